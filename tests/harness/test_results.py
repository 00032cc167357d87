"""M7/M8: the results document, its schema, summaries, verdicts and the pyperf/HDR exports."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.harness import ModeSpec, Recipe, RunResult, run_recipe, validate_results, write_json_atomic
from perfsuite.harness._results import probe_dir_fsync, results_schema, summarize, verdict
from perfsuite.harness._runner import plan_order

BASIC = "perfsuite.workloads.basic"


def _recipe(**kw: Any) -> Recipe:
    values: dict[str, Any] = {
        "name": "twomodes",
        "modes": (
            ModeSpec("idle", f"{BASIC}:idle", {"window_ms": 15}),
            ModeSpec("floor", f"{BASIC}:fsync_floor", {"bytes": 512}),
        ),
        "samples": 3,
        "warmup": 1,
        "isolation": "inline",
        "settle_ms": 10.0,
        "control_windows": 2,
    }
    values.update(kw)
    return Recipe(**values)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunResult, RunResult]:
    out = tmp_path_factory.mktemp("results")
    work = tmp_path_factory.mktemp("work")
    first = run_recipe(_recipe(), output_dir=out, work_root=work)
    second = run_recipe(_recipe(), output_dir=out, work_root=work)
    return first, second


def test_document_shape_and_schema(runs: tuple[RunResult, RunResult]) -> None:
    result = runs[0]
    on_disk = json.loads(result.path.read_text())
    jsonschema.Draft202012Validator.check_schema(results_schema())
    jsonschema.validate(on_disk, results_schema())
    validate_results(on_disk)
    assert on_disk["schema"] == 1 and on_disk["status"] == "complete"
    assert on_disk["progress"] == {"done": len(on_disk["order"]), "total": len(on_disk["order"])}
    for mode in ("idle", "floor"):
        body = on_disk["modes"][mode]
        assert [s["index"] for s in body["samples"]] == [0, 1, 2]
        assert body["warmups"] == 1
        for key in ("min", "median", "max", "ci_low", "ci_high"):
            assert key in body["summary"]["max_gap_ms"]
        assert set(body["verdict"]) >= {"target_ms", "met", "missed", "missed_with_gc"}
    floor = on_disk["modes"]["floor"]["samples"][0]
    assert set(floor["phases_ms"]) == {"write", "fsync", "replace", "dir_fsync"}
    assert floor["metrics"]["bytes_written"] == 512
    assert len(on_disk["control"]["samples"]) == 2
    env = on_disk["environment"]
    # the probe's answer for the run's work directory, which lived on the same filesystem as ``work``
    recorded = env["work_dir"]["path"].replace("<tmp>", tempfile.gettempdir(), 1)  # portable paths (not this machine's)
    assert env["work_dir"]["dir_fsync"] == probe_dir_fsync(Path(recorded).parent)
    assert env["cpu"]["cores"] >= 1 and env["python"]["version"]
    assert on_disk["fixture"] == {"name": None, "digest": None, "files": 0, "bytes": 0}


def test_fixed_order_alternates_modes_and_interleaves_control() -> None:
    order = [(e["kind"], e["mode"]) for e in plan_order(_recipe(order="fixed"))]
    assert order[:2] == [("warmup", "idle"), ("warmup", "floor")]
    assert order[2:5] == [("sample", "idle"), ("sample", "floor"), ("control", None)]
    assert order[5:8] == [("sample", "idle"), ("sample", "floor"), ("control", None)]
    assert order[8:] == [("sample", "idle"), ("sample", "floor")]


def _rounds(order: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    rounds: list[tuple[str, ...]] = []
    current: list[str] = []
    for entry in order:
        if entry["kind"] == "control":
            continue
        current.append(entry["mode"])
        if len(current) == 4:
            rounds.append(tuple(current))
            current = []
    return rounds


def test_random_order_is_seeded_per_round_and_recorded(runs: tuple[RunResult, RunResult]) -> None:
    """M4: every round runs each mode once, in an order drawn from the recorded seed."""
    modes = tuple(f"m{i}" for i in range(4))
    recipe = _recipe(modes=tuple(ModeSpec(m, f"{BASIC}:idle") for m in modes), samples=40, warmup=0, seed=7)
    order = plan_order(recipe)
    rounds = _rounds(order)
    assert len(rounds) == 40 and all(sorted(r) == list(modes) for r in rounds)
    assert len(set(rounds)) > 5  # shuffled per round, not one order repeated (24 orders, 40 rounds, seed 7)
    assert order == plan_order(recipe)  # the same seed, the same plan
    assert _rounds(plan_order(_recipe(modes=recipe.modes, samples=40, warmup=0, seed=8))) != rounds
    doc = runs[0].document  # a run records its seed and the plan drawn from it
    assert doc["recipe"]["order"] == "random" and isinstance(doc["recipe"]["seed"], int)
    rebuilt = plan_order(_recipe(seed=doc["recipe"]["seed"]))
    assert doc["order"] == rebuilt


def test_schema_rejects_a_broken_document(runs: tuple[RunResult, RunResult]) -> None:
    doc = json.loads(runs[0].path.read_text())
    del doc["modes"]["idle"]["samples"][0]["max_gap_ms"]
    with pytest.raises(PerfsuiteError, match="max_gap_ms"):
        validate_results(doc)


def _pyperf(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pyperf", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_pyperf_accepts_the_export(runs: tuple[RunResult, RunResult]) -> None:
    a, b = (Path(str(r.path).replace(".json", ".pyperf.json")) for r in runs)
    assert a in runs[0].exports
    stats = _pyperf("stats", str(a))
    assert stats.returncode == 0, stats.stderr
    assert "twomodes.floor.max_gap_ms" in stats.stdout
    hist = _pyperf("hist", str(a))
    assert hist.returncode == 0, hist.stderr
    compare = _pyperf("compare_to", str(a), str(b))
    assert compare.returncode == 0, compare.stderr
    assert "twomodes.idle.ack_ms" in compare.stdout  # listed as changed, or as "hidden because not significant"


def test_pyperf_values_are_positive_and_units_known(runs: tuple[RunResult, RunResult]) -> None:
    import pyperf

    suite = pyperf.BenchmarkSuite.load(str(runs[0].path).replace(".json", ".pyperf.json"))
    names = suite.get_benchmark_names()
    assert "twomodes.control.max_gap_ms" in names
    for bench in suite:
        assert bench.get_unit() in ("second", "byte", "integer")
        assert all(v > 0 for v in bench.get_values())
        assert bench.get_nrun() == (2 if ".control." in bench.get_name() else 3)
    written = suite.get_benchmark("twomodes.floor.metrics.bytes_written")
    assert written.get_unit() == "byte" and written.get_values() == (512.0,) * 3


def test_hlog_is_readable(runs: tuple[RunResult, RunResult]) -> None:
    from hdrh.histogram import HdrHistogram
    from hdrh.log import HistogramLogReader

    stem = str(runs[0].path)[: -len(".json")]
    for name in ("idle", "floor", "control"):
        path = Path(f"{stem}.{name}.hlog")
        assert path in runs[0].exports
        reader = HistogramLogReader(str(path), HdrHistogram(1, 600_000_000, 3))
        intervals = 0
        while reader.get_next_interval_histogram() is not None:
            intervals += 1
        reader.close()
        assert intervals == (2 if name == "control" else 3)
        assert Path(f"{stem}.{name}.uncorrected.hlog").exists()


def test_summary_is_seeded_and_brackets_the_median() -> None:
    values = [5.1, 5.3, 7.9, 5.2, 6.0, 5.5]
    a, b = summarize(values), summarize(values)
    assert a == b
    assert a["min"] == 5.1 and a["max"] == 7.9 and a["median"] == pytest.approx(5.4)
    assert a["ci_low"] <= a["median"] <= a["ci_high"]
    flat = summarize([3.0, 3.0])
    assert flat["ci_low"] == flat["ci_high"] == 3.0
    assert summarize([4.0])["n"] == 1


def test_verdict_counts_misses_and_gc() -> None:
    def s(gap: float, gcs: int) -> dict[str, Any]:
        return {"max_gap_ms": gap, "gc": {"collections": gcs}}

    assert verdict([s(5, 0), s(19.9, 1)], 20)["met"] is True
    v = verdict([s(5, 0), s(25, 0), s(40, 2), s(60, 1)], 20)
    assert (v["met"], v["missed"], v["missed_with_gc"], v["worst_ms"]) == (False, 3, 2, 60)
    assert verdict([], 20)["met"] is None


def test_atomic_write_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "x.json"
    write_json_atomic(target, {"a": 1})
    write_json_atomic(target, {"a": 2})
    assert json.loads(target.read_text()) == {"a": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]
    with pytest.raises(ValueError):
        write_json_atomic(target, {"a": float("nan")})
    assert json.loads(target.read_text()) == {"a": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_hlog_max_keeps_three_decimals_of_a_millisecond(tmp_path: Path) -> None:
    """M8, the HDR export: the interval max column is in ms with microsecond resolution (hdrh's own writer
    floor-divides it to whole milliseconds); the histograms themselves stay in microseconds."""
    from hdrh.histogram import HdrHistogram

    from perfsuite.harness import write_exports
    from perfsuite.harness._heartbeat import new_lag_histogram

    hist = new_lag_histogram()
    for lag_us in (120, 1_234, 5_503):
        hist.record_value(lag_us)
    sample = {"index": 0, "started_at": 10.5, "window_ms": 30.0, "submission_ms": 1.0, "ack_ms": 18.0,
              "max_gap_ms": 10.5, "hdr": {"corrected": hist.encode().decode(), "uncorrected": hist.encode().decode()}}
    doc = {"recipe": {"name": "r"}, "created_epoch": 10.0, "modes": {"m": {"samples": [sample]}}, "control": {}}
    paths = write_exports(doc, tmp_path / "r.json")
    hlog = tmp_path / "r.m.hlog"
    assert hlog in paths
    text = hlog.read_text()
    line = next(ln for ln in text.splitlines() if ln[:1].isdigit())
    start, length, max_ms, blob = line.split(",")
    assert float(start) == pytest.approx(0.5) and float(length) == pytest.approx(0.03)
    assert max_ms == f"{hist.get_max_value() / 1000:.3f}" and max_ms.startswith("5.50")  # not 5.000
    assert HdrHistogram.decode(blob).get_max_value() == hist.get_max_value()  # the values are microseconds
    assert "max column in milliseconds, 3 decimals" in text
