"""E4: the publication pipeline as explicit phases, one driver-agnostic step at a time (format 2).

freeze (caller, under the gate) -> stage -> hash -> select -> commit -> adopt -> finish, where

- stage: the bytes each changed artifact publishes, from the first byte that may differ (in memory);
- hash: the digests of the chunks those bytes touch, resuming kept hasher state (``hash_tail``);
- select: what changed against the base state (the committed one, or the group member before): per
  artifact the bytes written from an offset, the sidecar as put/delete of exactly the changed keys; an
  empty selection is a successful no-op, as before;
- commit: ONE ``pwrite`` of the record(s) at the log's tail inside its preallocated zeros (no sync), or a
  roll-over into a new log when they do not fit, the log is poisoned, or HEAD's last replace is not durable;
- adopt: ONE ``fdatasync`` of the log (the commit point), then the lease re-checked (a read);
- finish: install, modified flags, acknowledgements once.

A :class:`Publication` yields :class:`Step` objects; a driver runs each one inline (synchronous writer)
or off the loop thread when ``blocking`` (asynchronous job). A :class:`Round` is what the steps act on:
one publication, or a group of them sharing one pwrite and one fdatasync (group commit, the job).

The values the phases pass on are in ``_pipeline_values``, the base view and stage plan in ``_pipeline_base``,
the sidecar's delta in ``_sidecar_delta``, the step and the drivers' shared rules in ``_steps``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from perfsuite.engine._layout import StaleHead
from perfsuite.engine._logstate import ArtifactState, Extent, splice
from perfsuite.engine._logstore import LogStore
from perfsuite.engine._logvalues import Placement
from perfsuite.engine._objects import ChunkRef, HashMemo, hash_tail
from perfsuite.engine._pipeline_base import BaseView, stage_jobs
from perfsuite.engine._pipeline_values import (
    Batch,
    Changes,
    Hashed,
    PublicationReport,
    SaveFailed,
    Selection,
    Staged,
    StageJob,
)
from perfsuite.engine._sidecar_delta import sidecar_ops
from perfsuite.engine._steps import Step, driven_steps, mark_failed, step_done

PhaseObserver = Callable[[str, bool, float, float, str | None], None]
PHASES = ("freeze", "stage", "hash", "select", "commit", "adopt", "finish")
_placeholders = itertools.count(1)


# -- blocking phase functions (run inline, in a thread, or in a worker process) --------------------------------------
def stage_batch(jobs: Sequence[StageJob]) -> Staged:
    """E4 phase 2: the frozen bytes that may have changed, per artifact, from its job's ``start``."""
    data = {job.artifact: job.bytes_from_start() for job in jobs}
    return Staged(data, sum(len(d) - (j.at - j.start) for j, d in zip(jobs, data.values())))


def hash_staged(jobs: Sequence[StageJob], staged: Staged) -> Hashed:
    """E4 phase 3: digest the staged bytes (never live state), resuming from kept hasher state."""
    chunks: dict[str, tuple[ChunkRef, ...]] = {}
    memos: dict[str, HashMemo | None] = {}
    hashed = 0
    for job in jobs:
        tail = hash_tail(staged.data[job.artifact], job.start, job.chunk_size, clean_prefix_end=max(job.at, job.clean),
                         memo=job.memo)
        chunks[job.artifact] = tail.chunks
        memos[job.artifact] = tail.memo if job.memo is not None or job.text is not None else None
        hashed += tail.hashed_bytes
    return Hashed(chunks, memos, hashed)


def select_changes(batch: Batch, jobs: Sequence[StageJob], staged: Staged, hashed: Hashed, view: BaseView) -> Selection:
    """E4 phase 4: compare digests with the committed manifest; publish only what changed."""
    if view.state.epoch > batch.epoch:  # E3: a candidate from an older epoch never commits after a newer one
        raise StaleHead(f"{batch.id}: frozen in epoch {batch.epoch}, the session's log is in epoch {view.state.epoch}")
    placeholder = -next(_placeholders)
    changes_meta: list[dict[str, Any]] = []
    payload: list[bytes] = []
    offset = 0
    artifacts: dict[str, ArtifactState] = {}
    new_chunks = 0
    for job in jobs:
        chunks = hashed.chunks[job.artifact]
        base = view.artifact(job.artifact)
        if base is not None and base.size == job.size and tuple(
                (p.digest, p.size) for p in base.pieces[job.first:]) == tuple((c.digest, c.size) for c in chunks):
            continue  # unchanged: the bytes from ``at`` hash to what is committed
        data = staged.data[job.artifact][job.at - job.start :]
        artifacts[job.artifact] = splice(base, job.at, job.size, job.first, chunks,
                                         Extent(placeholder, offset, len(data)))
        changes_meta.append({"name": job.artifact, "at": job.at, "size": job.size, "from": job.first,
                             "chunks": [c.to_json() for c in chunks], "data": [offset, len(data)]})
        payload.append(data)
        offset += len(data)
        new_chunks += len(chunks)
    ops, values, prompt = sidecar_ops(batch, view)
    changed = tuple(sorted(artifacts)) + (("sidecar.json",) if ops else ())
    if not changed:
        return Selection(None, ())
    generation = view.generation + 1
    meta = {"generation": generation, "publication": batch.id, "kind": batch.kind, "artifacts": changes_meta,
            "sidecar": ops}
    memos = {job.artifact: hashed.memos.get(job.artifact) for job in jobs}
    return Selection(Changes(generation, batch.epoch, placeholder, meta, b"".join(payload), artifacts, values, ops,
                             prompt, memos, changed, new_chunks), changed)


def commit_records(store: LogStore, changes: Sequence[Changes]) -> tuple[list[Placement], bool]:
    """E4 phase 5: ONE pwrite of the records at the log's tail inside its preallocated space (no sync), or,
    when they cannot go there, a roll-over that makes them durable in a new log and switches HEAD. Returns
    the placements and whether a roll-over happened (then adopt has no fdatasync left to do)."""
    return store.place([c.spec() for c in changes])


def adopt_records(store: LogStore, rolled: bool, lease: Any, epoch: int) -> None:
    """E4 phase 6, the commit point: ONE fdatasync of the log (unless the roll-over already made the records
    durable), then the lease re-checked (a read): fenced owners acknowledge nothing."""
    if not rolled:
        store.sync()
    store.check_lease(lease, epoch)


# -- the publication as steps -------------------------------------------------------------------------------------
@dataclass
class Publication:
    """One batch on its way through the phases. The session supplies ``on_adopted`` (finish) and
    ``lease``; the publication owns nothing else."""

    batch: Batch
    store: LogStore
    lease: Any
    artifact_for: Callable[[str], str]
    on_adopted: Callable[[Publication], None]
    on_noop: Callable[[Publication], None]
    phases_ms: dict[str, float] = field(default_factory=dict)
    memos: Mapping[str, HashMemo | None] = field(default_factory=dict)
    jobs: list[StageJob] | None = None
    staged: Staged | None = None
    hashed: Hashed | None = None
    selection: Selection | None = None
    placement: Placement | None = None
    placed: dict[int, tuple[int, int]] = field(default_factory=dict)  # placeholder -> (log, payload offset)
    outcome: str = "running"
    error: BaseException | None = None
    failed_phase: str | None = None
    adopted: bool = False
    written: bool = False  # its record reached the log (the log must not be appended to unless it installs)
    group: int = 1
    # The asynchronous job's loop-thread time per phase (its trace's own dict, so nothing is counted
    # twice); None for the synchronous writer, whose every phase is on the calling thread.
    main_ms: dict[str, float] | None = None
    # Set by the session only while someone listens: (phase, done, main_ms, wall_ms, error).
    on_phase: PhaseObserver | None = None
    # Fault hooks (``FaultHooks``): acknowledge early after this phase; a rewritten step order.
    early_ack: tuple[str, Callable[[], None]] | None = None
    reorder: Callable[[Generator[Step, None, None]], Generator[Step, None, None]] | None = None
    process: bool = False  # the job's offload is a worker process: stage jobs carry their bytes
    unsynced: bool = False  # a seeded bug of the fused writer (``FaultHooks.fused_unsynced``): no fdatasync

    @property
    def changes(self) -> Changes | None:
        return self.selection.changes if self.selection is not None else None

    @property
    def head(self) -> Placement | None:
        return self.placement

    def prepare(self, view: BaseView) -> None:
        jobs = stage_jobs(self.batch, view, self.artifact_for)
        self.jobs = [j.materialised() for j in jobs] if self.process else jobs
        self._view = view

    def front_steps(self, view: BaseView) -> Generator[Step, None, None]:
        """stage, hash and select against ``view`` (a group runs these per member, then one commit)."""
        self.prepare(view)
        assert self.jobs is not None
        yield Step("stage", stage_batch, (self.jobs,), self._set("staged"), True)
        if self.outcome == "failed":  # a group's member failed alone: the driver carries on with the others
            return
        assert self.staged is not None
        yield Step("hash", hash_staged, (self.jobs, self.staged), self._set("hashed"), True)
        if self.outcome == "failed":
            return
        assert self.hashed is not None
        # select reads this process's committed state (the job holds the gate: nothing changes it meanwhile),
        # so it is local: off the loop, never in another process; chained with commit and adopt into one
        # hand-off to the worker (a hand-off costs more than a small step's work)
        yield Step("select", select_changes, (self.batch, self.jobs, self.staged, self.hashed, view),
                   self._set("selection"), True, local=True)

    def steps(self) -> Generator[Step, None, None]:
        round_ = Round([self], self.store, self.lease)
        return round_.steps()

    def _set(self, attribute: str) -> Callable[[Any], None]:
        def accept(value: Any) -> None:
            setattr(self, attribute, value)

        return accept

    def report(self) -> PublicationReport:
        phases = dict(self.phases_ms)
        main, driver = thread_times(phases, self.main_ms, self.batch.freeze_ms)
        changes = self.changes
        return PublicationReport(
            id=self.batch.id,
            kind=self.batch.kind,
            outcome=self.outcome,
            phases_ms=phases,
            changed=self.selection.changed if self.selection else (),
            new_chunks=changes.new_chunks if changes else 0,
            staged_bytes=self.staged.nbytes if self.staged else 0,
            hashed_bytes=self.hashed.hashed_bytes if self.hashed else 0,
            seq=changes.generation if self.adopted and changes else None,
            error=None if self.error is None else f"{type(self.error).__name__}: {self.error}",
            failed_phase=self.failed_phase,
            main_thread_ms=main,
            driver=driver,
            group=self.group,
            record_bytes=self.placement.size if self.placement else 0,
        )


class Round:
    """The publications one commit makes durable: a single one (the synchronous writer, a job's first), or
    a group the job absorbed (group commit): each selected against the one before it (parents chained),
    their records in ONE pwrite and ONE fdatasync, then each finished (and acknowledged) once, in order."""

    def __init__(self, members: Sequence[Publication], store: LogStore, lease: Any) -> None:
        self.members = list(members)
        self.store = store
        self.lease = lease
        self.placements: list[Placement] = []
        self.rolled = False
        for member in self.members:
            member.group = len(self.members)

    def steps(self) -> Generator[Step, None, None]:
        before: list[Changes] = []
        live: list[Publication] = []
        broken: BaseException | None = None
        for member in self.members:
            if broken is not None:  # its sidecar assumed the failed one ahead of it: it fails with it
                mark_failed(member, "select", SaveFailed(f"{broken}", phase="select", publication=member.batch.id))
                continue
            view = BaseView(self.store.state, member.memos, before)
            for step in member.front_steps(view):
                yield _for(member, step)
            if member.outcome == "failed":
                broken = RuntimeError(f"{member.batch.id}, committed ahead of it in its group, failed")
                continue
            if member.changes is None:
                member.outcome = "noop"
                yield _for(member, Step("finish", member.on_noop, (member,), _ignore, False))
                continue
            before.append(member.changes)
            live.append(member)
        if not live:
            return
        for member in live:
            member.written = True
        changes = [m.changes for m in live if m.changes is not None]
        yield _for(live[0], Step("commit", commit_records, (self.store, changes), self._placed(live), True,
                                 local=True), live)
        yield _for(live[0], Step("adopt", adopt_records, (self.store, self.rolled, self.lease, changes[0].epoch),
                                 self._adopted(live), True, local=True), live)
        for member in live:
            yield _for(member, Step("finish", member.on_adopted, (member,), _ignore, False))

    def _placed(self, live: list[Publication]) -> Callable[[Any], None]:
        def accept(result: tuple[list[Placement], bool]) -> None:
            placements, self.rolled = result
            self.placements = placements
            placed = {m.changes.placeholder: (p.log, p.payload) for m, p in zip(live, placements)
                      if m.changes is not None}
            for member, placement in zip(live, placements):
                member.placement = placement
                member.placed = placed

        return accept

    def _adopted(self, live: list[Publication]) -> Callable[[Any], None]:
        def accept(_: Any) -> None:
            for member in live:
                member.adopted = True
                member.outcome = "adopted"

        return accept


def _for(member: Publication, step: Step, shared: Sequence[Publication] = ()) -> Step:
    """A step tagged with the publication(s) it runs for (drivers time and fail them)."""
    step.owner = member  # type: ignore[attr-defined]
    step.shared = tuple(shared) or (member,)  # type: ignore[attr-defined]
    return step


def thread_times(phases: dict[str, float], main_ms: dict[str, float] | None,
                 freeze_ms: float) -> tuple[dict[str, float], str]:
    """A report's ``main_thread_ms`` and ``driver``, derived from who ran it: the job's loop-thread times
    (``main_ms``, freeze added), or for the synchronous writer (no ``main_ms``) every phase."""
    if main_ms is None:
        return phases, "sync"
    return {"freeze": freeze_ms, **main_ms}, "job"


def _ignore(_: Any) -> None:
    return None


def run_step(step: Step, phases_ms: dict[str, float]) -> float:
    """Run one step inline and time it (the synchronous writer's unit of work); returns its ms."""
    start = time.perf_counter()
    try:
        result = step.func(*step.args)
        step.accept(result)
    finally:
        elapsed = (time.perf_counter() - start) * 1e3
        phases_ms[step.phase] = phases_ms.get(step.phase, 0.0) + elapsed
    return elapsed


def run_inline(publication: Publication) -> None:
    """The synchronous driver: every phase inline on the caller's thread. Raises on failure with the
    publication marked failed (the session turns it into a pending publication). A format-2 publication
    nobody observes and no step-order or early-acknowledgement hook rewrites runs fused (``run_fused``)."""
    if isinstance(publication, Publication) and publication.on_phase is None and publication.reorder is None \
            and publication.early_ack is None:
        run_fused(publication)
        return
    for step in driven_steps(publication):
        observe = publication.on_phase
        if observe is not None:
            observe(step.phase, False, 0.0, 0.0, None)
        started = time.perf_counter()
        try:
            elapsed = run_step(step, publication.phases_ms)
        except BaseException as exc:
            if observe is not None:
                elapsed = (time.perf_counter() - started) * 1e3
                observe(step.phase, True, elapsed, elapsed, f"{type(exc).__name__}: {exc}")
            mark_failed(publication, step.phase, exc)
            raise
        if observe is not None:
            observe(step.phase, True, elapsed, elapsed, None)
        step_done(publication, step.phase)


def run_fused(publication: Publication) -> None:
    """The synchronous writer's fast path (E4): the same phases, in the same order, calling the same phase
    functions as ``Round.steps`` for one member, without a Step, a generator or a closure per phase and with
    one clock reading per phase. The lease fence before the write, the one fdatasync and the lease re-check
    after it are the store's (``commit_records``/``adopt_records``), so every store fault hook holds here;
    it is only entered when no hook rewrites the step order or acknowledges early (``run_inline``), and
    when nobody listens (no phase events to emit). ``unsynced`` is a seeded bug of this path alone."""
    store, phases, clock = publication.store, publication.phases_ms, time.perf_counter
    phase, started = "stage", clock()
    try:
        view = BaseView(store.state, publication.memos, [])
        publication.prepare(view)
        jobs = publication.jobs
        assert jobs is not None
        publication.staged = staged = stage_batch(jobs)
        now = clock()
        phases["stage"], phase, started = (now - started) * 1e3, "hash", now
        publication.hashed = hashed = hash_staged(jobs, staged)
        now = clock()
        phases["hash"], phase, started = (now - started) * 1e3, "select", now
        publication.selection = selection = select_changes(publication.batch, jobs, staged, hashed, view)
        now = clock()
        phases["select"], started = (now - started) * 1e3, now
        changes = selection.changes
        if changes is None:  # an empty selection: a successful no-op (E4 phase 4)
            publication.outcome, phase = "noop", "finish"
            publication.on_noop(publication)
            phases["finish"] = (clock() - started) * 1e3
            return
        publication.written, phase = True, "commit"
        placements, rolled = commit_records(store, [changes])
        placement = publication.placement = placements[0]
        publication.placed = {changes.placeholder: (placement.log, placement.payload)}
        now = clock()
        phases["commit"], phase, started = (now - started) * 1e3, "adopt", now
        adopt_records(store, rolled or publication.unsynced, publication.lease, changes.epoch)
        publication.adopted, publication.outcome = True, "adopted"
        now = clock()
        phases["adopt"], phase, started = (now - started) * 1e3, "finish", now
        publication.on_adopted(publication)
        phases["finish"] = (clock() - started) * 1e3
    except BaseException as exc:
        phases[phase] = phases.get(phase, 0.0) + (clock() - started) * 1e3
        mark_failed(publication, phase, exc)
        raise


__all__ = ["PHASES", "Publication", "Round"]
