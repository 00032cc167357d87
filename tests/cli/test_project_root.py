"""The project root (:mod:`perfsuite.cli._root`): where `ab`, `bisect` and `run` started in any directory of a
repository find its recipes and `[tool.perfsuite]`: the nearest pyproject.toml declaring [tool.perfsuite], else
the git root. Scratch repositories built here."""

from __future__ import annotations

import subprocess
from pathlib import Path

from perfsuite.cli._root import project_root


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_project_root_is_the_declaring_pyproject_else_the_git_root(tmp_path: Path) -> None:
    repo = tmp_path / "mono"
    _write(repo, {"README.md": "x\n", "svc/pyproject.toml": '[project]\nname = "svc"\n\n[tool.perfsuite]\n',
                 "svc/pkg/deep/x.txt": "", "other/pyproject.toml": '[project]\nname = "other"\n', "other/a/b.txt": ""})
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    assert project_root(repo / "svc" / "pkg" / "deep") == (repo / "svc").resolve()
    assert project_root(repo / "other" / "a") == repo.resolve()  # its pyproject declares no [tool.perfsuite]
    assert project_root(repo) == repo.resolve()
    outside = tmp_path / "plain"
    outside.mkdir()
    assert project_root(outside) is None
