"""docs/tutorial.md runs as written: every command block of the page, in order, in one scratch directory.

The page's convention, which this test reads:

- a **command block** is a fenced block whose info string is ``bash``; ``text`` blocks show output and are
  never run (``sh`` and ``console`` blocks are not used on the page);
- each block runs in a fresh ``bash -e`` (``set -e``: the first command that fails ends the block, as a
  reader's terminal stops being useful there), with the scratch directory as its working directory: the
  page's repository is that directory, so state passes from block to block through the files and git only;
- a block is expected to exit 0, unless its **last line ends with the marker comment** ``# exit N``: then its
  status must be N (``perfsuite ab`` of a regression: ``# exit 1``).

The environment is a user's: HOME, XDG_CACHE_HOME and PERFSUITE_CACHE in the scratch area, PATH starting
with this interpreter's directory (where ``perfsuite`` is installed), a git identity from the environment,
and nothing of perfsuite's own checkout on PYTHONPATH. Besides every status, the few lines a reader is told
to look at are asserted (the verdict names the metric that regressed; bisect names the commit). A block
added to the page later runs too; a page without command blocks fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docs.pages import page

BLOCK = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
MARKER = re.compile(r"#\s*exit\s+(\d+)\s*$")
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "reader", "GIT_AUTHOR_EMAIL": "reader@example.invalid",
                "GIT_COMMITTER_NAME": "reader", "GIT_COMMITTER_EMAIL": "reader@example.invalid"}
#: a fragment of a block -> what its output must hold (the lines the page tells the reader to look at)
EXPECT: dict[str, tuple[str, ...]] = {
    "perfsuite run save": ("results: results/local/save-", "save "),
    "perfsuite report results/local": ("idle control",),
    "perfsuite ab main": ("recipe  mode     metric",),
    "perfsuite bisect main HEAD": ("2 steps over 2 commits",),
    "perfsuite init": ("perfsuite init: wrote 5 files for journal", ".github/workflows/perfsuite.yml",
                       "the workflow installs perfsuite with: pip install 'perfsuite[report]==0.1.0'"),
    'grep -n \'perfsuite ab "\'': ('perfsuite ab "$base" --output-dir results/ab --neutral-exit 78',),
    "git rebase -q main": ("status=1\n", "1 regression: save/save metrics.fsyncs +1 (2.00x)"),
}
#: a fragment of a block -> how its output's first line (the verdict) starts, and what the line names
FIRST_LINE: dict[str, tuple[str, str]] = {
    # on a loaded machine "perfsuite ab: machine loaded (...): timings reported, not gated; gated on: fsyncs: 1 ..."
    "perfsuite ab main": ("perfsuite ab: ", "1 regression: save/save metrics.fsyncs +1 (2.00x)"),
    "perfsuite bisect main HEAD": ("perfsuite bisect: first regressed commit ", '"save: fsync twice, to be safe" '
                                   "(2 of 2 after GOOD) [tracked: save/save metrics.fsyncs]"),
}


@dataclass(frozen=True)
class Ran:
    """One command block and what running it gave."""

    block: str
    expected: int
    status: int
    output: str
    seconds: float


def blocks(text: str) -> list[tuple[str, int]]:
    """The page's command blocks in order, each with the exit status its marker (or none: 0) expects."""
    found = []
    for block in BLOCK.findall(text):
        lines = [line for line in block.splitlines() if line.strip()]
        marker = MARKER.search(lines[-1]) if lines else None
        found.append((block, int(marker.group(1)) if marker else 0))
    return found


def user_env(scratch: Path) -> dict[str, str]:
    """A reader's environment: their own HOME and caches under ``scratch``, perfsuite on PATH as installed."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PERFSUITE_RECIPES", "PERFSUITE_FIXTURES", "PERFSUITE_RECORD_TRACE",
                        "PERFSUITE_AB_ARGS", "PERFSUITE_RUN_ARGS")}
    for name in ("HOME", "XDG_CACHE_HOME", "PERFSUITE_CACHE"):
        (scratch / name.lower()).mkdir(parents=True, exist_ok=True)
        env[name] = str(scratch / name.lower())
    bin_dir = str(Path(sys.executable).parent)
    return {**env, **GIT_IDENTITY, "PATH": bin_dir + os.pathsep + env.get("PATH", ""), "GIT_CONFIG_NOSYSTEM": "1"}


def run_page(text: str, scratch: Path) -> list[Ran]:
    """Run every command block of ``text`` in order in ``scratch/repo``; stops after the first that fails."""
    repo = scratch / "repo"
    repo.mkdir(parents=True)
    env = user_env(scratch / "user")
    ran: list[Ran] = []
    for block, expected in blocks(text):
        start = time.monotonic()
        proc = subprocess.run(["bash", "-e", "-c", block], cwd=repo, env=env, capture_output=True, text=True,
                              timeout=300, check=False)
        ran.append(Ran(block, expected, proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start))
        if proc.returncode != expected:
            break
    return ran


def test_the_page_has_command_blocks_and_every_expectation_names_one() -> None:
    found = [block for block, _ in blocks(page("tutorial.md"))]
    assert found, "docs/tutorial.md has no ```bash block to run"
    assert not re.search(r"^```(sh|console|shell)\b", page("tutorial.md"), re.M), "commands go in ```bash blocks"
    for fragment in [*EXPECT, *FIRST_LINE]:
        assert sum(fragment in block for block in found) == 1, f"no single block holds {fragment!r}"
    assert [expected for _, expected in blocks(page("tutorial.md"))].count(1) >= 1  # the failing gate is shown


def test_the_marker_sets_the_expected_status() -> None:
    text = "```bash\ntrue\n```\n\n```bash\nfalse  # exit 1\n```\n\n```text\nnot run\n```\n"
    assert [expected for _, expected in blocks(text)] == [0, 1]


def test_every_block_of_the_tutorial_runs_as_written(tmp_path: Path) -> None:
    if shutil.which("perfsuite", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("perfsuite is not installed beside this interpreter (pip install -e '.[report]')")
    text = page("tutorial.md")
    ran = run_page(text, tmp_path)
    for result in ran:
        where = f"block:\n{result.block}\noutput:\n{result.output}"
        assert "Traceback" not in result.output, where
        assert result.status == result.expected, f"exit {result.status}, expected {result.expected}\n{where}"
        for fragment, wanted in EXPECT.items():
            if fragment in result.block:
                assert all(w in result.output for w in wanted), f"expected {wanted}\n{where}"
        for fragment, (starts, names) in FIRST_LINE.items():
            if fragment in result.block:
                first = result.output.splitlines()[0]
                assert first.startswith(starts) and names in first, f"first line: {first!r}\n{where}"
    assert len(ran) == len(blocks(text))
