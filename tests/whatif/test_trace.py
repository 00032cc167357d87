"""The trace format (SPEC section 6): round trip, ordering, one-line errors naming file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.whatif import TraceEvent, make_trace, parse_lines, read_trace, write_trace


def _line(**fields: object) -> str:
    base: dict[str, object] = {"time": 1.0, "session": "s", "conversation": "agent-1", "kind": "activity",
                               "size": 0, "flavour": "running"}
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not None})


def test_round_trip_keeps_events_extras_and_duration(tmp_path: Path) -> None:
    events = [TraceEvent(2.0, "s", "agent-1", "activity", 0, {"flavour": "running"}),
              TraceEvent(0.5, "s", "root", "message", 1200),
              TraceEvent(1.0, "s", "root", "mail", 300, {"path": "sync"})]
    trace = make_trace(events, duration_s=60.0, meta={"generator": "hand"})
    path = write_trace(trace, tmp_path / "t.jsonl")
    back = read_trace(path)
    assert [e.time for e in back.events] == [0.5, 1.0, 2.0]  # sorted by time
    assert back.events[2].flavour == "running" and back.events[1].extra == {"path": "sync"}
    assert back.duration_s == 60.0 and back.meta == {"generator": "hand"}


def test_without_header_the_duration_is_the_last_event_and_order_is_stable() -> None:
    trace = parse_lines([_line(time=3.0), "", _line(time=1.0, flavour="permission-blocked"), _line(time=1.0)])
    assert trace.duration_s == 3.0
    assert [e.flavour for e in trace.events] == ["permission-blocked", "running", "running"]


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("{not json", "t.jsonl:2: not valid JSON"),
        ("[1, 2]", "t.jsonl:2: expected a JSON object, got list"),
        (_line(session=None), "t.jsonl:2: missing field 'session'"),
        (_line(time=-1), "t.jsonl:2: time: expected seconds >= 0, got -1"),
        (_line(time="soon"), "t.jsonl:2: time: expected seconds >= 0"),
        (_line(kind="teleport"), "t.jsonl:2: kind: unknown 'teleport'"),
        (_line(size=-5), "t.jsonl:2: size: expected bytes"),
        (_line(flavour="sleepy"), "t.jsonl:2: activity: flavour must be one of"),
        (_line(conversation="root"), "t.jsonl:2: activity: the root conversation has no activity flavour"),
        (_line(conversation=""), "t.jsonl:2: conversation: expected a non-empty string"),
        (_line(kind="save", what="everything"), "t.jsonl:2: save: what must be checkpoint, registry or full"),
        (_line(kind="settle", status="maybe"), "t.jsonl:2: settle: status must be one of"),
        ('{"format": "perfsuite-trace", "version": 1}', "t.jsonl:2: the header must be the first line"),
    ],
)
def test_malformed_lines_give_one_line_errors_naming_file_and_line(tmp_path: Path, line: str, fragment: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(_line() + "\n" + line + "\n")
    with pytest.raises(PerfsuiteError) as info:
        read_trace(path)
    message = str(info.value)
    assert fragment in message and "\n" not in message


def test_bad_header_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('{"format": "perfsuite-trace", "version": 9}\n')
    with pytest.raises(PerfsuiteError, match=r"h.jsonl:1: header: unsupported version 9"):
        read_trace(path)
    with pytest.raises(PerfsuiteError, match=r"nope.jsonl: no such trace file"):
        read_trace(tmp_path / "nope.jsonl")


def test_window_and_compression_retime_events() -> None:
    trace = parse_lines([_line(time=10.0), _line(time=70.0), _line(time=130.0)])
    first = trace.window(0.0, 120.0)
    assert [e.time for e in first.events] == [10.0, 70.0] and first.duration_s == 120.0
    fast = first.compressed(10.0)
    assert [e.time for e in fast.events] == [1.0, 7.0] and fast.duration_s == 12.0
