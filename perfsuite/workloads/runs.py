"""``perfsuite run``'s measurement in the library (the CLI parses and prints, this decides).

Two calls. :func:`prepare_runs` decides what one invocation measures, before anything is measured: it
refuses a baseline directory on a loaded machine, plans the recipes (:func:`plan_run`, or
:func:`plan_resume` for ``--resume``; SPEC M4, M8) and resolves every fixture (M6). :func:`run_plans`
measures them one after another, reserving each results path when its run starts, and
returns a :class:`RunOutcome`: the documents written, each one's machine load, the recipes set aside, why
the loop stopped early (a signal or a failure, and what the document on disk kept) and the exit status.
Progress goes through callbacks (:class:`RunStarted`, then the harness's :class:`SampleEvent` per plan
entry); nothing here prints. The results writer, the load probe and the fixture resolver are parameters
(tests inject ENOSPC, a loaded machine, a fixture), never module globals.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from perfsuite.errors import PerfsuiteError, Terminated
from perfsuite.workloads.plan import RunOptions, Skipped

if TYPE_CHECKING:
    from perfsuite.harness import MachineLoad, Recipe, ResultsWriter, RunResult, SampleEvent

__all__ = [
    "FixtureResolver",
    "LoadProbe",
    "PlannedRun",
    "RunBatch",
    "RunOutcome",
    "RunStarted",
    "Stopped",
    "prepare_runs",
    "run_plans",
]

#: ``(fixture name, session directory) -> (directory a sample copies, info for the results)``; the default is
#: :func:`perfsuite.workloads.fixtures.resolve_fixture` (it is called for every recipe, fixture or not)
FixtureResolver = Callable[[str | None, str | None], tuple[Path | None, Mapping[str, Any]]]
#: ``() -> MachineLoad``: how loaded the machine is now (default :func:`perfsuite.harness.probe_load`)
LoadProbe = Callable[[], "MachineLoad"]


@dataclass(frozen=True, slots=True)
class PlannedRun:
    """One recipe to measure: its fixture resolved, and for ``--resume`` the document it continues."""

    recipe: Recipe
    fixture: Path | None
    fixture_info: Mapping[str, Any]
    resume: Path | None = None


@dataclass(frozen=True, slots=True)
class RunBatch:
    """What one invocation measures, every recipe checked and every fixture resolved; nothing measured yet."""

    runs: tuple[PlannedRun, ...]
    skipped: tuple[Skipped, ...]
    #: where the documents go (``--resume``: the resumed document's directory)
    output_dir: Path
    #: writing into a baseline directory (``.../baseline``) without ``allow_loaded``: a loaded run exits 1
    baseline: bool
    #: the measured repository (``environment.measured``; ``None`` for a resume: the document records it)
    measured: Mapping[str, Any] | None
    work_root: Path | None = None
    valgrind: str | None = None
    #: why the instruction pass cannot run here, when a recipe asks for it (it records "not measured")
    instructions_missing: str | None = None

    @property
    def resuming(self) -> bool:
        """Whether this batch continues a recorded document (``--resume``)."""
        return any(run.resume is not None for run in self.runs)


@dataclass(frozen=True, slots=True)
class RunStarted:
    """A recipe's run begins: its reserved results path and how many of its plan entries are already done."""

    recipe: str
    path: Path
    done: int
    total: int


@dataclass(frozen=True, slots=True)
class Stopped:
    """Why the loop stopped before its last recipe, and what the document on disk kept."""

    reason: Literal["interrupted", "terminated", "failed"]
    path: Path
    #: (entries done, total) of the document on disk; ``None`` when there is none to resume
    kept: tuple[int, int] | None
    #: the failure (``reason == "failed"``)
    error: Exception | None = None

    @property
    def resumable(self) -> bool:
        """Whether ``--resume path`` continues it: an interrupted document on disk, a failed one with entries."""
        if self.kept is None:
            return False
        return self.reason != "failed" or self.kept[0] > 0


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What one invocation measured and how it ended.

    ``status`` is the command's exit status: 0; 1 when a failure kept measured entries (resume them) or a
    baseline was measured on a loaded machine; 130 / 143 after SIGINT / SIGTERM; 2 when
    a failure kept nothing (``stopped.error`` says why)."""

    documents: tuple[RunResult, ...]
    #: the machine's load during each document's run (its idle control), in ``documents``' order
    loads: tuple[MachineLoad, ...]
    skipped: tuple[Skipped, ...]
    baseline: bool
    output_dir: Path
    stopped: Stopped | None = None
    status: int = 0

    @property
    def loaded(self) -> tuple[RunResult, ...]:
        """The documents measured on a loaded machine."""
        return tuple(doc for doc, load in zip(self.documents, self.loads) if load.loaded)

    @property
    def interrupted(self) -> bool:
        """Whether SIGINT or SIGTERM stopped the loop."""
        return self.stopped is not None and self.stopped.reason != "failed"


def _default_resolver(name: str | None, session: str | None) -> tuple[Path | None, Mapping[str, Any]]:
    from perfsuite.workloads.fixtures import resolve_fixture

    return resolve_fixture(name, session)


def prepare_runs(
    refs: Sequence[str],
    options: RunOptions | None = None,
    *,
    output_dir: str | os.PathLike[str] = "results/local",
    resume: str | os.PathLike[str] | None = None,
    all_recipes: bool = False,
    recipes_dir: str | os.PathLike[str] | None = None,
    session: str | None = None,
    commit: str | None = None,
    branch: str | None = None,
    allow_loaded: bool = False,
    work_root: str | os.PathLike[str] | None = None,
    valgrind: str | None = None,
    resolve_fixture: FixtureResolver | None = None,
    load_probe: LoadProbe | None = None,
) -> RunBatch:
    """Check and plan everything before anything is measured; one-line :class:`PerfsuiteError` otherwise.

    In order: ``work_root`` is created; ``--resume`` with a commit or branch is refused;
    the measured repository is found; a baseline directory (``output_dir`` named ``baseline``) on
    a loaded machine is refused unless ``allow_loaded`` (``load_probe``); the recipes are planned (or the
    resumed document checked), the output directory created, and every recipe's fixture resolved
    (``resolve_fixture(recipe.fixture, session or recipe.session)``).
    """
    from perfsuite.harness import BASELINE_DIR_NAME, LOAD_RULE, instructions_unavailable, measured_repository
    from perfsuite.workloads.plan import plan_resume, plan_run

    options = options or RunOptions()
    resolver = resolve_fixture or _default_resolver
    root = Path(work_root) if work_root is not None else None
    if root is not None:  # before any fixture is built or sample measured
        root.mkdir(parents=True, exist_ok=True)
    if resume is not None and (commit or branch):
        raise PerfsuiteError("--resume continues the recorded document, whose measured commit is recorded: "
                             "give no --commit or --branch")
    # the code measured is the working directory's repository (or --commit, or the CI's), found once
    measured = None if resume is not None else measured_repository(commit=commit, branch=branch)
    output = Path(resume).parent if resume is not None else Path(output_dir)
    baseline = output.name == BASELINE_DIR_NAME and not allow_loaded
    if baseline:  # a baseline is measured on a quiet machine; look before measuring anything
        from perfsuite.harness import probe_load

        load = (load_probe or probe_load)()
        if load.loaded:
            raise PerfsuiteError(f"{output} is a baseline directory and this machine is loaded now ({load.describe()}; "
                                 f"{LOAD_RULE}): nothing measured; measure it on a quiet machine, or pass "
                                 "--allow-loaded to keep a run marked loaded")
    runs: list[PlannedRun] = []
    skipped: tuple[Skipped, ...] = ()
    if resume is not None:
        recipe = plan_resume(resume, refs, options)
        runs.append(PlannedRun(recipe, *resolver(recipe.fixture, session or recipe.session), resume=Path(resume)))
    else:
        plan = plan_run(refs, options, all_recipes=all_recipes, recipes_dir=recipes_dir)
        skipped = plan.skipped
        if plan.recipes:  # every recipe checked: nothing measured, nothing written until here
            Path(output_dir).mkdir(parents=True, exist_ok=True)  # unusable: fail before building fixtures
        for recipe in plan.recipes:
            runs.append(PlannedRun(recipe, *resolver(recipe.fixture, session or recipe.session)))
    missing = instructions_unavailable(valgrind) if any(run.recipe.instructions for run in runs) else None
    return RunBatch(tuple(runs), skipped, output, baseline, measured, root, valgrind, missing)


def _kept(path: Path) -> tuple[int, int] | None:
    """(entries done, total) of the document on disk, or ``None`` when there is none to resume."""
    from perfsuite.harness import load_results

    try:
        progress = load_results(path)["progress"]
        return int(progress["done"]), int(progress["total"])
    except (PerfsuiteError, KeyError, TypeError, ValueError):
        return None


def _load_of(document: Mapping[str, Any]) -> MachineLoad:
    """The machine's load during a run, from its idle control against the heartbeat period."""
    from perfsuite.harness import machine_load

    period = float((document.get("recipe") or {}).get("heartbeat_ms") or 5.0)
    return machine_load((document.get("control") or {}).get("samples") or [], period)


@dataclass(slots=True)
class _Loop:
    """The documents finished so far (the outcome of a loop that stops early keeps them)."""

    batch: RunBatch
    documents: list[RunResult] = field(default_factory=list)

    def outcome(self, stopped: Stopped | None = None, status: int = 0) -> RunOutcome:
        docs = tuple(self.documents)
        return RunOutcome(docs, tuple(_load_of(d.document) for d in docs), self.batch.skipped, self.batch.baseline,
                          self.batch.output_dir, stopped, status)


def run_plans(
    batch: RunBatch,
    *,
    writer: ResultsWriter | None = None,
    run_id: str | None = None,
    on_start: Callable[[RunStarted], None] | None = None,
    on_sample: Callable[[SampleEvent], None] | None = None,
) -> RunOutcome:
    """Measure every planned run in order (SPEC M4) and say how it ended; nothing is printed.

    Each run's results path is reserved when it starts (a name no other run can take) and
    announced through ``on_start``; ``on_sample`` receives the harness's :class:`SampleEvent` after every plan
    entry. SIGINT / SIGTERM stop the loop (status 130 / 143) and so does a failed run (status 1 when its
    document kept entries, else 2 with the error in :attr:`Stopped.error`): the documents finished before it
    are in the outcome, and the failed one keeps every sample measured (M8). ``writer`` replaces the atomic
    results writer (fault injection); ``run_id`` ties the invocation's documents together (default: the
    time and the process id).
    """
    from perfsuite.harness import new_results_path, plan_order, resume_run, run_recipe

    run_id = run_id or f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"  # one invocation, many documents
    loop = _Loop(batch)
    for planned in batch.runs:
        recipe = planned.recipe
        # a name nobody else can take, reserved when its run starts
        path = planned.resume or new_results_path(batch.output_dir, recipe.name)
        done = (_kept(path) or (0, 0))[0] if batch.resuming else 0
        if on_start is not None:
            on_start(RunStarted(recipe.name, path, done, len(plan_order(recipe))))
        try:
            if planned.resume is not None:
                result = resume_run(path, fixture=planned.fixture, fixture_info=planned.fixture_info,
                                    work_root=batch.work_root, on_sample=on_sample, writer=writer,
                                    valgrind=batch.valgrind)
            else:
                result = run_recipe(recipe, output=path, fixture=planned.fixture, fixture_info=planned.fixture_info,
                                    work_root=batch.work_root, on_sample=on_sample, run_id=run_id, writer=writer,
                                    valgrind=batch.valgrind, measured=batch.measured)
        except KeyboardInterrupt as exc:  # SIGINT, or SIGTERM (Terminated): the document keeps what it measured
            terminated = isinstance(exc, Terminated)
            return loop.outcome(Stopped("terminated" if terminated else "interrupted", path, _kept(path)),
                                143 if terminated else 130)
        except Exception as exc:  # a failed sample, ENOSPC, a read-only output...
            stopped = Stopped("failed", path, _kept(path), exc)
            status = exc.exit_status if isinstance(exc, PerfsuiteError) else 2  # what the one line exits with
            return loop.outcome(stopped, 1 if stopped.resumable else status)
        loop.documents.append(result)
    outcome = loop.outcome()
    if outcome.loaded and batch.baseline:  # a baseline measured on a loaded machine is kept, marked
        return loop.outcome(status=1)
    return outcome
