"""The kinds of damage of the corruption campaign (both profiles, format 2's session log too), applied to a real tree.

Each kind is deterministic (``seed`` and the target's path choose the garbage and the flipped byte), so
a case can be rebuilt exactly for ``--keep``. A directory can be deleted, replaced by a regular file of
garbage, or replaced by a symbolic link to nowhere; a file can also be truncated (to 0 or to half),
have one byte flipped (XOR 0xFF) or be replaced by an empty directory. A format-2 session log
(``log/<n>.log``, one per era) can also have a byte flipped in its last record (never a tear: a crash leaves
old zeros), be damaged in the middle (an earlier record flipped, valid records after it), be replaced
by a log of another session, or have one letter of its last record's payload change case
(``retype-last-record``: the record still frames and decodes, so only its sha256 tells).
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import struct

KINDS = ("delete", "truncate-0", "truncate-half", "garbage", "flip", "directory", "symlink", "flip-last-record",
         "damage-mid-log", "foreign-log", "retype-last-record")
DIRECTORY_KINDS = ("delete", "garbage", "symlink")
LOG_KINDS = ("flip-last-record", "damage-mid-log", "foreign-log", "retype-last-record")  # session logs only (format 2)
NONE = "none"  # no damage: the baseline case of an owner that crashed with everything flushed
NOWHERE = ".nowhere"  # symbolic links point under this name, which never exists


def is_session_log(target: str) -> bool:
    parts = target.split("/")
    return len(parts) >= 2 and parts[-2] == "log" and parts[-1].endswith(".log")


def applicable(kind: str, is_dir: bool, size: int, target: str = "") -> bool:
    """Whether ``kind`` means something for this entry (a flip needs a byte, a half needs two; the log
    kinds need a session log)."""
    if is_dir:
        return kind in DIRECTORY_KINDS
    if kind in LOG_KINDS:
        return is_session_log(target) and size > 512
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
    if kind in LOG_KINDS:
        _damage_log(path, target, kind, seed)
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


def _damage_log(path: str, target: str, kind: str, seed: int) -> None:
    """The session-log kinds (format 2): a byte of the last record flipped, a byte of an earlier record
    flipped (mid-log damage), or the file replaced by another session's log."""
    from perfsuite.crash.invariants._logcheck import log_header, records

    with open(path, "rb") as handle:
        data = bytearray(handle.read())
    if kind == "foreign-log":
        data = bytearray(foreign_log(seed, int(os.path.basename(path).split(".")[0])))
    else:
        header = log_header(bytes(data)) or {}
        found, _end = records(bytes(data), int(str(header.get("salt", "0" * 8))[:8], 16))
        rng = _rng(seed, f"{kind}:{target}")
        if kind == "retype-last-record" and found:
            data[_payload_letter(bytes(data), found[-1].offset, rng)] ^= 0x20
            with open(path, "wb") as handle:
                handle.write(bytes(data))
            return
        if kind in ("flip-last-record", "retype-last-record") or len(found) < 2:
            chosen = found[-1] if found else None
        else:
            chosen = found[rng.randrange(len(found) - 1)]
        if chosen is None:  # no record: flip the first byte of where one would be
            offset = 512
        else:
            offset = chosen.offset + rng.randrange(chosen.end - chosen.offset)
        data[offset] ^= 0xFF
    with open(path, "wb") as handle:
        handle.write(bytes(data))


def _payload_letter(data: bytes, offset: int, rng: random.Random) -> int:
    """The offset of an ASCII letter in the payload (after the meta JSON) of the record at ``offset``, else in
    its meta: changing its case keeps the record valid JSON and UTF-8, so no framing check notices."""
    from perfsuite.crash.invariants._logcheck import REC

    length = REC.unpack_from(data, offset)[4]
    body = offset + REC.size
    (meta_length,) = struct.unpack_from("<I", data, body)
    for start in (body + 4 + meta_length, body + 4):
        letters = [i for i in range(start, body + length) if chr(data[i]).isascii() and chr(data[i]).isalpha()]
        if letters:
            return letters[rng.randrange(len(letters))]
    return body


def foreign_log(seed: int, number: int = 1) -> bytes:
    """The log ``number`` of another session (deterministic: its ids, salts and clock are seeded), complete
    in itself (compacted: it references no other log): what a user copies over a session's log by mistake.
    Built with the engine itself, in a scratch directory."""
    import itertools
    import tempfile

    from perfsuite.engine import Message, Session, SessionSettings
    from perfsuite.engine.testing import VirtualClock

    rng = random.Random(f"foreign:{seed}")
    ids = itertools.count(1)
    with tempfile.TemporaryDirectory(prefix="perfsuite-foreign-") as work:
        session = Session.open(os.path.join(work, "s"), create=True, clock=VirtualClock(),
                               settings=SessionSettings(log_capacity=12 * 1024, asynchronous=False),
                               id_source=lambda: f"{next(ids):06x}", entropy=lambda: f"{rng.getrandbits(128):032x}")
        session.add_message("root", Message("user", "a message of another session", 1.0))
        session.checkpoint()
        for _ in range(max(0, number - 1)):  # each compaction starts the next log
            session.compact()
        name = session.durable_files()[-1]
        session.close()
        with open(name, "rb") as handle:
            return handle.read()
