"""M2: GC accounting from gc.callbacks, and the policies."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable

import pytest

from perfsuite.harness import GcRecorder, SampleRecord, apply_gc_policy

BASIC = "perfsuite.workloads.basic"


def test_recorder_sees_a_forced_collection() -> None:
    with GcRecorder() as rec:
        t0 = time.perf_counter_ns()
        gc.collect()
        t1 = time.perf_counter_ns()
    w = rec.window(t0, t1)
    assert w.collections >= 1
    assert w.by_generation["2"] >= 1
    assert w.gc_ms > 0
    assert rec._callback not in gc.callbacks


def test_collection_outside_the_window_is_not_counted() -> None:
    with GcRecorder() as rec:
        gc.collect()
        t0 = time.perf_counter_ns()
    assert rec.window(t0, t0 + 1000).collections == 0


def test_forced_collection_inside_an_operation_is_in_the_sample(sample: Callable[..., SampleRecord]) -> None:
    rec = sample(f"{BASIC}:gc_collect", {"garbage": 20000})
    data = rec.to_dict()["gc"]
    assert data["collections"] >= 1
    assert data["by_generation"]["2"] >= 1
    assert data["gc_ms"] > 0
    assert any(e["generation"] == 2 for e in data["events"])


def test_idle_sample_under_collect_before_sees_no_forced_collection(sample: Callable[..., SampleRecord]) -> None:
    rec = sample(f"{BASIC}:idle", {"window_ms": 10}, gc="collect-before")
    assert rec.gc.by_generation["2"] == 0  # the policy's full collection happened before the window


def test_policies() -> None:
    async def main() -> int:
        with GcRecorder() as rec:
            await apply_gc_policy("natural", 0.0)
            before = rec.count
            await apply_gc_policy("collect-before", 0.001)
            return rec.count - before

    assert asyncio.run(main()) >= 1



def test_window_reads_the_same_collections_as_the_whole_ring_even_after_it_wrapped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """M11: the window walks back from the newest collection instead of rebuilding the ring each time; it must
    select exactly what a scan of every retained event selects, across a wrapped ring (clock injected)."""
    import perfsuite.harness._gc as gc_module

    now = [0]
    monkeypatch.setattr(gc_module.time, "perf_counter_ns", lambda: now[0])
    rec = GcRecorder(capacity=16)
    for n in range(40):  # collection n runs [10n, 10n + 4], through the gc.callbacks seam itself
        now[0] = 10 * n
        rec._callback("start", {"generation": n % 3})
        now[0] += 4
        rec._callback("stop", {"generation": n % 3, "collected": n, "uncollectable": 0})
    for start, end in [(0, 1000), (250, 300), (303, 306), (305, 305), (395, 500), (1000, 2000)]:
        expected = [e for e in rec.events() if e.end_ns >= start and e.start_ns <= end]
        assert list(rec.window(start, end).events) == expected, (start, end)
    assert rec.window(0, 1000).collections == 16


def test_a_recorder_rebuilt_from_events_reads_the_same_window() -> None:
    """M11: a live watch's agent sends its collections to the parent, which reads the window there."""
    with GcRecorder() as rec:
        t0 = time.perf_counter_ns()
        gc.collect()
        gc.collect(0)
        t1 = time.perf_counter_ns()
    events = rec.events_since(t0)
    assert len(events) >= 2 and events == [e for e in rec.events() if e.end_ns >= t0]
    again = GcRecorder.from_events(events)
    assert again.window(t0, t1, (t0, t1)) == rec.window(t0, t1, (t0, t1))
    assert GcRecorder.from_events([]).window(0, 1).collections == 0
