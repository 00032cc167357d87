"""E4: the base a publication is selected against (the committed state with the changes of the group members
before it laid over it, nothing copied) and what each artifact stages against it: from the first byte that may
differ, rehashed from the chunk boundary before it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from perfsuite.engine._buffer import FrozenText
from perfsuite.engine._logstate import ArtifactState, LogState, doc_value
from perfsuite.engine._objects import HashMemo, chunk_start_for
from perfsuite.engine._pipeline_values import Batch, Changes, StageJob


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


__all__ = ["BaseView", "aligned", "clean_prefix", "stage_jobs"]
