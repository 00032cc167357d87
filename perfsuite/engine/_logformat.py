"""Format 2: the framing of a session log and its records, and what open makes of the first
bytes that are not a valid record (torn tail or damage). Pure functions over bytes; no I/O.

A log (``log/<n>.log``) is preallocated to its capacity and zero-filled before any record goes in (its
name and size are durable first), so a crash on the steady path can only leave "records up to N intact,
N+1 absent or torn" (design 6.4). Layout::

    [0, 512)           log header: LOG_MAGIC | u32 length | u32 crc32 | JSON (format, log number, salt,
                       session id, epoch, capacity, digest of the predecessor's last record) | zeros
    [512, ...)         records, 8-byte aligned, then zeros to the capacity

A record::

    header  (40 B)     REC_MAGIC | u8 type | u8 flags | u16 0 | u32 body length | u32 salt | u64 seq |
                       u64 epoch | u32 crc32 of the 32 bytes before it | u32 0
    body               u32 meta length | meta (compact JSON) | payload (raw bytes: transcript tails inline)
    padding            zeros to the next multiple of 8
    trailer (48 B)     sha256(header || body) | u64 seq | END_MAGIC

The record's digest (the trailer's sha256) is what the next record names as its parent. ``salt`` is the
low 32 bits of the log's random salt, so a record copied from another log never verifies here.
"""

from __future__ import annotations

import binascii
import hashlib
import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

LOG_MAGIC = b"PSLOG\x02\r\n"
LOG_HEADER_SIZE = 512
SECTOR = 512
REC_MAGIC = b"PSR2"
#: no byte is 0x00 (a record whose last byte is zero never finished reaching the disk) and none is 0xff
#: (a flipped byte, XOR 0xff, never turns one into zero)
END_MAGIC = b"\xa5PSR2\x5a\xc3\x3c"
ALIGN = 8

BASE, GEN, EPOCH, CLOSE, SEAL = 1, 2, 3, 4, 5
KINDS = {BASE: "BASE", GEN: "GEN", EPOCH: "EPOCH", CLOSE: "CLOSE", SEAL: "SEAL"}
#: the record holds an aligned 512-byte run of zeros of its own (binary payload): an all-zero sector inside
#: it says nothing about a tear, so only the last-byte rule applies to it
ZERO_SECTORS = 0x01

_HEAD = struct.Struct("<4sBBHIIQQ")  # 32 bytes, covered by the crc
_CRC = struct.Struct("<II")  # crc32, reserved zero
HEADER_SIZE = _HEAD.size + _CRC.size  # 40
#: The header's ranges the log store's ``rezero`` zeroes, back to front, each made durable before the next.
#: A torn write of zeros leaves its first bytes zero and the rest old, so a range may only end at the last
#: nonzero byte and must not cut into what a torn header's prefix is checked by (magic 0-4, type 4, the salt
#: 12-16 once 16 bytes are present): the salt's last byte alone first, the magic byte by byte (a 1-byte write
#: cannot tear).
REZERO_HEADER = ((16, HEADER_SIZE), (15, 16), (5, 15), (4, 5), (3, 4), (2, 3), (1, 2), (0, 1))
_TRAILER = struct.Struct("<32sQ8s")  # 48
TRAILER_SIZE = _TRAILER.size
_META_LEN = struct.Struct("<I")
#: a record's meta encoder, built once (``json.dumps`` with options builds one per call, at every publication)
_META_JSON = json.JSONEncoder(separators=(",", ":"), sort_keys=True)
_LOG_PREFIX = struct.Struct("<8sII")
_ZEROS = bytes(SECTOR)


class LogDamage(ValueError):
    """Bytes of a log that no crash of this engine can produce: one line naming what and where."""


def align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def record_size(body_length: int) -> int:
    """Bytes a record with a body of ``body_length`` bytes occupies in the log (padding included)."""
    return align(HEADER_SIZE + body_length) + TRAILER_SIZE


def salt32(salt: str) -> int:
    """The part of a log's salt every record carries."""
    return int(salt[:8], 16)


# -- the log header ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LogHeader:
    """Who a log belongs to: its number, salt and session, the epoch that created it, its capacity, and
    the digest of its predecessor's last record (None for a session's first log)."""

    format: str
    number: int
    salt: str  # 32 hex digits, random per log
    session: str  # the session's id, the same in HEAD and every log of the session
    epoch: int
    capacity: int
    previous: str | None

    def encode(self) -> bytes:
        body = json.dumps({"format": self.format, "log": self.number, "salt": self.salt, "session": self.session,
                           "epoch": self.epoch, "capacity": self.capacity, "previous": self.previous},
                          separators=(",", ":"), sort_keys=True).encode()
        data = _LOG_PREFIX.pack(LOG_MAGIC, len(body), binascii.crc32(body)) + body
        if len(data) > LOG_HEADER_SIZE:
            raise ValueError("log header does not fit its sector")
        return data + bytes(LOG_HEADER_SIZE - len(data))

    @classmethod
    def decode(cls, data: bytes | memoryview) -> LogHeader:
        """The header of a log's first bytes; :class:`LogDamage` when they are not one (any flipped byte)."""
        head = bytes(data[:LOG_HEADER_SIZE])
        if len(head) < LOG_HEADER_SIZE:
            raise LogDamage(f"shorter than its {LOG_HEADER_SIZE}-byte header ({len(head)} bytes)")
        magic, length, crc = _LOG_PREFIX.unpack_from(head)
        if magic != LOG_MAGIC:
            raise LogDamage("not a perfsuite session log (bad magic)")
        end = _LOG_PREFIX.size + length
        if end > LOG_HEADER_SIZE or binascii.crc32(head[_LOG_PREFIX.size:end]) != crc or head[end:] != bytes(
                LOG_HEADER_SIZE - end):
            raise LogDamage("its header fails its checksum")
        try:
            record = json.loads(head[_LOG_PREFIX.size:end])
            previous = record["previous"]
            return cls(str(record["format"]), int(record["log"]), str(record["salt"]), str(record["session"]),
                       int(record["epoch"]), int(record["capacity"]), None if previous is None else str(previous))
        except (ValueError, KeyError, TypeError) as exc:
            raise LogDamage(f"its header does not decode ({type(exc).__name__})") from None


# -- records ----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Record:
    """One valid record found in a log: where it is, what it says, and where its payload lies."""

    kind: int
    flags: int
    seq: int
    epoch: int
    offset: int
    size: int
    meta: Mapping[str, Any]
    payload_start: int  # absolute offset of the payload in the log
    payload_length: int
    digest: str

    @property
    def end(self) -> int:
        return self.offset + self.size

    @property
    def name(self) -> str:
        return KINDS.get(self.kind, str(self.kind))


def encode_record(kind: int, seq: int, epoch: int, salt: int, meta: Mapping[str, Any],
                  payload: bytes = b"") -> tuple[bytes, str, int]:
    """A record's bytes, its digest and the offset of its payload inside the record."""
    meta_bytes = _META_JSON.encode(meta).encode()
    body_length = _META_LEN.size + len(meta_bytes) + len(payload)
    flags = ZERO_SECTORS if _ZEROS in payload else 0
    head = _HEAD.pack(REC_MAGIC, kind, flags, 0, body_length, salt & 0xFFFFFFFF, seq, epoch)
    header = head + _CRC.pack(binascii.crc32(head), 0)
    body_prefix = _META_LEN.pack(len(meta_bytes)) + meta_bytes
    digest = hashlib.sha256(header)
    digest.update(body_prefix)
    digest.update(payload)
    padding = bytes(align(HEADER_SIZE + body_length) - HEADER_SIZE - body_length)
    trailer = _TRAILER.pack(digest.digest(), seq, END_MAGIC)
    data = b"".join((header, body_prefix, payload, padding, trailer))
    return data, digest.hexdigest(), HEADER_SIZE + len(body_prefix)


@dataclass(frozen=True, slots=True)
class _Header:
    kind: int
    flags: int
    body_length: int
    salt: int
    seq: int
    epoch: int


def _header(data: bytes | memoryview, offset: int) -> _Header | None:
    """The record header at ``offset`` if its magic and checksum hold, else None."""
    if offset + HEADER_SIZE > len(data):
        return None
    head = data[offset : offset + _HEAD.size]
    crc, reserved = _CRC.unpack_from(data, offset + _HEAD.size)
    magic, kind, flags, zero, body_length, salt, seq, epoch = _HEAD.unpack(head)
    if magic != REC_MAGIC or reserved or zero or binascii.crc32(head) != crc:
        return None
    return _Header(kind, flags, body_length, salt, seq, epoch)


def read_record(data: bytes | memoryview, offset: int, salt: int, *, verify: bool = True) -> Record | None:
    """The valid record at ``offset``, or None: any failed check (magic, header checksum, salt, known type,
    size inside the log, zero padding, trailer sequence, end magic, sha256, meta JSON) makes it invalid.
    ``verify`` False skips the sha256 (a seeded bug of the crash checker, never the engine)."""
    head = _header(data, offset)
    if head is None or head.salt != salt & 0xFFFFFFFF or head.kind not in KINDS:
        return None
    size = record_size(head.body_length)
    if offset + size > len(data) or head.body_length < _META_LEN.size:
        return None
    body_end = offset + HEADER_SIZE + head.body_length
    trailer_at = offset + size - TRAILER_SIZE
    sha, seq, end = _TRAILER.unpack_from(data, trailer_at)
    view = memoryview(data)
    if verify and (end != END_MAGIC or seq != head.seq or any(view[body_end:trailer_at])):
        return None
    if verify and hashlib.sha256(view[offset:body_end]).digest() != sha:  # a view: no copy of a large payload
        return None
    (meta_length,) = _META_LEN.unpack_from(data, offset + HEADER_SIZE)
    meta_start = offset + HEADER_SIZE + _META_LEN.size
    if meta_start + meta_length > body_end:
        return None
    try:
        meta = json.loads(bytes(view[meta_start : meta_start + meta_length]))
    except ValueError:
        return None
    if not isinstance(meta, dict):
        return None
    payload_start = meta_start + meta_length
    return Record(head.kind, head.flags, head.seq, head.epoch, offset, size, meta, payload_start,
                  body_end - payload_start, sha.hex())


# -- the tail: clean end, torn record or damage (design 6.4) ----------------------------------------------------
CLEAN, TORN, DAMAGED = "clean", "torn", "damage"


@dataclass(frozen=True, slots=True)
class Tail:
    """What follows the last valid record. ``clean``: zeros to the end. ``torn``: a record whose write a
    crash cut short (its fdatasync never returned, so it was never acknowledged), bytes ``[offset, end)``,
    only zeros after it. ``damage``: anything a crash cannot produce; ``reason`` says what, in one line."""

    kind: str
    offset: int
    end: int
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Scan:
    records: tuple[Record, ...]
    tail: Tail


def content_end(data: bytes) -> int:
    """One past the last nonzero byte (0 for all zeros)."""
    return len(data.rstrip(b"\0"))


def _zero_sector_inside(data: bytes, start: int, end: int) -> bool:
    first = (start + SECTOR - 1) // SECTOR * SECTOR
    return any(data[s : s + SECTOR] == _ZEROS for s in range(first, end - SECTOR + 1, SECTOR))


def _header_prefix(present: bytes, salt: int) -> bool:
    """Whether ``present`` (the nonzero start of a would-be header) can be the first bytes of a header of
    this log cut by a crash: the magic, a known type, zero reserved bytes and this log's salt, as far as
    they reached the disk. A flipped zero byte after a clean end cannot pass this."""
    full = _HEAD.pack(REC_MAGIC, 0, 0, 0, 0, salt & 0xFFFFFFFF, 0, 0)
    n = len(present)
    if present[:4] != REC_MAGIC[: min(4, n)] or (n > 4 and present[4] not in KINDS):
        return False
    if n > 6 and any(present[6:8]):
        return False
    return not (n >= 16 and present[12:16] != full[12:16])


def classify(data: bytes, offset: int, salt: int, *, used: int | None = None) -> Tail:
    """What the bytes at ``offset`` (where the next record would start) are. ``used`` is
    :func:`content_end` of ``data`` when the caller has it. A record is torn only when nothing follows
    it and it shows a crash's mark: its last byte (END_MAGIC's, never zero) is zero, or one of its
    aligned 512-byte sectors is all zeros (etcd's ``isTornEntry``; unless it holds such a sector of its
    own); or its very header was cut. Every other invalid record is damage: a flipped byte (even in the
    last record), data after an invalid record (mid-log damage), a record of another log."""
    used = content_end(data) if used is None else used
    if used <= offset:
        return Tail(CLEAN, offset, offset)
    head = _header(data, offset)
    if head is None:
        if used <= offset + HEADER_SIZE and _header_prefix(data[offset:used], salt):
            return Tail(TORN, offset, used, "a record header cut short")
        return Tail(DAMAGED, offset, used, f"no valid record at byte {offset}, but data follows up to byte {used}")
    if head.salt != salt & 0xFFFFFFFF:
        return Tail(DAMAGED, offset, used, f"the record at byte {offset} belongs to another log (salt)")
    end = offset + record_size(head.body_length)
    if head.kind not in KINDS or end > len(data):
        return Tail(DAMAGED, offset, used, f"the record header at byte {offset} names an impossible record")
    if used > end:
        follows = read_record(data, end, salt)
        what = (f"record {follows.seq} follows it (mid-log damage)" if follows is not None
                else f"data follows it up to byte {used}")
        return Tail(DAMAGED, offset, used, f"the record at byte {offset} (seq {head.seq}) fails its checks and {what}")
    if data[end - 1] == 0 or (not head.flags & ZERO_SECTORS and _zero_sector_inside(data, offset, end)):
        return Tail(TORN, offset, end, f"record {head.seq} was cut short by a crash")
    return Tail(DAMAGED, offset, used, f"the record at byte {offset} (seq {head.seq}) fails its checksum, with no "
                f"mark of a torn write (a flipped byte?)")


def scan(data: bytes, salt: int, start: int = LOG_HEADER_SIZE, *, verify: bool = True,
         damage_as_torn: bool = False) -> Scan:
    """Every valid record from ``start`` on, in order, and what follows them (see :func:`classify`).
    ``verify`` and ``damage_as_torn`` exist for seeded bugs (``FaultHooks``): skip the sha256, call any
    invalid record a torn tail."""
    records: list[Record] = []
    offset = start
    used = content_end(data)
    while True:
        if offset >= used:
            return Scan(tuple(records), Tail(CLEAN, offset, offset))
        record = read_record(data, offset, salt, verify=verify)
        if record is None:
            tail = classify(data, offset, salt, used=used)
            if damage_as_torn and tail.kind == DAMAGED:
                tail = Tail(TORN, offset, used, "taken for a torn tail")
            return Scan(tuple(records), tail)
        records.append(record)
        offset = record.end


def payload_of(data: bytes | memoryview, record: Record) -> memoryview:
    return memoryview(data)[record.payload_start : record.payload_start + record.payload_length]


__all__ = [
    "BASE",
    "CLEAN",
    "CLOSE",
    "DAMAGED",
    "EPOCH",
    "GEN",
    "HEADER_SIZE",
    "LOG_HEADER_SIZE",
    "REZERO_HEADER",
    "SEAL",
    "TORN",
    "TRAILER_SIZE",
    "LogDamage",
    "LogHeader",
    "Record",
    "Scan",
    "Tail",
    "classify",
    "content_end",
    "encode_record",
    "read_record",
    "record_size",
    "salt32",
    "scan",
]
