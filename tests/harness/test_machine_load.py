"""M1's idle control: a run says how loaded its machine was (its idle control against the heartbeat period), and
`perfsuite run` refuses to start a baseline on a loaded machine and flags one measured loaded. Behaviour only:
the idle-control figures are planted through the results writer and the probe hook, never timed here."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from perfsuite import cli
from perfsuite.harness import LOADED_EXCESS_MS, MachineLoad, machine_load, write_json_atomic

BASELINE = Path(__file__).resolve().parents[2] / "results" / "baseline"


def _windows(*gaps: float) -> list[dict[str, float]]:
    return [{"max_gap_ms": g} for g in gaps]


def test_the_rule_is_the_median_window_against_the_period() -> None:
    # one late window in twelve happens on an idle machine (7.24 ms in the README's measurement): still quiet
    quiet = machine_load(_windows(*[5.3] * 11, 7.24), 5.0)
    assert (quiet.loaded, quiet.late_windows, quiet.threshold_ms) == (False, 1, 5.0 + LOADED_EXCESS_MS)
    assert quiet.describe().startswith("quiet: idle control median 5.30 ms, 0.30 ms over the 5 ms period")
    loaded = machine_load(_windows(8.5, 8.8, 9.0), 5.0)  # twice the cores busy: a scheduler slice per tick
    assert loaded.loaded is True and loaded.describe().startswith("LOADED: idle control median 8.80 ms")
    assert machine_load(_windows(6.0, 6.0), 5.0).loaded is False  # exactly at the threshold is not over it
    assert machine_load(_windows(11.2), 10.0).loaded is True  # the period is the recipe's heartbeat
    none = machine_load([], 5.0)
    assert none.loaded is None and none.word == "not measured" and "not measured" in none.describe()


def test_the_committed_baseline_was_measured_quietly_by_its_own_idle_control() -> None:
    """The loaded-machine rule: the baseline is re-measured on a quiet machine (the old one read loaded in 9 of 12
    runs): every recipe run's recorded load agrees with the rule applied to its own idle-control windows, and none
    is loaded (a baseline directory refuses loaded runs)."""
    verdicts = {}
    for path in sorted(BASELINE.glob("*.json")):
        if path.name.endswith(".pyperf.json"):
            continue
        doc = json.loads(path.read_text())
        if "load" not in doc:  # a watch document records its control windows, not a load section
            continue
        verdict = machine_load(doc["control"]["samples"], doc["recipe"]["heartbeat_ms"])
        assert verdict.loaded is doc["load"]["loaded"], path.name
        verdicts[doc["recipe"]["name"]] = verdict
    assert {"idle-control", "registry-save"} <= set(verdicts)
    assert not any(v.loaded for v in verdicts.values())


def _planting(gap_ms: float) -> Any:
    """A results writer that sets every idle-control window's max gap: the seam fault injection uses."""

    def write(path: Path, document: Mapping[str, Any]) -> None:
        for sample in document["control"]["samples"]:
            sample["max_gap_ms"] = gap_ms
        if document["control"]["samples"]:
            document["load"] = machine_load(document["control"]["samples"], 5.0).to_dict()  # type: ignore[index]
        write_json_atomic(path, document)

    return write


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str, probe: float, gap: float) -> int:
    services = cli.CliServices(load_probe=lambda: machine_load(_windows(probe, probe, probe), 5.0),
                               writer=_planting(gap))  # injected, never patched (observation through published seams)
    return cli.main(["run", "idle-control", "--samples", "2", "--warmup", "0", "--isolation", "inline",
                     "--output-dir", str(tmp_path / "results" / "baseline"), *extra], services=services)


def test_a_baseline_is_not_started_on_a_loaded_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(tmp_path, monkeypatch, probe=8.9, gap=5.3) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a baseline directory and this machine is loaded now" in err
    assert "nothing measured" in err and "--allow-loaded" in err
    assert not (tmp_path / "results" / "baseline").exists() or not list((tmp_path / "results" / "baseline").iterdir())


def test_a_baseline_measured_loaded_is_kept_marked_and_exit_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(tmp_path, monkeypatch, probe=5.3, gap=8.9) == 1  # quiet when it started, loaded while it ran
    captured = capsys.readouterr()
    assert "were measured on a loaded machine" in captured.err and "--allow-loaded" in captured.err
    assert "machine: idle-control-" in captured.out and ": LOADED: idle control median 8.90 ms" in captured.out
    (doc_path,) = [p for p in (tmp_path / "results" / "baseline").glob("*.json") if "pyperf" not in p.name]
    doc = json.loads(doc_path.read_text())
    assert doc["load"]["loaded"] is True and doc["status"] == "complete"  # nothing measured is lost
    assert "[LOADED]" in captured.out  # the table says so too


def test_allow_loaded_and_a_quiet_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(tmp_path, monkeypatch, "--allow-loaded", probe=8.9, gap=8.9) == 0
    assert ": LOADED: idle control median 8.90 ms" in capsys.readouterr().out
    assert _run(tmp_path / "q", monkeypatch, probe=5.3, gap=5.3) == 0
    out = capsys.readouterr().out
    assert "machine: quiet (idle control medians 5.30-5.30 ms against the 5 ms period" in out


def test_a_document_records_its_load_section(tmp_path: Path) -> None:
    from perfsuite.harness import ModeSpec, Recipe, run_recipe

    recipe = Recipe(name="idle", modes=(ModeSpec("idle", "perfsuite.harness._operation:control_operation",
                                                 {"window_ms": 20}),),
                    samples=2, warmup=0, isolation="inline", settle_ms=5.0, sync_after_copy=False)
    doc = run_recipe(recipe, output=tmp_path / "r.json", measured=None).document
    load = doc["load"]
    assert load["windows"] == len(doc["control"]["samples"]) > 0
    assert load["period_ms"] == 5.0 and load["threshold_ms"] == 6.0
    assert load["loaded"] == (load["median_gap_ms"] > 6.0) and "median idle-control window" in load["rule"]
    assert isinstance(machine_load(doc["control"]["samples"]), MachineLoad)
