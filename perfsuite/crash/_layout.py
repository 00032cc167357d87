"""The portable session's on-disk format, read independently of the engine (invariant 3, the corruption
campaign's expectations): HEAD, the manifest it names, and where each chunk lives.

Format 1: ``objects/manifest-*.json`` manifests and loose ``objects/<sha256>`` chunks. Format 2 (issue 21):
``pack-*.pack`` files in the session directory: the new chunks, the manifest, and a fixed-size trailer
``\\nPSPACK2 <manifest offset:16> <manifest length:16> <sha256 of the manifest>\\n``; a chunk reference
``[digest, size, pack, offset]`` is located in a pack, ``[digest, size]`` is a loose chunk.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

MAGIC = b"\nPSPACK2 "
TRAILER = len(MAGIC) + 16 + 1 + 16 + 1 + 64 + 1


def manifest_of(name: str, data: bytes) -> bytes:
    """The manifest bytes of a generation file (a pack's manifest, or a format-1 manifest as is);
    ValueError when a pack has no intact trailer."""
    if not name.endswith(".pack"):
        return data
    if len(data) < TRAILER or data[-TRAILER:][: len(MAGIC)] != MAGIC:
        raise ValueError("pack without a trailer")
    offset, length, _digest = data[-TRAILER + len(MAGIC) : -1].split(b" ")
    return data[int(offset) : int(offset) + int(length)]


def chunk_location(prefix: str, item: list) -> tuple[str, int]:
    """(path of the file holding the chunk, offset in it) for a manifest's chunk reference."""
    if len(item) >= 4 and item[2]:
        return f"{prefix}{item[2]}", int(item[3])
    return f"{prefix}objects/{item[0]}", 0


def chunk_bytes(files: Mapping[str, bytes | None], prefix: str, item: list) -> bytes | None:
    """A chunk's bytes as the tree holds them (None: its file is missing)."""
    path, offset = chunk_location(prefix, item)
    data = files.get(path)
    if data is None:
        return None
    return data[offset : offset + int(item[1])] if len(item) >= 4 and item[2] else data


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
