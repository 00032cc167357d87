"""The corruption campaign (SPEC section 7), ``perfsuite crashcheck --corrupt``: damage every file and directory of
a finished session, one at a time, in each of seven ways, and check what open, recovery and retirement
make of it.

Each standard session workload of the crash checker (portable and file-backed) is recorded once, and
gives up to three base trees:

- ``closed``: its final tree; every entry of the session directory (the directory itself included) is
  damaged in each applicable way of :mod:`perfsuite.crash.corrupt._damage`;
- ``owned``: the same with the LEASE or PID lock its owner wrote, as if it crashed right after its last
  flush; only that ownership file is damaged;
- ``pending`` (portable): the live tree just before the last fdatasync of the session log, a publication
  written but not yet at its commit point (format 2: the log's fdatasync): the log holding it is damaged;
- ``recovered`` (file-backed): the closed tree after an open recovered a torn tail into a transcript's
  ``recovery/``: the recovery files and the event logs are damaged.

Each base also runs undamaged (``none``). Every case is rebuilt in a scratch directory and exercised in a
worker process (:mod:`perfsuite.crash.corrupt._case` lists the invariants), so a hang or a crash is
contained. Violating cases can be kept (``keep_dir``): the damaged tree and a description.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
import random
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass, field

from perfsuite.cluster import Checkpoint, Runner, Task, stream
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
from perfsuite.crash.corrupt._case import OWNERSHIP, Case, CaseOutcome, Expect, run_cases
from perfsuite.crash.corrupt._damage import KINDS, NONE, applicable, apply
from perfsuite.crash.invariants._logcheck import records
from perfsuite.crash.invariants._sessions import SESSION
from perfsuite.crash.model._model import CrashCheckError, FsState, materialize, snapshot
from perfsuite.crash.model._replay import build_timeline
from perfsuite.crash.model._trace import OpTrace
from perfsuite.crash.workloads._registry import Workload, get_workload, standard_workloads
from perfsuite.crash.workloads._sessions import recover_file, recover_portable
from perfsuite.engine import FileSession

BATCH = 6  # cases per worker task


@dataclass(frozen=True, slots=True)
class CorruptConfig:
    """A corruption campaign: which workloads, how many cases, the seed, an optional seeded bug."""

    workloads: tuple[str, ...] = ()  # empty: every standard session workload
    seed: int = 0
    seeded_bug: str | None = None
    jobs: int = field(default_factory=lambda: os.cpu_count() or 1)
    keep_dir: str | None = None
    keep_limit: int = 20  # violating cases kept per workload
    max_cases: int | None = None  # per workload, a seeded sample (the tests' budget); None: every case
    targets: tuple[str, ...] = ()  # fnmatch patterns on paths relative to the workload root ("sess/HEAD")
    timeout_s: float = 60.0  # per case, then it is a "hang" violation
    scratch_dir: str | None = field(default_factory=default_scratch)


@dataclass(frozen=True, slots=True)
class CorruptViolation:
    workload: str
    profile: str
    base: str
    target: str
    kind: str
    invariant: str
    message: str
    kept: str | None = None


@dataclass(frozen=True, slots=True)
class CorruptResult:
    """One workload: cases run, how open answered them, and what broke."""

    workload: str
    profile: str
    cases: int
    opened: int
    refused: int
    undetectable: int
    violating: int
    violations: tuple[CorruptViolation, ...]
    seconds: float


@dataclass(frozen=True, slots=True)
class CorruptReport:
    results: tuple[CorruptResult, ...]
    seconds: float
    seeded_bug: str | None = None
    keep_dir: str | None = None

    @property
    def violations(self) -> tuple[CorruptViolation, ...]:
        return tuple(v for r in self.results for v in r.violations)

    @property
    def cases(self) -> int:
        return sum(r.cases for r in self.results)

    @property
    def caught(self) -> bool:
        return bool(self.violations)


def profile_of(workload: Workload) -> str | None:
    """``portable`` or ``file`` for a session workload, None for any other."""
    return {recover_portable: "portable", recover_file: "file"}.get(workload.recover)  # type: ignore[arg-type]


def session_workloads() -> tuple[str, ...]:
    """The standard crash workloads that run a session (the corruption campaign's default)."""
    return tuple(n for n in standard_workloads() if profile_of(get_workload(n)) is not None)


def bases(trace: OpTrace, profile: str) -> dict[str, tuple[FsState, Expect]]:
    """Every base tree of the workload, with what is expected of it (see the module docstring)."""
    closed = snapshot(trace.root)
    out = {"closed": (closed, expectations(trace, profile, closed, len(trace.ops)))}
    target = OWNERSHIP[profile]
    written = [op.data for op in trace.ops if op.kind == "write" and trace.rel(op.path) == target]
    if written:
        out["owned"] = (_with(closed, {target: written[-1]}), out["closed"][1])
    adoptions = [op.seq for op in trace.ops
                 if op.kind == "fdatasync" and trace.rel(op.path).startswith(f"{SESSION}/log/")]
    if profile == "portable" and adoptions:
        at = adoptions[-1]
        live = build_timeline(trace.ops, trace.root, "atomic-rename", initial=trace.initial, capture={at}).live[at]
        out["pending"] = (live, expectations(trace, profile, live, at))
    if profile == "file":
        out["recovered"] = (_recovered(closed), out["closed"][1])
    return out


def _with(state: FsState, files: dict[str, bytes | None]) -> FsState:
    merged = dict(state.files)
    merged.update(files)
    return FsState(tuple(sorted(merged.items())))


def _recovered(closed: FsState) -> FsState:
    """The closed file-backed tree after an open recovered a torn (unacknowledged) tail of the root
    transcript: its ``recovery/`` file and the event-log record are then part of the session."""
    path = f"{SESSION}/conversations/root/conversation.jsonl"
    data = closed.as_dict().get(path) or b""
    with tempfile.TemporaryDirectory(prefix="perfsuite-corrupt-base-") as work:
        materialize(_with(closed, {path: data + b'{"role":"user","content":"torn by a cr'}), work)
        FileSession.open(os.path.join(work, SESSION), owner_alive=lambda _pid: False).close()  # (its owner is gone)
        return snapshot(work)


def expectations(trace: OpTrace, profile: str, state: FsState, at: int) -> Expect:
    """What must survive in ``state``: the acknowledgements given before trace index ``at``, HEAD's
    generation (portable) and the bytes of every file (for the damage a case applies)."""
    files = state.as_dict()
    generation = None
    if profile == "portable" and files.get(f"{SESSION}/HEAD"):
        generation = _generation(files)
    prefix = f"{SESSION}/conversations/"
    transcripts = {p[len(prefix) :].split("/")[0]: d for p, d in state.files
                   if d is not None and p.startswith(prefix) and p.endswith("/conversation.jsonl")}
    sizes = {p: len(d) for p, d in state.files if d is not None}
    return Expect(profile, trace.oracle.acks_before(at), trace.oracle.notes_before(at), generation, sizes,
                  transcripts)


def _generation(files: dict[str, bytes | None]) -> tuple[int, str, tuple[str, ...]]:
    """The newest generation of a format-2 tree (the session log): its number, HEAD's log and the other logs its
    BASE references (the files it rests on), read with the checker's own log reader."""
    head = json.loads(files[f"{SESSION}/HEAD"] or b"{}")
    log = f"{SESSION}/{head['log']}"
    found, _end = records(files.get(log) or b"", int(str(head["salt"])[:8], 16))
    generation = int(found[-1].meta.get("generation", 0)) if found else 0
    refs = sorted({f"{SESSION}/log/{int(n):08d}.log" for n in (found[0].meta.get("logs", {}) if found else {})})
    return generation, log, tuple(r for r in refs if r != log)


def _targets(base: str, state: FsState, profile: str) -> list[tuple[str, bytes | None]]:
    entries = [(p, d) for p, d in state.files if p == SESSION or p.startswith(f"{SESSION}/")]
    if base == "owned":
        return [(p, d) for p, d in entries if p == OWNERSHIP[profile]]
    if base == "pending":  # the log holding the publication that is written but not synced yet
        return [(p, d) for p, d in entries if p.startswith(f"{SESSION}/log/") and d is not None]
    if base == "recovered":
        return [(p, d) for p, d in entries if "/recovery" in p or p.endswith("/events.jsonl")]
    return entries


def check_targets(config: CorruptConfig, recorded: list[tuple[str, dict[str, tuple[FsState, Expect]], str]]) -> None:
    """Bad input is refused (one line, exit 2): every ``--target`` pattern must match a damageable path of
    at least one workload (an empty pattern, or one that matches nothing, used to report "0 cases,
    0 violations" and pass a CI gate).
    ``recorded`` is ``(workload, states, profile)`` per workload, before any case runs."""
    if not config.targets:
        return
    everything = dataclasses.replace(config, targets=(), max_cases=None)
    paths = sorted({c.target for _name, states, profile in recorded for c in cases_for(states, profile, everything)},
                   key=lambda p: (p.count("/"), p))
    names = ", ".join(name for name, _states, _profile in recorded)
    for pattern in config.targets:
        if not pattern.strip():
            raise CrashCheckError(f"--target {pattern!r}: expected a glob of paths relative to the workload root "
                                  f"(e.g. sess/HEAD; the paths of {names}: {', '.join(paths[:8])}, ...)")
        if not any(fnmatch.fnmatch(path, pattern) for path in paths):
            raise CrashCheckError(f"--target {pattern!r}: matches no path of {names}; the {len(paths)} paths are "
                                  f"{', '.join(paths[:8])}{', ...' if len(paths) > 8 else ''}")


def cases_for(states: dict[str, tuple[FsState, Expect]], profile: str, config: CorruptConfig) -> list[Case]:
    """Every applicable (base, target, damage), filtered by ``config.targets`` and sampled to ``max_cases``."""
    out: list[Case] = []
    for base, (state, _expect) in states.items():
        out.append(Case(base, SESSION, NONE))
        for path, data in _targets(base, state, profile):
            out.extend(Case(base, path, k) for k in KINDS if applicable(k, data is None, len(data or b""), path))
    if config.targets:
        out = [c for c in out if any(fnmatch.fnmatch(c.target, t) for t in config.targets)]
    if config.max_cases is not None and len(out) > config.max_cases:
        chosen = set(random.Random(config.seed).sample(range(len(out)), config.max_cases))
        out = [c for i, c in enumerate(out) if i in chosen]
    return out


class _Keeper:
    def __init__(self, keep_dir: str | None, limit: int) -> None:
        self.keep_dir, self.limit = keep_dir, limit
        self.kept: dict[str, int] = {}

    def restore(self, workload: str, kept: int, keep_dir: str | None) -> None:
        """A resumed workload: what it had kept, and where (when this run was given no keep directory)."""
        self.kept[workload] = kept
        if self.keep_dir is None and keep_dir is not None and os.path.isdir(keep_dir):
            self.keep_dir = keep_dir

    def keep(self, workload: str, state: FsState, outcome: CaseOutcome, seed: int) -> str | None:
        """The damaged tree as the engine found it, and what went wrong."""
        if self.kept.get(workload, 0) >= self.limit:
            return None
        self.kept[workload] = self.kept.get(workload, 0) + 1
        if self.keep_dir is None:
            self.keep_dir = tempfile.mkdtemp(prefix="perfsuite-corruptcheck-")
        case = outcome.case
        target = os.path.join(self.keep_dir, f"{workload}-{self.kept[workload]}")
        materialize(state, os.path.join(target, "damaged"))
        apply(os.path.join(target, "damaged"), case.target, case.kind, seed)
        with open(os.path.join(target, "violation.txt"), "w", encoding="utf-8") as handle:
            handle.write("\n".join([f"workload {workload}, base {case.base}, {case.kind} {case.target}",
                                    f"outcome: {outcome.status} {outcome.detail}",
                                    *(f"[{i}] {m}" for i, m in outcome.violations), ""]))
        return target


def run_corrupt_campaign(config: CorruptConfig, *, executor: Executor | None = None,
                         on_result: Callable[[CorruptResult], None] | None = None, runner: Runner | None = None,
                         execution: Execution | None = None, on_progress: OnProgress | None = None) -> CorruptReport:
    """Record each session workload once, damage it case by case in worker processes, and report.
    Bad names raise :class:`CrashCheckError`; ``executor`` may be shared (the tests do); ``runner``,
    ``execution`` and ``on_progress`` as for :func:`~perfsuite.crash.run_campaign` (where the batches run)."""
    started = time.perf_counter()
    names = config.workloads or session_workloads()
    workloads = [get_workload(n) for n in names]
    for workload in workloads:
        if profile_of(workload) is None:
            raise CrashCheckError(f"{workload.name} is not a session workload (choose from "
                                  f"{', '.join(session_workloads())})")
    if config.seeded_bug:
        seeded_bug(config.seeded_bug)
    if config.jobs < 1 or (config.max_cases is not None and config.max_cases < 1) or config.timeout_s <= 0:
        raise CrashCheckError("--jobs and --max-cases must be at least 1, the timeout positive")
    checkpoint = open_checkpoint(execution, campaign_key("corrupt", config, ("jobs", "keep_dir", "scratch_dir")))
    keeper = _Keeper(config.keep_dir, config.keep_limit)
    results: list[CorruptResult] = []
    with runner_for(config.jobs, executor, runner, execution) as pool, \
            tempfile.TemporaryDirectory(prefix="perfsuite-corrupt-record-") as work:
        traces = []
        for workload in workloads:  # every workload recorded first: --target is checked before any case
            root = os.path.join(work, workload.name)
            os.makedirs(root)
            trace = recorded(workload, root, config.seeded_bug, checkpoint)
            traces.append((workload, trace, root, bases(trace, profile_of(workload) or "portable")))
        check_targets(config, [(w.name, states, profile_of(w) or "portable") for w, _t, _r, states in traces])
        for workload, trace, root, states in traces:
            result = _run_workload(trace, workload, config, pool, keeper, states, checkpoint, on_progress,
                                   sum(len(r.violations) for r in results))
            results.append(result)
            if on_result is not None:
                on_result(result)
            forget_recorded(trace, root)
    return CorruptReport(tuple(results), time.perf_counter() - started, config.seeded_bug, keeper.keep_dir)


def _run_workload(trace: OpTrace, workload: Workload, config: CorruptConfig, runner: Runner, keeper: _Keeper,
                  states: dict[str, tuple[FsState, Expect]], checkpoint: Checkpoint | None = None,
                  on_progress: OnProgress | None = None, prior: int = 0) -> CorruptResult:
    """One workload's cases, streamed to ``runner`` in batches and folded in batch order (the same
    answer on every back end); the fold is checkpointed as it goes."""
    started = time.perf_counter()
    profile = profile_of(workload) or "portable"
    trees = {base: state for base, (state, _expect) in states.items()}
    expects = {base: expect for base, (_state, expect) in states.items()}
    cases = cases_for(states, profile, config)
    saved = checkpoint.get(workload.name) if checkpoint is not None else None
    counts = {"opened": 0, "refused": 0, "undetectable": 0, "cases": 0, "violating": 0, "batches": 0}
    seconds = 0.0  # spent by the runs a resume continues (checkpointed beside the counts)
    violations: list[CorruptViolation] = []
    if saved is not None:
        saved_counts = dict(saved["counts"])
        seconds = float(saved_counts.pop("seconds", 0.0))
        counts.update(saved_counts)
        violations = [decode(CorruptViolation, v) for v in saved["violations"]]
        keeper.restore(workload.name, saved["kept"], saved.get("keep_dir"))

    def save(force: bool) -> None:
        if checkpoint is not None:
            checkpoint.put(workload.name, lambda: {
                "counts": {**counts, "seconds": seconds + time.perf_counter() - started},
                "violations": [encode(v) for v in violations], "kept": keeper.kept.get(workload.name, 0),
                "keep_dir": keeper.keep_dir, "done": force}, force=force)

    def tasks() -> Iterator[Task]:
        for key in range(counts["batches"], (len(cases) + BATCH - 1) // BATCH):
            batch = cases[key * BATCH : (key + 1) * BATCH]
            args = (workload.name, config.seeded_bug, trees, batch, expects, config.seed, config.scratch_dir,
                    (trace.pid,), config.timeout_s)
            yield Task(key, with_local_scratch, (run_cases, 6, *args), context=batch)

    def lost(task: Task, error: Exception) -> list[CaseOutcome]:
        """A batch whose process died on every attempt (a crash the deadline could not turn into an
        exception): each of its cases is a failure."""
        return [CaseOutcome(c, "failed", "the worker process died", (("T", "worker died"),)) for c in task.context]

    def fold(task: Task, outcomes: list[CaseOutcome]) -> None:
        for outcome in outcomes:
            counts["cases"] += 1
            if outcome.status in ("opened", "refused", "undetectable"):
                counts[outcome.status] += 1
            if not outcome.violations:
                continue
            counts["violating"] += 1
            kept = keeper.keep(workload.name, trees[outcome.case.base], outcome, config.seed)
            violations.extend(CorruptViolation(workload.name, profile, outcome.case.base, outcome.case.target,
                                               outcome.case.kind, inv, msg, kept) for inv, msg in outcome.violations)
        counts["batches"] += 1
        save(False)
        if on_progress is not None:
            on_progress(Progress(workload.name, counts["cases"], len(cases), prior + len(violations)))

    if not (saved and saved.get("done")):
        stream(runner, tasks(), fold, window=max(2, runner.slots * 2), lost=lost)
    save(True)
    if on_progress is not None:
        on_progress(Progress(workload.name, counts["cases"], counts["cases"], prior + len(violations)))
    return CorruptResult(workload.name, profile, counts["cases"], counts["opened"], counts["refused"],
                         counts["undetectable"], counts["violating"], tuple(violations),
                         seconds + time.perf_counter() - started)
