"""Without the peers extra the adapters still import, say which package is missing in one line, and the
peer recipes resolve (bad input one line, never a traceback). Runs whether or not the peers are installed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.harness import load_recipe, resolve_operation
from perfsuite.workloads.peers import INSTALL_HINT, missing_reason, require, requires

#: hide the peer packages from this interpreter, as if the extra were not installed
_HIDE = "import sys\nfor _name in ('gptme', 'langgraph', 'aiosqlite'):\n    sys.modules[_name] = None\n"


def test_missing_reason_names_the_package_and_the_install_command() -> None:
    reason = missing_reason(("gptme", "perfsuite_no_such_module"))
    assert reason == f"gptme is not installed (optional peers extra): {INSTALL_HINT}"
    assert "\n" not in reason
    assert missing_reason(("json", "json")) is None
    with pytest.raises(PerfsuiteError, match=r"no-such-dist is not installed .*pip install .*\[peers\]'"):
        require(("no-such-dist", "perfsuite_no_such_module.sub"))


def test_requires_sets_the_unavailable_hook() -> None:
    @requires(("no-such-dist", "perfsuite_no_such_module"))
    def factory(ctx: object) -> None:
        """A factory."""

    assert factory.unavailable() == missing_reason(("no-such-dist", "perfsuite_no_such_module"))  # type: ignore[attr-defined]


@pytest.mark.parametrize("recipe", ["peer-transcript", "peer-checkpoint"])
def test_the_peer_recipes_resolve(recipe: str) -> None:
    loaded = load_recipe(recipe)
    assert len(loaded.modes) >= 4
    for mode in loaded.modes:
        factory = resolve_operation(mode.operation)  # importing never needs the peer packages
        assert callable(factory)
    peers = [m for m in loaded.modes if ".peers." in m.operation]
    assert peers and all(callable(getattr(resolve_operation(m.operation), "unavailable", None)) for m in peers)


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _HIDE + textwrap.dedent(code)], cwd=cwd, capture_output=True,
                          text=True, timeout=120, check=False)


def test_without_the_peers_each_operation_fails_in_one_line(tmp_path: Path) -> None:
    proc = _python(
        """
        import asyncio
        from pathlib import Path
        from perfsuite.errors import PerfsuiteError
        from perfsuite.harness import OperationContext
        from perfsuite.workloads.peers import gptme_log, langgraph_sqlite

        print(gptme_log.transcript_barrier.unavailable())
        print(langgraph_sqlite.checkpoint.unavailable())
        ctx = OperationContext(workdir=None, params={}, mode="m", sample=0, scratch=Path.cwd())
        for factory in (gptme_log.transcript_barrier, langgraph_sqlite.checkpoint):
            try:
                op = factory(ctx)
                if asyncio.iscoroutine(op):
                    asyncio.run(op)
            except PerfsuiteError as exc:
                print("error:", exc)
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines == [
        f"gptme is not installed (optional peers extra): {INSTALL_HINT}",
        f"langgraph-checkpoint-sqlite is not installed (optional peers extra): {INSTALL_HINT}",
        f"error: gptme is not installed (optional peers extra): {INSTALL_HINT}",
        f"error: langgraph-checkpoint-sqlite is not installed (optional peers extra): {INSTALL_HINT}",
    ]
    assert not (tmp_path / "gptme").exists() or not any((tmp_path / "gptme" / "logs").iterdir())


def test_without_the_peers_perfsuite_run_says_why_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "peer.toml").write_text(
        'samples = 1\nwarmup = 0\nisolation = "inline"\n'
        '[modes.gptme-append]\noperation = "perfsuite.workloads.peers.gptme_log:transcript_barrier"\nmessages = 5\n'
    )
    proc = _python(
        """
        import sys
        from perfsuite.cli import main
        sys.exit(main(["run", "peer.toml", "--output-dir", "out"]))
        """,
        tmp_path,
    )
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text
    reason = f"gptme is not installed (optional peers extra): {INSTALL_HINT}"
    # perfsuite run skips a recipe whose operations are unavailable, says why in one line, measures nothing
    assert proc.returncode == 0, proc.stderr
    assert f"skipped: peer: modes.gptme-append: {reason}" in proc.stdout.splitlines()
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").glob("peer-*.json"))
