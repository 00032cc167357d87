"""The seven kinds of damage of the corruption campaign (issue 14), applied to a real tree.

Each kind is deterministic (``seed`` and the target's path choose the garbage and the flipped byte), so
a case can be rebuilt exactly for ``--keep``. A directory can be deleted, replaced by a regular file of
garbage, or replaced by a symbolic link to nowhere; a file can also be truncated (to 0 or to half),
have one byte flipped (XOR 0xFF) or be replaced by an empty directory.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil

KINDS = ("delete", "truncate-0", "truncate-half", "garbage", "flip", "directory", "symlink")
DIRECTORY_KINDS = ("delete", "garbage", "symlink")
NONE = "none"  # no damage: the baseline case of an owner that crashed with everything flushed
NOWHERE = ".nowhere"  # symbolic links point under this name, which never exists


def applicable(kind: str, is_dir: bool, size: int) -> bool:
    """Whether ``kind`` means something for this entry (a flip needs a byte, a half needs two)."""
    if is_dir:
        return kind in DIRECTORY_KINDS
    return not (kind == "flip" and size < 1) and not (kind == "truncate-half" and size < 2)


def _rng(seed: int, target: str) -> random.Random:
    return random.Random(int.from_bytes(hashlib.sha256(f"{seed}:{target}".encode()).digest()[:8], "big"))


def flip_offset(seed: int, target: str, size: int) -> int:
    """The byte a flip changes."""
    return _rng(seed, target).randrange(size)


def garbage(seed: int, target: str, size: int) -> bytes:
    """Random bytes of the same size (at least 16): what a misdirected write leaves."""
    return _rng(seed, f"garbage:{target}").randbytes(max(16, size))


def damaged_range(kind: str, seed: int, target: str, size: int) -> tuple[int, int]:
    """Bytes of the original file the damage destroyed, as ``[start, end)``."""
    if kind == "flip":
        offset = flip_offset(seed, target, size)
        return offset, offset + 1
    if kind == "truncate-half":
        return size // 2, size
    if kind == NONE:
        return size, size
    return 0, size


def apply(root: str, target: str, kind: str, seed: int) -> None:
    """Damage ``root/target`` (a path relative to the workload root, ``/``-separated) in place."""
    path = os.path.join(root, *target.split("/"))
    is_dir = os.path.isdir(path) and not os.path.islink(path)
    if kind == NONE:
        return
    if kind in ("delete", "garbage", "directory", "symlink"):
        size = 0 if is_dir else os.path.getsize(path)
        if is_dir:
            shutil.rmtree(path)
        else:
            os.remove(path)
        if kind == "garbage":
            with open(path, "wb") as handle:
                handle.write(garbage(seed, target, size))
        elif kind == "directory":
            os.mkdir(path)
        elif kind == "symlink":
            os.symlink(os.path.join(root, NOWHERE, os.path.basename(path)), path)
        return
    with open(path, "r+b") as handle:
        size = os.fstat(handle.fileno()).st_size
        if kind == "truncate-0":
            handle.truncate(0)
        elif kind == "truncate-half":
            handle.truncate(size // 2)
        elif kind == "flip":
            offset = flip_offset(seed, target, size)
            handle.seek(offset)
            byte = handle.read(1)
            handle.seek(offset)
            handle.write(bytes([byte[0] ^ 0xFF]))
        else:
            raise ValueError(f"unknown damage {kind!r}")
