"""Issue 15 item 5: the workflow's own shell steps, extracted from `.github/workflows/bench.yml`, run against a
scratch git repository (a copy of the project), with GITHUB_OUTPUT / GITHUB_STEP_SUMMARY files and a fake `gh`.

A pull request with a planted regression (an extra fsync per barrier: a deterministic cost) fails the gate and
gets one comment; the fix pushed to the same pull request passes and *updates* that comment; a push to main runs
the quick-set path green. `uses:` steps are GitHub's (checkout, setup-python, upload-artifact) and are not
run; "Install perfsuite" (`pip install -e .`) is replaced by PYTHONPATH pointing at the copy. Repository
variables shrink the run to a tiny recipe and gate on costs only: the steps' logic is under test, not timing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .conftest import FSYNC_FILE, FSYNC_OLD, GIT_ENV, SOURCE, commit, edit, git, plant_fsync

yaml = pytest.importorskip("yaml")

WORKFLOW = SOURCE / ".github" / "workflows" / "bench.yml"
MARKER = "<!-- perfsuite-ab -->"
ARTIFACT_URL = "https://github.example/octo/project/actions/runs/42/artifacts/1"
VARS = {
    "vars.PERFSUITE_AB_ARGS": "-r ci-tiny --samples 2 --warmup 0 --allocation-samples 1 --gate costs",
    "vars.PERFSUITE_RUN_ARGS": "ci-tiny --samples 2 --warmup 0",
}

FAKE_GH = textwrap.dedent('''\
    #!{python}
    """A fake `gh api`: issue comments kept in a JSON file; every call logged."""
    import json, os, re, sys
    state_path = os.environ["FAKE_GH_STATE"]
    state = json.load(open(state_path)) if os.path.exists(state_path) else {{"comments": [], "calls": []}}
    args = sys.argv[1:]
    state["calls"].append(args)
    assert args[0] == "api" and os.environ.get("GH_TOKEN"), args
    method, endpoint, body, jq = "GET", None, None, None
    i = 1
    while i < len(args):
        a = args[i]
        if a == "--method": method = args[i + 1]; i += 2; continue
        if a == "--jq": jq = args[i + 1]; i += 2; continue
        if a == "-F": key, _, value = args[i + 1].partition("="); body = open(value[1:]).read(); i += 2; continue
        if a == "--paginate": i += 1; continue
        endpoint = a; i += 1
    out = ""
    if method == "GET" and re.fullmatch(r"repos/[^/]+/[^/]+/issues/\\d+/comments", endpoint):
        marker = re.fullmatch(r'\\.\\[\\] \\| select\\(\\.body \\| startswith\\("(.*)"\\)\\) \\| \\.id', jq).group(1)
        out = "".join(f"{{c['id']}}\\n" for c in state["comments"] if c["body"].startswith(marker))
    elif method == "POST":
        state["comments"].append({{"id": 1000 + len(state["comments"]), "body": body}})
        out = "{{}}"
    elif method == "PATCH":
        cid = int(endpoint.rsplit("/", 1)[1])
        (comment,) = [c for c in state["comments"] if c["id"] == cid]
        comment["body"] = body
        out = "{{}}"
    else:
        sys.exit(f"fake gh: unexpected call {{args}}")
    json.dump(state, open(state_path, "w"))
    sys.stdout.write(out)
''')


# -- GitHub expressions: just what the workflow uses; anything else fails the test ----------------------


_TOKEN = re.compile(r"\s+|'[^']*'|&&|\|\||==|!=|!|\(|\)|[A-Za-z_][\w.\-]*\(\)|[A-Za-z_][\w.\-]*")


def _evaluate(expression: str, context: Mapping[str, Any]) -> Any:
    def value(name: str) -> Any:
        if name in context:
            return context[name]
        if name.startswith(("github.event.", "steps.")):
            return ""  # absent from this event / a step that did not run: GitHub gives null
        raise KeyError(f"the test does not know {name!r}: add it to the context")

    status = context["__status__"]
    functions = {"always()": "True", "success()": repr(status == "success"), "failure()": repr(status == "failure")}
    words = {"&&": " and ", "||": " or ", "!": " not ", "==": "==", "!=": "!=", "(": "(", ")": ")"}
    out = []
    pos = 0
    expression = expression.strip()
    while pos < len(expression):
        match = _TOKEN.match(expression, pos)
        assert match is not None, f"cannot parse {expression!r} at {pos}"
        token = match.group(0)
        pos = match.end()
        if token.isspace():
            continue
        if token.startswith("'"):
            out.append(repr(token[1:-1]))
        elif token in functions:
            out.append(functions[token])
        elif token in words:
            out.append(words[token])
        else:
            out.append(repr(value(token)))
    return eval(" ".join(out))  # the tokens above are literals, operators and repr()s only


def _substitute(text: str, context: Mapping[str, Any]) -> str:
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: str(_evaluate(m.group(1), context)), str(text))


@dataclass
class Job:
    """One run of the workflow's job: per step its exit status, outputs and log; the summary and the job's state."""

    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    summary: str = ""
    failed: bool = False


def run_job(repo: Path, event: str, context: Mapping[str, str], bin_dir: Path, tmp: Path,
            extra_env: Mapping[str, str]) -> Job:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    (job_spec,) = workflow["jobs"].values()
    job = Job()
    summary = tmp / f"summary-{len(list(tmp.glob('summary-*')))}.md"
    summary.write_text("")
    ctx: dict[str, Any] = {**context, "github.event_name": event}
    for index, step in enumerate(job_spec["steps"]):
        sid = step.get("id", f"step{index}")
        ctx["__status__"] = "failure" if job.failed else "success"
        for key, val in job.steps.items():
            for out_key, out_val in val["outputs"].items():
                ctx[f"steps.{key}.outputs.{out_key}"] = out_val
        condition = str(step.get("if", "success()")).replace("${{", "").replace("}}", "")
        if not any(f in condition for f in ("always()", "success()", "failure()", "cancelled()")):
            condition = f"success() && ({condition})"  # GitHub's implicit status check
        if not _evaluate(condition, ctx):
            job.steps[sid] = {"ran": False, "outputs": {}, "name": step.get("name")}
            continue
        if "uses" in step:  # GitHub's actions: the checkout is the scratch repo; the upload's URL is faked
            outputs = {"artifact-url": ARTIFACT_URL} if step["uses"].startswith("actions/upload-artifact") else {}
            job.steps[sid] = {"ran": True, "status": 0, "outputs": outputs}
            continue
        if step.get("name") == "Install perfsuite":
            assert step["run"].strip() == "python -m pip install -e ."  # replaced by PYTHONPATH below
            continue
        env = {**os.environ, **GIT_ENV, **extra_env, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
               "PYTHONPATH": str(repo)}
        for scope in (workflow.get("env") or {}, job_spec.get("env") or {}, step.get("env") or {}):
            env.update({k: _substitute(v, ctx) for k, v in scope.items()})
        output = tmp / f"output-{sid}-{index}"
        output.write_text("")
        env.update({"GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary)})
        script = tmp / f"step-{index}.sh"
        script.write_text(step["run"])
        shell = ["bash", "--noprofile", "--norc", "-eo", "pipefail"] if step.get("shell") == "bash" else ["bash", "-e"]
        proc = subprocess.run([*shell, str(script)], cwd=repo, env=env, capture_output=True, text=True, timeout=900,
                              check=False)
        outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
        job.steps[sid] = {"ran": True, "status": proc.returncode, "outputs": outputs, "log": proc.stdout + proc.stderr,
                          "name": step.get("name")}
        if proc.returncode != 0 and not step.get("continue-on-error"):
            job.failed = True
    job.summary = summary.read_text()
    return job


@pytest.fixture
def fake_tools(tmp_path: Path) -> tuple[Path, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(FAKE_GH.format(python=sys.executable))
    (bin_dir / "perfsuite").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m perfsuite "$@"\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    state = tmp_path / "gh-state.json"
    return bin_dir, state


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
    scratch_repo: Path, fake_tools: tuple[Path, Path], tmp_path: Path
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

    job = run_job(scratch_repo, "pull_request", context, bin_dir, tmp_path, gh)
    assert job.steps["ab"]["status"] == 0 and job.steps["ab"]["outputs"]["status"] == "1", job.steps["ab"]["log"]
    assert f"BASE: merge base {base_sha}" in job.steps["ab"]["log"]
    assert "### perfsuite compare: " in job.summary and "metrics.file_fsyncs" in job.summary
    assert "<details><summary>All " in job.summary  # the full Markdown in the job summary
    assert "### Evidence" in job.summary and "Against the baseline" in job.summary
    assert (scratch_repo / "site" / "index.html").is_file()
    gate = _by_name(job, "Gate")
    assert gate["ran"] and gate["status"] == 1 and "regression (exit 1)" in gate["log"]
    assert job.failed
    comments = json.loads(state.read_text())["comments"]
    assert len(comments) == 1
    body = comments[0]["body"]
    assert body.startswith(MARKER + "\n### perfsuite compare: ") and "metrics.file_fsyncs" in body
    assert ARTIFACT_URL in body and "<details>" not in body  # the headline table, not every metric
    assert len(body) < 10_000

    # the fix is pushed to the same pull request: the gate passes and the same comment is updated
    edit(scratch_repo, FSYNC_FILE, FSYNC_OLD + FSYNC_OLD, FSYNC_OLD)
    fixed = commit(scratch_repo, "fix: one fsync per barrier")
    _fresh_runner(scratch_repo)
    job = run_job(scratch_repo, "pull_request", {**context, "github.event.pull_request.head.sha": fixed,
                                                 "github.sha": fixed}, bin_dir, tmp_path, gh)
    assert job.steps["ab"]["outputs"]["status"] == "0", job.steps["ab"]["log"]
    assert not _by_name(job, "Gate")["ran"] and not job.failed
    after = json.loads(state.read_text())
    assert len(after["comments"]) == 1 and after["comments"][0]["id"] == comments[0]["id"]
    assert after["comments"][0]["body"].startswith(MARKER + "\n### perfsuite compare: no regression")
    assert [c[:3] for c in after["calls"] if "--method" in c] == [["api", "--method", "POST"],
                                                                  ["api", "--method", "PATCH"]]


def test_the_workflow_on_push_to_main_keeps_producing_results(
    scratch_repo: Path, fake_tools: tuple[Path, Path], tmp_path: Path
) -> None:
    bin_dir, state = fake_tools
    sha = git(scratch_repo, "rev-parse", "HEAD")
    context = {**VARS, "github.sha": sha, "github.repository": "octo/project", "github.token": "fake-token",
               "github.server_url": "https://github.example", "github.run_id": "43", "github.ref": "refs/heads/main"}
    job = run_job(scratch_repo, "push", context, bin_dir, tmp_path, {"FAKE_GH_STATE": str(state)})
    assert not job.failed, {k: v.get("log") for k, v in job.steps.items()}
    assert not job.steps["ab"]["ran"] and not _by_name(job, "Gate")["ran"]
    assert _by_name(job, "Run the quick set")["status"] == 0
    assert list((scratch_repo / "results" / "local").glob("ci-tiny-*.json"))
    assert "Against the committed baseline (information only" in job.summary
    assert "### Evidence" in job.summary and (scratch_repo / "site" / "index.html").is_file()
    assert not state.exists()  # no comment outside pull requests
