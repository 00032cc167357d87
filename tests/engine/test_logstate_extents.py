"""The extent walk of format 2's state (O(change) CPU): ``extents_between`` and ``cut`` reuse whole
extents instead of rebuilding them, and must say exactly what the straightforward walk says, for any
artifact (zero-length extents, pieces of many extents), any range and any chunking; and a checkpoint of a
tail chunk fed by many small records builds no new extent objects for the extents it keeps."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from perfsuite.engine._logstate import ArtifactState, Extent, Piece, cut, extents_between, splice
from perfsuite.engine._objects import ChunkRef


def reference_between(artifact: ArtifactState, start: int, end: int) -> list[Extent]:
    """The walk as first written: every overlapping extent clipped to the range, rebuilt."""
    out: list[Extent] = []
    if end <= start:
        return out
    index = len(artifact.pieces)
    offset = artifact.size
    while index > 0 and offset > start:
        index -= 1
        offset -= artifact.pieces[index].size
    for piece in artifact.pieces[index:]:
        for extent in piece.extents:
            lo, hi = max(start, offset), min(end, offset + extent.length)
            if lo < hi:
                out.append(Extent(extent.log, extent.offset + lo - offset, hi - lo))
            offset += extent.length
            if offset >= end:
                return out
    return out


def reference_cut(extents: Sequence[Extent], sizes: Iterable[int]) -> list[tuple[Extent, ...]]:
    out: list[tuple[Extent, ...]] = []
    queue = list(extents)
    position = 0
    for size in sizes:
        piece: list[Extent] = []
        need = size
        while need > 0:
            if position >= len(queue):
                raise ValueError("chunk sizes exceed the bytes written")
            extent = queue[position]
            take = min(need, extent.length)
            piece.append(Extent(extent.log, extent.offset, take))
            if take == extent.length:
                position += 1
            else:
                queue[position] = Extent(extent.log, extent.offset + take, extent.length - take)
            need -= take
        out.append(tuple(piece))
    if position < len(queue):
        raise ValueError("bytes written beyond the chunks that describe them")
    return out


extent = st.builds(Extent, st.integers(1, 4), st.integers(0, 10_000), st.integers(0, 40))
pieces = st.lists(st.lists(extent, min_size=1, max_size=6), max_size=6)


def artifact_of(groups: list[list[Extent]]) -> ArtifactState:
    built = tuple(Piece(f"d{i}", sum(e.length for e in g), tuple(g)) for i, g in enumerate(groups))
    return ArtifactState(sum(p.size for p in built), built)


def outcome(func, *args):  # type: ignore[no-untyped-def]
    try:
        return func(*args)
    except ValueError as exc:
        return ("ValueError", str(exc))


@settings(max_examples=400, deadline=None)
@given(pieces, st.integers(-5, 300), st.integers(-5, 300))
@example([[Extent(1, 0, 1)]], -1, 0)  # found by CI (stop 36): a zero-length extent for a range before byte 0
def test_extents_between_says_what_the_plain_walk_says(groups: list[list[Extent]], start: int, end: int) -> None:
    artifact = artifact_of(groups)
    assert extents_between(artifact, start, end) == reference_between(artifact, start, end)


@pytest.mark.parametrize(("start", "end"), [(-1, 0), (-5, 0), (-3, -1)])
def test_a_range_that_ends_before_the_artifact_holds_no_extent(start: int, end: int) -> None:
    """The counterexample CI's hypothesis run found (stop 36): a range ending at or before byte 0 selects
    nothing; the reusing walk returned one zero-length extent for [-1, 0)."""
    artifact = artifact_of([[Extent(1, 0, 1)], [Extent(2, 7, 3)]])
    assert extents_between(artifact, start, end) == reference_between(artifact, start, end) == []


@settings(max_examples=400, deadline=None)
@given(st.lists(extent, max_size=12), st.lists(st.integers(0, 60), max_size=8))
def test_cut_says_what_the_plain_cut_says(stream: list[Extent], sizes: list[int]) -> None:
    assert outcome(cut, stream, sizes) == outcome(reference_cut, stream, sizes)


def test_a_tail_chunk_of_many_records_keeps_its_extent_objects() -> None:
    """400 small appends to one chunk: the next splice reuses the 400 extents it keeps (O(change) work per
    extent is a reference copy, not a new object)."""
    artifact: ArtifactState | None = None
    size = 0
    for i in range(400):
        grown = size + 100
        artifact = splice(artifact, size, grown, 0, [ChunkRef(f"c{i}", grown)], Extent(1, 1000 * i, 100))
        size = grown
    assert artifact is not None and len(artifact.pieces[0].extents) == 400
    kept = artifact.pieces[0].extents
    after = splice(artifact, size, size + 100, 0, [ChunkRef("last", size + 100)], Extent(1, 999_000, 100))
    assert all(a is b for a, b in zip(after.pieces[0].extents, kept))
    assert after.pieces[0].extents[-1] == Extent(1, 999_000, 100)
