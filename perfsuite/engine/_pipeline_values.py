"""E4: what a publication carries from phase to phase: the frozen batch, each artifact's stage job, the staged
bytes and their digests, the selected changes, and the report; plain values, shared by the phases, the drivers,
the offload (a worker process receives stage jobs) and the session."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from perfsuite.engine._buffer import FrozenText
from perfsuite.engine._logformat import GEN
from perfsuite.engine._logstate import ArtifactState
from perfsuite.engine._logvalues import RecordSpec
from perfsuite.engine._objects import ChunkRef, HashMemo
from perfsuite.engine._sidecar import SidecarCapture


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


__all__ = ["Batch", "Changes", "Hashed", "PublicationReport", "SaveFailed", "Selection", "StageJob", "Staged"]
