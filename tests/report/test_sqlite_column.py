"""The SQLite reference in the reports (SPEC section 8): the ``ack/sqlite`` column (synchronous modes over the
synchronous reference, asynchronous ones over the threaded reference), its caption, the evidence sentence and
the bars, all read from the document's own reference modes; without them, no column. Behaviour, not timing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from perfsuite import cli
from perfsuite.report import Result, bars, summary_rows
from perfsuite.report._evidence import evidence
from perfsuite.report._table import sqlite_reference_for, summary_columns
from tests.report.test_evidence import check_provenance

SQLITE = "perfsuite.workloads.sqlite_reference:sqlite_commit"
PARAMS = {"sync": {"path": "sync"}, "async": {"path": "async"}, "publication-floor": {"path": "async"},
          "sqlite": {"path": "sync", "handoff": "inline"}, "sqlite-threaded": {"path": "async", "handoff": "thread"}}


def _doc(docs: Any, *, sync_ack: float = 6.0, async_ack: float = 9.0, references: tuple[str, ...] = (
        "sqlite", "sqlite-threaded"), seed: int = 11) -> dict[str, Any]:
    """A mailbox-delivery document with the publication floor and the SQLite references (3.0 and 4.5 ms)."""
    shapes = {k: dict(v) for k, v in docs.new_modes.items()}
    shapes["sync"].update(ack_ms=sync_ack, submission_ms=sync_ack, max_gap_ms=9.0)  # met, as format 2's writer
    shapes["async"]["ack_ms"] = async_ack
    ref = {"max_gap_ms": 7.0, "bytes_written": 0, "stall_ms": 2.0, "operation": SQLITE}
    if "sqlite" in references:
        shapes["sqlite"] = {**ref, "submission_ms": 3.0, "ack_ms": 3.0, "inline": True,
                            "reference": "sqlite3 inline", "metrics": {"record_bytes": 4464, "commits": 1}}
    if "sqlite-threaded" in references:
        shapes["sqlite-threaded"] = {**ref, "submission_ms": 0.05, "ack_ms": 4.5,
                                     "reference": "sqlite3 on one worker thread",
                                     "metrics": {"record_bytes": 4464, "commits": 1}}
    doc = docs.make("mailbox-delivery", shapes, seed=seed, noise=0.0)
    for mode, params in PARAMS.items():  # the run records each mode's parameters (the generator records none)
        if mode in doc["modes"]:
            doc["modes"][mode]["params"] = dict(params)
    return doc


def _row(doc: dict[str, Any], mode: str) -> Any:
    return next(r for r in summary_rows(doc) if r.mode == mode)


def test_the_column_pairs_sync_with_inline_and_async_with_threaded(docs: Any) -> None:
    doc = _doc(docs)
    columns = summary_columns(doc, None)
    assert columns.index("ack/sqlite") == columns.index("ack/pub floor") + 1
    assert _row(doc, "sync").ack_sqlite == "2.0x"  # 6.0 / 3.0 (the synchronous reference)
    assert _row(doc, "async").ack_sqlite == "2.0x"  # 9.0 / 4.5 (the threaded reference)
    assert sqlite_reference_for(doc, "sync").mode == "sqlite"
    assert sqlite_reference_for(doc, "async").mode == "sqlite-threaded"
    # the anchors get no cell; their own ack/pub floor says how far SQLite is from the raw calls (3.0 ms)
    for mode in ("sqlite", "sqlite-threaded", "publication-floor"):
        assert _row(doc, mode).ack_sqlite == ""
    assert _row(doc, "sqlite").ack_publication_floor == "1.0x"
    assert next(r for r in summary_rows(doc) if r.control).ack_sqlite == ""


def test_the_ratio_follows_the_medians(docs: Any) -> None:
    doc = _doc(docs, sync_ack=2.4, async_ack=13.5)
    assert _row(doc, "sync").ack_sqlite == "0.8x" and _row(doc, "async").ack_sqlite == "3.0x"


def test_without_a_sqlite_reference_there_is_no_column(docs: Any) -> None:
    doc = _doc(docs, references=())
    assert "ack/sqlite" not in summary_columns(doc, None)
    assert all(r.ack_sqlite == "" for r in summary_rows(doc))
    # one side only: the other side's modes get no cell (never read against the wrong hand-off)
    doc = _doc(docs, references=("sqlite",))
    assert "ack/sqlite" in summary_columns(doc, None)
    assert _row(doc, "sync").ack_sqlite == "2.0x" and _row(doc, "async").ack_sqlite == ""


def test_report_prints_the_column_and_its_caption_within_a_ci_log(
    tmp_path: Path, docs: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    docs.write(tmp_path / "mailbox-delivery-1.json", _doc(docs))
    docs.write(tmp_path / "fsync-floor-1.json", docs.floor(epoch=1_795_000_050.0))
    assert cli.main(["report", str(tmp_path / "mailbox-delivery-1.json")]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 100  # a CI log's width, the new column included
    header = next(i for i, ln in enumerate(lines) if ln.strip().startswith("mode "))
    assert lines[header - 1].split() == ["ack/fsync", "ack/pub", "ack/"] and "sqlite" in lines[header].split()
    assert "sqlite reference 3.00 ms (median ack of mode sqlite; column ack/sqlite of sync modes)" in out
    assert "sqlite reference 4.50 ms (median ack of mode sqlite-threaded; column ack/sqlite of async modes)" in out
    (sync,) = [ln for ln in lines if ln.strip().startswith("sync ")]
    assert "2.0x" in sync.split()


def test_evidence_names_the_references_and_their_pairs(docs: Any) -> None:
    ev = evidence(Result(None, _doc(docs)))
    text = ev.markdown
    assert check_provenance(ev) == []
    assert ("The SQLite references measured beside the modes (`sqlite3`, `journal_mode=WAL`, `synchronous=FULL`, "
            "one INSERT and COMMIT of the bytes the engine wrote for the same publication") in text
    assert ("`sqlite` committed 4,464 bytes of the record inline on the loop thread and acknowledged in 3.000 ms "
            "(median 3.000 ms), the reference of `sync` (median 6.000 ms)") in text
    assert ("`sqlite-threaded` committed 4,464 bytes of the record on one worker thread with the acknowledgement on "
            "the loop, in 4.500 ms (median 4.500 ms), the reference of `async` (median 9.000 ms)") in text
    assert "SQLite references" not in evidence(Result(None, _doc(docs, references=()))).markdown


def test_bars_read_the_same_pairing(docs: Any) -> None:
    judged = bars([Result(None, _doc(docs, sync_ack=2.4, async_ack=9.0))])
    sync = next(b for b in judged if b.bar == "sync ack within 1.0x synchronous SQLite" and
                b.recipe == "mailbox-delivery")
    asyn = next(b for b in judged if b.bar == "async ack within 1.0x threaded SQLite" and
                b.recipe == "mailbox-delivery")
    assert sync.met is True and sync.measured == "2.40 / 3.00 ms (`sqlite`) = 0.80x"
    assert asyn.met is False and asyn.measured == "9.00 / 4.50 ms (`sqlite-threaded`) = 2.00x"
    judged = bars([Result(None, _doc(docs, references=()))])
    older = next(b for b in judged if b.bar == "sync ack within 1.0x synchronous SQLite" and
                 b.recipe == "mailbox-delivery")
    assert older.met is None and "no SQLite reference" in older.measured
    absent = next(b for b in judged if b.bar == "async ack within 1.0x threaded SQLite" and
                  b.recipe == "root-checkpoint")
    assert absent.met is None and "recipe absent" in absent.measured

