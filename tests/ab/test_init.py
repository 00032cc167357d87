"""`perfsuite init` (issue 28 item 7) in a user's repository outside perfsuite: what it writes runs green as
generated (the recipe with `perfsuite run` and `ab`, the pytest example, and the CI workflow step by step through
scripts/dev/run_workflow.py: the pull request's gate and comment, the push's run and its history job), and it
never overwrites a file."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .userrepo import INIT, STORE, commit_all, git, perfsuite, pyproject, tool_env, write

pytest.importorskip("yaml")
SOURCE = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("run_workflow", SOURCE / "scripts" / "dev" / "run_workflow.py")
assert _spec is not None and _spec.loader is not None
workflow = importlib.util.module_from_spec(_spec)
sys.modules["run_workflow"] = workflow
_spec.loader.exec_module(workflow)

WORKFLOW = Path(".github/workflows/perfsuite.yml")
FILES = ["recipes/myruntime-example.toml", "perf/__init__.py", "perf/ops.py", "tests/test_perfsuite_example.py",
         str(WORKFLOW)]
VARS = {"vars.PERFSUITE_AB_ARGS": "--samples 2 --warmup 0 --gate costs",
        "vars.PERFSUITE_RUN_ARGS": "--samples 2 --warmup 0"}


def _code_only(repo: Path) -> str:
    """The team's repository before perfsuite: its package and nothing else."""
    repo.mkdir(parents=True)
    write(repo, {"pyproject.toml": pyproject(code_under_test=None), "myruntime/__init__.py": INIT,
                 "myruntime/store.py": STORE, ".gitignore": "__pycache__/\nresults/\nsite/\nhistory-site/\n"})
    git(repo, "init", "-q", "-b", "main")
    return commit_all(repo, "myruntime")


def test_init_writes_what_a_team_needs_and_never_overwrites(tmp_path: Path) -> None:
    repo = tmp_path / "myruntime"
    _code_only(repo)
    proc = perfsuite(repo / "myruntime", "init")  # from a subdirectory: the repository's top
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith(f"perfsuite init: wrote 5 files for myruntime in {repo}")
    assert all(f"  {rel}: " in proc.stdout for rel in FILES) and all((repo / rel).is_file() for rel in FILES)
    assert 'code-under-test = ["myruntime"]' in proc.stdout  # how to declare it
    before = {rel: (repo / rel).read_text() for rel in FILES}
    (repo / "perf" / "ops.py").write_text("# mine\n")
    again = perfsuite(repo, "init")
    lines = [ln for ln in again.stderr.splitlines() if ln.strip()]
    assert again.returncode == 2 and lines == ["perfsuite: error: recipes/myruntime-example.toml exists already: "
                                               "nothing written (perfsuite init never overwrites a file)"]
    assert (repo / "perf" / "ops.py").read_text() == "# mine\n"
    assert {rel: (repo / rel).read_text() for rel in FILES if rel != "perf/ops.py"} == {
        rel: text for rel, text in before.items() if rel != "perf/ops.py"}
    # several packages: one line naming them; --package chooses
    other = tmp_path / "two"
    other.mkdir()
    write(other, {"a/__init__.py": "", "b/__init__.py": "", "tests/__init__.py": ""})
    two = perfsuite(other, "init")
    assert two.returncode == 2 and "several packages" in two.stderr and "(a, b)" in two.stderr
    assert two.stderr.count("\n") == 1
    chosen = perfsuite(other, "init", "--package", "b")
    assert chosen.returncode == 0 and (other / "recipes" / "b-example.toml").is_file(), chosen.stderr
    assert "not in a git repository" in chosen.stdout


def test_what_init_writes_runs_green_as_generated(tmp_path: Path) -> None:
    repo = tmp_path / "myruntime"
    before = _code_only(repo)
    assert perfsuite(repo, "init").returncode == 0
    added = commit_all(repo, "perfsuite init")
    run = perfsuite(repo, "run", "myruntime-example", "--samples", "2", "--warmup", "0",
                    "--output-dir", str(tmp_path / "run"))
    assert run.returncode == 0 and "example" in run.stdout, run.stdout + run.stderr
    [document] = [p for p in (tmp_path / "run").glob("myruntime-example-*.json") if ".pyperf." not in p.name]
    samples = json.loads(document.read_text())["modes"]["example"]["samples"]
    assert [s["metrics"]["fsyncs"] for s in samples] == [1, 1]
    test = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/test_perfsuite_example.py"], cwd=repo, env=tool_env(), capture_output=True,
                          text=True, timeout=300, check=False)
    assert test.returncode == 0 and "1 passed" in test.stdout, test.stdout + test.stderr
    ab = perfsuite(repo, "ab", before, "--samples", "2", "--warmup", "0", "--gate", "costs",
                   "--output-dir", str(tmp_path / "ab"))  # BASE predates perf/: the running checkout's operations
    assert ab.returncode == 0, ab.stdout + ab.stderr
    assert "code under test (myruntime: the repository's packages the operations import)" in ab.stdout
    assert git(repo, "rev-parse", "HEAD") == added


def test_the_workflow_init_writes_runs_step_by_step(tmp_path: Path) -> None:
    repo = tmp_path / "myruntime"
    before = _code_only(repo)
    assert perfsuite(repo, "init").returncode == 0
    head = commit_all(repo, "perfsuite init")
    bare = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    git(repo, "remote", "add", "origin", str(bare))
    bin_dir, state = workflow.fake_tools(tmp_path / "bin"), tmp_path / "gh-state.json"
    gh = {"FAKE_GH_STATE": str(state), "PERFSUITE_CACHE": str(tmp_path / "cache")}
    base_context = {**VARS, "github.repository": "team/myruntime", "github.token": "fake-token",
                    "github.server_url": "https://github.example", "github.run_id": "9"}
    # the pull request that adds perfsuite: the gate runs against its merge base, green, one comment
    pr = {**base_context, "github.event.pull_request.base.sha": before, "github.event.pull_request.head.sha": head,
          "github.sha": head, "github.event.pull_request.number": "3", "github.ref": "refs/pull/3/merge",
          "github.event.pull_request.head.repo.full_name": "team/myruntime"}
    job = workflow.run_job(repo, "pull_request", pr, bin_dir, tmp_path, gh, workflow_path=WORKFLOW)
    assert not job.failed, {k: v.get("log") for k, v in job.steps.items()}
    assert job.steps["ab"]["outputs"]["status"] == "0" and f"BASE: merge base {before}" in job.steps["ab"]["log"]
    assert "### perfsuite compare: no regression" in job.summary and (repo / "site" / "index.html").is_file()
    (comment,) = json.loads(state.read_text())["comments"]
    assert comment["body"].startswith(workflow.MARKER + "\n### perfsuite compare: no regression")
    history = workflow.run_job(repo, "pull_request", pr, bin_dir, tmp_path, gh, workflow_path=WORKFLOW,
                               job_name="history")
    assert not history.ran  # pushes only
    # a push: the recipes run, then the history job appends them to the results branch and draws its dashboard
    push = {**base_context, "github.sha": head, "github.ref": "refs/heads/main"}
    bench = workflow.run_job(repo, "push", push, bin_dir, tmp_path, gh, workflow_path=WORKFLOW)
    assert not bench.failed, {k: v.get("log") for k, v in bench.steps.items()}
    assert not bench.steps["ab"]["ran"] and list((repo / "results" / "local").glob("myruntime-example-*.json"))
    history = workflow.run_job(repo, "push", push, bin_dir, tmp_path, gh, workflow_path=WORKFLOW,
                               job_name="history")
    assert history.ran and not history.failed, {k: v.get("log") for k, v in history.steps.items()}
    listed = subprocess.run(["git", "--git-dir", str(bare), "ls-tree", "-r", "--name-only", "perfsuite-results"],
                            capture_output=True, text=True, check=True, env={**os.environ}).stdout
    assert "myruntime-example-" in listed
    assert (repo / "history-site" / "index.html").is_file()
