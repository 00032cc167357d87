"""A virtual-clock asyncio event loop: your own asyncio code, unchanged, in virtual time.

:class:`VirtualTimeLoop` is a standard selector event loop whose ``time()`` is virtual: when nothing is
ready, instead of sleeping until the next timer it jumps its clock to it (what ``looptime`` does for
tests). Code written with ``loop.call_later``, ``loop.call_at``, ``asyncio.sleep``, ``asyncio.wait_for``
or ``asyncio.timeout`` runs as it would on a real loop, only an hour of timers takes milliseconds.

Work handed to threads with ``loop.run_in_executor`` or ``asyncio.to_thread`` takes **no virtual time**:
while such a job is in flight the loop waits for it really (the clock stands still), so a replay is
deterministic however slow the machine is. Hazards, said once: code that reads ``time.monotonic()`` or
``time.time()`` sees real time, not the loop's (use ``loop.time()``); a thread you start yourself and that
calls ``loop.call_soon_threadsafe`` races the virtual clock (use ``run_in_executor``); an executor job that
waits on the loop's timers deadlocks (the clock cannot move while it is in flight).
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from typing import Any, TypeVar, TypeVarTuple

__all__ = ["VirtualTimeLoop", "virtual_run"]

T = TypeVar("T")
_Ts = TypeVarTuple("_Ts")


class _VirtualSelector(selectors.BaseSelector):
    """The real selector, asked without blocking; an idle wait becomes a jump of the loop's clock."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        self._real = selectors.DefaultSelector()
        self._loop = loop

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.get_key(fileobj)

    def get_map(self) -> Any:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout == 0:
            return self._real.select(0)
        if self._loop.executor_jobs:  # a thread is working: the clock stands still until it reports back
            return self._real.select(None)
        ready = self._real.select(0)
        if ready:
            return ready
        if timeout is None:  # nothing scheduled, nothing ready: only an outside event can wake the loop
            return self._real.select(None)
        self._loop.advance(timeout)  # idle until the next timer: jump to it
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An asyncio event loop on a virtual clock starting at ``start`` seconds (see the module's notes).

    ``advance(seconds)`` moves the clock by hand (timers then due run on the next iteration);
    ``executor_jobs`` is the number of ``run_in_executor`` jobs in flight."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self.executor_jobs = 0
        super().__init__(_VirtualSelector(self))

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"the virtual clock cannot go back ({seconds:g} s)")
        self._now += seconds

    def run_in_executor(self, executor: Executor | None, func: Callable[[*_Ts], T], *args: *_Ts) -> asyncio.Future[T]:
        future = super().run_in_executor(executor, func, *args)
        self.executor_jobs += 1
        future.add_done_callback(self._job_done)  # runs on the loop's thread, after the result arrived
        return future

    def _job_done(self, _future: asyncio.Future[Any]) -> None:
        self.executor_jobs -= 1


def virtual_run(main: Coroutine[Any, Any, T], *, start: float = 0.0, debug: bool | None = None) -> T:
    """``asyncio.run(main)`` on a fresh :class:`VirtualTimeLoop` (the loop is closed afterwards)."""
    with asyncio.Runner(debug=debug, loop_factory=lambda: VirtualTimeLoop(start)) as runner:
        return runner.run(main)
