"""A scratch git repository holding a copy of the project, to run `perfsuite ab` and the workflow against.

The copy is this source tree (committed or not; caches, local results and most of the committed baseline left
out), committed as the base;
tests then commit planted changes on top. Planted regressions are deterministic costs (an extra fsync),
never timings (house rule 1), and the recipe is tiny: the gate's logic is under test, not the machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

SOURCE = Path(__file__).resolve().parents[2]
_PATTERNS = shutil.ignore_patterns(".git", "__pycache__", ".venv", ".pytest_cache", ".ruff_cache", "*.egg-info",
                                   ".hypothesis", "local", "site", "build", "dist", "peers")


def _ignored(directory: str, names: list[str]) -> set[str]:
    """Caches and local results; of the committed baseline only idle-control (a dashboard of all twelve
    recipes takes minutes: the workflow's steps, not matplotlib, are under test)."""
    skip = set(_PATTERNS(directory, names))
    if Path(directory).name == "baseline" and Path(directory).parent.name == "results":
        skip |= {n for n in names if not n.startswith("idle-control-")}
    return skip

#: five transcript appends with a barrier each, I/O counted: a cost changes when a barrier fsyncs twice
TINY_RECIPE = textwrap.dedent("""
    name = "ci-tiny"
    description = "five appends with a barrier each: a test of the gate, not a measurement"
    samples = 2
    warmup = 0
    isolation = "process"
    allocation = true
    allocation_samples = 1
    settle_ms = 10

    [modes.barrier]
    operation = "perfsuite.workloads.engine:transcript_barrier"
    operation_kind = "append+barrier"
    messages = 5
""")
#: the planted regression: every barrier fsyncs each transcript twice (deterministic: +5 fsyncs per sample)
FSYNC_FILE = "perfsuite/engine/_transcript.py"
FSYNC_OLD = "                    self.fs.fsync_file(entry.fd, entry.path)\n"

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid"}


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                          env={**os.environ, **GIT_ENV})
    return proc.stdout.strip()


def edit(repo: Path, path: str, old: str, new: str) -> None:
    """Replace the one occurrence of ``old`` in ``path`` (fails loudly when the code moved)."""
    file = repo / path
    text = file.read_text()
    assert text.count(old) == 1, f"{path}: expected one occurrence of {old!r}"
    file.write_text(text.replace(old, new))


def commit(repo: Path, message: str, *paths: str) -> str:
    """Commit ``paths`` (default: everything) and return the commit."""
    git(repo, "add", *(paths or ("-A",)))
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def plant_fsync(repo: Path) -> str:
    """Commit the planted regression; returns the commit."""
    edit(repo, FSYNC_FILE, FSYNC_OLD, FSYNC_OLD + FSYNC_OLD)
    return commit(repo, "plant: fsync every transcript twice at each barrier", FSYNC_FILE)


def env_for(repo: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The project's own code first on the path, as `pip install -e .` in that checkout would give."""
    return {**os.environ, **GIT_ENV, "PYTHONPATH": str(repo), **dict(extra or {})}


def perfsuite(repo: Path, *args: str, timeout: float = 600,
              env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m perfsuite ARGS`` run in ``repo`` with ``repo``'s code (``env``: more variables)."""
    return subprocess.run([sys.executable, "-m", "perfsuite", *args], cwd=repo, env=env_for(repo, env),
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture
def scratch_repo(tmp_path: Path) -> Path:
    """A git repository with a copy of the project committed once (the base) and the tiny recipe."""
    repo = tmp_path / "project"
    shutil.copytree(SOURCE, repo, ignore=_ignored, symlinks=True)
    (repo / "recipes" / "ci-tiny.toml").write_text(TINY_RECIPE)
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "base")
    return repo


@pytest.fixture
def run_perfsuite() -> Callable[..., Any]:
    return perfsuite
