"""Run a workflow's own shell steps (`.github/workflows/bench.yml`, or the one `perfsuite init` writes into a
user's repository: `.github/workflows/perfsuite.yml`) on this machine, as GitHub would.

Extracts the `run:` steps of one job from the YAML and runs them in order in a git checkout, with GITHUB_OUTPUT
and GITHUB_STEP_SUMMARY files, the step's `env:` and `if:` evaluated (the expressions the workflow uses; any
other one is an error), and a fake `gh` that keeps issue comments in a JSON file. `uses:` steps are GitHub's
(checkout, setup-python, upload- and download-artifact) and are not run (a job after another runs in the same
checkout, so the first one's results are its "artifact"); "Install perfsuite" is replaced by PYTHONPATH
pointing at the checkout (perfsuite's own repository) or at this perfsuite and the checkout (a user's, whose
`pip install -e .` it replaces). Used by tests/ab/test_workflow.py and tests/ab/test_init.py, and on its own
for issue 15's acceptance ("the workflow's steps run green against the committed baseline and the project
itself"):

    python scripts/dev/run_workflow.py --event pull_request   # a scratch clone of this repository, PR = HEAD
    python scripts/dev/run_workflow.py --event push           # the quick set, the committed baseline, dashboard
    python scripts/dev/run_workflow.py --event push --repo ~/myruntime --workflow .github/workflows/perfsuite.yml \
        --job bench --job history                         # a user's repository (`perfsuite init`)

Prints each step's exit status and the job's; exit status 0 when the job would be green. Needs PyYAML.
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
    summary_path: Path | None = None
    failed: bool = False
    ran: bool = True  # False: the job's own `if:` was false


def _check_extra(extra: str) -> None:
    """The packages of a pyproject extra the install step names are importable here (else the run would test
    an install the workflow does not make)."""
    import importlib.util
    import tomllib

    project = tomllib.loads((SOURCE / "pyproject.toml").read_text())["project"]
    for requirement in project["optional-dependencies"][extra]:
        name = re.split(r"[\[<>=!~ ]", requirement, maxsplit=1)[0]
        if name == "perfsuite":
            continue
        module = {"scikit-learn": "sklearn"}.get(name, name.replace("-", "_"))
        if importlib.util.find_spec(module) is None:
            raise SystemExit(f"run_workflow: the install step's extra [{extra}] needs {name}, not installed here")


#: the install lines the runner knows: perfsuite's own checkout (`-e '.[extras]'`), perfsuite from the index
#: (`'perfsuite[extras]'`), and a user's project (`-e .` when it has a pyproject.toml or setup.py)
_INSTALLS = (
    re.compile(r"python -m pip install -e '?\.(?:\[(?P<extras>[\w,]+)\])?'?"),
    re.compile(r"python -m pip install '?perfsuite(?:\[(?P<extras>[\w,]+)\])?'?"),
    re.compile(r"if \[ -f pyproject\.toml \] \|\| \[ -f setup\.py \]; then python -m pip install -e \.; fi"),
)


def _check_install(run: str) -> None:
    """Every line of an install step is one the runner replaces by PYTHONPATH; the extras it names import here."""
    for line in run.splitlines():
        command = line.split("#", 1)[0].strip()
        if not command:
            continue
        found = next((m for m in (p.fullmatch(command) for p in _INSTALLS) if m), None)
        assert found, f"the runner does not know this install line: {command!r}"
        for extra in ((found.groupdict().get("extras") or "").split(",")):
            if extra:
                _check_extra(extra)


def default_pythonpath(repo: Path) -> list[str]:
    """What replaces the install step: the checkout when it is perfsuite's own, else this perfsuite and it."""
    if (repo / "perfsuite" / "__init__.py").is_file():
        return [str(repo)]
    return [str(SOURCE), str(repo)]


def run_job(repo: Path, event: str, context: Mapping[str, str], bin_dir: Path, tmp: Path,
            extra_env: Mapping[str, str], *, workflow_path: Path = WORKFLOW, job_name: str = "bench",
            pythonpath: list[str] | None = None) -> Job:
    import yaml

    workflow = yaml.safe_load((repo / workflow_path).read_text())
    job_spec = workflow["jobs"][job_name]
    path_env = os.pathsep.join(pythonpath if pythonpath is not None else default_pythonpath(repo))
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
        if "uses" in step:  # GitHub's actions: the checkout is the scratch repo; the upload's URL is faked
            outputs = {"artifact-url": ARTIFACT_URL} if step["uses"].startswith("actions/upload-artifact") else {}
            job.steps[sid] = {"ran": True, "status": 0, "outputs": outputs}
            continue
        if step.get("name") == "Install perfsuite":
            _check_install(step["run"])  # replaced by PYTHONPATH below
            continue
        env = {**os.environ, **GIT_ENV, **extra_env, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
               "PYTHONPATH": path_env}
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
    """A `gh` that keeps comments in ``$FAKE_GH_STATE`` and a `perfsuite` that runs this interpreter's."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "gh").write_text(FAKE_GH.format(python=sys.executable))
    (directory / "perfsuite").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m perfsuite "$@"\n')
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
                      workflow_path=Path(args.workflow), job_name=name)
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
