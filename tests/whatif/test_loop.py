"""The virtual-clock event loop (U, SPEC section 6): plain asyncio timer code runs unchanged in virtual time."""

from __future__ import annotations

import asyncio
import threading

import pytest

from perfsuite.whatif import VirtualTimeLoop, virtual_run


def test_timers_sleeps_and_timeouts_run_at_their_virtual_times() -> None:
    async def main() -> list[tuple[str, float]]:
        loop = asyncio.get_running_loop()
        seen: list[tuple[str, float]] = []
        loop.call_later(5.0, lambda: seen.append(("call_later 5", loop.time())))
        loop.call_at(2.5, lambda: seen.append(("call_at 2.5", loop.time())))
        await asyncio.sleep(3600.0)  # an hour: no real waiting
        seen.append(("slept 3600", loop.time()))
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.sleep(10.0), timeout=1.5)
        seen.append(("wait_for timed out", loop.time()))
        async with asyncio.timeout(0.25):
            await asyncio.sleep(0.1)
        seen.append(("inside timeout", loop.time()))
        return seen

    assert virtual_run(main()) == [("call_at 2.5", 2.5), ("call_later 5", 5.0), ("slept 3600", 3600.0),
                                   ("wait_for timed out", 3601.5), ("inside timeout", 3601.6)]


def test_a_debouncer_written_with_call_later_fires_once_per_quiet_period() -> None:
    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        fired: list[float] = []
        handle: list[asyncio.TimerHandle] = []

        def changed() -> None:
            if handle:
                handle.pop().cancel()
            handle.append(loop.call_later(2.0, lambda: fired.append(loop.time())))

        for at in (0.0, 1.0, 1.5, 10.0):
            loop.call_at(at, changed)
        await asyncio.sleep(20.0)
        return fired

    assert virtual_run(main()) == [3.5, 12.0]


def test_executor_work_takes_no_virtual_time_so_the_order_is_the_same_on_any_machine() -> None:
    """A thread slower (really) than a pending timer (virtually) still finishes first: the clock waits for it."""
    release = threading.Event()

    def slow() -> str:
        release.wait(5.0)  # held until the timer below would have fired on a real loop
        return "thread"

    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        order: list[str] = []
        loop.call_later(0.001, order.append, "timer")
        threading.Timer(0.05, release.set).start()  # really later than the timer's 1 ms
        order.append(await loop.run_in_executor(None, slow))
        order.append(await asyncio.to_thread(lambda: "to_thread"))
        await asyncio.sleep(0.01)
        assert loop.time() == pytest.approx(0.01)
        return order

    assert virtual_run(main()) == ["thread", "to_thread", "timer"]


def test_the_clock_moves_only_forward_and_starts_where_asked() -> None:
    loop = VirtualTimeLoop(start=100.0)
    try:
        assert loop.time() == 100.0
        loop.advance(2.0)
        assert loop.time() == 102.0
        with pytest.raises(ValueError, match="cannot go back"):
            loop.advance(-1.0)
        assert loop.run_until_complete(asyncio.sleep(3.0, result="done")) == "done" and loop.time() == 105.0
    finally:
        loop.close()
