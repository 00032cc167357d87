"""E8: diagnostic logs append exactly their delta through a pinned directory descriptor."""

from __future__ import annotations

import os

from perfsuite.engine import DiagnosticLog, FullRewriteLog, OsFileSystem, read_log
from perfsuite.engine.testing import RecordingFileSystem


def test_delta_append_writes_exactly_the_delta_through_one_pinned_dir(tmp_path):
    fs = RecordingFileSystem(OsFileSystem())
    log = DiagnosticLog(tmp_path / "logs", fs=fs)
    for i in range(1000):
        log.log("telemetry.jsonl", {"i": i, "payload": "x" * 100})
    first = log.flush()
    size_after_first = os.path.getsize(tmp_path / "logs" / "telemetry.jsonl")
    mark = fs.mark()
    log.log("telemetry.jsonl", {"i": "delta"})
    delta = log.flush()
    ops = fs.since(mark)
    assert first == size_after_first
    assert delta == os.path.getsize(tmp_path / "logs" / "telemetry.jsonl") - size_after_first
    assert [op.kind for op in ops] == ["write"] and ops[0].length == delta  # no open, no read, no rewrite
    assert sum(op.kind == "open" for op in fs.ops) == 1
    log.close()


def test_full_rewrite_baseline_rewrites_everything(tmp_path):
    fs = RecordingFileSystem(OsFileSystem())
    log = FullRewriteLog(tmp_path / "logs", fs=fs)
    for i in range(100):
        log.log("t.jsonl", {"i": i})
    log.flush()
    log.log("t.jsonl", {"i": "delta"})
    assert log.flush() == os.path.getsize(tmp_path / "logs" / "t.jsonl")


def test_reader_skips_a_torn_tail(tmp_path):
    with DiagnosticLog(tmp_path / "logs") as log:
        log.log("t.jsonl", {"i": 1})
        log.log("t.jsonl", {"i": 2})
    with open(tmp_path / "logs" / "t.jsonl", "ab") as handle:
        handle.write(b'{"i": 3, "tor')
    assert read_log(tmp_path / "logs" / "t.jsonl") == [{"i": 1}, {"i": 2}]
