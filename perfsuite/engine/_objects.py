"""E3/E4: content-addressed chunks and incremental hashing.

A manifest lists each artifact as a list of chunks; an append-only transcript republishes only its
changed tail chunk. ``chunk_size == 0`` means one chunk per artifact, the whole-artifact design of the
seed. Hasher state is kept at the committed end of an artifact's last chunk so a growing tail is
hashed from where the last commit stopped, never from its beginning (E4 hash phase).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

HASH_NAME = "sha256"


@dataclass(frozen=True, slots=True)
class ChunkRef:
    digest: str
    size: int

    def to_json(self) -> list[Any]:
        return [self.digest, self.size]


@dataclass(frozen=True, slots=True)
class ArtifactEntry:
    """What a manifest says about one artifact: its chunks, in order, and its total size."""

    chunks: tuple[ChunkRef, ...]
    size: int

    def to_json(self) -> dict[str, Any]:
        return {"size": self.size, "chunks": [c.to_json() for c in self.chunks]}

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> ArtifactEntry:
        chunks = tuple(ChunkRef(str(d), int(n)) for d, n in record["chunks"])
        if any(len(c.digest) != 64 or c.digest.strip("0123456789abcdef") or c.size < 0 for c in chunks):
            raise ValueError("a chunk reference is not a sha256 digest and a size")  # never a path elsewhere
        size = int(record["size"])
        if sum(c.size for c in chunks) != size:
            raise ValueError("chunk sizes do not add up to the artifact size")
        return cls(chunks, size)


@dataclass(frozen=True, slots=True)
class HashMemo:
    """Hasher state after ``offset`` bytes of the chunk that starts at ``chunk_start`` (the last chunk)."""

    chunk_start: int
    offset: int
    state: Any  # a hashlib object; only ever .copy()'d, never updated in place


def chunk_start_for(offset: int, chunk_size: int) -> int:
    """Start of the chunk containing ``offset`` (0 in whole-artifact mode)."""
    if chunk_size <= 0:
        return 0
    return offset - offset % chunk_size


def digest_bytes(data: bytes | memoryview) -> str:
    return hashlib.new(HASH_NAME, data).hexdigest()


@dataclass(frozen=True, slots=True)
class HashedTail:
    """The digests of the chunks from ``start`` on, and the memo for the next publication."""

    chunks: tuple[ChunkRef, ...]
    memo: HashMemo | None
    hashed_bytes: int


def hash_tail(
    data: bytes,
    start: int,
    chunk_size: int,
    *,
    clean_prefix_end: int,
    memo: HashMemo | None,
) -> HashedTail:
    """Digest ``data`` (the artifact's bytes from chunk-aligned ``start``) chunk by chunk.

    ``clean_prefix_end`` is the earliest offset that may differ from the committed bytes; a memo whose
    offset lies in ``[start, clean_prefix_end]`` resumes the first chunk's hasher instead of rehashing.
    """
    total = start + len(data)
    view = memoryview(data)
    chunks: list[ChunkRef] = []
    position = start
    hashed = 0
    new_memo: HashMemo | None = None
    while position < total:
        end = total if chunk_size <= 0 else min(total, position + chunk_size)
        resume = (
            memo is not None
            and position == start
            and memo.chunk_start == position
            and position <= memo.offset <= min(clean_prefix_end, end)
        )
        if resume:
            assert memo is not None
            hasher = memo.state.copy()
            piece = view[memo.offset - start : end - start]
        else:
            hasher = hashlib.new(HASH_NAME)
            piece = view[position - start : end - start]
        hasher.update(piece)
        hashed += len(piece)
        if end == total:
            new_memo = HashMemo(position, end, hasher.copy())
        chunks.append(ChunkRef(hasher.hexdigest(), end - position))
        position = end
    return HashedTail(tuple(chunks), new_memo, hashed)


def reuse_prefix(base: ArtifactEntry | None, start: int) -> tuple[ChunkRef, ...]:
    """The committed chunks entirely before ``start`` (which is chunk-aligned)."""
    if base is None or start == 0:
        return ()
    kept: list[ChunkRef] = []
    offset = 0
    for chunk in base.chunks:
        if offset + chunk.size > start:
            break
        kept.append(chunk)
        offset += chunk.size
    if offset != start:
        raise ValueError("staging start is not on a committed chunk boundary")
    return tuple(kept)


def new_chunks(chunks: Sequence[ChunkRef], known: set[str] | frozenset[str]) -> list[ChunkRef]:
    """Chunks not already in the object store, deduplicated, in order."""
    seen: set[str] = set()
    fresh: list[ChunkRef] = []
    for chunk in chunks:
        if chunk.digest in known or chunk.digest in seen:
            continue
        seen.add(chunk.digest)
        fresh.append(chunk)
    return fresh
