"""M9: loop stalls. Every event-loop callback inside a sample window is timed on the harness's own loop,
so a block shorter than the heartbeat period (invisible to the max gap when it ends before the next tick)
is seen whole. No assertion here depends on how fast or loaded the machine is: lower bounds come from
busy-waits on the same clock the monitor reads, upper bounds from an injected clock."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from perfsuite.harness import (
    GcRecorder,
    Heartbeat,
    InstrumentedLoop,
    SampleRecord,
    StallEntry,
    StallMonitor,
    measure_sample,
    sample_metrics,
)
from perfsuite.harness._stalls import callback_name, run_instrumented, stall_monitor_of
from tests.harness.conftest import make_spec

BASIC = "perfsuite.workloads.basic"
MS = 1_000_000


def _measure(spec: Any, factory: Callable[..., Any] | None = None, monitor: StallMonitor | None = None,
             before: Callable[[Heartbeat], Any] | None = None) -> SampleRecord:
    async def main() -> SampleRecord:
        with GcRecorder() as recorder:
            async with Heartbeat(spec.heartbeat_ms) as heartbeat:
                await asyncio.sleep(0.02)
                if before is not None:
                    await before(heartbeat)
                return await measure_sample(spec, heartbeat, recorder, factory)

    return run_instrumented(main(), monitor)


def _named(rec: SampleRecord, name: str) -> StallEntry:
    """The longest timed callback called ``name`` among the sample's top ones. Not necessarily the first: on a
    loaded machine any callback the scheduler preempts (the heartbeat's tick, the harness's) can read longer
    than a planted millisecond hold, so only the planted callback's name and lower bound are asserted."""
    assert rec.stalls is not None
    named = [entry for entry in rec.stalls.top if entry.name == name]
    assert named, [entry.name for entry in rec.stalls.top]
    return named[0]


def test_a_block_shorter_than_the_period_is_seen_whole(tmp_path: Path) -> None:
    """M9: a 3 ms busy-wait on the loop thread reads at least 3 ms as the longest callback,
    named after the operation's own callback. The lower bound cannot flake: the busy-wait spins on
    ``time.perf_counter_ns`` until 3 ms have passed, and the monitor reads the same clock before and
    after the callback, so its reading contains the whole spin however the machine schedules us."""
    spec = make_spec(f"{BASIC}:busy", {"ms": 3, "deferred": True}, work_root=tmp_path)
    rec = _measure(spec)
    assert rec.stalls is not None
    assert rec.stalls.longest_ms >= 3.0
    assert rec.stalls.busy_ms >= rec.stalls.longest_ms
    assert _named(rec, "perfsuite.workloads.basic._Busy._run").duration_ns >= 3 * MS
    assert rec.stalls.top[0].duration_ns == rec.stalls.longest_ns
    doc = rec.to_dict()
    assert doc["stalls"]["longest_ms"] == rec.stalls.longest_ms
    assert [entry["name"] for entry in doc["stalls"]["top"]] == [entry.name for entry in rec.stalls.top]
    flat = sample_metrics(doc)
    assert flat["stalls.longest_ms"] == rec.stalls.longest_ms and flat["stalls.callbacks"] >= 2


def test_a_synchronous_submit_is_named_after_the_operation(tmp_path: Path) -> None:
    """The harness calls ``submit`` in its own loop callback, so a synchronous hold is attributed to the
    operation's ``submit``, not to the harness's sample coroutine."""
    rec = _measure(make_spec(f"{BASIC}:busy", {"ms": 2}, work_root=tmp_path))
    assert rec.stalls is not None and rec.stalls.longest_ms >= 2.0
    assert _named(rec, "perfsuite.workloads.basic._Busy.submit").duration_ns >= 2 * MS
    assert rec.submission_ms >= 2.0 and rec.ack_ms >= 2.0


class _FakeClock:
    """Integer ns that advance by ``step_ns`` on every read: time passes only when someone looks."""

    def __init__(self, start_ns: int, step_ns: int = 1_000) -> None:
        self.now = start_ns
        self.step_ns = step_ns

    def __call__(self) -> int:
        self.now += self.step_ns
        return self.now


@pytest.mark.parametrize("phase_ms", [0.0, 1.0, 2.5, 4.0, 4.9])
@pytest.mark.parametrize("offset_ms", [0.0, 2.0, 4.5])
def test_calibration_a_3_ms_block_reads_3_0_to_3_3_ms_at_any_phase(phase_ms: float, offset_ms: float) -> None:
    """Calibration (M9): a 3 ms block reads 3.0-3.3 ms whatever its phase against the heartbeat.

    It cannot flake: the harness's loop times the callback through its clock seam, and here that clock is
    injected and advances 1 us per read; the block busy-waits 3 ms on the same clock. So the reading is the
    block plus the wrapper's own reads whatever the real machine does, while the phase (the block is
    scheduled ``phase_ms`` of real time after a real heartbeat tick, and the injected clock starts
    ``offset_ms`` into a 5 ms period) moves the block against the heartbeat and must not change it."""
    clock = _FakeClock(start_ns=int(offset_ms * MS))
    monitor = StallMonitor(clock=clock)

    def block(done: asyncio.Future[None]) -> None:
        end = clock() + 3 * MS
        while clock() < end:  # a busy-wait on the monitor's clock: exactly 3 ms
            pass
        done.set_result(None)

    async def main() -> Any:
        loop = asyncio.get_running_loop()
        async with Heartbeat(5.0) as hb:
            await asyncio.sleep(0.02)
            ticks = hb.tick_count
            while hb.tick_count == ticks:  # just after a tick
                await asyncio.sleep(0)
            monitor.arm()
            start = clock.now
            done = loop.create_future()
            loop.call_later(phase_ms / 1e3, block, done)
            await done
            stalls = monitor.window(start, clock.now)
            monitor.disarm()
            return stalls

    stalls = run_instrumented(main(), monitor)
    assert stalls.top[0].name.endswith("test_calibration_a_3_ms_block_reads_3_0_to_3_3_ms_at_any_phase.<locals>.block")
    assert 3.0 <= stalls.longest_ms <= 3.3
    assert stalls.longest_ms == 3.002  # 3 ms, the spin's last read and the wrapper's closing read
    assert stalls.busy_ms >= stalls.longest_ms


def test_the_heartbeat_misses_what_the_stall_monitor_sees(tmp_path: Path) -> None:
    """The defect the metric fixes, shown without timing: on ticks recorded at 0, 5 and 10 ms, a block from
    1 to 4 ms lies between two ticks, so the max gap is the ordinary 5 ms; the stall window holds it."""
    hb = Heartbeat.from_ticks([0, 5 * MS, 10 * MS], period_ms=5)
    assert hb.window(0, 10 * MS).max_gap_ns == 5 * MS
    monitor = StallMonitor(clock=iter([1 * MS, 4 * MS]).__next__)
    monitor.arm()
    monitor.wrap(lambda: None)()
    stalls = monitor.window(0, 10 * MS)
    assert stalls.longest_ns == 3 * MS and stalls.callbacks == 1 and stalls.busy_ns == 3 * MS


def test_window_counts_overlapping_callbacks_whole_and_only_while_armed() -> None:
    times = iter([0, 2, 5, 9, 12, 20, 30, 31])
    monitor = StallMonitor(clock=lambda: next(times) * MS)
    work = monitor.wrap(lambda: None)
    work()  # not armed: not recorded, and the clock is not read
    monitor.arm()
    for _ in range(4):
        work()  # [0, 2], [5, 9], [12, 20], [30, 31]
    stalls = monitor.window(8 * MS, 25 * MS)  # overlaps [5, 9] and [12, 20]
    assert stalls.callbacks == 2 and stalls.busy_ns == 12 * MS and stalls.longest_ns == 8 * MS
    assert [e.duration_ns for e in stalls.top] == [8 * MS, 4 * MS]
    assert stalls.to_dict()["top"][0] == {"name": stalls.top[0].name, "ms": 8.0, "at_ms": 4.0}
    monitor.disarm()
    assert monitor.recorded == 4
    empty = StallMonitor().window(0, 1)
    assert empty.callbacks == 0 and empty.longest_ns == 0 and empty.top == ()


def test_trim_keeps_what_ends_inside_the_next_window_and_since_walks_back_from_the_newest() -> None:
    """M11/M12: a live watch trims what ended before its next window (a callback straddling the boundary stays,
    counted in both windows like the heartbeat's straddling gap); ``since`` names the callbacks that ended at or
    after an instant (a key's arrival), longest first."""
    times = iter([0, 2, 5, 9, 12, 20, 30, 31])
    monitor = StallMonitor(clock=lambda: next(times) * MS)
    first, second = monitor.wrap(lambda: None), monitor.wrap(functools.partial(print, end=""))
    monitor.arm()
    first(), first(), second(), first()  # [0, 2], [5, 9], [12, 20] (second), [30, 31]
    assert [e.duration_ns for e in monitor.since(9 * MS)] == [8 * MS, 4 * MS, 1 * MS]
    assert [e.name for e in monitor.since(10 * MS, top=1)] == ["print"]
    assert monitor.since(32 * MS) == ()
    assert [e.duration_ns for e in monitor.since(9 * MS, until_ns=11 * MS)] == [4 * MS]  # [12, 20] started later
    monitor.trim(10 * MS)  # drops [0, 2] and [5, 9]; [12, 20] ended after the boundary
    assert monitor.recorded == 2 and monitor.armed
    assert monitor.window(15 * MS, 40 * MS).busy_ns == 9 * MS
    monitor.trim(0)
    assert monitor.recorded == 2


def test_every_scheduling_method_is_timed_once() -> None:
    """call_soon, call_later (through call_at), call_soon_threadsafe, add_reader: each callback once."""
    import os
    import threading

    monitor = StallMonitor()
    ran: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        assert stall_monitor_of(loop) is monitor
        monitor.arm()
        done = loop.create_future()
        r, w = os.pipe()

        def readable() -> None:
            os.read(r, 1)
            loop.remove_reader(r)
            ran.append("reader")
            done.set_result(None)

        loop.call_soon(ran.append, "soon")
        loop.call_later(0.001, ran.append, "later")
        thread = threading.Thread(target=loop.call_soon_threadsafe, args=(ran.append, "threadsafe"))
        thread.start()
        thread.join()  # enqueued before the reader fires, whatever the scheduler does
        loop.add_reader(r, readable)
        await asyncio.sleep(0.01)
        os.write(w, b"x")
        await done
        os.close(r)
        os.close(w)

    run_instrumented(main(), monitor)
    names = [callback_name(cb) for cb in monitor._callbacks]
    assert sorted(ran) == ["later", "reader", "soon", "threadsafe"]
    assert names.count("list.append") == 3  # each of the three scheduled appends, timed once
    assert any(n.endswith("readable") for n in names)


def test_callback_names() -> None:
    async def coro_fn() -> None:
        await asyncio.sleep(0)

    async def main() -> list[str]:
        task = asyncio.get_running_loop().create_task(coro_fn())
        await task
        hb = Heartbeat()
        return [callback_name(hb._tick), callback_name(functools.partial(time.sleep, 0)),
                callback_name(StallMonitor().wrap(test_callback_names)),
                callback_name(_task_step(task))]

    def _task_step(task: asyncio.Task[None]) -> Any:
        return type("Step", (), {"__self__": task, "__name__": "__step", "__call__": lambda self: None})()

    names = asyncio.run(main())
    assert names[0] == "perfsuite.harness._heartbeat.Heartbeat._tick"
    assert names[1] == "time.sleep"
    assert names[2] == "tests.harness.test_stalls.test_callback_names"
    assert names[3] == "Task.__step of tests.harness.test_stalls.test_callback_names.<locals>.coro_fn"


def test_a_loop_the_harness_does_not_own_reports_not_measured(tmp_path: Path) -> None:
    """Measured on a plain asyncio loop the sample has no stall record: ``None`` (not measured), never 0."""
    from tests.harness.conftest import measure

    rec = measure(make_spec(f"{BASIC}:busy", {"ms": 1}, work_root=tmp_path))
    assert rec.stalls is None
    doc = rec.to_dict()
    assert doc["stalls"] is None
    assert not any(k.startswith("stalls.") for k in sample_metrics(doc))
    assert isinstance(asyncio.new_event_loop(), asyncio.AbstractEventLoop)
    assert not isinstance(asyncio.new_event_loop(), InstrumentedLoop)  # nothing patched globally
