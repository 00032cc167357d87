"""``perfsuite init`` (as ``asv quickstart``): what a team needs to measure and gate its own code, written
into its git repository, green as generated.

* ``recipes/<package>-example.toml``: a recipe, found by name from the repository (``./recipes``), the
  default set of ``perfsuite ab`` and ``bisect`` there;
* ``perf/__init__.py``, ``perf/ops.py``: an operation skeleton (the operation protocol) that imports the
  package, so it is the default code under test of ``perfsuite ab`` (imported from each revision's tree),
  and does a small durable write in a writer thread, with its fsyncs and bytes as deterministic costs;
* ``tests/test_perfsuite_example.py``: the pytest plugin's ``perfsuite_bench`` on the package;
* ``.github/workflows/perfsuite.yml``: on a pull request, ``perfsuite ab`` against the merge base (the gate, one
  comment updated in place); on a push, the recipes' results go to a results branch with a history dashboard;
  it installs perfsuite as the running one was installed (:mod:`perfsuite.ab._install`), or ``--install-from``;
* ``.gitignore``: ``results/local/`` (what ``perfsuite run`` writes), created or appended once.

Nothing is written when any of these files exists (the first is named), outside a git repository, or when no CI
runner could install this perfsuite. The package is ``--package`` or the repository's one (root or ``src/``).
"""

from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path

from perfsuite.ab._git import repo_root
from perfsuite.ab._install import workflow_requirement
from perfsuite.ab._project import read_config
from perfsuite.errors import PerfsuiteError

__all__ = ["InitResult", "find_package", "init_project"]

#: directories that hold no package under test
_NOT_CODE = {"tests", "test", "testing", "docs", "doc", "examples", "example", "scripts", "benchmarks", "bench",
             "perf", "build", "dist", "site", "results", "recipes", "fixtures", "notebooks", "tools"}
WORKFLOW = ".github/workflows/perfsuite.yml"
#: what ``perfsuite run`` writes by default: local, never committed
IGNORED = "results/local/"
_IGNORED_ALREADY = {IGNORED, IGNORED.rstrip("/"), "/" + IGNORED, "/" + IGNORED.rstrip("/")}


@dataclass(frozen=True, slots=True)
class InitResult:
    """What ``init`` wrote (paths relative to ``root``, with what each one is), for which package; the pip
    requirement the workflow installs perfsuite with; what became of ``.gitignore`` ("created", "appended"
    or "" when it ignored ``results/local/`` already)."""

    root: Path
    package: str
    recipe: str
    written: tuple[tuple[str, str], ...]
    install: str
    gitignore: str
    notes: tuple[str, ...] = ()  # what the repository needs before the workflow's `pip install -e .` works
    declared: tuple[str, ...] | None = None  # pyproject's [tool.perfsuite] code-under-test, if set

    def next_steps(self) -> tuple[str, ...]:
        """What to run next, as lines (the CLI prints them)."""
        return (
            f"perfsuite run {self.recipe}              # measure it once (results/local/)",
            "python -m pytest tests/test_perfsuite_example.py",
            "git add .gitignore recipes perf tests .github && git commit -m 'perfsuite'",
            "perfsuite ab HEAD~1                          # after your next change: the gate (exit 1 on a regression)",
            self._code_line(),
        )

    def _code_line(self) -> str:
        if self.declared is None:
            return (f"code under test: {self.package} (what perf/ops.py imports); to declare it, add to "
                    f'pyproject.toml: [tool.perfsuite] code-under-test = ["{self.package}"]')
        line = f"code under test: {', '.join(self.declared)} (declared in pyproject.toml [tool.perfsuite])"
        return line + ("" if self.package in self.declared else f"; perf/ops.py imports {self.package}")


def _packages(root: Path) -> list[str]:
    found = []
    for base in (root, root / "src"):
        if not base.is_dir():
            continue
        for child in sorted(base.iterdir()):
            if (child.is_dir() and (child / "__init__.py").is_file() and child.name.isidentifier()
                    and child.name not in _NOT_CODE and not child.name.startswith(("_", "."))):
                found.append(child.name)
    return found


def _project_name(root: Path) -> str | None:
    try:
        with open(root / "pyproject.toml", "rb") as fh:
            name = (tomllib.load(fh).get("project") or {}).get("name")
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return re.sub(r"[-.]+", "_", name).lower() if isinstance(name, str) else None


def find_package(root: Path, package: str | None = None) -> str:
    """``package`` (checked to exist), else the repository's one package (its project's, among several)."""
    found = _packages(root)
    if package is not None:
        if not package.isidentifier():
            raise PerfsuiteError(f"--package {package!r}: not a Python package name")
        if package not in found and not any((b / package / "__init__.py").is_file() for b in (root, root / "src")):
            raise PerfsuiteError(f"--package {package}: no package {package}/ (with __init__.py) in {root} or src/")
        return package
    if len(found) == 1:
        return found[0]
    named = _project_name(root)
    if named in found:
        return str(named)
    if not found:
        raise PerfsuiteError(f"no Python package in {root} (a directory with __init__.py, or under src/): name the "
                             "code to measure with --package")
    raise PerfsuiteError(f"several packages in {root} ({', '.join(found)}): name the one to measure with --package")


def _files(package: str, recipe: str, install: str) -> list[tuple[str, str, str]]:
    """(path, what it is, text) of every file ``init`` creates."""
    return [
        (f"recipes/{recipe}.toml", "the recipe", _RECIPE.format(package=package, recipe=recipe)),
        ("perf/__init__.py", "the operations' package", '"""perfsuite operations (see ops.py)."""\n'),
        ("perf/ops.py", f"an operation skeleton importing {package}", _OPS.format(package=package, recipe=recipe)),
        ("tests/test_perfsuite_example.py", "a pytest example (the perfsuite_bench fixture)",
         _PYTEST.format(package=package)),
        (WORKFLOW, "the CI workflow: pull request: perfsuite ab; push: history",
         _WORKFLOW.format(recipe=recipe, install=shlex.quote(install))),
    ]


def _git_top(directory: Path) -> Path:
    """The top of the git repository holding ``directory``: the workflow, ``ab`` and ``bisect`` need its
    history, and ``git add`` (the next step printed) would fail anywhere else."""
    try:
        return repo_root(directory)
    except PerfsuiteError:
        raise PerfsuiteError(f"{directory}: not in a git repository: perfsuite init writes into a team's "
                             "repository (run git init first, or name one with --dir); nothing written") from None


def _ignore_local(root: Path) -> str:
    """Add ``results/local/`` to ``root/.gitignore`` unless a line of it says so already; what was done."""
    path, entry = root / ".gitignore", f"# perfsuite run's results on this machine (perfsuite init)\n{IGNORED}\n"
    text = path.read_text(encoding="utf-8") if path.exists() else None
    if text is not None and _IGNORED_ALREADY & {line.strip() for line in text.splitlines()}:
        return ""  # idempotent: a second init never adds it twice
    with open(path, "x" if text is None else "a", encoding="utf-8") as fh:
        # a team's file may end without a newline: the entry would join its last pattern
        fh.write(("" if not text or text.endswith("\n") else "\n") + entry)
    return "created" if text is None else "appended"


def init_project(root: Path, package: str | None = None, *, install_from: str | None = None) -> InitResult:
    """Write the files of the module docstring into the top of the git repository holding ``root``; one-line
    :class:`PerfsuiteError` (nothing written) outside one, when a file exists already, when the package cannot
    be told, or when no CI runner could install this perfsuite and ``install_from`` does not say how."""
    root = _git_top(Path(root))
    declared = read_config(root).code_under_test  # a bad [tool.perfsuite] is one line before anything is written
    name = find_package(root, package)
    recipe = f"{name.replace('_', '-')}-example"
    for rel, _, _ in _files(name, recipe, ""):
        if (root / rel).exists():
            raise PerfsuiteError(f"{rel} exists already: nothing written (perfsuite init never overwrites a file)")
    if (root / ".gitignore").exists() and not (root / ".gitignore").is_file():
        raise PerfsuiteError(".gitignore is not a file: nothing written")
    install = workflow_requirement(install_from)
    written = []
    for rel, what, text in _files(name, recipe, install):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "x", encoding="utf-8") as fh:  # "x": never over a file that appeared meanwhile
            fh.write(text)
        written.append((rel, what))
    return InitResult(root, name, recipe, tuple(written), install, _ignore_local(root), flat_layout_note(root, name),
                      declared)


def flat_layout_note(root: Path, package: str) -> tuple[str, ...]:
    """One line when setuptools would refuse ``pip install -e .`` (the workflow's install step) once ``perf/``
    exists: a ``[project]`` built by setuptools (the default backend) with no package list and the package at
    the top of the repository, where setuptools' flat-layout discovery finds several top-level packages
    ("Multiple top-level packages discovered in a flat-layout") and builds nothing."""
    try:
        with open(root / "pyproject.toml", "rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError):
        return ()
    backend = str((data.get("build-system") or {}).get("build-backend") or "setuptools")
    table = (data.get("tool") or {}).get("setuptools") or {}
    named = isinstance(table, dict) and ("packages" in table or "py-modules" in table)
    flat = (root / package / "__init__.py").is_file() and not (root / "setup.py").exists()
    if "project" not in data or not backend.startswith("setuptools") or named or not flat:
        return ()
    return (f"pyproject.toml: pip install -e . (the workflow's install step) fails once perf/ exists: setuptools finds "
            f'"Multiple top-level packages discovered in a flat-layout" ({package}, perf); name the package, add: '
            f'[tool.setuptools.packages.find] include = ["{package}*"]',)


_RECIPE = '''\
# A perfsuite recipe for {package} (written by `perfsuite init`): `perfsuite run {recipe}` measures it,
# `perfsuite ab BASE` gates it, `perfsuite bisect GOOD BAD` finds the commit that slowed it down.
# Keys: perfsuite's docs/run.md, "perfsuite run", and the recipes' README. Each mode names an operation,
# "module:factory" (perf/ops.py); other keys of a mode table are passed to it as ctx.params.
name = "{recipe}"
description = "one record written and fsynced in a writer thread: replace perf/ops.py's Example with your code"
samples = 6
warmup = 1
isolation = "process"
target_ms = 20
allocation = true
allocation_samples = 3

[modes.example]
operation = "perf.ops:Example"
'''

_OPS = '''\
"""perfsuite operations for {package} (written by `perfsuite init`; the protocol: perfsuite's docs/own-code.md,
"Measuring your own code: the operation protocol").

`perfsuite run {recipe}` measures each mode of recipes/{recipe}.toml; `perfsuite ab BASE` measures two
revisions of {package}, each imported from its own git worktree, with these operations, interleaved.
"""

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor

import {package}  # noqa: F401  the code under test: `perfsuite ab` imports it from each revision


class Example:
    """Submit: hand a record to a writer thread; acknowledge: once it is written and fsynced.

    Replace the body of ``_write`` (or of ``submit``) with a call into {package}, e.g. append a message and
    commit it, keeping the contract: ``submit`` returns quickly (its time is the submission time, on the
    event loop's thread), ``ack(None)`` is called once when the work is durable (``ack(exc)`` on failure).
    """

    def __init__(self, ctx):
        self.path = ctx.scratch / "example.jsonl"  # a private, empty directory for each sample
        self.writer = ThreadPoolExecutor(1)
        self.writer.submit(int).result()  # the thread starts before the sample, not inside it
        self.fsyncs = 0
        self.bytes_written = 0

    def submit(self, ack):
        record = b'{{"role": "assistant", "text": "hello"}}\\n'
        job = asyncio.get_running_loop().run_in_executor(self.writer, self._write, record)
        job.add_done_callback(lambda f: ack(f.exception()))

    def _write(self, data):
        with open(self.path, "ab") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        self.fsyncs += 1
        self.bytes_written += len(data)

    def metrics(self):
        # counts, not times: `perfsuite ab` gates them exactly (metrics.fsyncs, metrics.bytes_written)
        return {{"fsyncs": self.fsyncs, "bytes_written": self.bytes_written}}

    def close(self):
        self.writer.shutdown()
'''

_PYTEST = '''\
"""perfsuite's pytest plugin on {package} (written by `perfsuite init`): each perfsuite_bench call measures
with the harness's method (heartbeat max gap, GC, warm-up, idle-control windows) and writes a results
document; keep them with `python -m pytest --perfsuite-dir results/pytest`."""

import {package}  # noqa: F401  replace the lambda below with a call into it


def test_{package}_example(perfsuite_bench):
    run = perfsuite_bench(lambda: sorted(range(10_000), reverse=True), name="example", target_ms=20)
    print(run.line())  # median max gap and acknowledgement, the verdict against the target, the results file
    # a measurement, not a timing assertion (a loaded machine would fail it): gate timings with `perfsuite ab`
    assert run.path.is_file() and run.document["status"] == "complete"
'''

_WORKFLOW = '''\
# perfsuite in CI (written by `perfsuite init`; perfsuite's docs/gates.md, "The CI gate").
#
# Pull request:  perfsuite ab <merge base>  -> both revisions measured on this runner, rounds interleaved;
#                                              exit 0 passed, 1 regression (red), 2 unusable input (red),
#                                              3 inconclusive (only with --strict: red), 78 neutral (a loaded
#                                              runner's timings not gated, or inconclusive): a warning, green
#                results/ab/compare.md       -> the job summary; results/ab/summary.md -> ONE comment per pull
#                                              request, updated in place
# Push:          perfsuite run recipes/*.toml -> results/local, then the history job appends them to the
#                                              results branch and publishes a history dashboard artifact
#
# Repository variables add arguments without editing this file: PERFSUITE_AB_ARGS (e.g. "--looks 6", or
# "--gate costs" on a noisy shared runner, "--strict" to fail on inconclusive timings), PERFSUITE_RUN_ARGS
# (e.g. "--samples 12") and PERFSUITE_AB_INSTRUCTIONS ("false" turns off the callgrind pass, on by default:
# on a loaded runner, where timings cannot gate, instruction counts still catch added work).
name: perfsuite

on:
  pull_request:
  push:
    branches: [main]
  workflow_dispatch:

permissions:
  contents: read
  pull-requests: write # the one comment per pull request

concurrency:
  group: perfsuite-${{{{ github.ref }}}}
  cancel-in-progress: true

env:
  PERFSUITE_HOST_LABEL: github-ubuntu-latest # the machine's name in history (runner host names change)
  PERFSUITE_AB_ARGS: ${{{{ vars.PERFSUITE_AB_ARGS }}}}
  PERFSUITE_RUN_ARGS: ${{{{ vars.PERFSUITE_RUN_ARGS }}}}
  PERFSUITE_AB_INSTRUCTIONS: ${{{{ vars.PERFSUITE_AB_INSTRUCTIONS || 'true' }}}}

jobs:
  bench:
    runs-on: ubuntu-latest
    timeout-minutes: 45
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0 # the merge base and its worktree
          ref: ${{{{ github.event.pull_request.head.sha || github.sha }}}}

      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"

      - name: Install perfsuite
        run: |
          # perfsuite as `perfsuite init` found it installed (or its --install-from): edit to upgrade
          python -m pip install {install}
          if [ -f pyproject.toml ] || [ -f setup.py ]; then python -m pip install -e .; fi

      - name: Install valgrind (for the callgrind pass)
        if: github.event_name == 'pull_request'
        shell: bash
        run: |
          # instruction counts gate on a loaded runner, where timings cannot: the pass (on unless the variable
          # PERFSUITE_AB_INSTRUCTIONS is "false"; also recipes with instructions = true) needs valgrind from the
          # runner's package manager; without valgrind it is "not measured" and the other costs still gate
          if [ "$PERFSUITE_AB_INSTRUCTIONS" != false ] \\
              || grep -qsE '^[[:space:]]*instructions[[:space:]]*=[[:space:]]*true' recipes/*.toml \\
              || [[ " $PERFSUITE_AB_ARGS " == *" --instructions "* ]]; then
            if command -v valgrind > /dev/null; then
              echo "valgrind already installed: $(valgrind --version)"
            else
              sudo apt-get update -q
              sudo apt-get install -y valgrind
            fi
          else
            echo "valgrind not needed: PERFSUITE_AB_INSTRUCTIONS is false and no recipe sets instructions = true"
          fi

      - name: A/B against the merge base
        id: ab
        if: github.event_name == 'pull_request'
        shell: bash
        env:
          BASE_SHA: ${{{{ github.event.pull_request.base.sha }}}}
        run: |
          base=$(git merge-base "$BASE_SHA" HEAD || echo "$BASE_SHA")
          echo "BASE: merge base $base of $BASE_SHA and HEAD $(git rev-parse HEAD)"
          instructions=()
          if [ "$PERFSUITE_AB_INSTRUCTIONS" != false ]; then instructions=(--instructions); fi
          set +e
          # shellcheck disable=SC2086 # PERFSUITE_AB_ARGS holds several arguments
          # --neutral-exit 78: a neutral result gets a status of its own, which the Gate step turns into a warning
          perfsuite ab "$base" --output-dir results/ab --neutral-exit 78 "${{instructions[@]}}" $PERFSUITE_AB_ARGS
          status=$?
          set -e
          echo "status=$status" >> "$GITHUB_OUTPUT"
          if [ -f results/ab/compare.md ]; then
            cat results/ab/compare.md >> "$GITHUB_STEP_SUMMARY"
          else
            echo "### perfsuite ab: no comparison (exit $status): see the job log" > results-ab-failed.md
            cat results-ab-failed.md >> "$GITHUB_STEP_SUMMARY"
          fi

      - name: Run the recipes
        if: github.event_name != 'pull_request'
        shell: bash
        run: |
          # shellcheck disable=SC2086
          perfsuite run recipes/*.toml --output-dir results/local $PERFSUITE_RUN_ARGS

      - name: Dashboard
        if: always()
        shell: bash
        run: |
          if [ -d results/ab ]; then
            perfsuite dashboard results/ab -o site
          elif [ -d results/local ]; then
            perfsuite dashboard results/local -o site
          fi

      - uses: actions/upload-artifact@v4
        id: upload-results
        if: always()
        with:
          name: perfsuite-results
          path: |
            results/ab/
            results/local/
            site/
          if-no-files-found: warn

      - name: Comment on the pull request (one comment, updated in place)
        if: >-
          always() && github.event_name == 'pull_request'
          && github.event.pull_request.head.repo.full_name == github.repository
        continue-on-error: true
        shell: bash
        env:
          GH_TOKEN: ${{{{ github.token }}}}
          REPO: ${{{{ github.repository }}}}
          PR: ${{{{ github.event.pull_request.number }}}}
          RUN_URL: ${{{{ github.server_url }}}}/${{{{ github.repository }}}}/actions/runs/${{{{ github.run_id }}}}
          ARTIFACT_URL: ${{{{ steps.upload-results.outputs.artifact-url }}}}
        run: |
          marker="<!-- perfsuite-ab -->"
          {{
            echo "$marker"
            cat results/ab/summary.md 2>/dev/null || cat results-ab-failed.md 2>/dev/null \\
              || echo "### perfsuite ab did not run"
            echo
            echo "Every metric: [job summary]($RUN_URL)."
            echo "Results documents, pairing and dashboard: [artifact]($ARTIFACT_URL)."
          }} > pr-comment.md
          id=$(gh api "repos/$REPO/issues/$PR/comments" --paginate \\
                 --jq ".[] | select(.body | startswith(\\"$marker\\")) | .id" | head -n 1)
          if [ -n "$id" ]; then
            gh api --method PATCH "repos/$REPO/issues/comments/$id" -F body=@pr-comment.md > /dev/null
            echo "updated comment $id"
          else
            gh api --method POST "repos/$REPO/issues/$PR/comments" -F body=@pr-comment.md > /dev/null
            echo "created the comment"
          fi

      - name: Gate
        if: github.event_name == 'pull_request' && steps.ab.outputs.status != '0'
        shell: bash
        env:
          STATUS: ${{{{ steps.ab.outputs.status }}}}
        run: |
          verdict=$(head -n 1 results/ab/summary.md 2>/dev/null | sed 's/^### //' || true)
          case "$STATUS" in
            78) # neutral: no regression in what gated; the timings could not gate (a loaded runner) or stayed
                # inconclusive: a warning on the run, and a green job
                echo "::warning title=perfsuite ab: neutral::${{verdict:-no regression in what gated}}"
                exit 0 ;;
            1) echo "perfsuite ab: regression (exit 1): $verdict" ;;
            3) echo "perfsuite ab: inconclusive (--strict): beyond the factor, but the test could not tell (exit 3)" ;;
            *) echo "perfsuite ab: unusable input or failure (exit $STATUS)" ;;
          esac
          exit 1

  history:
    # results that survive CI: every push's documents on the results branch (plain JSON in git), the store
    # rebuilt from it (derived, never committed) and the history dashboard (change points per machine)
    needs: bench
    if: github.event_name == 'push'
    runs-on: ubuntu-latest
    timeout-minutes: 15
    permissions:
      contents: write # push to the results branch
    concurrency:
      group: perfsuite-results-branch
      cancel-in-progress: false
    steps:
      - uses: actions/checkout@v4

      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"

      - name: Install perfsuite
        run: |
          python -m pip install {install}

      - uses: actions/download-artifact@v4
        with:
          name: perfsuite-results

      - name: Append this run to the results branch
        run: perfsuite store push results/local --branch perfsuite-results

      - name: Rebuild the store from the results branch
        run: >-
          perfsuite store pull --branch perfsuite-results --into results/history
          --store results/perfsuite.sqlite3

      - name: History dashboard
        env:
          COMMIT_URL: ${{{{ github.server_url }}}}/${{{{ github.repository }}}}/commit/{{commit}}
        run: perfsuite dashboard results/perfsuite.sqlite3 -o history-site --commit-url "$COMMIT_URL"

      - uses: actions/upload-artifact@v4
        with:
          name: perfsuite-history-dashboard
          path: history-site/
'''
