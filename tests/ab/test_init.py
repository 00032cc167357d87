"""`perfsuite init` in a user's repository outside perfsuite: what it writes runs green as
generated (the recipe with `perfsuite run` and `ab`, the pytest example, and the CI workflow step by step through
scripts/dev/run_workflow.py: the pull request's gate and comment, the push's run and its history job, each
step as written, perfsuite installed by the workflow's own step into a fresh virtualenv), it never overwrites a
file, refuses outside a git repository and keeps results/local/ out of git."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

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
#: the tests run perfsuite from this checkout, which a CI runner cannot install from: they name what to install
INSTALL = ("--install-from", "perfsuite[report]==0.1.0")


def _code_only(repo: Path) -> str:
    """The team's repository before perfsuite: its package and nothing else."""
    repo.mkdir(parents=True)
    # packages named: setuptools' flat-layout discovery refuses the several top-level directories (myruntime/,
    # perf/, recipes/) of `pip install -e .` in the workflow once init has written perf/ and recipes/
    write(repo, {"pyproject.toml": pyproject(code_under_test=None, packages=("myruntime",)),
                 "myruntime/__init__.py": INIT,
                 "myruntime/store.py": STORE, ".gitignore": "__pycache__/\nresults/\nsite/\nhistory-site/\n"})
    git(repo, "init", "-q", "-b", "main")
    return commit_all(repo, "myruntime")


def test_init_writes_what_a_team_needs_and_never_overwrites(tmp_path: Path) -> None:
    repo = tmp_path / "myruntime"
    _code_only(repo)
    proc = perfsuite(repo / "myruntime", "init", *INSTALL)  # from a subdirectory: the repository's top
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith(f"perfsuite init: wrote 5 files for myruntime in {repo}")
    assert all(f"  {rel}: " in proc.stdout for rel in FILES) and all((repo / rel).is_file() for rel in FILES)
    assert 'code-under-test = ["myruntime"]' in proc.stdout  # how to declare it
    before = {rel: (repo / rel).read_text() for rel in FILES}
    (repo / "perf" / "ops.py").write_text("# mine\n")
    again = perfsuite(repo, "init", *INSTALL)
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
    git(other, "init", "-q", "-b", "main")
    two = perfsuite(other, "init", *INSTALL)
    assert two.returncode == 2 and "several packages" in two.stderr and "(a, b)" in two.stderr
    assert two.stderr.count("\n") == 1
    chosen = perfsuite(other, "init", "--package", "b", *INSTALL)
    assert chosen.returncode == 0 and (other / "recipes" / "b-example.toml").is_file(), chosen.stderr


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_init_does_not_ask_to_declare_what_pyproject_already_declares(tmp_path: Path) -> None:
    """A repository whose ``[tool.perfsuite] code-under-test`` is set is told what it declared, not how to
    declare it; one that declares another package than the skeleton imports hears both names."""
    repo = tmp_path / "declared"
    _code_only(repo)
    (repo / "pyproject.toml").write_text(pyproject(code_under_test=("myruntime",), packages=("myruntime",)))
    commit_all(repo, "declare")
    proc = perfsuite(repo, "init", *INSTALL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "to declare it" not in proc.stdout
    assert 'code under test: myruntime (declared in pyproject.toml [tool.perfsuite])' in proc.stdout
    other = tmp_path / "other"
    _code_only(other)
    (other / "pyproject.toml").write_text(pyproject(code_under_test=("myruntime.store",), packages=("myruntime",)))
    commit_all(other, "declare a module")
    proc = perfsuite(other, "init", *INSTALL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ("code under test: myruntime.store (declared in pyproject.toml [tool.perfsuite]); "
            "perf/ops.py imports myruntime") in proc.stdout


def test_init_outside_a_git_repository_refuses_and_writes_nothing(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    write(plain, {"pyproject.toml": pyproject(), "myruntime/__init__.py": INIT})
    before = _tree(plain)
    for args in (INSTALL, ()):  # before anything else: the install choice is not asked for
        proc = perfsuite(plain, "init", *args)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 2 and len(lines) == 1, proc.stdout + proc.stderr
        assert lines[0].startswith(f"perfsuite: error: {plain}: not in a git repository: ") and "git init" in lines[0]
        assert "Traceback" not in proc.stderr and _tree(plain) == before


def test_init_keeps_results_local_out_of_git(tmp_path: Path) -> None:
    # no .gitignore: created with the one entry
    fresh = tmp_path / "fresh"
    make = {"pyproject.toml": pyproject(), "myruntime/__init__.py": INIT}
    fresh.mkdir()
    write(fresh, make)
    git(fresh, "init", "-q", "-b", "main")
    proc = perfsuite(fresh, "init", *INSTALL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (fresh / ".gitignore").read_text().splitlines()[-1] == "results/local/"
    assert "  .gitignore: results/local/ ignored (created)" in proc.stdout
    write(fresh, {"results/local/myruntime-example-1.json": "{}"})
    assert git(fresh, "status", "--porcelain", "--untracked-files=all", "results") == ""
    # a .gitignore of the team's, no newline at its end: appended once, on a line of its own
    team = tmp_path / "team"
    team.mkdir()
    write(team, {**make, ".gitignore": "__pycache__/\n*.egg-info"})
    git(team, "init", "-q", "-b", "main")
    assert perfsuite(team, "init", *INSTALL).returncode == 0
    text = (team / ".gitignore").read_text()
    assert text.startswith("__pycache__/\n*.egg-info\n") and text.endswith("results/local/\n")
    assert text.splitlines().count("results/local/") == 1
    # init again (its files removed first, or it writes nothing): the entry is not added twice
    for rel in FILES:
        (team / rel).unlink()
    again = perfsuite(team, "init", *INSTALL)
    assert again.returncode == 0 and (team / ".gitignore").read_text() == text, again.stderr
    assert ".gitignore: results/local/ ignored already" in again.stdout
    assert "git add .gitignore " in again.stdout


def test_the_workflow_installs_perfsuite_from_where_it_came(tmp_path: Path) -> None:
    repo = tmp_path / "myruntime"
    _code_only(repo)
    # this perfsuite runs from a checkout: no runner can install it from there, so init asks, writing nothing
    refused = perfsuite(repo, "init")
    lines = [ln for ln in refused.stderr.splitlines() if ln.strip()]
    assert refused.returncode == 2 and len(lines) == 1, refused.stdout + refused.stderr
    assert lines[0].startswith("perfsuite: error: perfsuite runs from a local directory (")
    assert "--install-from SPEC" in lines[0] and not (repo / "recipes").exists() and not (repo / "perf").exists()
    spec = "perfsuite[report] @ git+https://github.example/octo/perfsuite.git@v0.1.0"
    proc = perfsuite(repo, "init", "--install-from", spec)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"the workflow installs perfsuite with: pip install {shlex.quote(spec)} (--install-from)" in proc.stdout
    text = (repo / WORKFLOW).read_text()
    assert text.count(f"python -m pip install {shlex.quote(spec)}\n") == 2  # the bench and the history job
    assert "install 'perfsuite[report]'\n" not in text  # a name no index holds


def test_what_init_writes_runs_green_as_generated(tmp_path: Path) -> None:
    repo = tmp_path / "myruntime"
    before = _code_only(repo)
    assert perfsuite(repo, "init", *INSTALL).returncode == 0
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


def _by_name(job: Any, name: str) -> dict[str, Any]:
    (step,) = [s for s in job.steps.values() if s.get("name") == name]
    return step


def _installed(venv: Path) -> dict[str, Any]:
    """The installation record pip left for perfsuite in ``venv`` (PEP 610 direct_url.json)."""
    (record,) = venv.glob("lib/python*/site-packages/perfsuite-*.dist-info/direct_url.json")
    return dict(json.loads(record.read_text()))


@pytest.mark.slow  # two fresh virtualenvs, each installing perfsuite[report] from a git URL (~25 s each)
def test_the_workflow_init_writes_runs_step_by_step(tmp_path: Path) -> None:
    # perfsuite as a team's runner gets it: from a git URL (here a bare clone of this checkout's HEAD, so
    # committed code only), installed by the workflow's own step into the runner's fresh virtualenv
    origin = tmp_path / "perfsuite.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(SOURCE), str(origin)], check=True, capture_output=True)
    committed = git(origin, "rev-parse", "HEAD")
    spec = f"perfsuite[report] @ git+{origin.as_uri()}"
    repo = tmp_path / "myruntime"
    before = _code_only(repo)
    assert perfsuite(repo, "init", "--install-from", spec).returncode == 0
    assert (repo / WORKFLOW).read_text().count(f"python -m pip install {shlex.quote(spec)}\n") == 2
    head = commit_all(repo, "perfsuite init")
    bare = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    git(repo, "remote", "add", "origin", str(bare))
    bin_dir, state = workflow.fake_tools(tmp_path / "bin"), tmp_path / "gh-state.json"
    gh = {"FAKE_GH_STATE": str(state), "PERFSUITE_CACHE": str(tmp_path / "cache")}
    base_context = {**VARS, "github.repository": "team/myruntime", "github.token": "fake-token",
                    "github.server_url": "https://github.example", "github.run_id": "9"}
    runner = tmp_path / "runner-bench"  # the bench job's runner: its virtualenv, made by setup-python's step
    # the pull request that adds perfsuite: the gate runs against its merge base, green, one comment
    pr = {**base_context, "github.event.pull_request.base.sha": before, "github.event.pull_request.head.sha": head,
          "github.sha": head, "github.event.pull_request.number": "3", "github.ref": "refs/pull/3/merge",
          "github.event.pull_request.head.repo.full_name": "team/myruntime"}
    job = workflow.run_job(repo, "pull_request", pr, bin_dir, tmp_path, gh, workflow_path=WORKFLOW, venv=runner)
    assert not job.failed, {k: v.get("log") for k, v in job.steps.items()}
    assert _by_name(job, "Install perfsuite")["status"] == 0
    installed = _installed(runner)
    assert installed["url"] == origin.as_uri() and installed["vcs_info"]["commit_id"] == committed
    assert job.steps["ab"]["outputs"]["status"] == "0" and f"BASE: merge base {before}" in job.steps["ab"]["log"]
    assert "### perfsuite ab: no regression" in job.summary and (repo / "site" / "index.html").is_file()
    if shutil.which("valgrind"):  # the callgrind pass, on by default (PERFSUITE_AB_INSTRUCTIONS unset)
        assert "valgrind already installed" in _by_name(job, "Install valgrind (for the callgrind pass)")["log"]
        assert "instructions.loop_thread" in job.summary, job.summary
    (comment,) = json.loads(state.read_text())["comments"]
    assert comment["body"].startswith(workflow.MARKER + "\n### perfsuite ab: no regression")
    history = workflow.run_job(repo, "pull_request", pr, bin_dir, tmp_path, gh, workflow_path=WORKFLOW,
                               job_name="history", venv=tmp_path / "runner-unused")
    assert not history.ran  # pushes only
    # a push: the recipes run, then the history job, on a runner of its own, installs perfsuite itself,
    # appends the results to the results branch and draws its dashboard
    push = {**base_context, "github.sha": head, "github.ref": "refs/heads/main"}
    bench = workflow.run_job(repo, "push", push, bin_dir, tmp_path, gh, workflow_path=WORKFLOW, venv=runner)
    assert not bench.failed, {k: v.get("log") for k, v in bench.steps.items()}
    assert not bench.steps["ab"]["ran"] and list((repo / "results" / "local").glob("myruntime-example-*.json"))
    fresh = tmp_path / "runner-history"
    history = workflow.run_job(repo, "push", push, bin_dir, tmp_path, gh, workflow_path=WORKFLOW,
                               job_name="history", venv=fresh)
    assert history.ran and not history.failed, {k: v.get("log") for k, v in history.steps.items()}
    assert _by_name(history, "Install perfsuite")["status"] == 0
    assert _installed(fresh)["vcs_info"]["commit_id"] == committed
    listed = subprocess.run(["git", "--git-dir", str(bare), "ls-tree", "-r", "--name-only", "perfsuite-results"],
                            capture_output=True, text=True, check=True, env={**os.environ}).stdout
    assert "myruntime-example-" in listed
    assert (repo / "history-site" / "index.html").is_file()
