"""The workflow's own shell steps, extracted from `.github/workflows/bench.yml`, run against a
scratch git repository (a copy of the project), with GITHUB_OUTPUT / GITHUB_STEP_SUMMARY files and a fake `gh`.

A pull request with a planted regression (an extra fsync per barrier: a deterministic cost) fails the gate and
gets one comment; the fix pushed to the same pull request passes and *updates* that comment; a push to main runs
the quick-set path green. Every `run:` step runs as written, "Install perfsuite" (`pip install -e '.[report]'`)
included, into the runner's virtualenv (setup-python's local equivalent), without PYTHONPATH; the other `uses:`
steps are GitHub's (checkout, upload-artifact). Repository variables shrink the run to a tiny recipe and gate
on costs only: the steps' logic is under test, not timing.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from .conftest import FSYNC_FILE, FSYNC_OLD, SOURCE, commit, edit, git, plant_fsync
from .userrepo import wheel

pytest.importorskip("yaml")
_spec = importlib.util.spec_from_file_location("run_workflow", SOURCE / "scripts" / "dev" / "run_workflow.py")
assert _spec is not None and _spec.loader is not None
workflow = importlib.util.module_from_spec(_spec)
sys.modules["run_workflow"] = workflow  # dataclasses look their module up there
_spec.loader.exec_module(workflow)
Job, run_job, ARTIFACT_URL, MARKER = workflow.Job, workflow.run_job, workflow.ARTIFACT_URL, workflow.MARKER

VARS = {
    "vars.PERFSUITE_AB_ARGS": "-r ci-tiny --samples 2 --warmup 0 --allocation-samples 1 --gate costs",
    "vars.PERFSUITE_RUN_ARGS": "ci-tiny --samples 2 --warmup 0",
    "vars.PERFSUITE_AB_INSTRUCTIONS": "false",  # the callgrind pass runs in tests/ab/test_init.py's job
}


@pytest.fixture
def fake_tools(tmp_path: Path) -> tuple[Path, Path]:
    return workflow.fake_tools(tmp_path / "bin"), tmp_path / "gh-state.json"


@pytest.fixture(scope="module")
def runner_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The runner's virtualenv, shared by this module's runs of bench.yml: the first install step fills it from
    nothing (perfsuite[report] and its dependencies, ~20 s), each later one reinstalls its own scratch copy."""
    return tmp_path_factory.mktemp("runner") / "venv"


#: a workflow whose install step installs a wheel by hand; the next step imports it
_INSTALLING = textwrap.dedent("""\
    name: installs
    on: [push]
    jobs:
      bench:
        runs-on: ubuntu-latest
        steps:
          - uses: actions/checkout@v4
          - uses: actions/setup-python@v5
            with:
              python-version: "3.11"
          - name: Install perfsuite
            run: |
              python -m pip install --no-index {wheel}
              python -c "import os, sys; print(sys.prefix); print(os.environ.get('PYTHONPATH', '-'))" > where.txt
          - name: Use it
            run: python -c "import tinydep; print(tinydep.VERSION)" > used.txt
""")


def test_the_install_step_runs_as_written_in_a_fresh_virtualenv(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    built = wheel(tmp_path / "wheels", "tinydep", "1.0", 'VERSION = "1.0"\n')
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / ".github" / "workflows" / "installs.yml").write_text(_INSTALLING.format(wheel=built))
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "installs")
    venv = tmp_path / "runner"
    job = run_job(repo, "push", {}, workflow.fake_tools(tmp_path / "bin"), tmp_path, {},
                  workflow_path=Path(".github/workflows/installs.yml"), venv=venv)
    assert not job.failed, {k: v.get("log") for k, v in job.steps.items()}
    prefix, pythonpath = (repo / "where.txt").read_text().splitlines()
    assert Path(prefix).resolve() == venv.resolve() and pythonpath == "-"  # the runner's python, nothing added
    assert (repo / "used.txt").read_text() == "1.0\n"
    outside = subprocess.run([sys.executable, "-c", "import tinydep"], capture_output=True, check=False)
    assert outside.returncode != 0  # installed into the runner's virtualenv, not into this interpreter
    # an install that fails fails the job, and the steps after it do not run
    (repo / ".github" / "workflows" / "installs.yml").write_text(_INSTALLING.format(wheel=tmp_path / "none.whl"))
    (repo / "used.txt").unlink()
    job = run_job(repo, "push", {}, workflow.fake_tools(tmp_path / "bin"), tmp_path, {},
                  workflow_path=Path(".github/workflows/installs.yml"), venv=tmp_path / "runner-2")
    assert job.failed and not (repo / "used.txt").exists()
    (install,) = [s for s in job.steps.values() if s.get("name") == "Install perfsuite"]
    assert install["status"] != 0 and "none.whl" in install["log"]


def _fresh_runner(repo: Path) -> None:
    """What a new CI runner starts from: the checkout, nothing left by a previous job."""
    for leftover in ("results/ab", "results/local", "site", "pr-comment.md", "results-ab-failed.md"):
        path = repo / leftover
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def _by_name(job: Job, name: str) -> dict[str, Any]:
    (step,) = [s for s in job.steps.values() if s.get("name") == name]
    return step


def test_the_workflow_gates_a_pull_request_and_keeps_one_comment(
    scratch_repo: Path, fake_tools: tuple[Path, Path], tmp_path: Path, runner_venv: Path
) -> None:
    bin_dir, state = fake_tools
    gh = {"FAKE_GH_STATE": str(state)}
    base_sha = git(scratch_repo, "rev-parse", "HEAD")
    git(scratch_repo, "checkout", "-q", "-b", "feature")
    head_sha = plant_fsync(scratch_repo)
    context = {**VARS, "github.event.pull_request.base.sha": base_sha,
               "github.event.pull_request.head.sha": head_sha, "github.sha": head_sha,
               "github.event.pull_request.number": "7",
               "github.event.pull_request.head.repo.full_name": "octo/project", "github.repository": "octo/project",
               "github.token": "fake-token", "github.server_url": "https://github.example", "github.run_id": "42",
               "github.ref": "refs/pull/7/merge"}

    job = run_job(scratch_repo, "pull_request", context, bin_dir, tmp_path, gh, venv=runner_venv)
    assert _by_name(job, "Install perfsuite")["status"] == 0
    assert job.steps["ab"]["status"] == 0 and job.steps["ab"]["outputs"]["status"] == "1", job.steps["ab"]["log"]
    assert f"BASE: merge base {base_sha}" in job.steps["ab"]["log"]
    assert "### perfsuite ab: " in job.summary and "metrics.fsyncs" in job.summary
    assert "<details><summary>All " in job.summary  # the full Markdown in the job summary
    assert "### Evidence" in job.summary and "Against the baseline" in job.summary
    assert (scratch_repo / "site" / "index.html").is_file()
    gate = _by_name(job, "Gate")
    assert gate["ran"] and gate["status"] == 1 and "regression (exit 1)" in gate["log"]
    assert job.failed
    comments = json.loads(state.read_text())["comments"]
    assert len(comments) == 1
    body = comments[0]["body"]
    assert body.startswith(MARKER + "\n### perfsuite ab: ") and "metrics.fsyncs" in body
    assert ARTIFACT_URL in body and "<details>" not in body  # the headline table, not every metric
    assert len(body) < 10_000

    # the fix is pushed to the same pull request: the gate passes and the same comment is updated
    edit(scratch_repo, FSYNC_FILE, FSYNC_OLD + FSYNC_OLD, FSYNC_OLD)
    fixed = commit(scratch_repo, "fix: one fsync per barrier")
    _fresh_runner(scratch_repo)
    job = run_job(scratch_repo, "pull_request", {**context, "github.event.pull_request.head.sha": fixed,
                                                 "github.sha": fixed}, bin_dir, tmp_path, gh, venv=runner_venv)
    assert job.steps["ab"]["outputs"]["status"] == "0", job.steps["ab"]["log"]
    assert not _by_name(job, "Gate")["ran"] and not job.failed
    after = json.loads(state.read_text())
    assert len(after["comments"]) == 1 and after["comments"][0]["id"] == comments[0]["id"]
    assert after["comments"][0]["body"].startswith(MARKER + "\n### perfsuite ab: no regression")
    assert [c[:3] for c in after["calls"] if "--method" in c] == [["api", "--method", "POST"],
                                                                  ["api", "--method", "PATCH"]]


def test_the_workflow_on_push_to_main_keeps_producing_results(
    scratch_repo: Path, fake_tools: tuple[Path, Path], tmp_path: Path, runner_venv: Path
) -> None:
    bin_dir, state = fake_tools
    sha = git(scratch_repo, "rev-parse", "HEAD")
    context = {**VARS, "github.sha": sha, "github.repository": "octo/project", "github.token": "fake-token",
               "github.server_url": "https://github.example", "github.run_id": "43", "github.ref": "refs/heads/main"}
    job = run_job(scratch_repo, "push", context, bin_dir, tmp_path, {"FAKE_GH_STATE": str(state)},
                  venv=runner_venv)
    assert not job.failed, {k: v.get("log") for k, v in job.steps.items()}
    assert not job.steps["ab"]["ran"] and not _by_name(job, "Gate")["ran"]
    assert _by_name(job, "Run the quick set")["status"] == 0
    assert list((scratch_repo / "results" / "local").glob("ci-tiny-*.json"))
    assert "Against the committed baseline (information only" in job.summary
    assert "### Evidence" in job.summary and (scratch_repo / "site" / "index.html").is_file()
    assert not state.exists()  # no comment outside pull requests
