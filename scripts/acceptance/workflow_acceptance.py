"""The measured acceptance of the workflow `perfsuite init` writes: its pull-request job, run as written, N times
on a team's own scratch repository (SPEC section 5, the CI gate): not a test, it times.

The repository is tests/ab/userrepo.py's (a JSONL transcript store whose commit fsyncs in a writer thread,
its recipe `commit`), with `perfsuite init --install-from 'perfsuite[report] @ git+file://<bare clone>'`
committed on main: the runner installs perfsuite from a bare clone of this checkout's committed HEAD, as a
team's runner would from a git URL. The pull request is a branch of one commit on main:

  aa      a changelog line: the job must be green (passed, or neutral: a warning on a green job);
  fsync / alloc / block-work
          a plant (tests/ab/userrepo.py; block-work: fixed work calibrated to 3 ms on the loop's thread):
          the job must be red.

Every run is one `bench` job of the pull_request event through scripts/dev/run_workflow.py (every `run:` step
as written, the install step included, a fake `gh`), in a fresh clone of the scratch repository. The runner's
virtualenv is made fresh for the first run and kept for the others (``--fresh-venv``: one per run), so later
install steps find perfsuite installed. Repository variables come from ``--var NAME=VALUE`` (default: none
set, the workflow's defaults: the callgrind pass on). ``--hogs N`` runs N CPU hogs throughout.

    python scripts/acceptance/workflow_acceptance.py [--runs 20] [--plant aa|fsync|alloc|block-work]
        [--hogs 2] [--var PERFSUITE_AB_ARGS=--looks 2] [--fresh-venv] [--until HH:MM] [--workdir DIR] [--out OUT]
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).resolve().parents[2]
WORKFLOW = Path(".github/workflows/perfsuite.yml")


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


acceptance = _load("ab_user_acceptance", SOURCE / "scripts" / "acceptance" / "ab_user_acceptance.py")
workflow = _load("run_workflow", SOURCE / "scripts" / "dev" / "run_workflow.py")
u = acceptance.u


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def team_repository(workdir: Path, plant: str, spec: str) -> tuple[Path, str, str]:
    """The scratch repository with the workflow committed on main and the pull request's branch ``pr``;
    returns (its path, main's commit, the branch's commit)."""
    repo = workdir / "myruntime"
    u.make_repo(repo)
    # the package named for setuptools: the workflow's `pip install -e .` cannot discover one among the
    # several top-level directories (myruntime/, benchmarks/, perf/, recipes/), as `perfsuite init` says
    u.write(repo, {"pyproject.toml": u.pyproject(packages=("myruntime",))})
    u.commit_all(repo, "myruntime: its package named for setuptools")
    init = subprocess.run([sys.executable, "-m", "perfsuite", "init", "--install-from", spec], cwd=repo,
                          env=u.tool_env(), capture_output=True, text=True, timeout=120, check=False)
    if init.returncode != 0:
        raise SystemExit(f"workflow_acceptance: perfsuite init failed: {init.stdout}{init.stderr}")
    base = u.commit_all(repo, "perfsuite init")
    u.git(repo, "checkout", "--quiet", "-b", "pr")
    if plant == "aa":
        with open(repo / "CHANGELOG.md", "a") as fh:
            fh.write("- nothing that runs\n")
        head = u.commit_all(repo, "a changelog line")
    else:
        if plant == "block-work":
            rounds, ns = acceptance.calibrate_rounds(3)
            u.PLANTS["block-work"] = acceptance.work_plant(3, rounds)
            print(f"block-work: {rounds} steps = 3 ms here ({ns:.0f} ns each)", flush=True)
        head = u.plant(repo, plant)
    return repo, base, head


def one_job(repo: Path, base: str, head: str, variables: dict[str, str], run_dir: Path, venv: Path) -> dict[str, Any]:
    """One pull-request job in a fresh clone of ``repo`` at the branch: its verdict and what it printed."""
    clone = run_dir / "clone"
    subprocess.run(["git", "clone", "--quiet", "--branch", "pr", str(repo), str(clone)], check=True)
    bin_dir = workflow.fake_tools(run_dir / "bin")
    context = {**{f"vars.{k}": v for k, v in variables.items()}, "github.sha": head,
               "github.repository": "team/myruntime", "github.token": "fake-token",
               "github.server_url": "https://github.invalid", "github.run_id": "1", "github.ref": "refs/pull/1/merge",
               "github.event.pull_request.base.sha": base, "github.event.pull_request.head.sha": head,
               "github.event.pull_request.number": "1", "github.event.pull_request.head.repo.full_name":
               "team/myruntime"}
    started = time.monotonic()
    job = workflow.run_job(clone, "pull_request", context, bin_dir, run_dir,
                           {"FAKE_GH_STATE": str(run_dir / "gh-state.json"),
                            "PERFSUITE_CACHE": str(run_dir.parent / "cache")},
                           venv=venv, workflow_path=WORKFLOW)
    seconds = time.monotonic() - started
    ab = job.steps.get("ab", {})
    first = next((ln for ln in job.summary.splitlines() if ln.startswith("### ")), "(no summary)")
    failed_steps = [s.get("name") or sid for sid, s in job.steps.items() if s.get("ran") and s.get("status")]
    return {"red": job.failed, "ab_status": (ab.get("outputs") or {}).get("status"), "seconds": round(seconds, 1),
            "first_line": first, "failed_steps": failed_steps, "finished_at": _now(),
            "load": round(os.getloadavg()[0], 2), "install_log_tail": _install_tail(job)}


def _install_tail(job: Any) -> str:
    step: dict[str, Any] = next((s for s in job.steps.values() if s.get("name") == "Install perfsuite"), {})
    lines = [ln for ln in str(step.get("log") or "").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--plant", default="aa", choices=("aa", "fsync", "alloc", "block-work"))
    parser.add_argument("--hogs", type=int, default=0, help="CPU hogs running for the whole acceptance")
    parser.add_argument("--var", action="append", default=[], metavar="NAME=VALUE",
                        help="a repository variable (repeatable); unset ones are GitHub's empty string")
    parser.add_argument("--fresh-venv", action="store_true", help="a fresh runner virtualenv for every run")
    parser.add_argument("--until", help="start no run after this UTC time (today), HH:MM")
    parser.add_argument("--workdir", help="where the repositories and runs go (default: a temp dir, kept)")
    parser.add_argument("--out", help="write the tally and every run here (rewritten after each run)")
    args = parser.parse_args()
    variables = dict(item.partition("=")[::2] for item in args.var)
    until = None
    if args.until:
        hour, minute = (int(x) for x in args.until.split(":"))
        until = dt.datetime.now(dt.UTC).replace(hour=hour, minute=minute, second=0, microsecond=0)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="workflow-acceptance-"))
    workdir.mkdir(parents=True, exist_ok=True)
    origin = workdir / "perfsuite.git"
    subprocess.run(["git", "clone", "--quiet", "--bare", str(SOURCE), str(origin)], check=True)
    committed = subprocess.run(["git", "--git-dir", str(origin), "rev-parse", "HEAD"], capture_output=True,
                               text=True, check=True).stdout.strip()
    spec = f"perfsuite[report] @ git+{origin.as_uri()}"
    repo, base, head = team_repository(workdir, args.plant, spec)
    expect_red = args.plant != "aa"
    document: dict[str, Any] = {"source_commit": committed, "install": spec, "plant": args.plant,
                                "expected": "red" if expect_red else "green", "variables": variables,
                                "hogs": args.hogs, "started_at": _now(), "runs": []}
    print(f"perfsuite {committed[:12]} installed from {spec}; {repo}: main {base[:12]}, pull request {head[:12]} "
          f"({args.plant}); expected {document['expected']}; started {document['started_at']}", flush=True)

    def save() -> None:
        runs = document["runs"]
        document["summary"] = {"runs": len(runs), "as_expected": sum(r["red"] == expect_red for r in runs),
                               "red": sum(r["red"] for r in runs)}
        document["ended_at"] = _now()
        if args.out:
            Path(args.out).write_text(json.dumps(document, indent=1))

    with acceptance.hogs(args.hogs):
        for i in range(1, args.runs + 1):
            if until is not None and dt.datetime.now(dt.UTC) >= until:
                document["stopped"] = f"--until {args.until} reached before run {i}"
                break
            run_dir = workdir / f"run-{i}"
            run_dir.mkdir()
            venv = run_dir / "venv" if args.fresh_venv or i == 1 else workdir / "run-1" / "venv"
            r = one_job(repo, base, head, variables, run_dir, venv)
            document["runs"].append(r)
            save()
            verdict = "red" if r["red"] else "green"
            ok = "ok" if r["red"] == expect_red else "NOT AS EXPECTED"
            print(f"run {i}: {verdict} {ok} (ab exit {r['ab_status']}, {r['seconds']:.0f} s, load {r['load']}): "
                  f"{r['first_line'][:300]}", flush=True)
    save()
    tally = document["summary"]
    print(f"{args.plant}: {tally['as_expected']}/{tally['runs']} as expected ({tally['red']} red); "
          f"command: {' '.join(shlex.quote(a) for a in sys.argv)}")
    return 0 if tally["as_expected"] == tally["runs"] == args.runs else 1


if __name__ == "__main__":
    raise SystemExit(main())
