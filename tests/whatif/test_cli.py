"""`perfsuite whatif`: outputs, one-line errors with exit 2, and --validate on the storm's first minutes."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from perfsuite import cli
from perfsuite.whatif import KindCost, PublicationCosts, write_costs


@pytest.fixture
def costs_file(tmp_path: Path) -> Path:
    costs = PublicationCosts({k: KindCost(1000, 100, 50, 20, 5.0) for k in ("registry", "checkpoint", "mail")},
                             {"node": "test"}, "0.0", "2026-01-01T00:00:00+00:00")
    return write_costs(costs, tmp_path / "costs.json")


def _one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def _perfsuite(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "perfsuite", *args], capture_output=True, text=True, timeout=120,
                          check=False)


def test_storm_table_csv_json_and_plot(tmp_path: Path, costs_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    status = cli.main(["whatif", "--storm", "--costs", str(costs_file), "--csv", str(out / "s.csv"),
                       "--json", str(out / "s.json"), "--plot", str(out / "s.png"), "--save-trace",
                       str(out / "storm.jsonl")])
    assert status == 0
    printed = capsys.readouterr().out
    assert "this machine's measured per-publication costs" in printed and "1526 observational changes" in printed
    rows = list(csv.DictReader((out / "s.csv").open()))
    assert [float(r["debounce_s"]) for r in rows] == [0.1, 0.5, 1.0, 2.0, 5.0, 10.0]
    assert rows[3]["publications"] == "434" and rows[3]["per_minute_peak"] == "21"
    doc = json.loads((out / "s.json").read_text())
    assert doc["trace"]["observational_changes"] == 1526 and len(doc["results"]) == 6
    assert doc["costs"]["note"].startswith("bytes are this machine's")
    assert (out / "s.png").stat().st_size > 10_000
    # the saved trace replays to the same figures
    assert cli.main(["whatif", "--trace", str(out / "storm.jsonl"), "--no-costs", "--debounce", "2",
                     "--json", str(out / "again.json")]) == 0
    again = json.loads((out / "again.json").read_text())
    assert again["results"][0]["publications"] == 434


def test_malformed_trace_is_a_one_line_error_naming_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"time": 0, "session": "s", "conversation": "agent-1", "kind": "activity", '
                   '"flavour": "running"}\n{"time": 1, "session": "s"\n')
    line = _one_line_error(_perfsuite("whatif", "--trace", str(bad), "--no-costs"))
    assert line.startswith("perfsuite: error: ") and f"{bad}:2: not valid JSON" in line


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--debounce", "1,-0.5"], "--debounce: -0.5 is negative; intervals must be >= 0 s"),
        (["--checkpoint-interval", "0"], "--checkpoint-interval: intervals must be > 0 s"),
        (["--notify-max", "-1"], "--notify-max: -1 is negative"),
        (["--notify-max", "0.01"], "notification backoff limit must be >= the first delay"),
    ],
)
def test_impossible_grids_exit_2_with_one_line(args: list[str], fragment: str) -> None:
    line = _one_line_error(_perfsuite("whatif", "--storm", "--no-costs", *args))
    assert fragment in line


def test_exactly_one_trace_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["whatif", "--no-costs"]) == 2
    assert cli.main(["whatif", "--storm", "--unattended", "--no-costs"]) == 2
    assert "exactly one of --trace FILE, --storm or --unattended" in capsys.readouterr().err


def test_validate_passes_on_the_storms_first_two_minutes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """SPEC section 6 --validate, compressed 10x: 120 s of trace in about 12 s of real time."""
    status = cli.main(["whatif", "--storm", "--validate", "--validate-seconds", "120", "--speed", "10",
                       "--json", str(tmp_path / "v.json")])
    printed = capsys.readouterr().out
    assert status == 0, printed
    doc = json.loads((tmp_path / "v.json").read_text())
    assert doc["passed"] and doc["debounce_s"] == 2.0 and doc["speed"] == 10
    assert doc["simulated_publications"] == doc["real_publications"] == 15  # the 15 bursts of minutes 0-1
    assert doc["simulated_generations"] == doc["real_generations"]
    assert abs(doc["simulated_loss_s"] - doc["real_loss_s"]) <= doc["loss_tolerance_s"]
    assert "validate: PASS" in printed
