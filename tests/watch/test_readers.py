"""M11: every command that reads results reads a watch document like any run: report (text, JSON, Markdown),
evidence (every figure from its own field), compare (the planted block is a regression), history and the store."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from perfsuite.report import evidence_for
from tests.report.test_evidence import check_provenance
from tests.watch.conftest import PROGRAMS, perfsuite


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two watches of the same program, without and with a planted 20 ms block every 100 ms."""
    out = tmp_path_factory.mktemp("watched")
    paths = []
    for block in ("0", "20"):
        path = out / f"watch-plant-{block}.json"
        proc = perfsuite("watch", "--window", "0.25", "--name", "watch-plant", "--output", str(path), "--",
                         sys.executable, str(PROGRAMS / "plant.py"), "--block-ms", block, "--duration", "2.5")
        assert proc.returncode == 0, proc.stderr
        paths.append(path)
    return paths[0], paths[1]


def test_report_prints_the_windows_without_submission_columns(watched: tuple[Path, Path]) -> None:
    _, planted = watched
    proc = perfsuite("report", str(planted))
    assert proc.returncode == 0, proc.stderr
    assert "watch-plant: live windows of 0.25 s" in proc.stdout and "submit" not in proc.stdout
    data = json.loads(perfsuite("report", str(planted), "--format", "json").stdout)
    [row] = [m for m in data["results"][0]["modes"] if m["mode"] == "live"]
    assert row["submission_ms"] is None and row["ack_ms"] is None and row["max_gap_ms"]["max"] >= 20.0
    # every window that spans one of the plant's periods (100 ms asleep, 20 ms blocked) holds a 20 ms block; the
    # last, partial window ends at the stop instant and may be shorter than a period, so it may hold none
    samples = json.loads(planted.read_text())["modes"]["live"]["samples"]
    spanning = [s for s in samples if s["window_ms"] >= 120.0]
    assert any(s["labels"]["window"] == "whole" for s in spanning)
    assert all(s["max_gap_ms"] >= 20.0 for s in spanning), [(s["window_ms"], s["max_gap_ms"]) for s in samples]
    assert row["max_gap_ms"]["min"] == pytest.approx(min(s["max_gap_ms"] for s in samples), abs=1e-3)
    assert "| live |" in perfsuite("report", str(planted), "--format", "markdown").stdout


def test_evidence_says_what_was_watched_and_every_figure_comes_from_its_field(watched: tuple[Path, Path]) -> None:
    base, planted = watched
    ev = evidence_for(planted)
    assert "Watched `" in ev.markdown and "plant.py --block-ms 20 --duration 2.5` live" in ev.markdown
    assert "Thread `MainThread` (`live`): per window, maximum heartbeat gaps of" in ev.markdown
    assert "a longest loop callback of" in ev.markdown  # and its name: the worst window's longest callback (the
    # plant's task, unless a loaded machine held another callback longer)
    assert "in its own process alongside the program" in ev.markdown
    assert "windows of a live program's own loop" in ev.markdown
    assert "submission" not in ev.markdown.split("Watched", 1)[1]
    assert check_provenance(ev) == []
    against = evidence_for(planted, base)
    assert "regressed" in against.markdown and check_provenance(against) == []


def test_compare_shows_the_planted_block_as_information_between_two_watches(watched: tuple[Path, Path]) -> None:
    """Two watches are separate runs: their timings cannot tell the machine's load from a regression, so
    `compare` shows the planted block's regression as information and gates costs only (two separate runs, U)."""
    base, planted = watched
    proc = perfsuite("compare", str(base), str(planted))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith("perfsuite compare: ") and "separate runs: timings are information" in first
    rows = [line for line in proc.stdout.splitlines() if " live " in line and "max_gap_ms" in line]
    assert rows and "regressed (info)" in rows[0], proc.stdout
    assert perfsuite("compare", str(base), str(base)).returncode == 0


def test_history_and_the_store_read_watch_documents(watched: tuple[Path, Path], tmp_path: Path) -> None:
    """(The dashboard reads them in tests/watch/test_baseline.py, among the committed baseline's documents.)"""
    directory = watched[0].parent
    proc = perfsuite("history", str(directory))
    assert proc.returncode == 0, proc.stderr
    assert "regression" in proc.stdout  # the planted block, a step from one run to the next
    store = tmp_path / "store.sqlite3"
    assert perfsuite("store", "ingest", str(directory), "--store", str(store)).returncode == 0


def test_a_watch_document_cannot_be_resumed(watched: tuple[Path, Path]) -> None:
    proc = perfsuite("run", "--resume", str(watched[0]))
    assert proc.returncode == 2 and "a live watch (perfsuite watch) measured a running program" in proc.stderr
