"""Results that survive CI (the results store's branch): the results branch round trip, against a local bare remote,
through the library, the command line, and the workflow's own steps extracted from the YAML."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from perfsuite import cli
from perfsuite.errors import PerfsuiteError
from perfsuite.report import open_store, pull_results, push_results, read_results, rebuild_store
from perfsuite.report._results_branch import branch_path

from .conftest import make_doc, make_floor_doc, write_doc

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "bench.yml"


def _git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, (args, proc.stderr)
    return proc.stdout.strip()


@pytest.fixture
def git_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME (no global git identity: the push must bring its own) and a quiet git."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for key in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_DIR"):
        monkeypatch.delenv(key, raising=False)
    return home


@pytest.fixture
def scratch(tmp_path: Path, git_env: Path) -> Path:
    """A project clone whose ``origin`` is a local bare repository with a ``main`` branch."""
    remote = tmp_path / "remote.git"
    _git(tmp_path, "init", "--quiet", "--bare", str(remote))
    repo = tmp_path / "project"
    repo.mkdir()
    _git(repo, "init", "--quiet", "-b", "main")
    (repo / "README.md").write_text("project\n")
    _git(repo, "add", "README.md")
    _git(repo, "-c", "user.name=dev", "-c", "user.email=dev@example.invalid", "commit", "--quiet", "-m", "start")
    _git(repo, "remote", "add", "origin", str(remote))
    _git(repo, "push", "--quiet", "origin", "main")
    return repo


def _ci_run(directory: Path, k: int) -> Path:
    """What one CI run leaves in results/local: mailbox-delivery and its fsync floor, at commit ``k``."""
    commit = f"{k:02d}{'c1' * 19}"
    kwargs = {"commit": commit, "date": f"2026-12-{k + 1:02d}T07:00:00+00:00", "epoch": 1_796_000_000.0 + k * 86_400}
    for doc in (make_doc(seed=k, **kwargs), make_floor_doc(seed=40 + k, **{**kwargs, "epoch": kwargs["epoch"] + 30})):
        doc["run_id"] = f"run-{k}"
        doc["environment"]["host_label"] = "github-ubuntu-latest"
        write_doc(directory / f"{doc['recipe']['name']}-2026120{k}T070000.json", doc)
    (directory / f"mailbox-delivery-2026120{k}T070000.pyperf.json").write_text("{}")  # exports are not pushed
    return directory


def _tree(repo: Path, ref: str) -> list[str]:
    return _git(repo, "ls-tree", "-r", "--name-only", ref).splitlines()


def test_push_pull_rebuild_round_trip(scratch: Path, tmp_path: Path) -> None:
    head, status = _git(scratch, "rev-parse", "HEAD"), _git(scratch, "status", "--porcelain")
    first = push_results([_ci_run(tmp_path / "run0", 0)], repo=scratch)
    assert first.commit is not None and len(first.added) == 2
    remote = tmp_path / "remote.git"
    files = _tree(remote, "perfsuite-results")
    docs = read_results(tmp_path / "run0")
    assert sorted(files) == sorted(["README.md", *(branch_path(r) for r in docs)])
    assert all(re.match(r"github-ubuntu-latest-[0-9a-f]{10}/00c1c1c1c1c1/[a-z-]+-20261200T070000\.json$", f)
               for f in files if f != "README.md")
    # the project itself is untouched: same HEAD, same branch, clean tree
    assert (_git(scratch, "rev-parse", "HEAD"), _git(scratch, "status", "--porcelain")) == (head, status)
    assert _git(scratch, "branch", "--show-current") == "main"

    again = push_results([tmp_path / "run0"], repo=scratch)  # a run pushed twice is one run
    assert (again.commit, again.added, again.unchanged) == (None, (), 2)
    second = push_results([_ci_run(tmp_path / "run1", 1)], repo=scratch)
    assert second.commit is not None
    assert _git(remote, "rev-parse", "perfsuite-results") == second.commit
    assert _git(remote, "rev-parse", "perfsuite-results^") == first.commit  # appended, never rewritten
    assert _git(remote, "log", "-1", "--format=%an", "perfsuite-results") == "perfsuite results"

    pulled = pull_results(tmp_path / "history", repo=scratch)
    assert (pulled.commit, pulled.files) == (second.commit, 4)
    report = rebuild_store(pulled.directory, tmp_path / "store.sqlite3")
    assert (report.runs, report.machines) == (4, 1)
    report = rebuild_store(pulled.directory, tmp_path / "store.sqlite3")  # rebuilt, not appended to
    assert report.runs == 4
    with open_store(tmp_path / "store.sqlite3") as db:
        assert [r.run_id for r in db.runs(recipe="mailbox-delivery")] == ["run-0", "run-1"]
    assert not any(f.endswith((".sqlite3", ".pyperf.json")) for f in _tree(remote, "perfsuite-results"))


def test_a_push_that_loses_a_race_retries(scratch: Path, tmp_path: Path) -> None:
    hook = tmp_path / "remote.git" / "hooks" / "pre-receive"
    marker = tmp_path / "rejected-once"
    hook.write_text(f"#!/bin/sh\nif [ ! -e {shlex.quote(str(marker))} ]; then touch {shlex.quote(str(marker))}; "
                    "echo 'someone else pushed' >&2; exit 1; fi\nexit 0\n")
    hook.chmod(0o755)
    pushed = push_results([_ci_run(tmp_path / "run0", 0)], repo=scratch)
    assert marker.exists() and pushed.commit == _git(tmp_path / "remote.git", "rev-parse", "perfsuite-results")
    marker.unlink()
    with pytest.raises(PerfsuiteError, match="git push to origin perfsuite-results failed: someone else pushed"):
        push_results([_ci_run(tmp_path / "run1", 1)], repo=scratch, attempts=1)


def test_only_complete_measurements_are_pushed(scratch: Path, tmp_path: Path, capsys: Any) -> None:
    run = _ci_run(tmp_path / "run0", 0)
    doc = make_doc(seed=3)
    doc["status"] = "interrupted"
    write_doc(run / "interrupted.json", doc)
    assert cli.main(["store", "push", str(run), "--repo", str(scratch)]) == 0
    out = capsys.readouterr().out
    assert "skipped interrupted.json: interrupted" in out and "2 document(s) added" in out
    synthetic = make_doc(seed=4)
    synthetic["synthetic"] = {"note": "SYNTHETIC"}
    write_doc(tmp_path / "fake" / "s.json", synthetic)
    assert cli.main(["store", "push", str(tmp_path / "fake"), "--repo", str(scratch)]) == 2
    assert "synthetic test data, not a measurement" in capsys.readouterr().err
    assert cli.main(["store", "pull", "--branch", "nope", "--repo", str(scratch), "--into", str(tmp_path / "x")]) == 2
    assert "no branch 'nope' on origin yet" in capsys.readouterr().err


def _expand(command: str, values: dict[str, str]) -> str:
    def sub(match: re.Match[str]) -> str:
        return values[match.group(1).strip()]

    return re.sub(r"\$\{\{(.*?)\}\}", sub, command)


def test_the_workflow_history_steps_against_a_bare_remote(scratch: Path, tmp_path: Path) -> None:
    """The `history` job's shell steps, exactly as written in the YAML, run twice (two pushes to main)."""
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert workflow["env"]["PERFSUITE_HOST_LABEL"]  # `perfsuite run` records it: one machine across CI jobs
    job = workflow["jobs"]["history"]
    assert job["needs"] == "bench" and "refs/heads/main" in job["if"] and "push" in job["if"]
    assert job["permissions"] == {"contents": "write"}
    steps = [s for s in job["steps"] if "run" in s and not s["run"].startswith("python -m pip")]
    assert [s["name"] for s in steps] == [
        "Append this run to the results branch",
        "Rebuild the store from the results branch",
        "History dashboard",
    ]
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "perfsuite").write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m perfsuite \"$@\"\n")
    (shim / "perfsuite").chmod(0o755)
    env = {**os.environ, "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}", "MPLCONFIGDIR": str(tmp_path / "mpl"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    values = {"github.server_url": "https://github.example", "github.repository": "org/perfsuite"}
    for k in range(2):
        local = scratch / "results" / "local"
        if local.exists():
            for f in local.iterdir():
                f.unlink()
        _ci_run(local, k)  # what actions/download-artifact puts there
        for step in steps:
            proc = subprocess.run(["bash", "-e", "-c", _expand(step["run"], values)], cwd=scratch, env=env,
                                  capture_output=True, text=True, timeout=300, check=False)
            assert proc.returncode == 0, (step["name"], proc.stdout, proc.stderr)
    remote = tmp_path / "remote.git"
    assert len(_git(remote, "rev-list", "perfsuite-results").splitlines()) == 2
    assert len([f for f in _tree(remote, "perfsuite-results") if f.endswith(".json")]) == 4
    with open_store(scratch / "results" / "perfsuite.sqlite3") as db:
        assert len(db.runs()) == 4 and [m.machine.host for m in db.machines()] == ["github-ubuntu-latest"]
    index = (scratch / "history-site" / "index.html").read_text()
    assert "href='https://github.example/org/perfsuite/commit/01c1c1" in index
    assert "against the previous one" in index
    assert _git(scratch, "status", "--porcelain", "--untracked-files=no") == ""
