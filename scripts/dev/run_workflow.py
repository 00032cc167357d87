"""Run a workflow's own shell steps (`.github/workflows/bench.yml`, or the one `perfsuite init` writes into a
user's repository: `.github/workflows/perfsuite.yml`) on this machine, as GitHub would.

Extracts the steps of one job from the YAML and runs every `run:` step as written, in order, in a git checkout,
with GITHUB_OUTPUT and GITHUB_STEP_SUMMARY files, the step's `env:` and `if:` evaluated (the expressions the
workflow uses; any other one is an error), and a fake `gh` that keeps issue comments in a JSON file. Nothing
is replaced: "Install perfsuite" runs its own pip lines, and the steps after it find perfsuite where it
installed it, with no PYTHONPATH. The `uses:` steps are GitHub's; each runs as its local equivalent:

* actions/checkout: the checkout given (`--repo`, or a fresh clone of this repository);
* actions/setup-python: the job's virtualenv (`python -m venv` with this interpreter, whatever its
  python-version says, and pip upgraded from the configured index, as the runner's Python has a current pip:
  the one ensurepip bundles cannot parse a `git+file://` requirement), first on PATH for the later steps;
  a virtualenv that exists already is reused (a job after another on the same runner);
* actions/upload-artifact / download-artifact: nothing: a job after another runs in the same checkout, so
  the first one's results are its "artifact" (the upload's `artifact-url` output is faked).

Used by tests/ab/test_workflow.py and tests/ab/test_init.py, and on its own to check that the workflow's steps
run green against the committed baseline and the project itself:

    python scripts/dev/run_workflow.py --event pull_request   # a scratch clone of this repository, PR = HEAD
    python scripts/dev/run_workflow.py --event push           # the quick set, the committed baseline, dashboard
    python scripts/dev/run_workflow.py --event push --repo ~/myruntime --workflow .github/workflows/perfsuite.yml \
        --job bench --job history                         # a user's repository (`perfsuite init`)

Prints each step's exit status and the job's; exit status 0 when the job would be green. Needs PyYAML, and
pip's index (the configured one) for what the install steps install.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).resolve().parents[2]
GIT_ENV = {"GIT_AUTHOR_NAME": "ci", "GIT_AUTHOR_EMAIL": "ci@example.invalid", "GIT_COMMITTER_NAME": "ci",
           "GIT_COMMITTER_EMAIL": "ci@example.invalid"}
WORKFLOW = Path(".github") / "workflows" / "bench.yml"  # in the checkout the job runs in
MARKER = "<!-- perfsuite-ab -->"
#: the `uses:` steps the runner knows (each one's local equivalent: the module docstring)
_ACTIONS = ("actions/checkout", "actions/setup-python", "actions/upload-artifact", "actions/download-artifact")
ARTIFACT_URL = "https://github.example/octo/project/actions/runs/42/artifacts/1"

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
        if name.startswith(("github.event.", "steps.", "vars.")):
            return ""  # absent from this event / a step that did not run / a variable not set: GitHub gives ""
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
    summary_path: Path | None = None
    failed: bool = False
    ran: bool = True  # False: the job's own `if:` was false


#: what would make a step's python find this interpreter's packages instead of what its install step installed
_HOST_PYTHON = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "PYTHONUSERBASE")


def setup_python(venv: Path) -> Path:
    """actions/setup-python's local equivalent: ``venv`` made with this interpreter (when it is not there
    yet) and its pip upgraded; returns its bin directory."""
    bin_dir = venv / "bin"
    if not (bin_dir / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
        env = {k: v for k, v in os.environ.items() if k not in _HOST_PYTHON}
        proc = subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
                              env=env, capture_output=True, text=True, timeout=600, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"run_workflow: setup-python: pip could not be upgraded in {venv}: {proc.stderr}")
    return bin_dir


def run_job(repo: Path, event: str, context: Mapping[str, str], bin_dir: Path, tmp: Path,
            extra_env: Mapping[str, str], *, venv: Path, workflow_path: Path = WORKFLOW,
            job_name: str = "bench") -> Job:
    """Run the job ``job_name`` of ``repo``'s workflow for ``event``: ``bin_dir``'s tools (the fake `gh`) first
    on PATH, then ``venv``'s once setup-python's step ran; ``extra_env`` added to every step's environment."""
    import yaml

    workflow = yaml.safe_load((repo / workflow_path).read_text())
    job_spec = workflow["jobs"][job_name]
    path = [str(bin_dir), os.environ["PATH"]]
    job = Job()
    summary = tmp / f"summary-{len(list(tmp.glob('summary-*')))}.md"
    summary.write_text("")
    ctx: dict[str, Any] = {**context, "github.event_name": event}
    if "if" in job_spec:  # the job's own condition (the history job: pushes only)
        ctx["__status__"] = "success"
        if not _evaluate(str(job_spec["if"]).replace("${{", "").replace("}}", ""), ctx):
            job.ran = False
            return job
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
        if "uses" in step:  # GitHub's actions, as their local equivalents (the module docstring)
            action = step["uses"].split("@", 1)[0]
            if action not in _ACTIONS:
                raise SystemExit(f"run_workflow: no local equivalent of {step['uses']}")
            if action == "actions/setup-python":
                path.insert(1, str(setup_python(venv)))
            outputs = {"artifact-url": ARTIFACT_URL} if action == "actions/upload-artifact" else {}
            job.steps[sid] = {"ran": True, "status": 0, "outputs": outputs, "name": step.get("name")}
            continue
        env = {k: v for k, v in os.environ.items() if k not in _HOST_PYTHON}
        env.update({**GIT_ENV, **extra_env, "PATH": os.pathsep.join(path)})
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
    job.summary_path = summary
    return job


def fake_tools(directory: Path) -> Path:
    """A `gh` that keeps comments in ``$FAKE_GH_STATE`` (perfsuite itself is what the install step installs)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "gh").write_text(FAKE_GH.format(python=sys.executable))
    for tool in directory.iterdir():
        tool.chmod(0o755)
    return directory


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--event", choices=("pull_request", "push"), required=True)
    parser.add_argument("--repo", help="a git checkout to run in (default: a fresh clone of this repository)")
    parser.add_argument("--base", help="the pull request's base commit (default: HEAD: the project against itself)")
    parser.add_argument("--var", action="append", default=[], metavar="NAME=VALUE",
                        help="a repository variable, e.g. PERFSUITE_AB_ARGS='--looks 6'")
    parser.add_argument("--workflow", default=str(WORKFLOW),
                        help=f"the workflow file, relative to the checkout (default: {WORKFLOW})")
    parser.add_argument("--job", action="append", dest="jobs", metavar="NAME",
                        help="a job to run, repeatable, in order, in the same checkout (default: bench)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="run-workflow-"))
    if args.repo:
        repo = Path(args.repo).resolve()
    else:
        repo = tmp / "clone"
        subprocess.run(["git", "clone", "--quiet", str(SOURCE), str(repo)], check=True)
    sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                         check=True).stdout.strip()
    variables = {"vars.PERFSUITE_AB_ARGS": "", "vars.PERFSUITE_RUN_ARGS": ""}
    for item in args.var:
        name, _, value = item.partition("=")
        variables[f"vars.{name}"] = value
    context = {**variables, "github.sha": sha, "github.repository": "local/project", "github.token": "fake-token",
               "github.server_url": "https://github.invalid", "github.run_id": "1", "github.ref": "refs/heads/main"}
    if args.event == "pull_request":
        context.update({"github.event.pull_request.base.sha": args.base or sha,
                        "github.event.pull_request.head.sha": sha, "github.event.pull_request.number": "1",
                        "github.event.pull_request.head.repo.full_name": "local/project"})
    state = tmp / "gh-state.json"
    bin_dir = fake_tools(tmp / "bin")
    print(f"{args.event} in {repo} ({sha[:12]}); work files in {tmp}")
    failed = False
    for name in args.jobs or ["bench"]:
        job = run_job(repo, args.event, context, bin_dir, tmp, {"FAKE_GH_STATE": str(state)},
                      venv=tmp / f"venv-{name}", workflow_path=Path(args.workflow), job_name=name)
        if not job.ran:
            print(f"job {name}: skipped (its if: is false for {args.event})")
            continue
        print(f"job {name}:")
        for sid, step in job.steps.items():
            status = "skipped" if not step.get("ran") else f"exit {step.get('status', 0)}"
            outputs = f" outputs {step['outputs']}" if step.get("outputs") else ""
            print(f"  {step.get('name') or sid}: {status}{outputs}")
        print(f"job {name}: {'FAILED' if job.failed else 'green'}; summary: {job.summary_path}")
        failed = failed or job.failed
        if job.failed:
            break  # `needs:`: a later job does not run after a failed one
    if state.exists():
        for comment in json.loads(state.read_text())["comments"]:
            print(f"  pull request comment {comment['id']}: {comment['body'].splitlines()[1][:160]}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
