"""Format 2's names and values: a log's file name and number, HEAD's record (checksummed), the open log's
identity, tail and health, a record to place and where it went, and what open found. Below every part of the
log store, so the parts and the session name them without importing the store."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from perfsuite.engine._layout import FORMAT, LOG_DIR, SessionError, format_version
from perfsuite.engine._logformat import LOG_HEADER_SIZE, LogHeader, Tail, salt32
from perfsuite.engine._logstate import LogState

DEFAULT_CAPACITY = 16 * 1024 * 1024
_LOG_RE = re.compile(r"(\d{8})\.log$")


def log_name(number: int) -> str:
    return f"{LOG_DIR}/{number:08d}.log"


def log_number(name: str) -> int | None:
    match = _LOG_RE.fullmatch(os.path.basename(name))
    return int(match.group(1)) if match else None


@dataclass(frozen=True, slots=True)
class HeadV2:
    """HEAD in format 2: which log is current, who it belongs to, and a checksum of these fields."""

    session: str
    number: int
    salt: str
    capacity: int
    base_seq: int  # seq of the log's BASE record
    generation: int  # the generation its BASE holds
    epoch: int

    @property
    def log(self) -> str:
        return log_name(self.number)

    def _fields(self) -> dict[str, Any]:
        return {"format": FORMAT, "session": self.session, "log": self.log, "number": self.number,
                "salt": self.salt, "capacity": self.capacity, "base_seq": self.base_seq,
                "generation": self.generation, "epoch": self.epoch}

    def encode(self) -> bytes:
        fields = self._fields()
        check = hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
        return json.dumps({**fields, "check": check}, sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes, path: str) -> HeadV2:
        """A format-2 HEAD; FormatTooNew for a newer format, ValueError for any damage (its checksum)."""
        record = json.loads(data)
        if not isinstance(record, dict):
            raise ValueError("not a perfsuite HEAD")
        format_version(record.get("format"), path)
        try:
            head = cls(str(record["session"]), int(record["number"]), str(record["salt"]), int(record["capacity"]),
                       int(record["base_seq"]), int(record["generation"]), int(record["epoch"]))
        except (KeyError, TypeError, OverflowError) as exc:
            raise ValueError(f"not a head record ({type(exc).__name__})") from None
        fields = head._fields()
        check = hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
        if record.get("check") != check or record.get("log") != head.log:
            raise ValueError("its checksum does not match its fields")
        return head


@dataclass(frozen=True, slots=True)
class StorageStats:
    """A format-2 session's disk use (``Session.storage()``): logs on disk, bytes they allocate (their
    preallocated capacities), bytes in use (records), bytes the committed state references (live), the
    artifacts' total size, and this process's bytes appended and roll-overs. Space amplification is
    ``allocated / artifacts`` (what the disk holds per byte of session) or ``used / live``."""

    logs: int
    allocated: int
    used: int
    live: int
    artifacts: int
    appended: int
    rolled: int

    @property
    def amplification(self) -> float | None:
        return self.allocated / self.artifacts if self.artifacts else None


@dataclass(frozen=True, slots=True)
class GenerationRef:
    """The session's committed generation (``Session.head``): its number, the digest of the record that
    made it, the epoch it was written in and the log it is in."""

    seq: int
    digest: str | None
    epoch: int
    log: int


@dataclass
class OpenLog:
    """The log the session appends to: its identity, descriptor (flock-ed), tail and health."""

    header: LogHeader
    path: str
    fd: int | None
    tail: int
    poisoned: str | None = None  # why it may no longer be synced or appended to (fsyncgate)
    base_end: int = LOG_HEADER_SIZE  # where its BASE (and the records it carried) end: the room starts there

    @property
    def filled(self) -> float:
        """How much of the room after its BASE the appended records use (0..1): roll-overs are due at 0.75."""
        room = self.header.capacity - self.base_end
        return (self.tail - self.base_end) / room if room > 0 else 1.0

    @property
    def number(self) -> int:
        return self.header.number

    @property
    def salt(self) -> int:
        return salt32(self.header.salt)


@dataclass(frozen=True, slots=True)
class RecordSpec:
    """A record to place: its kind, epoch and generation, its meta (the parent is added when it is placed:
    a roll-over puts a BASE before it) and its payload."""

    kind: int
    epoch: int
    meta: Mapping[str, Any]
    payload: bytes = b""


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a record went: its log, offset, seq and digest, and the absolute offset of its payload."""

    log: int
    offset: int
    size: int
    seq: int
    digest: str
    payload: int


@dataclass
class Loaded:
    """What open found: the committed state, every artifact's verified bytes, the current log's tail
    (``torn``: a torn unacknowledged record to drop) and one-line problems."""

    head: HeadV2
    state: LogState
    contents: dict[str, bytes]
    torn: Tail | None
    problems: list[str] = field(default_factory=list)


class OwnerConflictFenced(SessionError):
    """The lease no longer names this owner: fenced before acknowledging (E3)."""


def _placements(log: int, offset: int, chunks: Sequence[bytes], info: Sequence[tuple[int, str, int]]
                ) -> list[Placement]:
    out = []
    for data, (seq, digest, payload) in zip(chunks, info):
        out.append(Placement(log, offset, len(data), seq, digest, offset + payload))
        offset += len(data)
    return out


__all__ = ["DEFAULT_CAPACITY", "GenerationRef", "HeadV2", "Loaded", "OpenLog", "OwnerConflictFenced", "Placement",
           "RecordSpec", "StorageStats", "log_name", "log_number"]
