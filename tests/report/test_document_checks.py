"""A results document is untrusted input: its dates are ISO 8601, its epoch a time between 1970 and 2100,
and its verdicts are what its samples say against its recipe's target, whatever the document claims."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from perfsuite import cli
from perfsuite.errors import PerfsuiteError
from perfsuite.report import read_result


def _one_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize(("key", "value", "needle"), [
    ("created_epoch", -1e18, "created_epoch: expected a finite number from 0 to 4102444800 (s), got -1e+18"),
    ("created_epoch", 1e18, "created_epoch: expected a finite number from 0 to 4102444800 (s), got 1e+18"),
    ("created_at", "yesterday at noon", 'created_at: "yesterday at noon" is not an ISO 8601 date and time'),
    ("finished_at", "2026-13-45T99:00:00", "finished_at: \"2026-13-45T99:00:00\" is not an ISO 8601"),
])
def test_nonsense_dates_and_epochs_are_refused_in_one_line(tmp_path: Path, docs: Any,
                                                           capsys: pytest.CaptureFixture[str], key: str,
                                                           value: object, needle: str) -> None:
    doc = docs.make()
    doc[key] = value
    path = docs.write(tmp_path / "doc.json", doc)
    line = _one_error(capsys, ["report", str(path)])
    assert line.startswith(f"perfsuite: error: {path}: results do not match the schema at ") and needle in line


def test_an_environment_date_that_is_not_iso_8601_is_refused(tmp_path: Path, docs: Any) -> None:
    doc = docs.make()
    doc["environment"]["date"] = "last tuesday"
    with pytest.raises(PerfsuiteError, match='environment/date: "last tuesday" is not an ISO 8601'):
        read_result(docs.write(tmp_path / "doc.json", doc))


def test_genuine_dates_and_epochs_still_load(tmp_path: Path, docs: Any) -> None:
    doc = docs.make(date="2026-11-20T10:00:00+00:00", epoch=1_795_000_000.0)
    doc["resumed_at"] = ["2026-11-20T10:05:00+00:00"]
    assert read_result(docs.write(tmp_path / "doc.json", doc)).created_epoch == 1_795_000_000.0


def _forged(docs: Any) -> dict[str, Any]:
    """An async mode whose stored verdict says met, with one sample's max gap of 1e308 ms."""
    doc = docs.make()
    doc["modes"]["async"]["samples"][2]["max_gap_ms"] = 1e308
    assert doc["modes"]["async"]["verdict"]["met"] is True  # as stored: written before the sample was edited
    return doc


def test_a_verdict_is_recomputed_from_the_samples_not_read_from_the_document(
        tmp_path: Path, docs: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = docs.write(tmp_path / "doc.json", _forged(docs))
    verdict = read_result(path).data["modes"]["async"]["verdict"]
    assert verdict["met"] is False and verdict["missed"] == 1 and verdict["worst_ms"] == 1e308
    assert cli.main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    (row,) = [line for line in out.splitlines() if line.startswith("async")]
    assert "missed 1/6" in row and "met" not in row.replace("missed", "")
    assert cli.main(["report", str(path), "--format", "json"]) == 0
    (mode,) = [m for m in json.loads(capsys.readouterr().out)["results"][0]["modes"] if m["mode"] == "async"]
    assert mode["verdict"]["met"] is False and mode["verdict"]["missed"] == 1


def test_a_stored_verdict_that_agrees_is_kept_as_it_is(tmp_path: Path, docs: Any) -> None:
    doc = docs.make()
    doc["modes"]["async"]["verdict"]["note"] = "kept"  # a key the samples do not decide
    result = read_result(docs.write(tmp_path / "doc.json", doc))
    assert result.data["modes"] == doc["modes"]
