"""A wheel works on its own (a lean install): built from a copy of the sources, installed into a fresh
venv with its core dependencies only, it finds its built-in recipes and fixture specs, a user's own
``./recipes``, and runs the main job in a reduced form, from a directory that is not a checkout."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: what the build needs (setup.py copies recipes/ and fixtures/ into the wheel)
SOURCES = ("perfsuite", "recipes", "fixtures", "pyproject.toml", "setup.py", "MANIFEST.in", "README.md")
TIMEOUT = 900

pytestmark = pytest.mark.slow


def _run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    tail = f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, f"{' '.join(command)}: exit {proc.returncode}\n{tail}"
    return proc


def _has_setuptools() -> bool:
    try:
        from importlib.metadata import version

        return int(version("setuptools").split(".")[0]) >= 77
    except Exception:
        return False


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel and its core dependencies: returns its ``bin`` directory."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    src.mkdir()
    for name in SOURCES:  # a clean copy: the build never writes into the worktree
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, src / name, ignore=shutil.ignore_patterns("__pycache__", "_data"))
        else:
            shutil.copy2(source, src / name)
    wheels = base / "wheels"
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(wheels), str(src)]
    if _has_setuptools():  # no download of a build environment
        build.insert(4, "--no-build-isolation")
    _run(build, cwd=base)
    [wheel] = wheels.glob("perfsuite-*.whl")
    env_dir = base / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    _run([str(bin_dir / "python"), "-m", "pip", "install", "--quiet", str(wheel)], cwd=base, env=env)
    return bin_dir


def _env(bin_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PERFSUITE_RECIPES",
                                                            "PERFSUITE_FIXTURES")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "100"
    return env


def test_the_wheel_ships_the_recipes_and_fixture_specs(installed: Path, tmp_path: Path) -> None:
    env = _env(installed)
    where = _run([str(installed / "python"), "-c", "import perfsuite, perfsuite._paths as p; "
                  "print(perfsuite.__file__); print(p.builtin_dir('recipes')); print(p.builtin_dir('fixtures'))"],
                 cwd=tmp_path, env=env).stdout.split()
    assert "site-packages" in where[0] and not where[0].startswith(str(ROOT))
    assert where[1].endswith("perfsuite/_data/recipes") and where[2].endswith("perfsuite/_data/fixtures")
    shipped = {p.name for p in Path(where[1]).glob("*.toml")}
    assert shipped == {p.name for p in (ROOT / "recipes").glob("*.toml")}
    probe = ("from importlib import metadata, resources; "
             "print(sorted(e.value for e in metadata.entry_points(group='pytest11') if e.name == 'perfsuite')); "
             "print(resources.files('perfsuite.cli').joinpath('output.schema.json').is_file())")
    plugin, schema = _run([str(installed / "python"), "-c", probe], cwd=tmp_path, env=env).stdout.split("\n")[:2]
    assert plugin == "['perfsuite.pytest_plugin']" and schema == "True"  # the pytest plugin and --format's schema
    fixtures = _run([str(installed / "perfsuite"), "fixtures", "list"], cwd=tmp_path, env=env).stdout
    for spec in (ROOT / "fixtures").glob("*.toml"):
        assert spec.stem in fixtures


def test_the_main_job_runs_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    """The quick set's first recipe, reduced, from a fresh venv in a directory that is not a checkout; a
    user's own ``./recipes`` folder is found beside the built-ins."""
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "mine.toml").write_text(
        'name = "mine"\nsamples = 1\nwarmup = 0\n[modes.idle]\noperation = "perfsuite.workloads.basic:idle"\n')
    env = _env(installed)
    proc = _run([str(installed / "perfsuite"), "run", "idle-control", "mine", "--samples", "2", "--output-dir", "out"],
                cwd=tmp_path, env=env)
    assert re.search(r"^idle +2 .*(met <= 20 ms|missed \d/2)", proc.stdout, re.M)  # the verdict, whichever
    docs = {p.name.split("-2")[0]: json.loads(p.read_text()) for p in (tmp_path / "out").glob("*.json")
            if not p.name.endswith(".pyperf.json")}
    assert docs["idle-control"]["status"] == "complete"
    assert docs["idle-control"]["recipe"]["path"] == "<perfsuite>/recipes/idle-control.toml"
    assert docs["mine"]["recipe"]["path"] == "recipes/mine.toml"
