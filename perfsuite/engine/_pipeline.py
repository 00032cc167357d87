"""E4: the publication pipeline as explicit phases, one driver-agnostic step at a time.

freeze (caller, under the gate) -> stage -> hash -> select -> commit -> adopt -> finish.
A :class:`Publication` yields :class:`Step` objects; a driver runs each one inline (synchronous writer)
or off the loop thread when ``blocking`` (asynchronous job, issue 4). Blocking steps are module-level
functions of plain data so a worker process can run them too.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from perfsuite.engine._buffer import FrozenText
from perfsuite.engine._fs import FileSystem
from perfsuite.engine._generations import STAGING, GenerationStore, HeadRef, Lease, Manifest, StaleHead
from perfsuite.engine._objects import (
    ArtifactEntry,
    ChunkRef,
    HashMemo,
    hash_tail,
)
from perfsuite.engine._sidecar import encode_sidecar

PhaseObserver = Callable[[str, bool, float, float, str | None], None]
PHASES = ("freeze", "stage", "hash", "select", "commit", "adopt", "finish")


class SaveFailed(Exception):
    """A publication failed before adoption: nothing was acknowledged, the batch is pending (E4)."""

    def __init__(self, message: str, *, phase: str, publication: str) -> None:
        super().__init__(message)
        self.phase = phase
        self.publication = publication


@dataclass(frozen=True, slots=True)
class StageInput:
    """One artifact to stage: bytes from the chunk-aligned ``start`` to ``size``; ``prefix`` is the
    committed chunks before ``start``. The bytes come from ``text`` (a frozen buffer) or ``data``."""

    artifact: str
    start: int
    clean_prefix_end: int
    size: int
    prefix: tuple[ChunkRef, ...]
    chunk_size: int
    text: FrozenText | None = None
    data: bytes | None = None
    document: Mapping[str, Any] | None = None  # a detached sidecar, encoded at stage time (off the loop)

    def payload(self) -> bytes:
        if self.data is not None:
            return self.data
        if self.document is not None:
            return encode_sidecar(self.document)
        assert self.text is not None
        return self.text.bytes_from(self.start)


@dataclass
class Batch:
    """Everything freeze captured (E4 phase 1). Nothing here aliases mutable live state except the
    append-only line lists inside ``FrozenText``, which are safe to read from another thread."""

    id: str
    kind: str
    epoch: int
    base: HeadRef | None
    base_manifest: Manifest | None
    inputs: list[StageInput]
    memos: dict[str, HashMemo | None]
    texts: dict[str, FrozenText]  # conversation -> frozen buffer
    receipts: dict[str, frozenset[str]]  # conversation -> receipts this batch commits
    projection: dict[str, Any] | None  # root projection if the root transcript is in the batch
    candidate: dict[str, Any]
    owner: str  # publication id owning tentative records
    created: float
    staging_dir: str
    freeze_ms: float = 0.0

    def for_offload(self) -> Batch:
        """A picklable copy for a worker process: bytes materialised, no hasher memos."""
        inputs = [replace(i, data=i.payload(), text=None) for i in self.inputs]
        return replace(self, inputs=inputs, memos={}, texts={})


@dataclass(frozen=True, slots=True)
class StagedChunk:
    artifact: str
    start: int
    end: int
    path: str


@dataclass(frozen=True, slots=True)
class Staged:
    chunks: Mapping[str, tuple[StagedChunk, ...]]
    payloads: Mapping[str, bytes]
    nbytes: int


@dataclass(frozen=True, slots=True)
class Hashed:
    entries: Mapping[str, ArtifactEntry]
    memos: Mapping[str, HashMemo | None]
    hashed_bytes: int


@dataclass(frozen=True, slots=True)
class Selection:
    """What changed: ``manifest`` is None for an empty selection (a successful no-op)."""

    manifest: Manifest | None
    fresh: tuple[tuple[ChunkRef, str], ...]  # new chunks and the staged file holding each
    changed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PublicationReport:
    """What one publication did, for callers and the suite. ``phases_ms``: each phase's wall time
    (off-loop work included); ``main_thread_ms``: the part of it on the calling (loop) thread, freeze
    included; ``driver``: ``sync`` (the synchronous writer, every phase inline) or ``job`` (E4)."""

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


# -- blocking phase functions (run inline, in a thread, or in a worker process) ------------------------

def _safe(name: str) -> str:
    return name.replace("/", "__")


def stage_batch(store: GenerationStore, batch: Batch) -> Staged:
    """E4 phase 2: write the frozen bytes that may have changed to the staging area (recovery bytes),
    one file per chunk so commit can rename them into the object store without copying."""
    fs = store.fs
    fs.makedirs(batch.staging_dir)
    chunks: dict[str, tuple[StagedChunk, ...]] = {}
    payloads: dict[str, bytes] = {}
    total = 0
    for item in batch.inputs:
        data = item.payload()
        payloads[item.artifact] = data
        files: list[StagedChunk] = []
        position = item.start
        end_all = item.start + len(data)
        while position < end_all:
            end = end_all if item.chunk_size <= 0 else min(end_all, position + item.chunk_size)
            path = os.path.join(batch.staging_dir, f"{_safe(item.artifact)}.{position}")
            fs.write_new(path, data[position - item.start : end - item.start], sync=True)
            files.append(StagedChunk(item.artifact, position, end, path))
            position = end
        chunks[item.artifact] = tuple(files)
        total += len(data)
    record = {
        "id": batch.id, "kind": batch.kind, "epoch": batch.epoch,
        "base": batch.base.to_json() if batch.base else None,
        "artifacts": {i.artifact: {"start": i.start, "size": i.size, "prefix": [c.to_json() for c in i.prefix],
                                   "files": [[c.start, c.end, os.path.basename(c.path)]
                                             for c in chunks[i.artifact]]} for i in batch.inputs},
        "digests": sorted({c.digest for i in batch.inputs for c in i.prefix}),
        "candidate": batch.candidate,
    }
    # The batch record is best-effort recovery metadata: a process crash keeps it, power loss may not.
    fs.write_new(os.path.join(batch.staging_dir, "batch.json"), json.dumps(record).encode(), sync=False)
    return Staged(chunks, payloads, total)


def hash_staged(batch: Batch, staged: Staged) -> Hashed:
    """E4 phase 3: digest the staged bytes (never live state), resuming from kept hasher state."""
    entries: dict[str, ArtifactEntry] = {}
    memos: dict[str, HashMemo | None] = {}
    hashed = 0
    for item in batch.inputs:
        tail = hash_tail(staged.payloads[item.artifact], item.start, item.chunk_size,
                         clean_prefix_end=item.clean_prefix_end, memo=batch.memos.get(item.artifact))
        size = item.start + len(staged.payloads[item.artifact])
        entries[item.artifact] = ArtifactEntry(item.prefix + tail.chunks, size)
        # A batch prepared for a worker process carries no memos and returns none: hasher state
        # cannot cross a process boundary, so process offload rehashes the first restaged chunk.
        memos[item.artifact] = tail.memo if batch.memos else None
        hashed += tail.hashed_bytes
    return Hashed(entries, memos, hashed)


def select_changes(batch: Batch, staged: Staged, hashed: Hashed, known: set[str]) -> Selection:
    """E4 phase 4: compare digests with the committed manifest; publish only what changed."""
    committed = batch.base_manifest.artifacts if batch.base_manifest else {}
    changed = tuple(sorted(n for n, e in hashed.entries.items() if committed.get(n) != e))
    if not changed:
        return Selection(None, (), ())
    files = {(c.artifact, c.start): c.path for chunks in staged.chunks.values() for c in chunks}
    fresh: list[tuple[ChunkRef, str]] = []
    taken = set(known)
    for name in changed:
        offset = 0
        for chunk in hashed.entries[name].chunks:
            path = files.get((name, offset))
            offset += chunk.size
            if path is None or chunk.digest in taken:
                continue  # a committed prefix chunk, or content the store already holds
            taken.add(chunk.digest)
            fresh.append((chunk, path))
    artifacts = dict(committed)
    artifacts.update({n: hashed.entries[n] for n in changed})
    seq = (batch.base.seq if batch.base else 0) + 1
    manifest = Manifest(seq=seq, epoch=batch.epoch, parent=batch.base.manifest if batch.base else None,
                        created=batch.created, artifacts=artifacts,
                        meta={"publication": batch.id, "kind": batch.kind, "changed": list(changed)})
    return Selection(manifest, tuple(fresh), changed)


def commit_selection(store: GenerationStore, selection: Selection) -> HeadRef:
    """E4 phase 5: move the new chunks into the object store (their data was fsynced by stage), write
    the manifest after them and fsync it, then fsync the directory once for all the new names."""
    assert selection.manifest is not None
    for chunk, path in selection.fresh:
        store.fs.replace(path, store.object_path(chunk.digest))
    return store.write_manifest(selection.manifest, sync_dir=True)


def adopt_head(store: GenerationStore, new: HeadRef, expected: HeadRef | None, lease: Lease,
               staging_dir: str | None = None) -> HeadRef:
    """E4 phase 6: the only commit point. A HEAD that already names ``new`` (a replace whose directory
    sync failed) is reconciled by replacing it again, never by trusting the earlier attempt. After
    adoption the batch's leftover staged files are removed here, off the loop thread, best effort."""
    try:
        current = store.read_head()
    except ValueError:
        current = expected
    if current == new:
        expected = new
    store.adopt(new, expected=expected, lease=lease)
    if staging_dir is not None:
        try:
            remove_staging(store.fs, staging_dir)
        except OSError:
            pass  # after adoption: durable; a leftover staging dir is cleaned at the next open
    return new


def remove_staging(fs: FileSystem, directory: str) -> None:
    """Best effort: staged files that were not renamed into the object store. Damage (a directory where
    a staged file was) is removed too when it is empty, else left for the next open (issue 14)."""
    if not fs.isdir(directory):
        return
    for name in fs.listdir(directory):
        path = os.path.join(directory, name)
        try:
            if fs.isdir(path) and not fs.listdir(path):
                fs.rmdir(path)
            else:
                fs.remove(path)
        except OSError:
            pass
    try:
        fs.rmdir(directory)
    except OSError:
        pass


# -- the publication as steps ----------------------------------------------------------------------------

@dataclass
class Step:
    """One unit a driver runs. ``blocking`` steps may run off the loop thread; ``func(*args)``'s result
    is handed to ``accept`` on the loop thread."""

    phase: str
    func: Callable[..., Any]
    args: tuple[Any, ...]
    accept: Callable[[Any], None]
    blocking: bool


@dataclass
class Publication:
    """One batch on its way through the phases. The session supplies ``on_adopted`` (finish) and
    ``lease``; the publication owns nothing else."""

    batch: Batch
    store: GenerationStore
    lease: Lease
    known: set[str]
    on_adopted: Callable[[Publication], None]
    on_noop: Callable[[Publication], None]
    phases_ms: dict[str, float] = field(default_factory=dict)
    staged: Staged | None = None
    hashed: Hashed | None = None
    selection: Selection | None = None
    head: HeadRef | None = None
    outcome: str = "running"
    error: BaseException | None = None
    failed_phase: str | None = None
    adopted: bool = False
    # The asynchronous job's loop-thread time per phase (its trace's own dict, so nothing is counted
    # twice); None for the synchronous writer, whose every phase is on the calling thread.
    main_ms: dict[str, float] | None = None
    # Set by the session only while someone listens (issue 19): (phase, done, main_ms, wall_ms, error).
    on_phase: PhaseObserver | None = None
    # Fault hooks (issue 19, ``FaultHooks``): acknowledge early after this phase; a rewritten step order.
    early_ack: tuple[str, Callable[[], None]] | None = None
    reorder: Callable[[Iterator[Step]], Iterator[Step]] | None = None

    def steps(self) -> Iterator[Step]:
        if self.head is None:
            yield Step("stage", stage_batch, (self.store, self.batch), self._set("staged"), True)
            assert self.staged is not None
            yield Step("hash", hash_staged, (self.batch, self.staged), self._set("hashed"), True)
            assert self.hashed is not None
            yield Step("select", select_changes, (self.batch, self.staged, self.hashed, self.known),
                       self._set("selection"), False)
            assert self.selection is not None
            if self.selection.manifest is None:
                self.outcome = "noop"
                yield Step("finish", remove_staging, (self.store.fs, self.batch.staging_dir), _ignore, True)
                yield Step("finish", self.on_noop, (self,), _ignore, False)
                return
            yield Step("commit", commit_selection, (self.store, self.selection), self._set("head"), True)
        assert self.head is not None
        yield Step("adopt", adopt_head, (self.store, self.head, self.batch.base, self.lease, self.batch.staging_dir),
                   self._mark_adopted, True)
        yield Step("finish", self.on_adopted, (self,), _ignore, False)

    def _set(self, attribute: str) -> Callable[[Any], None]:
        def accept(value: Any) -> None:
            setattr(self, attribute, value)

        return accept

    def _mark_adopted(self, head: HeadRef) -> None:
        self.head = head
        self.adopted = True
        self.outcome = "adopted"


    def report(self) -> PublicationReport:
        phases = dict(self.phases_ms)
        main, driver = thread_times(phases, self.main_ms, self.batch.freeze_ms)
        return PublicationReport(
            id=self.batch.id,
            kind=self.batch.kind,
            outcome=self.outcome,
            phases_ms=phases,
            changed=self.selection.changed if self.selection else (),
            new_chunks=len(self.selection.fresh) if self.selection else 0,
            staged_bytes=self.staged.nbytes if self.staged else 0,
            hashed_bytes=self.hashed.hashed_bytes if self.hashed else 0,
            seq=self.head.seq if self.adopted and self.head else None,
            error=None if self.error is None else f"{type(self.error).__name__}: {self.error}",
            failed_phase=self.failed_phase,
            main_thread_ms=main,
            driver=driver,
        )


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


def driven_steps(publication: Any) -> Iterator[Step]:
    """The steps a driver runs: the publication's own, in the order a fault hook may rewrite."""
    steps = publication.steps()
    return publication.reorder(steps) if publication.reorder is not None else steps


def step_done(publication: Any, phase: str) -> None:
    """After a step succeeded: a fault hook's early acknowledgement, when it is due after this phase."""
    early = publication.early_ack
    if early is not None and early[0] == phase:
        publication.early_ack = None
        early[1]()


def mark_failed(publication: Publication, phase: str, exc: BaseException) -> None:
    if publication.adopted:
        # Failure after adoption is durable and only logged (E4).
        publication.error = exc
        return
    publication.outcome = "failed"
    publication.error = exc
    publication.failed_phase = phase


def staging_dir_for(store: GenerationStore, publication_id: str) -> str:
    return store.path(STAGING, publication_id)


__all__ = ["PHASES", "Batch", "Publication", "PublicationReport", "SaveFailed", "StaleHead", "Step"]
