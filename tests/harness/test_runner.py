"""M3/M4: process isolation, resume after an interruption, fixtures, the allocation pass."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.harness import ModeSpec, Recipe, SampleEvent, resume_run, run_recipe, validate_results

BASIC = "perfsuite.workloads.basic"


def test_process_isolation_runs_each_sample_in_a_worker(tmp_path: Path) -> None:
    recipe = Recipe(
        name="proc",
        modes=(ModeSpec("busy", f"{BASIC}:busy", {"ms": 30}),),
        samples=2,
        warmup=0,
        isolation="process",
        control_windows=1,
        settle_ms=10.0,
    )
    events: list[SampleEvent] = []
    result = run_recipe(recipe, output_dir=tmp_path / "out", work_root=tmp_path / "work", on_sample=events.append)
    samples = result.document["modes"]["busy"]["samples"]
    assert len(samples) == 2
    assert all(s["max_gap_ms"] >= 30.0 for s in samples)
    assert [(e.kind, e.done, e.total) for e in events] == [("sample", 1, 3), ("control", 2, 3), ("sample", 3, 3)]
    validate_results(json.loads(result.path.read_text()))
    assert list((tmp_path / "work").iterdir()) == []  # private copies and run dirs cleaned up


def test_worker_errors_come_back_as_one_line(tmp_path: Path) -> None:
    recipe = Recipe(
        name="proc",
        modes=(ModeSpec("never", f"{BASIC}:never_ack"),),
        samples=1,
        warmup=0,
        isolation="process",
        control_windows=1,
        ack_timeout_s=0.2,
        settle_ms=0.0,
    )
    with pytest.raises(PerfsuiteError) as info:
        run_recipe(recipe, output_dir=tmp_path, work_root=tmp_path / "work")
    assert "proc: never sample 0: no acknowledgement within 0.2 s" in str(info.value)
    doc = json.loads(next(tmp_path.glob("proc-*.json")).read_text())
    # a failure is "failed", with its reason, never "interrupted" (nothing lost: a failed run says why)
    assert doc["status"] == "failed" and doc["progress"]["done"] == 0
    assert "no acknowledgement within 0.2 s" in doc["error"]


def test_interrupted_run_keeps_samples_and_resumes(tmp_path: Path) -> None:
    recipe = Recipe(
        name="resumable",
        modes=(ModeSpec("a", f"{BASIC}:idle", {"window_ms": 5}), ModeSpec("b", f"{BASIC}:idle", {"window_ms": 5})),
        samples=3,
        warmup=1,
        isolation="inline",
        control_windows=1,
        settle_ms=5.0,
        order="fixed",  # the interruption is planted after the first round's b sample, so a ran before it
    )
    path = tmp_path / "run.json"

    def stop_after_two_samples(event: SampleEvent) -> None:
        if event.kind == "sample" and event.mode == "b" and event.index == 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_recipe(recipe, output=path, on_sample=stop_after_two_samples, work_root=tmp_path / "w")
    doc = json.loads(path.read_text())
    assert doc["status"] == "interrupted"
    kept = {m: [s["started_at"] for s in body["samples"]] for m, body in doc["modes"].items()}
    assert len(kept["a"]) == 1 and len(kept["b"]) == 1
    order = doc["order"]

    result = resume_run(path, work_root=tmp_path / "w")
    final = json.loads(path.read_text())
    assert final["status"] == "complete" and final["order"] == order
    assert final["progress"]["done"] == final["progress"]["total"]
    for mode in ("a", "b"):
        started = [s["started_at"] for s in final["modes"][mode]["samples"]]
        assert len(started) == 3 and started[:1] == kept[mode]
        assert [s["index"] for s in final["modes"][mode]["samples"]] == [0, 1, 2]
    assert len(final["resumed_at"]) == 1
    validate_results(final)
    assert result.exports
    with pytest.raises(PerfsuiteError, match="already complete"):
        resume_run(path)


def test_fixture_is_described_and_required(tmp_path: Path) -> None:
    fixture = tmp_path / "fx"
    fixture.mkdir()
    (fixture / "f").write_bytes(b"x" * 100)
    recipe = Recipe(
        name="fx",
        fixture="tiny",
        modes=(ModeSpec("a", f"{BASIC}:idle", {"window_ms": 1}),),
        samples=1,
        warmup=0,
        isolation="inline",
        control_windows=1,
        settle_ms=0.0,
    )
    with pytest.raises(PerfsuiteError, match="needs fixture 'tiny'"):
        run_recipe(recipe, output_dir=tmp_path / "out")
    result = run_recipe(recipe, output_dir=tmp_path / "out", fixture=fixture, work_root=tmp_path / "w")
    info = result.document["fixture"]
    assert (info["name"], info["files"], info["bytes"]) == ("tiny", 1, 100)
    assert info["digest"].startswith("sha256:")
    again = run_recipe(recipe, output_dir=tmp_path / "out", fixture=fixture, work_root=tmp_path / "w")
    assert again.document["fixture"]["digest"] == info["digest"]


def _alloc_recipe(total: int) -> Recipe:
    return Recipe(
        name="alloc",
        modes=(ModeSpec("a", f"{BASIC}:allocate", {"bytes": total, "chunk": 64 << 10}),),
        samples=1,
        warmup=0,
        isolation="inline",
        control_windows=1,
        allocation=True,
        allocation_samples=1,
        settle_ms=0.0,
    )


def test_the_allocation_pass_on_tracemalloc_measures_the_peak_and_says_the_sum_is_not_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The core install: the core's tracker (the standard library's; chosen here, since memray is the default wherever
    it is installed); what it cannot see is None, never 0."""
    monkeypatch.setenv("PERFSUITE_ALLOCATION_TRACKER", "tracemalloc")
    total = 4 << 20
    result = run_recipe(_alloc_recipe(total), output_dir=tmp_path, work_root=tmp_path / "w")
    alloc: dict[str, Any] = result.document["modes"]["a"]["allocation"]
    rec = alloc["samples"][0]
    assert alloc["tracker"] == rec["tracker"] == "tracemalloc"
    assert rec["total_bytes"] is None and rec["allocations"] is None
    assert alloc["total_bytes"] is None and alloc["allocations"] is None
    assert 64 << 10 <= rec["peak_bytes"] < total // 4  # one live chunk at a time, above the span's start
    assert alloc["peak_bytes"]["median"] == rec["peak_bytes"]
    validate_results(result.document)


def test_an_unknown_allocation_tracker_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFSUITE_ALLOCATION_TRACKER", "valgrind")
    with pytest.raises(PerfsuiteError, match=r"PERFSUITE_ALLOCATION_TRACKER='valgrind': expected one of "
                                             r"tracemalloc, memray"):
        run_recipe(_alloc_recipe(1 << 20), output_dir=tmp_path, work_root=tmp_path / "w")


def test_allocation_pass_sums_allocations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFSUITE_ALLOCATION_TRACKER", "memray")  # the alloc extra: the sum of every allocation
    total = 4 << 20
    result = run_recipe(_alloc_recipe(total), output_dir=tmp_path, work_root=tmp_path / "w")
    alloc: dict[str, Any] = result.document["modes"]["a"]["allocation"]
    rec = alloc["samples"][0]
    assert rec["total_bytes"] >= total  # the sum of allocations ...
    assert rec["peak_bytes"] < total // 4  # ... not a difference of live sizes
    assert rec["allocations"] >= total // (64 << 10)
    assert rec["metrics"]["requested_bytes"] == total
    assert alloc["total_bytes"]["median"] == rec["total_bytes"]
    # the allocation pass is never one of the latency samples
    assert len(result.document["modes"]["a"]["samples"]) == 1
    validate_results(result.document)


def test_the_allocation_pass_defaults_to_memray_where_it_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """SPEC M3 asks for the sum of allocations, which only memray measures: it is the default wherever the
    alloc extra is installed; the environment variable still chooses either (tests/test_extras.py: the core
    without memray falls back to tracemalloc)."""
    pytest.importorskip("memray")
    from perfsuite.harness import allocation_tracker

    monkeypatch.delenv("PERFSUITE_ALLOCATION_TRACKER", raising=False)
    assert allocation_tracker() == "memray"
    monkeypatch.setenv("PERFSUITE_ALLOCATION_TRACKER", "tracemalloc")
    assert allocation_tracker() == "tracemalloc"
