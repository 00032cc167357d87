"""The engine installs on its own (the engine imports nothing from the suite): ``packaging/engine`` builds the wheel
``perfsuite-engine`` from this checkout's ``perfsuite/engine/``, offline; installed without its index into a fresh venv
that holds no third-party package, it opens a session, adds a message, checkpoints, closes, reopens and reads it back,
and that venv still lists nothing but pip and setuptools beside it (no numpy, rich, memray: SPEC section 1,
the engine imports only the standard library)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 300  # the whole test takes about 5 s (not marked slow)
#: what a venv holds before anything is installed (Python 3.11's venv seeds setuptools too)
SEED = {"pip", "setuptools"}

_USE = """
import os, sys, tempfile
import perfsuite.engine
import perfsuite.engine.events
import perfsuite.engine.testing
from perfsuite.engine import Message, Session
path = os.path.join(tempfile.mkdtemp(), "session")
with Session.open(path, create=True) as session:
    session.add_message("root", Message(role="user", content="hello from a bare venv"))
    session.checkpoint()
with Session.open(path) as session:
    print([m.content for m in session.conversation("root").messages()])
third = sorted(m for m in sys.modules if m.split(".")[0] in {"numpy", "rich", "memray", "pyperf", "jsonschema"})
print("engine:", perfsuite.engine.__file__)
print("public modules:", perfsuite.engine.events.listen.__name__, perfsuite.engine.testing.VirtualClock.__name__)
print("third-party modules:", third)
"""


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    tail = f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, f"{' '.join(command)}: exit {proc.returncode}\n{tail}"
    return proc


def test_the_engine_wheel_installs_alone_and_keeps_a_session(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    src = tmp_path / "src"  # a copy with the layout the build reads (packaging/engine -> ../../perfsuite/engine)
    shutil.copytree(ROOT / "packaging" / "engine", src / "packaging" / "engine")
    shutil.copytree(ROOT / "perfsuite" / "engine", src / "perfsuite" / "engine",
                    ignore=shutil.ignore_patterns("__pycache__"))
    wheels = tmp_path / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "--quiet",
          "-w", str(wheels), str(src / "packaging" / "engine")], cwd=tmp_path, env=env)
    [wheel] = wheels.glob("perfsuite_engine-*.whl")

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    _run([python, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", str(wheel)], cwd=tmp_path, env=env)

    run_dir = tmp_path / "run"  # not a checkout: nothing of this repository on the path
    run_dir.mkdir()
    out = _run([python, "-c", _USE], cwd=run_dir, env=env).stdout
    assert "['hello from a bare venv']" in out
    assert f"engine: {env_dir}" in out  # the installed copy, not this checkout's
    assert "third-party modules: []" in out
    assert "public modules: listen VirtualClock" in out  # events and testing ship in the wheel (public modules)

    listed = _run([python, "-m", "pip", "list", "--format=freeze"], cwd=run_dir, env=env).stdout.split()
    names = {line.split("==")[0].lower() for line in listed}
    assert names - SEED == {"perfsuite-engine"}, listed
    # the suite is not there: only the engine package was installed
    missing = subprocess.run([python, "-c", "import perfsuite.harness"], cwd=run_dir, env=env,
                             capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert missing.returncode != 0 and "perfsuite.harness" in missing.stderr


def test_the_engine_distribution_is_versioned_with_the_suite() -> None:
    """``perfsuite-engine`` is cut from the same checkout as ``perfsuite``: the two pyprojects name one
    version (a release that bumps one and not the other would ship an engine wheel that claims another
    checkout's code)."""
    import tomllib

    suite = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    engine = tomllib.loads((ROOT / "packaging" / "engine" / "pyproject.toml").read_text())["project"]["version"]
    assert engine == suite, f"packaging/engine/pyproject.toml says {engine}, pyproject.toml says {suite}"
