"""The corruption campaign (issue 14), ``perfsuite crashcheck --corrupt``: damage every file and directory of
a finished session, one at a time, in each of seven ways, and check what open, recovery and retirement
make of it.

Each standard session workload of the crash checker (portable and file-backed) is recorded once, and
gives up to three base trees:

- ``closed``: its final tree; every entry of the session directory (the directory itself included) is
  damaged in each applicable way of :mod:`perfsuite.crash._damage`;
- ``owned``: the same with the LEASE or PID lock its owner wrote, as if it crashed right after its last
  flush; only that ownership file is damaged;
- ``pending`` (portable): the live tree just before the last fdatasync of the session log, a publication
  written but not yet at its commit point (format 2, issue 29): the log holding it is damaged;
- ``recovered`` (file-backed): the closed tree after an open recovered a torn tail into a transcript's
  ``recovery/``: the recovery files and the event logs are damaged.

Each base also runs undamaged (``none``). Every case is rebuilt in a scratch directory and exercised in a
worker process (:mod:`perfsuite.crash._corrupt_check` lists the invariants), so a hang or a crash is
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
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field

from perfsuite.crash._bugs import seeded_bug
from perfsuite.crash._check import default_scratch, make_executor
from perfsuite.crash._corrupt_check import OWNERSHIP, Case, CaseOutcome, Expect, run_cases
from perfsuite.crash._damage import KINDS, NONE, applicable, apply
from perfsuite.crash._logcheck import records
from perfsuite.crash._model import CrashCheckError, FsState, materialize, snapshot
from perfsuite.crash._replay import build_timeline
from perfsuite.crash._session_invariants import SESSION
from perfsuite.crash._sessions import recover_file, recover_portable
from perfsuite.crash._trace import Trace
from perfsuite.crash._workloads import Workload, get_workload, record_workload, standard_workloads
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


def bases(trace: Trace, profile: str) -> dict[str, tuple[FsState, Expect]]:
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


def expectations(trace: Trace, profile: str, state: FsState, at: int) -> Expect:
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
    """The newest generation of a format-2 tree (issue 29): its number, HEAD's log and the other logs its
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
    """Issue 27: every ``--target`` pattern must match a damageable path of at least one workload (an empty
    pattern, or one that matches nothing, used to report "0 cases, 0 violations" and pass a CI gate).
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
                         on_result: Callable[[CorruptResult], None] | None = None) -> CorruptReport:
    """Record each session workload once, damage it case by case in worker processes, and report.
    Bad names raise :class:`CrashCheckError`; ``executor`` may be shared (the tests do)."""
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
    keeper = _Keeper(config.keep_dir, config.keep_limit)
    own = executor is None
    pool = executor or make_executor(config.jobs)
    results: list[CorruptResult] = []
    try:
        with tempfile.TemporaryDirectory(prefix="perfsuite-corrupt-record-") as work:
            recorded = []
            for workload in workloads:  # every workload recorded first: --target is checked before any case
                root = os.path.join(work, workload.name)
                os.makedirs(root)
                trace = record_workload(workload, root, config.seeded_bug)
                recorded.append((workload, trace, bases(trace, profile_of(workload) or "portable")))
            check_targets(config, [(w.name, states, profile_of(w) or "portable") for w, _t, states in recorded])
            for workload, trace, states in recorded:
                result, pool = _run_workload(trace, workload, config, pool, own, keeper, states)
                results.append(result)
                if on_result is not None:
                    on_result(result)
    finally:
        if own:
            pool.shutdown()
    return CorruptReport(tuple(results), time.perf_counter() - started, config.seeded_bug, keeper.keep_dir)


def _run_workload(trace: Trace, workload: Workload, config: CorruptConfig, pool: Executor, own: bool,
                  keeper: _Keeper, states: dict[str, tuple[FsState, Expect]]) -> tuple[CorruptResult, Executor]:
    started = time.perf_counter()
    profile = profile_of(workload) or "portable"
    trees = {base: state for base, (state, _expect) in states.items()}
    expects = {base: expect for base, (_state, expect) in states.items()}
    cases = cases_for(states, profile, config)
    batches = [cases[i : i + BATCH] for i in range(0, len(cases), BATCH)]
    outcomes: list[CaseOutcome] = []
    in_flight: dict[Future[list[CaseOutcome]], list[Case]] = {}

    def submit(batch: list[Case]) -> None:
        future = pool.submit(run_cases, workload.name, config.seeded_bug, trees, batch, expects, config.seed,
                             config.scratch_dir, (trace.pid,), config.timeout_s)
        in_flight[future] = batch

    def collect(done: set[Future[list[CaseOutcome]]]) -> bool:
        broken = False
        for future in done:
            batch = in_flight.pop(future)
            try:
                outcomes.extend(future.result())
            except BrokenProcessPool:
                broken = True
                outcomes.extend(CaseOutcome(c, "failed", "the worker process died", (("T", "worker died"),))
                                for c in batch)
        return broken

    window = max(2, config.jobs * 2)
    for batch in batches:
        submit(batch)
        while len(in_flight) >= window:
            done, _ = wait(set(in_flight), return_when=FIRST_COMPLETED)
            if collect(done):
                pool = _replace_pool(pool, own, config, collect, in_flight)
    while in_flight:
        done, _ = wait(set(in_flight), return_when=FIRST_COMPLETED)
        if collect(done):
            pool = _replace_pool(pool, own, config, collect, in_flight)
    violations: list[CorruptViolation] = []
    violating = 0
    for outcome in outcomes:
        if not outcome.violations:
            continue
        violating += 1
        kept = keeper.keep(workload.name, trees[outcome.case.base], outcome, config.seed)
        violations.extend(CorruptViolation(workload.name, profile, outcome.case.base, outcome.case.target,
                                           outcome.case.kind, inv, msg, kept) for inv, msg in outcome.violations)
    count = {s: sum(o.status == s for o in outcomes) for s in ("opened", "refused", "undetectable")}
    return CorruptResult(workload.name, profile, len(outcomes), count["opened"], count["refused"],
                         count["undetectable"], violating, tuple(violations), time.perf_counter() - started), pool


def _replace_pool(pool: Executor, own: bool, config: CorruptConfig, collect: Callable[..., bool],
                  in_flight: dict[Future[list[CaseOutcome]], list[Case]]) -> Executor:
    """A worker died (a crash the deadline could not turn into an exception): every batch that was in the
    dead pool is reported failed, and the campaign continues in a new pool."""
    if not own:
        raise CrashCheckError("a corruption-campaign worker process died")
    collect(set(in_flight))
    pool.shutdown(wait=False, cancel_futures=True)
    return make_executor(config.jobs)
