"""Any directory of the repository: `perfsuite ab` and `run` started in a subdirectory find the recipes and
`[tool.perfsuite]` from the project root (the nearest pyproject.toml that declares [tool.perfsuite], else the
git root), so `ab` from `myruntime/` measures what it measures from the top. A scratch git repository built
here (tests/ab/userrepo.py); the verdict is on counts (fsyncs), never timing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .userrepo import commit_all, git, make_repo, perfsuite, plant, write

# the recipe's three allocation samples, not one: a writer thread's wake-up moves a single pass by 16
# allocations and ~2 KB now and then, so one sample a side can fail an A/A on a cost (the median of 3 cannot)
FAST = ["--samples", "2", "--warmup", "0", "--looks", "1"]


def test_ab_and_run_from_a_subdirectory_find_the_projects_recipes(tmp_path: Path) -> None:
    pytest.importorskip("scipy.stats")
    repo = tmp_path / "myruntime"
    make_repo(repo)
    write(repo, {"pyproject.toml": (repo / "pyproject.toml").read_text() + 'recipes = ["commit"]\n'})
    commit_all(repo, "recipes declared")
    sub = repo / "myruntime"
    out = tmp_path / "ab"
    ab = perfsuite(sub, "ab", "HEAD", *FAST, "--output-dir", str(out))
    assert ab.returncode == 0, ab.stdout + ab.stderr
    assert "unknown recipe" not in ab.stderr
    assert ab.stdout.splitlines()[0].startswith("perfsuite ab:")
    assert [e["recipe"] for e in json.loads((out / "ab.json").read_text())["recipes"]] == ["commit"]
    named = perfsuite(sub, "ab", "HEAD", "-r", "commit", *FAST, "--output-dir", str(tmp_path / "ab2"))
    assert named.returncode == 0, named.stdout + named.stderr
    ran = perfsuite(sub, "run", "commit", "--samples", "1", "--warmup", "0", "--output-dir", str(tmp_path / "run"))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert list((tmp_path / "run").glob("commit*.json"))


def test_a_project_inside_a_larger_repository_is_measured_from_its_own_root(tmp_path: Path) -> None:
    """A monorepo: git's root holds other things, the project (its pyproject declaring [tool.perfsuite], its
    package, operations and recipes) lives in ``services/notes/``. Each revision's code under test is that
    directory of the revision's tree, not a package at git's root."""
    pytest.importorskip("scipy.stats")
    mono = tmp_path / "mono"
    project = mono / "services" / "notes"
    make_repo(project)
    shutil.rmtree(project / ".git")
    write(mono, {"README.md": "a monorepo\n", "tools/__init__.py": "", "tools/lint.py": "print('lint')\n"})
    git(mono, "init", "-q", "-b", "main")
    commit_all(mono, "a monorepo with a service")
    plant(project, "fsync")  # git in a subdirectory commits to the monorepo
    ab = perfsuite(project / "myruntime", "ab", "HEAD~1", "-r", "commit", *FAST, "--output-dir", str(tmp_path / "ab"))
    assert ab.returncode == 1, ab.stdout + ab.stderr
    first = ab.stdout.splitlines()[0]  # loaded, it begins "machine loaded (...): timings reported, not gated"
    assert first.startswith("perfsuite ab: ") and "1 regression: commit/commit metrics.fsyncs +1 (2.00x)" in first
    assert f"declared in {(project / 'pyproject.toml').resolve()}" in " ".join(ab.stdout.split())
    aa = perfsuite(project, "ab", "HEAD", "-r", "commit", *FAST, "--output-dir", str(tmp_path / "aa"))
    assert aa.returncode == 0, aa.stdout + aa.stderr
