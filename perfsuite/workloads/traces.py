"""The event trace format (SPEC section 6): JSON lines, one event each, read with one-line errors.

Each event line is an object with ``time`` (seconds from the trace start), ``session``, ``conversation``,
``kind`` and ``size`` (bytes), plus optional extra fields (``flavour`` for ``activity``). An optional
first line ``{"format": "perfsuite-trace", "version": 1, "duration_s": ..., "meta": {...}}`` is a header.
A kind is one of :data:`KINDS` (what the engine's sessions replay) or a user's own, ``x-NAME`` (a
team's own events, replayed only by its own replay target; the engine's replay leaves them out).
Times and durations are at most a year, an event's ``size`` at most 64 MiB (the replay builds that many
bytes in memory; :data:`perfsuite._limits.LIMITS`); ``NaN``/``Infinity`` and deep nesting are refused.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite._limits import check_limit
from perfsuite.engine import ACTIVITY_FLAVOURS, ROOT, TERMINAL
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import bounded_lines, parse_json

FORMAT = "perfsuite-trace"
VERSION = 1

#: what each kind means when replayed (SPEC E6/E7); ``publication`` is a recorded output, not replayed
KINDS: Mapping[str, str] = {
    "activity": "observational activity change (needs 'flavour'): schedules the debounced registry save (E7)",
    "discard": "explicit mailbox discard: observational, published by the registry save (E7)",
    "mail": "a background completion delivered to the conversation's mailbox (the asynchronous acknowledged"
    " publication, E4; 'path': 'sync' for Session.append_mail), then a wake notification for its waiter (E6)",
    "message": "a streamed message into the conversation's transcript (not gated; dirty until a checkpoint)",
    "save": "an explicit synchronous save (turn commit, settlement): Session.checkpoint(conversation), or"
    " save_registry()/full_save() when 'what' is registry/full; drains the gate and absorbs pending saves (E5, E7)",
    "checkpoint": "an automatic checkpoint requested (Session.request_checkpoint: one accepted per conversation,"
    " coalesced, E7)",
    "spawn": "an agent is spawned (acknowledged: registry entry and first transcript commit together, E3)",
    "settle": "terminal settlement of an agent (needs 'status' done|failed|cancelled; its transcript, metadata and"
    " a RESULT of 'size' bytes commit together, E7)",
    "request-start": "a root or agent request enters flight (starts the in-flight checkpoint timer, E7)",
    "request-end": "a request leaves flight (the timer stops when none is in flight, E7)",
    "notify": "a notification offered (waiter wake or wake offer, E6)",
    "transport-start": "the transport becomes busy (notifications wait, E6)",
    "transport-end": "the transport becomes idle",
    "publication": "recorded output of a real run (ignored by the replay, counted for comparison)",
}
OBSERVATIONAL = frozenset({"activity", "discard"})
#: a user's own kinds: ``x-`` then letters, digits, ``_``, ``.`` or ``-``
USER_KIND_PREFIX = "x-"
_USER_KIND = re.compile(r"x-[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def is_user_kind(kind: str) -> bool:
    """Whether ``kind`` is a user's own (``x-NAME``), not one the engine's sessions replay."""
    return bool(_USER_KIND.fullmatch(kind))


def check_kind(kind: object) -> str | None:
    """Why ``kind`` is no trace kind, or ``None`` when it is one."""
    if isinstance(kind, str) and (kind in KINDS or is_user_kind(kind)):
        return None
    return (f"unknown {kind!r}; expected one of {', '.join(KINDS)}, or a kind of your own named "
            f"{USER_KIND_PREFIX}NAME (letters, digits, _ . -)")


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One event. ``extra`` holds optional fields (``flavour``, ``outcome``...), JSON-able values only."""

    time: float
    session: str
    conversation: str
    kind: str
    size: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def flavour(self) -> str:
        return str(self.extra.get("flavour", ""))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"time": round(self.time, 6), "session": self.session,
                               "conversation": self.conversation, "kind": self.kind, "size": self.size}
        out.update(self.extra)
        return out


@dataclass(frozen=True, slots=True)
class Trace:
    """Events in time order (stable for equal times) and the trace's duration in seconds."""

    events: tuple[TraceEvent, ...]
    duration_s: float
    meta: Mapping[str, Any] = field(default_factory=dict)
    source: str = "<trace>"

    @property
    def sessions(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(e.session for e in self.events))

    def count(self, *kinds: str) -> int:
        return sum(1 for e in self.events if e.kind in kinds)

    def window(self, start_s: float, end_s: float) -> Trace:
        """The events in ``[start_s, end_s)``, re-timed from ``start_s`` (for validating a prefix)."""
        events = tuple(_retime(e, e.time - start_s) for e in self.events if start_s <= e.time < end_s)
        duration = min(self.duration_s, end_s) - start_s
        return Trace(events, max(duration, 0.0), dict(self.meta), f"{self.source}[{start_s:g}s:{end_s:g}s]")

    def compressed(self, factor: float) -> Trace:
        """Every time divided by ``factor`` (the ``--speed`` scaling of ``--validate``)."""
        if not factor > 0:
            raise PerfsuiteError(f"--speed must be > 0, got {factor:g}")
        events = tuple(_retime(e, e.time / factor) for e in self.events)
        return Trace(events, self.duration_s / factor, dict(self.meta), f"{self.source}/{factor:g}")


def _retime(event: TraceEvent, time: float) -> TraceEvent:
    return TraceEvent(time, event.session, event.conversation, event.kind, event.size, event.extra)


def make_trace(events: Iterable[TraceEvent], *, duration_s: float | None = None,
               meta: Mapping[str, Any] | None = None, source: str = "<trace>") -> Trace:
    """Sort events by time (stable) and take the duration from the last event unless given."""
    ordered = tuple(sorted(events, key=lambda e: e.time))
    last = ordered[-1].time if ordered else 0.0
    duration = last if duration_s is None else max(duration_s, last)
    return Trace(ordered, duration, dict(meta or {}), source)


def _fail(source: str, line: int, message: str) -> PerfsuiteError:
    """``SOURCE:LINE: message`` (``SOURCE: message`` for a line number below 1: one event, no file)."""
    return PerfsuiteError(f"{source}:{line}: {message}" if line > 0 else f"{source}: {message}")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def parse_event(record: Any, source: str, line: int) -> TraceEvent:
    """Check one decoded line; every problem is a one-line error naming ``source`` and ``line``."""
    if not isinstance(record, dict):
        raise _fail(source, line, f"expected a JSON object, got {type(record).__name__}")
    missing = [k for k in ("time", "session", "conversation", "kind") if k not in record]
    if missing:
        raise _fail(source, line, f"missing field {missing[0]!r} (every event needs time, session, conversation, "
                                  "kind)")
    time, kind = record["time"], record["kind"]
    if not _number(time) or time < 0:
        raise _fail(source, line, f"time: expected seconds >= 0, got {time!r}")
    problem = check_limit("trace_time_s", float(time))
    if problem:
        raise _fail(source, line, f"time: {problem}")
    for key in ("session", "conversation"):
        if not isinstance(record[key], str) or not record[key]:
            raise _fail(source, line, f"{key}: expected a non-empty string, got {record[key]!r}")
    problem = check_kind(kind)
    if problem:
        raise _fail(source, line, f"kind: {problem}")
    size = record.get("size", 0)
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise _fail(source, line, f"size: expected bytes (an integer >= 0), got {size!r}")
    problem = check_limit("trace_size", size)  # the replay builds `size` bytes in memory (MemoryError)
    if problem:
        raise _fail(source, line, f"size: {problem}")
    extra = {k: v for k, v in record.items() if k not in ("time", "session", "conversation", "kind", "size")}
    if kind == "activity":
        flavour = extra.get("flavour")
        if flavour not in ACTIVITY_FLAVOURS:
            raise _fail(source, line, f"activity: flavour must be one of {', '.join(sorted(ACTIVITY_FLAVOURS))}, "
                                      f"got {flavour!r}")
        if record["conversation"] == ROOT:
            raise _fail(source, line, "activity: the root conversation has no activity flavour; name an agent")
    if kind in ("spawn", "settle") and record["conversation"] == ROOT:
        raise _fail(source, line, f"{kind}: name an agent, not the root conversation")
    if kind == "settle" and extra.get("status", "done") not in TERMINAL:
        raise _fail(source, line, f"settle: status must be one of {', '.join(sorted(TERMINAL))}, "
                                  f"got {extra.get('status')!r}")
    if kind == "mail" and extra.get("path", "async") not in ("async", "sync"):
        raise _fail(source, line, f"mail: path must be async or sync, got {extra.get('path')!r}")
    if kind == "save" and extra.get("what", "checkpoint") not in ("checkpoint", "registry", "full"):
        raise _fail(source, line, f"save: what must be checkpoint, registry or full, got {extra.get('what')!r}")
    return TraceEvent(float(time), record["session"], record["conversation"], kind, size, extra)


def _header(record: Mapping[str, Any], source: str, line: int) -> tuple[float | None, dict[str, Any]]:
    if record.get("format") != FORMAT:
        raise _fail(source, line, f"header: format must be {FORMAT!r}, got {record.get('format')!r}")
    if record.get("version") != VERSION:
        raise _fail(source, line, f"header: unsupported version {record.get('version')!r} (this reader: {VERSION})")
    duration = record.get("duration_s")
    if duration is not None and (not _number(duration) or duration < 0):
        raise _fail(source, line, f"header: duration_s: expected seconds >= 0, got {duration!r}")
    if duration is not None and check_limit("trace_time_s", float(duration)):
        raise _fail(source, line, f"header: duration_s: {check_limit('trace_time_s', float(duration))}")
    meta = record.get("meta", {})
    if not isinstance(meta, dict):
        raise _fail(source, line, f"header: meta: expected an object, got {type(meta).__name__}")
    return (None if duration is None else float(duration)), meta


def parse_lines(lines: Iterable[str], source: str = "<trace>") -> Trace:
    """Parse JSON lines (blank lines skipped); see :func:`read_trace`."""
    events: list[TraceEvent] = []
    duration: float | None = None
    meta: dict[str, Any] = {}
    seen_any = False
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        record = parse_json(text, f"{source}:{number}")  # strict: NaN, Infinity and deep nesting refused
        if isinstance(record, dict) and "format" in record and "kind" not in record:
            if seen_any:
                raise _fail(source, number, "the header must be the first line")
            duration, meta = _header(record, source, number)
        else:
            events.append(parse_event(record, source, number))
        seen_any = True
    return make_trace(events, duration_s=duration, meta=meta, source=source)


def read_trace(path: str | os.PathLike[str]) -> Trace:
    """Read a trace file. Malformed lines raise :class:`PerfsuiteError` as ``FILE:LINE: problem``;
    events may come in any order (recorded multi-process traces) and are sorted stably by time."""
    source = os.fspath(path)
    try:  # a regular file within LIMITS["document_bytes"] only: a FIFO or /dev/zero is one line, never a hang
        return parse_lines(bounded_lines(source, "trace file"), source)
    except OSError as exc:
        raise PerfsuiteError(f"{source}: cannot read: {exc.strerror or exc}") from None


def trace_lines(trace: Trace) -> Iterator[str]:
    """The header and one line per event (no trailing newlines)."""
    header = {"format": FORMAT, "version": VERSION, "duration_s": round(trace.duration_s, 6), "meta": dict(trace.meta)}
    yield json.dumps(header, sort_keys=True)
    for event in trace.events:
        yield json.dumps(event.to_json(), sort_keys=True)


def write_trace(trace: Trace, path: str | os.PathLike[str]) -> Path:
    """Write ``trace`` as JSON lines (header first)."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(line + "\n" for line in trace_lines(trace)), encoding="utf-8")
    except OSError as exc:
        raise PerfsuiteError(f"{target}: cannot write the trace: {exc.strerror or exc}") from None
    return target
