"""A `watch` paragraph names the application's commit (the repository the watch ran in), never as "perfsuite
commit", and perfsuite's version apart: a watch of a program in a scratch git repository built here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from perfsuite.report import evidence_for
from tests.watch.conftest import PROGRAMS, perfsuite


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True, env=env).stdout.strip()


def test_a_watch_paragraph_names_the_applications_commit(tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    (app / "README.md").write_text("an application\n")
    _git(app, "init", "-q", "-b", "main")
    _git(app, "add", "README.md")
    _git(app, "commit", "-q", "-m", "app")
    commit = _git(app, "rev-parse", "HEAD")
    out = tmp_path / "w.json"
    proc = perfsuite("watch", "--window", "0.25", "--output", str(out), "--", sys.executable,
                     str(PROGRAMS / "plant.py"), "--block-ms", "0", "--duration", "1", cwd=app)
    assert proc.returncode == 0, proc.stderr
    text = evidence_for(out).markdown
    assert "perfsuite commit" not in text
    assert f"live at the application's commit `{commit[:7]}`" in text, text
    assert ", perfsuite `" in text
