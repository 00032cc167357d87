"""`perfsuite whatif`: outputs, one-line errors with exit 2, and --validate on the storm's first minutes."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def _observed(publications: int, loss_s: float) -> Any:
    """A real run's reduction, fixed: the comparison is then exercised without real time (tests assert behaviour, never
    timing)."""
    from perfsuite.whatif._validate import Observed

    async def real_run(trace: Any, setting: Any, directory: Path) -> Observed:
        return Observed(publications, {"registry": publications}, publications, loss_s, None, 1.0, {}, 0.0)

    return real_run


def test_validate_compares_the_simulation_with_what_really_happened() -> None:
    """SPEC section 6 --validate, its comparison: the real simulator on the storm's first two minutes
    (compressed 10x) against fixed observations: equal counts and loss pass; 3 more publications, or a
    crash-loss window a second longer, fail with the figure named. The simulation is deterministic."""
    from perfsuite import whatif

    trace = whatif.permission_storm(whatif.StormSpec())
    setting = whatif.make_grid((2.0,), whatif.DEFAULT_CHECKPOINT_S, whatif.DEFAULT_NOTIFY_MAX_S)[0]
    probe = whatif.validate(trace, setting, speed=10, seconds=120, real_run=_observed(0, 0.0))
    assert probe.simulated_publications == 15  # the 15 bursts of minutes 0-1
    assert not probe.passed and "publications: simulated 15, real 0" in probe.problems[0]
    loss = probe.simulated_loss_s / 10  # compressed seconds, as a real run reports them
    same = whatif.validate(trace, setting, speed=10, seconds=120, real_run=_observed(15, loss))
    assert same.passed and same.real_publications == same.simulated_publications == 15
    assert same.real_loss_s == pytest.approx(same.simulated_loss_s)
    more = whatif.validate(trace, setting, speed=10, seconds=120, real_run=_observed(18, loss))
    assert more.problems == ("publications: simulated 15, real 18 (tolerance 1)",)
    late = whatif.validate(trace, setting, speed=10, seconds=120, real_run=_observed(15, loss + 1.0))
    assert len(late.problems) == 1 and late.problems[0].startswith("crash-loss window: simulated")


@pytest.mark.parametrize("passed", [True, False])
def test_validate_cli_prints_the_verdict_and_exits_by_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str], passed: bool) -> None:
    from perfsuite import whatif

    real_validate = whatif.validate
    trace = whatif.permission_storm(whatif.StormSpec())
    setting = whatif.make_grid((2.0,), whatif.DEFAULT_CHECKPOINT_S, whatif.DEFAULT_NOTIFY_MAX_S)[0]
    loss = real_validate(trace, setting, speed=10, seconds=120, real_run=_observed(15, 0.0)).simulated_loss_s / 10
    monkeypatch.setattr(whatif, "validate", lambda *a, **kw: real_validate(
        *a, **kw, real_run=_observed(15 if passed else 40, loss)))
    status = cli.main(["whatif", "--storm", "--validate", "--validate-seconds", "120", "--speed", "10",
                       "--json", str(tmp_path / "v.json")])
    printed = capsys.readouterr().out
    doc = json.loads((tmp_path / "v.json").read_text())
    assert doc["debounce_s"] == 2.0 and doc["speed"] == 10 and doc["simulated_publications"] == 15
    if passed:
        assert status == 0 and "validate: PASS" in printed and doc["passed"]
    else:
        assert status == 1 and "validate: FAIL: publications: simulated 15, real 40" in printed
        assert not doc["passed"] and doc["real_publications"] == 40


def test_validate_really_runs_a_session(tmp_path: Path) -> None:
    """The real side runs end to end (a smoke test: what it measures depends on the machine, so only the
    shape of its answer is checked, never a pass or a tolerance)."""
    from perfsuite import whatif

    trace = whatif.permission_storm(whatif.StormSpec())
    setting = whatif.make_grid((2.0,), whatif.DEFAULT_CHECKPOINT_S, whatif.DEFAULT_NOTIFY_MAX_S)[0]
    check = whatif.validate(trace, setting, speed=10, seconds=30, work_root=tmp_path)
    assert check.real_publications >= 1 and check.real_durations_ms and check.wall_s > 0
    assert set(check.real_by_kind) <= {"registry", "checkpoint", "mail"}
