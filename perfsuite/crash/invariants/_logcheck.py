"""An independent reader of format 2's session log for invariant 3 (SPEC 7.3): the checker
parses HEAD and the log itself, from the documented framing, without the engine's code, so an engine bug
in its own reader cannot hide from the check.

Framing (docs/engine.md, "Session format and its version"): a 512-byte header (magic ``PSLOG\\x02\\r\\n``, u32 length,
u32 crc32, JSON); 8-aligned records of a 40-byte header (``PSR2``, type, flags, 0, body length, salt, seq,
epoch, crc32 of the first 32 bytes, 0), a body (u32 meta length, meta JSON, payload), zero padding, and a
48-byte trailer (sha256 of header and body, seq, end magic).
"""

from __future__ import annotations

import binascii
import hashlib
import itertools
import json
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

LOG_MAGIC = b"PSLOG\x02\r\n"
HEADER = 512
REC = struct.Struct("<4sBBHIIQQII")
TRAILER = struct.Struct("<32sQ8s")
END = b"\xa5PSR2\x5a\xc3\x3c"
BASE, GEN = 1, 2


@dataclass(frozen=True, slots=True)
class Rec:
    kind: int
    seq: int
    epoch: int
    offset: int
    end: int
    meta: Mapping[str, Any]
    digest: str


def head_check(fields: Mapping[str, Any]) -> str:
    """HEAD's checksum of its other fields."""
    body = {k: v for k, v in fields.items() if k != "check"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def log_header(data: bytes) -> dict[str, Any] | None:
    if len(data) < HEADER or data[:8] != LOG_MAGIC:
        return None
    length, crc = struct.unpack_from("<II", data, 8)
    body = data[16 : 16 + length]
    if 16 + length > HEADER or binascii.crc32(body) != crc or any(data[16 + length : HEADER]):
        return None
    try:
        record = json.loads(body)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def records(data: bytes, salt: int) -> tuple[list[Rec], int]:
    """The valid records from byte 512 on, and the offset where they stop."""
    out: list[Rec] = []
    offset = HEADER
    while offset + REC.size <= len(data):
        magic, kind, _flags, zero, length, rsalt, seq, epoch, crc, reserved = REC.unpack_from(data, offset)
        if magic != b"PSR2" or zero or reserved or binascii.crc32(data[offset : offset + 32]) != crc or rsalt != salt:
            break
        body_end = offset + REC.size + length
        end = (body_end + 7) // 8 * 8 + TRAILER.size
        if end > len(data):
            break
        sha, tseq, tail = TRAILER.unpack_from(data, end - TRAILER.size)
        if tail != END or tseq != seq or any(data[body_end : end - TRAILER.size]):
            break
        if hashlib.sha256(data[offset:body_end]).digest() != sha:
            break
        (meta_length,) = struct.unpack_from("<I", data, offset + REC.size)
        try:
            meta = json.loads(data[offset + REC.size + 4 : offset + REC.size + 4 + meta_length])
        except ValueError:
            break
        out.append(Rec(kind, seq, epoch, offset, end, meta, sha.hex()))
        offset = end
    return out, offset


def logs_of(store: Any) -> Iterator[tuple[int, dict[str, Any], list[Rec]]]:
    """Every readable log of a format-2 store, in number order: (number, header, valid records); a log that
    cannot be read or whose header does not verify is skipped (the seeded recoveries walk them so)."""
    for number in store.log_numbers():
        try:
            data = store.fs.read(store.log_path(number))
        except OSError:
            continue
        header = log_header(data)
        if header is not None:
            yield number, header, records(data, int(str(header.get("salt", "0" * 8))[:8], 16))[0]


def head_problems(files: Mapping[str, bytes | None], prefix: str, acked: int, loaded: Any = None) -> Iterator[str]:
    """Invariant 3 in format 2: HEAD names a log that exists, whose header names this session, number and
    salt and whose size is its capacity, whose records chain (a BASE with HEAD's seq, then GENs by seq,
    parent digest and non-decreasing epoch) with only zeros after them (recovery left no torn tail), whose
    BASE's referenced logs exist; its newest generation is not older than the newest acknowledged one and
    is the one the engine loaded."""
    raw = files.get(f"{prefix}HEAD")
    if raw is None:
        if acked:
            yield f"HEAD is missing although generation {acked} was acknowledged"
        if loaded is not None:
            yield f"HEAD is missing but the engine loaded generation {loaded[0]}"
        return
    try:
        head = json.loads(raw)
        number, salt, capacity, base_seq = int(head["number"]), str(head["salt"]), int(head["capacity"]), int(
            head["base_seq"])
        log, session = str(head["log"]), str(head["session"])
    except (ValueError, KeyError, TypeError) as exc:
        yield f"HEAD is not a valid format-2 head record ({type(exc).__name__})"
        return
    if head.get("check") != head_check(head):
        yield "HEAD's checksum does not match its fields"
        return
    data = files.get(f"{prefix}{log}")
    if data is None:
        yield f"HEAD names {log}, which does not exist"
        return
    header = log_header(data)
    if header is None:
        yield f"HEAD names {log}, whose header does not verify"
        return
    if (header.get("log"), header.get("salt"), header.get("session")) != (number, salt, session):
        yield f"HEAD names {log}, whose header names another log or session"
        return
    if len(data) != capacity or int(header.get("capacity", -1)) != capacity:
        yield f"{log} is {len(data)} bytes, its capacity is {capacity}"
        return
    chain, end = records(data, int(salt[:8], 16))
    if not chain or chain[0].kind != BASE or chain[0].seq != base_seq:
        yield f"{log} does not start with the BASE record HEAD names (seq {base_seq})"
        return
    for previous, record in itertools.pairwise(chain):
        if record.kind != GEN or record.seq != previous.seq + 1 or record.meta.get("parent") != previous.digest:
            yield f"{log}: the record at byte {record.offset} does not follow the one before it"
            return
        if record.epoch < previous.epoch:
            yield f"{log}: the record at byte {record.offset} has an older epoch than the one before it"
            return
    if any(data[end:]):
        yield f"{log}: bytes after its last valid record (byte {end}) are not zeros: a torn or damaged tail left"
    for older in dict(chain[0].meta.get("logs", {})):
        name = f"log/{int(older):08d}.log"
        if name != log and files.get(f"{prefix}{name}") is None:
            yield f"{log}'s BASE references {name}, which does not exist"
    generation = int(chain[-1].meta.get("generation", -1))
    if generation < acked:
        yield f"recovered generation {generation} is older than the acknowledged generation {acked}"
    if loaded is not None and int(loaded[0]) != generation:
        yield f"the engine loaded generation {loaded[0]}, HEAD's log holds generation {generation}"


__all__ = ["head_problems", "log_header", "records"]
