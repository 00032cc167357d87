"""E2: the records of a transcript log as JSON lines: a message, what load found damaged, and the scan
that tells a torn tail from a damaged line in the middle. No I/O."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from perfsuite.engine._damage import DAMAGE


@dataclass(frozen=True, slots=True)
class Message:
    """One transcript entry. ``meta`` carries hidden fields such as mail receipts (E7)."""

    role: str
    content: str
    timestamp: float = 0.0
    meta: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"role": self.role, "content": self.content, "timestamp": self.timestamp}
        if self.meta:
            record["meta"] = dict(self.meta)
        return record

    def encode(self) -> bytes:
        return encode_record(self.to_json())

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> Message:
        meta = record.get("meta")
        if meta is not None and not isinstance(meta, Mapping):
            raise ValueError("meta is not an object")
        return cls(
            role=str(record["role"]),
            content=str(record["content"]),
            timestamp=float(record.get("timestamp", 0.0)),
            meta=meta,
        )

    @property
    def hidden(self) -> bool:
        return bool(self.meta and self.meta.get("hidden"))


def encode_record(record: Mapping[str, Any]) -> bytes:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


@dataclass(frozen=True, slots=True)
class TornTail:
    """What load found after the last complete line of a file, and where it was preserved."""

    path: str
    offset: int
    nbytes: int
    recovery_file: str


@dataclass(frozen=True, slots=True)
class Quarantined:
    """A complete line in the middle of a file that did not decode, and where its bytes were kept. A crash
    only loses or zeroes the unsynced tail, so this is damage: the line is moved under ``recovery/`` and
    every intact line after it stays in the log."""

    path: str
    offset: int
    nbytes: int
    recovery_file: str


class TranscriptError(Exception):
    """A transcript operation failed (or its files are damaged); the message is one line naming the file.
    The turn must not be reported as persisted."""


def scan_lines(data: bytes, decode: Any) -> tuple[list[Any], list[tuple[int, bytes]], int]:
    """Split JSON-lines bytes into decoded records, quarantined lines ``(offset, bytes)`` and the offset
    where the torn tail starts (``len(data)`` when there is none). Only a torn tail is a tail: a last
    line without its newline (a partial append) or a line holding NUL bytes (blocks a crash left
    unwritten read as zeros, and every append after them is as unsynced) ends the log. Any other line
    that does not decode is damage in place: quarantined, and the scan goes on."""
    records: list[Any] = []
    bad: list[tuple[int, bytes]] = []
    offset = 0
    while offset < len(data):
        end = data.find(b"\n", offset)
        if end < 0 or data.find(b"\0", offset, end) >= 0:
            return records, bad, offset
        try:
            records.append(decode(json.loads(data[offset:end])))
        except DAMAGE:
            bad.append((offset, data[offset : end + 1]))
        offset = end + 1
    return records, bad, offset
