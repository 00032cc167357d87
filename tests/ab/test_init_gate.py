"""The workflow `perfsuite init` writes maps the gate's exit statuses (docs/gates.md, "Exit status"): a neutral
result (78: `perfsuite ab --neutral-exit 78`) is a `::warning::` annotation and a green job, a regression stays
red; the callgrind pass is on by default and valgrind is installed with the runner's package manager when it is
missing. Each step is
run as written (bash, the step's own `if:` evaluated by scripts/dev/run_workflow.py), with fake `sudo`."""

from __future__ import annotations

import importlib.util
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from perfsuite.ab import init_project

from .userrepo import INIT, STORE, commit_all, git, pyproject, write

yaml = pytest.importorskip("yaml")
SOURCE = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("run_workflow_gate", SOURCE / "scripts" / "dev" / "run_workflow.py")
assert _spec is not None and _spec.loader is not None
workflow = importlib.util.module_from_spec(_spec)
sys.modules["run_workflow_gate"] = workflow
_spec.loader.exec_module(workflow)


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "myruntime"
    repo.mkdir()
    write(repo, {"pyproject.toml": pyproject(code_under_test=None, packages=("myruntime",)),
                 "myruntime/__init__.py": INIT, "myruntime/store.py": STORE})
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "myruntime")
    init_project(repo, install_from="perfsuite[report]==0.1.0")
    return repo


def _steps(repo: Path) -> dict[str, dict[str, Any]]:
    spec = yaml.safe_load((repo / ".github/workflows/perfsuite.yml").read_text())
    return {str(s.get("name")): s for s in spec["jobs"]["bench"]["steps"]}


def _run(repo: Path, step: dict[str, Any], env: dict[str, str], context: dict[str, Any]) -> tuple[bool, int, str]:
    """(whether its `if:` let it run, its exit status, its output): the step's script as written."""
    condition = str(step.get("if", "success()")).replace("${{", "").replace("}}", "")
    if not workflow._evaluate(condition, {"__status__": "success", **context}):
        return False, 0, ""
    script = repo.parent / "step.sh"
    script.write_text(step["run"])
    bash = shutil.which("bash")
    assert bash is not None
    proc = subprocess.run([bash, "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=repo,
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=60, check=False)
    return True, proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize(("status", "red", "said"), [
    ("78", False, "::warning title=perfsuite ab: neutral::perfsuite compare: machine loaded"),
    ("1", True, "perfsuite ab: regression (exit 1)"),
    ("3", True, "inconclusive (--strict)"),
    ("2", True, "unusable input or failure (exit 2)"),
])
def test_the_gate_step_maps_the_exit_statuses(tmp_path: Path, status: str, red: bool, said: str) -> None:
    repo = _repo(tmp_path)
    steps = _steps(repo)
    assert "--neutral-exit 78" in steps["A/B against the merge base"]["run"]
    (repo / "results" / "ab").mkdir(parents=True)
    (repo / "results" / "ab" / "summary.md").write_text(
        "### perfsuite compare: machine loaded (idle control ...): timings reported, not gated; gated on: fsyncs: "
        "no regression\n")
    context = {"github.event_name": "pull_request", "steps.ab.outputs.status": status}
    ran, code, log = _run(repo, steps["Gate"], {"STATUS": status}, context)
    assert ran and (code != 0) == red and said in log, log
    skipped, _, _ = _run(repo, steps["Gate"], {"STATUS": "0"}, {**context, "steps.ab.outputs.status": "0"})
    assert not skipped  # passed: no Gate step, a green job


def _fake_sudo(directory: Path) -> Path:
    directory.mkdir()
    sudo = directory / "sudo"
    sudo.write_text(f'#!/bin/sh\necho "$@" >> {directory / "sudo.log"}\n')
    sudo.chmod(sudo.stat().st_mode | stat.S_IEXEC)
    return directory


def _tools(directory: Path, *, valgrind: bool) -> str:
    """A PATH of the step's tools only: a fake sudo that logs, grep, and (``valgrind``) a valgrind."""
    bin_dir = _fake_sudo(directory)
    grep = shutil.which("grep")
    assert grep is not None
    (bin_dir / "grep").symlink_to(grep)
    if valgrind:
        fake = bin_dir / "valgrind"
        fake.write_text("#!/bin/sh\necho valgrind-3.19.0\n")
        fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return str(bin_dir)


def test_the_callgrind_pass_is_on_by_default_and_valgrind_installed_when_missing(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    steps = _steps(repo)
    spec = yaml.safe_load((repo / ".github/workflows/perfsuite.yml").read_text())
    assert spec["env"]["PERFSUITE_AB_INSTRUCTIONS"] == "${{ vars.PERFSUITE_AB_INSTRUCTIONS || 'true' }}"
    context = {"github.event_name": "pull_request", "vars.PERFSUITE_AB_INSTRUCTIONS": ""}
    default = workflow._substitute(spec["env"]["PERFSUITE_AB_INSTRUCTIONS"], {"__status__": "success", **context})
    assert default == "true"
    step = steps["Install valgrind (for the callgrind pass)"]
    missing = tmp_path / "missing"
    env = {"PATH": _tools(missing, valgrind=False), "PERFSUITE_AB_ARGS": "--samples 2",
           "PERFSUITE_AB_INSTRUCTIONS": "true"}
    ran, code, log = _run(repo, step, env, context)
    assert ran and code == 0, log
    assert (missing / "sudo.log").read_text().splitlines() == ["apt-get update -q", "apt-get install -y valgrind"]
    present = tmp_path / "present"
    ran, code, log = _run(repo, step, {**env, "PATH": _tools(present, valgrind=True)}, context)
    assert ran and code == 0 and "valgrind already installed: valgrind-3.19.0" in log, log
    assert not (present / "sudo.log").exists()
    # turned off: nothing installed, unless a recipe or the arguments still ask for the pass
    off = tmp_path / "off"
    env = {**env, "PATH": _tools(off, valgrind=False), "PERFSUITE_AB_INSTRUCTIONS": "false"}
    ran, code, log = _run(repo, step, env, context)
    assert ran and code == 0 and "valgrind not needed" in log and not (off / "sudo.log").exists(), log
    ran, code, _ = _run(repo, step, {**env, "PERFSUITE_AB_ARGS": "--samples 2 --instructions"}, context)
    assert ran and code == 0 and (off / "sudo.log").read_text().splitlines()[-1] == "apt-get install -y valgrind"
    (off / "sudo.log").unlink()
    recipe = next((repo / "recipes").glob("*.toml"))
    recipe.write_text(recipe.read_text().replace("allocation = true\n", "allocation = true\ninstructions = true\n"))
    ran, code, _ = _run(repo, step, env, context)
    assert ran and code == 0 and "apt-get install -y valgrind" in (off / "sudo.log").read_text()


def test_the_ab_step_passes_instructions_unless_turned_off(tmp_path: Path) -> None:
    """The A/B step's script as written, with a fake perfsuite that records its arguments."""
    repo = _repo(tmp_path)
    step = _steps(repo)["A/B against the merge base"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    argv_log = tmp_path / "argv.log"
    for tool in ("perfsuite", "git"):
        fake = bin_dir / tool
        body = f'echo "$@" >> {argv_log}' if tool == "perfsuite" else "echo 0123abcd"
        fake.write_text(f"#!/bin/sh\n{body}\n")
        fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    outputs = tmp_path / "outputs"
    summary = tmp_path / "summary.md"
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "BASE_SHA": "0123abcd", "GITHUB_OUTPUT": str(outputs),
           "GITHUB_STEP_SUMMARY": str(summary), "PERFSUITE_AB_ARGS": "--samples 2"}
    context = {"github.event_name": "pull_request"}
    for value, expected in (("true", "--instructions --samples 2"), ("false", "--samples 2")):
        ran, code, log = _run(repo, step, {**env, "PERFSUITE_AB_INSTRUCTIONS": value}, context)
        assert ran and code == 0, log
        called = argv_log.read_text().splitlines()[-1]
        assert called == f"ab 0123abcd --output-dir results/ab --neutral-exit 78 {expected}"


def _flat(tmp_path: Path, pyproject_text: str, *, src: bool = False) -> Path:
    repo = tmp_path / "flat"
    repo.mkdir()
    where = "src/myruntime" if src else "myruntime"
    write(repo, {"pyproject.toml": pyproject_text, f"{where}/__init__.py": INIT, f"{where}/store.py": STORE})
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "myruntime")
    return repo


def _egg_info(repo: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """setuptools' own package discovery on the repository, as `pip install -e .` runs it (no network)."""
    base = tmp_path / "egg"
    base.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-c", "import setuptools; setuptools.setup()", "egg_info", "--egg-base",
                           str(base)], cwd=repo, capture_output=True, text=True, timeout=120, check=False)


NO_PACKAGES = '[project]\nname = "myruntime"\nversion = "0.1.0"\n'


def test_init_says_what_a_flat_layout_without_a_package_list_needs(tmp_path: Path) -> None:
    pytest.importorskip("setuptools")
    repo = _flat(tmp_path, NO_PACKAGES)
    result = init_project(repo, install_from="perfsuite[report]==0.1.0")
    (note,) = result.notes
    assert note.startswith("pyproject.toml: ") and "Multiple top-level packages" in note
    assert '[tool.setuptools.packages.find] include = ["myruntime*"]' in note and "\n" not in note
    failed = _egg_info(repo, tmp_path)  # what the workflow's `pip install -e .` would meet
    assert failed.returncode != 0 and "Multiple top-level packages discovered in a flat-layout" in failed.stderr
    with open(repo / "pyproject.toml", "a") as fh:  # the line init gave, as a team adds it
        fh.write('\n[tool.setuptools.packages.find]\ninclude = ["myruntime*"]\n')
    fixed = _egg_info(repo, tmp_path)
    assert fixed.returncode == 0, fixed.stderr


@pytest.mark.parametrize("text", [
    NO_PACKAGES + '\n[tool.setuptools]\npackages = ["myruntime"]\n',
    NO_PACKAGES + '\n[tool.setuptools.packages.find]\ninclude = ["myruntime*"]\n',
    NO_PACKAGES + '\n[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n',
    '[tool.black]\nline-length = 100\n',  # no [project]: nothing pip would install
])
def test_no_note_when_the_packages_are_named_or_not_setuptools(tmp_path: Path, text: str) -> None:
    assert init_project(_flat(tmp_path, text), install_from="perfsuite[report]==0.1.0").notes == ()


def test_no_note_for_a_src_layout(tmp_path: Path) -> None:
    repo = _flat(tmp_path, NO_PACKAGES, src=True)
    assert init_project(repo, install_from="perfsuite[report]==0.1.0").notes == ()
