"""U, operation modules found beside the recipe, as a user outside this repository meets it (house rule 8): a scratch
git repository of their own holds ``benchops.py`` (docs/own-code.md's "Declaring parameters" example, as written) at its
root and a recipe in ``recipes/``; the real ``python -m perfsuite run`` finds the operation from the repository's
root, from a subdirectory and from a directory outside it (it used to work from the root only), in worker
processes too; a misspelled parameter is one line with "did you mean", exit 2, nothing measured; a module
found nowhere says where it was looked for."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.pages import page

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"```python\n(.*?)```", page("own-code.md"), re.S)
BLOCK = next(b for b in BLOCKS if "class Commit" in b)
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid"}
RECIPE = """name = "commit"
samples = 1
warmup = 0
isolation = "process"
settle_ms = 0
control_windows = 1

[modes.few]
operation = "benchops:Commit"
records = 3
fsync = false

[modes.labelled]
operation = "benchops:labelled"
label = "x"
"""


def _perfsuite(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **GIT_ENV, "PYTHONPATH": str(ROOT)}  # perfsuite itself, as an install would give
    return subprocess.run([sys.executable, "-m", "perfsuite", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


@pytest.fixture
def user_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "myruntime"
    (repo / "recipes").mkdir(parents=True)
    (repo / "sub").mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, capture_output=True, env={**os.environ, **GIT_ENV})
    (repo / "benchops.py").write_text(BLOCK)
    (repo / "recipes" / "commit.toml").write_text(RECIPE)
    return repo


@pytest.mark.parametrize("where", ["outside", "root", "subdirectory"])
def test_the_operation_is_found_from_anywhere(user_repo: Path, tmp_path: Path, where: str) -> None:
    cwd = {"outside": tmp_path / "elsewhere", "root": user_repo, "subdirectory": user_repo / "sub"}[where]
    cwd.mkdir(exist_ok=True)
    out = tmp_path / f"out-{where}"
    proc = _perfsuite(cwd, "run", str(user_repo / "recipes" / "commit.toml"), "--output-dir", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    [document] = [json.loads(p.read_text()) for p in out.glob("commit-*.json") if not p.name.endswith(".pyperf.json")]
    assert document["modes"]["few"]["params"] == {"records": 3, "fsync": False}
    assert len(document["modes"]["few"]["samples"]) == 1 and len(document["modes"]["labelled"]["samples"]) == 1
    assert "import_roots" not in document["recipe"]  # this machine's paths are never recorded


def test_a_misspelled_parameter_is_one_line_and_nothing_runs(user_repo: Path, tmp_path: Path) -> None:
    recipe = user_repo / "recipes" / "typo.toml"
    recipe.write_text(RECIPE.replace("records = 3", "recrods = 3"))
    proc = _perfsuite(tmp_path, "run", str(recipe), "--output-dir", str(tmp_path / "out"))
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "modes.few.recrods: unknown parameter of benchops:Commit (known: fsync, records; did you mean records?)" \
        in lines[0]
    assert not (tmp_path / "out").exists()


def test_a_module_found_nowhere_says_where_it_looked(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    recipe = tmp_path / "plain" / "r.toml"  # not in a git repository; benchops.py is nowhere
    recipe.write_text(RECIPE)
    proc = _perfsuite(tmp_path, "run", str(recipe))
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip()
    assert "no module named 'benchops'" in line and f"the working directory {tmp_path}" in line
    assert str(tmp_path / "plain") in line
    (tmp_path / "plain" / "benchops.py").write_text(BLOCK)  # beside the recipe: found there
    proc = _perfsuite(tmp_path, "run", str(recipe), "--output-dir", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr[-2000:]
