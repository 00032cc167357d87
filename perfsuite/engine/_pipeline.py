"""E4: the publication pipeline as explicit phases, one driver-agnostic step at a time (format 2, issue 29).

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
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from perfsuite.engine._buffer import FrozenText
from perfsuite.engine._layout import SessionError, StaleHead
from perfsuite.engine._logformat import GEN
from perfsuite.engine._logstate import ArtifactState, Extent, LogState, doc_value, splice
from perfsuite.engine._logstore import LogStore, Placement, RecordSpec
from perfsuite.engine._objects import ChunkRef, HashMemo, chunk_start_for, hash_tail
from perfsuite.engine._sidecar import SidecarCapture

PhaseObserver = Callable[[str, bool, float, float, str | None], None]
PHASES = ("freeze", "stage", "hash", "select", "commit", "adopt", "finish")
_placeholders = itertools.count(1)


class SaveFailed(Exception):
    """A publication failed before adoption: nothing was acknowledged, the batch is pending (E4)."""

    def __init__(self, message: str, *, phase: str, publication: str) -> None:
        super().__init__(message)
        self.phase = phase
        self.publication = publication


@dataclass
class Batch:
    """Everything freeze captured (E4 phase 1). Nothing here aliases mutable live state except the
    append-only line lists inside ``FrozenText``, which are safe to read from another thread.
    ``capture`` is the sidecar delta's captured keys (portable); ``document`` the whole detached sidecar
    (file-backed, which writes it whole)."""

    id: str
    kind: str
    epoch: int
    texts: dict[str, FrozenText]  # conversation -> frozen buffer
    attachments: dict[str, bytes]  # artifact name -> bytes (new attachments, published whole)
    memos: dict[str, HashMemo | None]
    receipts: dict[str, frozenset[str]]  # conversation -> receipts this batch commits
    projection: dict[str, Any] | None  # root projection if the root transcript is in the batch
    candidate: dict[str, Any]
    owner: str  # publication id owning tentative records
    created: float
    chunk_size: int = 0
    capture: SidecarCapture | None = None
    document: dict[str, Any] | None = None
    prompt_reset: int | None = None  # the root buffer's prompt-index list identity (with the projection)
    freeze_ms: float = 0.0

    @property
    def sidecar(self) -> bool:
        return self.capture is not None or self.document is not None


@dataclass(frozen=True, slots=True)
class StageJob:
    """One artifact to stage: bytes from ``at`` (the first that may differ from the base) to ``size``,
    rehashed from ``start`` (chunk-aligned: where chunk ``first`` begins). The bytes come from ``text`` (a
    frozen buffer) or ``data`` (from ``start``: an attachment, or a batch prepared for a worker process)."""

    artifact: str
    at: int
    start: int
    first: int
    size: int
    chunk_size: int
    memo: HashMemo | None
    text: FrozenText | None = None
    data: bytes | None = None
    clean: int = 0  # bytes known equal to the base's (a memo up to here is resumed): ``at``, or more

    def bytes_from_start(self) -> bytes:
        if self.data is not None:
            return self.data
        assert self.text is not None
        return self.text.bytes_from(self.start)

    def materialised(self) -> StageJob:
        """A picklable copy for a worker process: bytes materialised, no hasher memo."""
        return StageJob(self.artifact, self.at, self.start, self.first, self.size, self.chunk_size, None,
                        None, self.bytes_from_start(), self.clean)


@dataclass(frozen=True, slots=True)
class Staged:
    """Per artifact, its bytes from the job's ``start``."""

    data: Mapping[str, bytes]
    nbytes: int


@dataclass(frozen=True, slots=True)
class Hashed:
    """Per artifact, the digests of its chunks from the job's ``first`` on, and the memo for the next."""

    chunks: Mapping[str, tuple[ChunkRef, ...]]
    memos: Mapping[str, HashMemo | None]
    hashed_bytes: int


@dataclass
class Changes:
    """What one publication changes, against its base: the GEN record to write and, for install (and the
    next group member's base), the artifacts' new states (extents of this record as a placeholder log
    until it is placed), the sidecar values after it and the prompt index's length and list identity."""

    generation: int
    epoch: int
    placeholder: int  # this record's stand-in log number (negative) in new extents
    meta: dict[str, Any]
    payload: bytes
    artifacts: dict[str, ArtifactState]
    values: dict[tuple[str, str | None], Any]
    ops: list[list[Any]]
    prompt: tuple[int, int | None] | None  # (length, reset) of the prompt index after it, when it changed
    memos: dict[str, HashMemo | None]
    changed: tuple[str, ...]
    new_chunks: int

    def spec(self) -> RecordSpec:
        return RecordSpec(GEN, self.epoch, self.meta, self.payload)


@dataclass(frozen=True, slots=True)
class Selection:
    """What changed: ``changes`` is None for an empty selection (a successful no-op)."""

    changes: Changes | None
    changed: tuple[str, ...]

    @property
    def manifest(self) -> Changes | None:  # format 1's name for "there is something to commit"
        return self.changes


@dataclass(frozen=True, slots=True)
class PublicationReport:
    """What one publication did, for callers and the suite. ``phases_ms``: each phase's wall time
    (off-loop work included); ``main_thread_ms``: the part of it on the calling (loop) thread, freeze
    included; ``driver``: ``sync`` (the synchronous writer, every phase inline) or ``job`` (E4);
    ``group``: how many publications shared its commit's pwrite and fdatasync (group commit)."""

    id: str
    kind: str
    outcome: str  # adopted | noop | failed
    phases_ms: Mapping[str, float]
    changed: tuple[str, ...] = ()
    new_chunks: int = 0
    staged_bytes: int = 0
    hashed_bytes: int = 0
    seq: int | None = None
    error: str | None = None
    failed_phase: str | None = None
    main_thread_ms: Mapping[str, float] = field(default_factory=dict)
    driver: str = "sync"
    group: int = 1
    record_bytes: int = 0


# -- the base a publication is selected against ------------------------------------------------------------------
class BaseView:
    """The committed state as seen by one publication: the store's state with the changes of the group
    members before it laid over it (nothing here copies the state)."""

    def __init__(self, state: LogState, memos: Mapping[str, HashMemo | None], before: Sequence[Changes] = ()) -> None:
        self.state = state
        self._memos = memos
        self.before = tuple(before)

    @property
    def generation(self) -> int:
        return self.before[-1].generation if self.before else self.state.generation

    def artifact(self, name: str) -> ArtifactState | None:
        for changes in reversed(self.before):
            if name in changes.artifacts:
                return changes.artifacts[name]
        return self.state.artifacts.get(name)

    def memo(self, name: str, fallback: HashMemo | None) -> HashMemo | None:
        for changes in reversed(self.before):
            if name in changes.memos:
                return changes.memos[name]
        return self._memos.get(name, fallback)

    def value(self, section: str, name: str | None) -> Any:
        for changes in reversed(self.before):
            if (section, name) in changes.values:
                return changes.values[(section, name)]
        return doc_value(self.state.sidecar, section, name)

    def prompt(self) -> tuple[int, int | None]:
        for changes in reversed(self.before):
            if changes.prompt is not None:
                return changes.prompt
        index = doc_value(self.state.sidecar, "prompt_index", None)
        return (len(index) if isinstance(index, list) else 0), self.state.prompt_reset


def stage_jobs(batch: Batch, view: BaseView, artifact_for: Callable[[str], str]) -> list[StageJob]:
    """What each artifact of the batch stages against ``view`` (on the loop thread: O(artifacts))."""
    jobs: list[StageJob] = []
    size = batch.chunk_size
    for conversation, frozen in batch.texts.items():
        name = artifact_for(conversation)
        base = view.artifact(name)
        clean = clean_prefix(frozen, base) if base is not None else 0
        at = clean if size > 0 else 0  # whole-artifact mode publishes every byte (the seed's design)
        start, first, fits = aligned(base, at, size)
        if not fits:
            at = start = first = 0  # the committed chunks do not follow this chunk size: restage it whole
            clean = 0
        jobs.append(StageJob(name, at, start, first, frozen.size, size, view.memo(name, batch.memos.get(name)),
                             text=frozen, clean=clean))
    for name, data in batch.attachments.items():
        jobs.append(StageJob(name, 0, 0, 0, len(data), size, None, data=data))
    return jobs


def clean_prefix(frozen: FrozenText, base: ArtifactState) -> int:
    """The first byte of ``frozen`` that may differ from ``base``: its whole size when it was published from
    the same (append-only) line list, else the buffer's earliest change since the last commit."""
    if base.source is frozen.lines and frozen.size >= base.size and frozen.dirty_from >= base.size:
        return base.size
    return min(frozen.dirty_from, base.size, frozen.size)  # a rewrite, or a restage asked for (dirty_from 0)


def aligned(base: ArtifactState | None, at: int, chunk_size: int) -> tuple[int, int, bool]:
    """(start, first, fits): the chunk-aligned offset where rehashing starts for a change at ``at`` and the
    index of the chunk starting there; ``fits`` is False when the base's chunks do not follow ``chunk_size``
    (a chunk size changed since they were committed, or whole-artifact chunks)."""
    if base is None or at <= 0 or chunk_size <= 0:
        return 0, 0, True
    start = chunk_start_for(at, chunk_size)
    first = start // chunk_size
    pieces = base.pieces
    if first > len(pieces) or any(p.size != chunk_size for p in pieces[max(0, first - 1) : first]):
        return 0, 0, False
    if (base.piece_start(first) if first < len(pieces) else base.size) != start:
        return 0, 0, False
    return start, first, True


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


def mailbox_ops(name: str | None, old: list[Any], new: list[Any]) -> list[list[Any]] | None:
    """A mailbox's change as its delta, O(what changed) in bytes: records removed by id (``mdel``:
    delivered and committed, discarded, or moved) and records appended (``madd``): the longest prefix of
    the new mailbox that the old one holds in order is kept, the rest of the new one appended. None when a
    record has no id (then the whole mailbox is put). Mail records are immutable (one id, one record), so
    ids say which are the same."""
    old_ids = [r.get("id") if isinstance(r, dict) else None for r in old]
    new_ids = [r.get("id") if isinstance(r, dict) else None for r in new]
    if None in old_ids or None in new_ids or len(set(new_ids)) != len(new_ids):
        return None
    k = 0
    for rid in old_ids:  # the longest prefix of the new mailbox that is a subsequence of the old one
        if k < len(new_ids) and rid == new_ids[k]:
            k += 1
    kept = set(new_ids[:k])
    ops: list[list[Any]] = []
    removed = [i for i in old_ids if i not in kept]
    if removed:
        ops.append(["mdel", "mailboxes", name, removed])
    if k < len(new):
        ops.append(["madd", "mailboxes", name, new[k:]])
    return ops


def sidecar_ops(batch: Batch, view: BaseView) -> tuple[list[list[Any]], dict[tuple[str, str | None], Any],
                                                       tuple[int, int | None] | None]:
    """The sidecar delta: put/delete of each captured key whose value differs from the base, the root
    projection's fields and prompt-index offsets appended (a rewrite replaces the index), the checkpoint
    marker's entries. O(what changed): nothing here walks the whole document."""
    ops: list[list[Any]] = []
    values: dict[tuple[str, str | None], Any] = {}

    def put(section: str, name: str | None, value: Any) -> None:
        old = view.value(section, name)
        if section == "mailboxes" and isinstance(old, list) and isinstance(value, list):
            mail = mailbox_ops(name, old, value)
            if mail is not None:
                ops.extend(mail)
                if mail:
                    values[(section, name)] = value
                return
        if value != old:
            ops.append(["del" if value is None and section in ("agents", "mailboxes") else "put", section, name, value])
            values[(section, name)] = value

    if batch.capture is None:
        return ops, values, None
    for (section, name), value in sorted(batch.capture.values.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        put(section, name, value)
    prompt = None
    if batch.projection is not None:
        fields = {k: v for k, v in batch.projection.items() if k != "prompt_index"}
        put("root", None, fields)
        index = batch.projection.get("prompt_index", ())  # a view (OffsetsView): never copied whole here
        length, reset = view.prompt()
        if reset is not None and reset == batch.prompt_reset and len(index) >= length:
            if len(index) > length:
                ops.append(["index", "prompt_index", None, list(index[length:])])
        else:
            whole = list(index)  # a rewrite replaced the index (or nothing is known of it): O(index), rare
            if whole != view.value("prompt_index", None):
                ops.append(["put", "prompt_index", None, whole])
        prompt = (len(index), batch.prompt_reset)
    marker = batch.candidate.get("marker") or {}
    if marker:
        put("marker", "epoch", marker.get("epoch"))
        for conversation in batch.texts:
            put("marker", conversation, (marker.get("conversations") or {}).get(conversation))
    return ops, values, prompt


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
class Step:
    """One unit a driver runs. ``blocking`` steps may run off the loop thread; ``func(*args)``'s result
    is handed to ``accept`` on the loop thread. ``local``: a blocking step that needs this process's open
    log (commit, adopt), so a process offload runs it on its thread instead of in the worker."""

    phase: str
    func: Callable[..., Any]
    args: tuple[Any, ...]
    accept: Callable[[Any], None]
    blocking: bool
    local: bool = False


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
    # Set by the session only while someone listens (issue 19): (phase, done, main_ms, wall_ms, error).
    on_phase: PhaseObserver | None = None
    # Fault hooks (issue 19, ``FaultHooks``): acknowledge early after this phase; a rewritten step order.
    early_ack: tuple[str, Callable[[], None]] | None = None
    reorder: Callable[[Generator[Step, None, None]], Generator[Step, None, None]] | None = None
    process: bool = False  # the job's offload is a worker process: stage jobs carry their bytes

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
        # so it is local: off the loop, never in another process; chained with commit and adopt (issue 29)
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
    publication marked failed (the session turns it into a pending publication)."""
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


def driven_steps(publication: Any) -> Generator[Step, None, None]:
    """The steps a driver runs: the publication's own, in the order a fault hook may rewrite."""
    steps = publication.steps()
    return publication.reorder(steps) if publication.reorder is not None else steps


def step_done(publication: Any, phase: str) -> None:
    """After a step succeeded: a fault hook's early acknowledgement, when it is due after this phase."""
    early = publication.early_ack
    if early is not None and early[0] == phase:
        publication.early_ack = None
        early[1]()


def mark_failed(publication: Any, phase: str, exc: BaseException) -> None:
    if publication.adopted:
        # Failure after adoption is durable and only logged (E4).
        publication.error = exc
        return
    publication.outcome = "failed"
    publication.error = exc
    publication.failed_phase = phase


__all__ = ["PHASES", "Batch", "Publication", "PublicationReport", "Round", "SaveFailed", "SessionError", "StaleHead",
           "Step"]
