"""Rebuild, recover, check (SPEC section 7): the campaign that ties model, states and invariants together.

Each crash state is rebuilt in a temporary directory and recovered by the workload's real open path in a
worker process (spawned, so it shares no memory with the workload that produced the trace). Recovery runs
on a recorder; its own trace is then crashed too (after each of its operations, persistence points first,
up to ``recovery_states``) and each of those states is recovered again. The parent
checks every outcome against the workload's invariants and keeps violating states for inspection.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, field

from perfsuite.cluster import Checkpoint, Runner, Task, make_pool, stream
from perfsuite.crash._execution import (
    Execution,
    OnProgress,
    Progress,
    campaign_key,
    decode,
    default_scratch,
    encode,
    forget_recorded,
    open_checkpoint,
    recorded,
    runner_for,
    with_local_scratch,
)
from perfsuite.crash.bugs._seeded import seeded_bug
from perfsuite.crash.invariants._checks import CheckContext, Outcome
from perfsuite.crash.invariants._sessions import SESSION
from perfsuite.crash.model._model import MODELS, CrashCheckError, FsState, Timeline, materialize, snapshot
from perfsuite.crash.model._replay import build_timeline
from perfsuite.crash.model._states import CrashSpec, CrashState, Enumeration, describe_spec, enumerate_states
from perfsuite.crash.model._trace import CRASHED, OpRecorder, OpTrace
from perfsuite.crash.workloads._registry import Workload, get_workload, standard_workloads
from perfsuite.engine import FileSystem, OsFileSystem, SessionError

BATCH = 8  # crash states per worker task
DEFAULT_MAX_STATES = 5000  # unique crash states per workload and model, unless the workload or the config says


@dataclass(frozen=True, slots=True)
class CrashConfig:
    """A campaign: which workloads and models, how many states, the seed, an optional seeded bug."""

    workloads: tuple[str, ...] = ()  # empty: every standard workload
    models: tuple[str, ...] = MODELS
    max_states: int | None = None  # None: each workload's own cap (DEFAULT_MAX_STATES unless it sets one)
    seed: int = 0
    seeded_bug: str | None = None
    jobs: int = field(default_factory=lambda: os.cpu_count() or 1)
    keep_dir: str | None = None
    keep_limit: int = 20  # violating states written to disk per workload and model
    recovery_states: int = 32  # crash states of each recovery that did durable work (every prefix of it)
    subset_limit: int = 10
    samples: int = 32
    scratch_dir: str | None = field(default_factory=default_scratch)  # where workers rebuild states
    stop_after: int | None = None  # stop a workload and model after this many violating states (None: never)


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken invariant in one recovery outcome of one crash state (or of the whole trace)."""

    workload: str
    model: str
    invariant: str
    name: str
    message: str
    crash: str
    dropped: tuple[str, ...]
    torn: tuple[str, ...]
    recovery: str
    trace: tuple[str, ...]
    kept: str | None = None


@dataclass(frozen=True, slots=True)
class CrashResult:
    """One workload under one model: what was explored, what broke, how long it took."""

    workload: str
    model: str
    ops: int
    micro_ops: int
    persistence_points: int
    acks: int
    states: int
    recovery_states: int
    violating_states: int
    violations: tuple[Violation, ...]
    seconds: float


@dataclass(frozen=True, slots=True)
class CampaignReport:
    """Every run of a campaign, where violating states were kept, and the total time."""

    results: tuple[CrashResult, ...]
    seconds: float
    seeded_bug: str | None = None
    keep_dir: str | None = None

    @property
    def violations(self) -> tuple[Violation, ...]:
        return tuple(v for r in self.results for v in r.violations)

    @property
    def states(self) -> int:
        return sum(r.states + r.recovery_states for r in self.results)

    @property
    def caught(self) -> bool:
        """With a seeded bug: at least one violation (the bug was caught)."""
        return bool(self.violations)


# -- worker side ------------------------------------------------------------------------------------------
def _fs_for(bug: str | None, inner: FileSystem) -> FileSystem:
    return seeded_bug(bug).wrap(inner) if bug else inner


def _recover(workload: Workload, root: str, fs: FileSystem) -> tuple[FsState | None, object, str | None, bool]:
    """(tree after recovery, view, error, refused): ``refused`` when the error is the engine's own one-line
    refusal (``SessionError``), which a damaged crash state may get (HEAD lost on top of the crash)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            view = workload.recover(root, fs)
    except Exception as exc:
        where = traceback.extract_tb(exc.__traceback__)[-1]
        refused = isinstance(exc, SessionError) and "\n" not in str(exc) and bool(str(exc))
        return (None, None, f"{type(exc).__name__}: {exc} ({os.path.basename(where.filename)}:{where.lineno})",
                refused)
    return snapshot(root), view, None, False


def _recover_twice(workload: Workload, bug: str | None, state: FsState, root: str, label: str,
                   recorder: OpRecorder | None = None, *, origin: FsState | None = None,
                   damage: str | None = None) -> Outcome:
    materialize(state, root)
    post, view, error, refused = _recover(workload, root, _fs_for(bug, recorder or OsFileSystem()))
    again, view_again = None, None
    if error is None:
        again, view_again, error, refused = _recover(workload, root, _fs_for(bug, OsFileSystem()))
    return Outcome(label, state, post, again, view, view_again, error, len(recorder.ops) if recorder else 0,
                   origin=origin, damage=damage, refused=refused)


#: Damage applied to a crash state of a ``head_loss`` workload before its extra recovery (a crash while HEAD
#: is also lost), alternating by state: HEAD deleted, or HEAD torn (half its bytes).
HEAD_DAMAGE = ("HEAD deleted", "HEAD torn")


def _damaged(state: FsState, damage: str) -> FsState | None:
    """``state`` with its session's HEAD deleted or torn; None when it has no HEAD to damage."""
    files = dict(state.files)
    head = files.get(f"{SESSION}/HEAD")
    if head is None:
        return None
    if damage == "HEAD deleted":
        del files[f"{SESSION}/HEAD"]
    else:
        files[f"{SESSION}/HEAD"] = head[: len(head) // 2]
    return FsState(tuple(sorted(files.items())))


def recover_batch(workload_name: str, model: str, bug: str | None, nested: Enumeration,
                  states: list[tuple[int, FsState]], scratch: str | None = None, crashed: tuple[int, ...] = ()
                  ) -> list[tuple[int, list[Outcome]]]:
    """Worker task: recover each state twice; crash each recovery that did durable work and recover the
    resulting states again. Runs in a worker process; everything it needs comes in its arguments
    (``crashed``: the pids the crash killed, for the crash model of ownership)."""
    workload = get_workload(workload_name)
    base = os.path.realpath(tempfile.mkdtemp(prefix="perfsuite-crash-", dir=scratch))
    results: list[tuple[int, list[Outcome]]] = []
    CRASHED.clear()
    CRASHED.update(crashed)
    if bug:
        seeded_bug(bug)  # an unknown name fails here; the bug's file system wraps every recovery (_fs_for)
    try:
        for state_id, state in states:
            root = os.path.join(base, f"s{state_id}")
            recorder = OpRecorder(OsFileSystem())
            first = _recover_twice(workload, bug, state, root, "recover", recorder)
            outcomes = [first]
            if recorder.ops and nested.max_states and first.post is not None:
                outcomes.extend(_crash_recovery(workload, model, bug, nested, state, root, recorder, first.post,
                                                os.path.join(base, f"s{state_id}-r")))
            shutil.rmtree(root, ignore_errors=True)
            if workload.head_loss:
                damage = HEAD_DAMAGE[state_id % len(HEAD_DAMAGE)]
                damaged = _damaged(state, damage)
                if damaged is not None:
                    where = os.path.join(base, f"s{state_id}-h")
                    outcomes.append(_recover_twice(workload, bug, damaged, where, f"recover after the crash and "
                                                   f"{damage}", damage=damage))
                    shutil.rmtree(where, ignore_errors=True)
            results.append((state_id, outcomes))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return results


def _crash_recovery(workload: Workload, model: str, bug: str | None, nested: Enumeration, state: FsState,
                    root: str, recorder: OpRecorder, post: FsState, base: str) -> Iterator[Outcome]:
    """Crash states of recovery itself (from ``state``), each recovered again (SPEC 7.6)."""
    tl = build_timeline(recorder.ops, root, model, initial=state)
    known = {state.digest, post.digest}
    for n, crash in enumerate(enumerate_states(tl, nested)):
        if crash.digest in known:
            continue
        point, dropped, torn = describe_spec(tl, crash.spec)
        label = f"recovery crash: {point}" + (f"; dropped {', '.join(dropped)}" if dropped else "") + (
            f"; torn {', '.join(torn)}" if torn else "")
        yield _recover_twice(workload, bug, crash.state, os.path.join(base, str(n)), label, origin=state)
        shutil.rmtree(os.path.join(base, str(n)), ignore_errors=True)


# -- parent side ------------------------------------------------------------------------------------------
class _Keeper:
    """Writes violating states (before and after recovery) and a description under the keep directory."""

    def __init__(self, keep_dir: str | None, limit: int) -> None:
        self.keep_dir = keep_dir
        self.limit = limit
        self.kept: dict[tuple[str, str], int] = {}

    def restore(self, workload: str, model: str, kept: int, keep_dir: str | None) -> None:
        """A resumed unit: what it had kept, and where (when this run was given no keep directory)."""
        self.kept[(workload, model)] = kept
        if self.keep_dir is None and keep_dir is not None and os.path.isdir(keep_dir):
            self.keep_dir = keep_dir

    def keep(self, trace: OpTrace, model: str, name: str, outcome: Outcome | None, text: str) -> str | None:
        """Keep one violating state (or, with no ``outcome``, the whole trace) as ``<workload>-<model>-<name>``."""
        key = (trace.workload, model)
        if self.kept.get(key, 0) >= self.limit:
            return None
        self.kept[key] = self.kept.get(key, 0) + 1
        if self.keep_dir is None:
            self.keep_dir = tempfile.mkdtemp(prefix="perfsuite-crashcheck-")
        target = os.path.join(self.keep_dir, f"{trace.workload}-{model}-{name}")
        os.makedirs(target, exist_ok=True)
        if outcome is not None:
            materialize(outcome.pre, os.path.join(target, "before-recovery"))
            if outcome.post is not None:
                materialize(outcome.post, os.path.join(target, "after-recovery"))
        with open(os.path.join(target, "violation.txt"), "w", encoding="utf-8") as handle:
            handle.write(text)
        return target


def _violations(trace: OpTrace, tl: Timeline, workload: Workload, spec: CrashSpec | None, outcome: Outcome | None,
                per: str) -> list[tuple[str, str, str]]:
    ctx = CheckContext(trace, tl, spec, outcome)
    return [(inv.id, inv.name, message) for inv in workload.invariants if inv.per == per
            for message in inv.check(ctx)]


def _batches(trace: OpTrace, tl: Timeline, model: str, limits: Enumeration, nested: Enumeration,
             config: CrashConfig, first: int) -> Iterator[Task]:
    """Batch ``k`` holds crash states ``k * BATCH`` to ``(k + 1) * BATCH - 1`` of the enumeration, pulled one
    batch at a time (bounded memory: never the whole list); batches before ``first`` (resumed) are skipped."""
    chunk: list[tuple[int, CrashState]] = []
    for state_id, crash in enumerate(enumerate_states(tl, limits)):
        if state_id // BATCH < first:
            continue
        chunk.append((state_id, crash))
        if len(chunk) == BATCH:
            yield _batch_task(trace, model, nested, config, chunk)
            chunk = []
    if chunk:
        yield _batch_task(trace, model, nested, config, chunk)


def _batch_task(trace: OpTrace, model: str, nested: Enumeration, config: CrashConfig,
                chunk: list[tuple[int, CrashState]]) -> Task:
    states = [(state_id, crash.state) for state_id, crash in chunk]
    args = (trace.workload, model, trace.seeded_bug, nested, states, config.scratch_dir, (trace.pid,))
    return Task(chunk[0][0] // BATCH, with_local_scratch, (recover_batch, 5, *args), context=dict(chunk))


def _explore(trace: OpTrace, workload: Workload, model: str, config: CrashConfig, runner: Runner,
             keeper: _Keeper, checkpoint: Checkpoint | None = None, on_progress: OnProgress | None = None,
             prior: int = 0) -> CrashResult:
    """Explore one workload under one model: stream its crash states to ``runner`` in batches and fold the
    outcomes in batch order (the same answer on every back end), checkpointing the fold as it goes.
    ``prior``: violations of the units before this one (for progress)."""
    started = time.perf_counter()
    unit = f"{trace.workload} / {model}"
    tl = build_timeline(trace.ops, trace.root, model, initial=trace.initial,
                        capture={a.at for a in trace.oracle.acks})
    cap = config.max_states or workload.max_states or DEFAULT_MAX_STATES
    saved = checkpoint.get(unit) if checkpoint is not None else None
    violations: list[Violation] = []
    counts = {"states": 0, "recovery": 0, "violating": 0, "trace": 0, "batches": 0}
    seconds = 0.0  # spent by the runs a resume continues (checkpointed beside the counts)
    if saved is not None:
        violations = [decode(Violation, v) for v in saved["violations"]]
        saved_counts = dict(saved["counts"])
        seconds = float(saved_counts.pop("seconds", 0.0))
        counts.update(saved_counts)
        keeper.restore(trace.workload, model, saved["kept"], saved.get("keep_dir"))
    else:
        found = _violations(trace, tl, workload, None, None, "trace")
        if found:
            text = "\n".join([f"workload {trace.workload}, model {model}, seeded bug {trace.seeded_bug or '-'}",
                              "violations:", *(f"[{i}] {n}: {m}" for i, n, m in found),
                              "trace:", *trace.summary(len(trace.ops), before=len(trace.ops), after=0), ""])
            kept = keeper.keep(trace, model, "trace", None, text)
            violations.extend(Violation(trace.workload, model, inv_id, name, message, "whole trace", (), (), "-", (),
                                        kept) for inv_id, name, message in found)
            counts["trace"] = 1  # a stop_after budget counts it like a violating state

    def save(force: bool) -> None:
        if checkpoint is not None:
            checkpoint.put(unit, lambda: {
                "counts": {**counts, "seconds": seconds + time.perf_counter() - started},
                "violations": [encode(v) for v in violations], "kept": keeper.kept.get((trace.workload, model), 0),
                "keep_dir": keeper.keep_dir, "done": force}, force=force)

    limits = Enumeration(cap, config.subset_limit, config.samples, config.seed)
    # Recovery is crashed after every one of its operations (persistence points first), synced-only and
    # with everything it issued; its torn writes and subsets are not explored (they only re-tear the tail).
    nested = Enumeration(config.recovery_states, 0, 0, config.seed, passes=(1, 2))
    stop = bool(config.stop_after and counts["violating"] + counts["trace"] >= config.stop_after)

    def fold(task: Task, outcomes_by_state: list[tuple[int, list[Outcome]]]) -> bool:
        for state_id, outcomes in outcomes_by_state:
            crash = task.context[state_id]
            counts["states"] += 1
            counts["recovery"] += len(outcomes) - 1
            found = False
            for outcome in outcomes:
                found |= _check_outcome(trace, tl, workload, model, state_id, crash, outcome, keeper, violations)
            counts["violating"] += found
        counts["batches"] += 1
        save(False)
        if on_progress is not None:
            on_progress(Progress(unit, counts["states"], cap, prior + len(violations)))
        # enough violating states for this workload and model (seeded-bug checks): the budget is counted in
        # batch order, so it stops at the same batch on every back end
        return bool(config.stop_after and counts["violating"] + counts["trace"] >= config.stop_after)

    if not stop and not (saved and saved.get("done")):
        stream(runner, _batches(trace, tl, model, limits, nested, config, counts["batches"]), fold)
    save(True)
    if on_progress is not None:
        on_progress(Progress(unit, counts["states"], counts["states"], prior + len(violations)))
    return CrashResult(trace.workload, model, len(trace.ops), len(tl.micro), len(tl.persistence_points),
                     len(trace.oracle.acks), counts["states"], counts["recovery"], counts["violating"],
                     tuple(violations), seconds + time.perf_counter() - started)


def _check_outcome(trace: OpTrace, tl: Timeline, workload: Workload, model: str, state_id: int, crash: CrashState,
                   outcome: Outcome, keeper: _Keeper, out: list[Violation]) -> bool:
    found = _violations(trace, tl, workload, crash.spec, outcome, "state")
    if not found:
        return False
    point, dropped, torn = describe_spec(tl, crash.spec)
    summary = tuple(trace.summary(crash.spec.at))
    text = "\n".join([
        f"workload {trace.workload}, model {model}, seeded bug {trace.seeded_bug or '-'}",
        point, f"recovery: {outcome.label}",
        *(f"dropped: {d}" for d in dropped), *(f"torn: {t}" for t in torn),
        "trace:", *summary, "violations:", *(f"[{i}] {n}: {m}" for i, n, m in found), "",
    ])
    kept = keeper.keep(trace, model, str(state_id), outcome, text)
    out.extend(Violation(trace.workload, model, inv_id, name, message, point, tuple(dropped), tuple(torn),
                         outcome.label, summary, kept) for inv_id, name, message in found)
    return True


def make_executor(jobs: int) -> ProcessPoolExecutor:
    """The worker pool: spawned processes, so recovery shares no memory with the recorded workload."""
    return make_pool(jobs)


def run_campaign(config: CrashConfig, *, executor: Executor | None = None,
                 on_result: Callable[[CrashResult], None] | None = None, runner: Runner | None = None,
                 execution: Execution | None = None, on_progress: OnProgress | None = None) -> CampaignReport:
    """Record each workload once, explore it under each model, and report (SPEC section 7).

    Bad names raise :class:`CrashCheckError`. Where the batches run (the same answer on each): ``runner``, else a pool
    around ``executor`` (which may be shared across campaigns; tests do), else what ``execution`` names (a
    local pool of ``config.jobs`` by default, a Dask cluster), created and closed here. ``execution`` also
    names a checkpoint file to record and resume from; ``on_progress`` hears of every finished batch."""
    started = time.perf_counter()
    names = config.workloads or standard_workloads()
    workloads = [get_workload(name) for name in names]
    for model in config.models:
        if model not in MODELS:
            raise CrashCheckError(f"unknown crash model {model!r} (choose from {', '.join(MODELS)})")
    if config.seeded_bug:
        seeded_bug(config.seeded_bug)
    if (config.max_states is not None and config.max_states < 1) or config.jobs < 1:
        raise CrashCheckError("--max-states and --jobs must be at least 1")
    checkpoint = open_checkpoint(execution, campaign_key("crash", config, ("jobs", "keep_dir", "scratch_dir")))
    keeper = _Keeper(config.keep_dir, config.keep_limit)
    results: list[CrashResult] = []
    with runner_for(config.jobs, executor, runner, execution) as pool, \
            tempfile.TemporaryDirectory(prefix="perfsuite-crash-record-") as work:
        for workload in workloads:
            root = os.path.join(work, workload.name)
            os.makedirs(root)
            trace = recorded(workload, root, config.seeded_bug, checkpoint)
            for model in config.models:
                result = _explore(trace, workload, model, config, pool, keeper, checkpoint, on_progress,
                                  sum(len(r.violations) for r in results))
                results.append(result)
                if on_result is not None:
                    on_result(result)
            forget_recorded(trace, root)
    return CampaignReport(tuple(results), time.perf_counter() - started, config.seeded_bug, keeper.keep_dir)
