"""Injectable clocks: every engine scheduler asks a ``Clock`` for time and timers, so
tests and the what-if simulator run the real schedulers in virtual time."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field


class TimerHandle(ABC):
    @abstractmethod
    def cancel(self) -> None: ...

    @property
    @abstractmethod
    def cancelled(self) -> bool: ...


class Clock(ABC):
    """Monotonic seconds, wall time for records, and one-shot timers."""

    @abstractmethod
    def monotonic(self) -> float: ...

    @abstractmethod
    def wall(self) -> float: ...

    @abstractmethod
    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle: ...


class SystemClock(Clock):
    """Real time; timers need a running asyncio loop (given, or the running one at call time)."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop

    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        """A loop timer. Without a running loop (a synchronous caller), the timer is inert: the work it
        would do is flushed by shutdown or absorbed by the next commit instead."""
        loop = self._loop
        if loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return _InertTimer()
        return _LoopTimer(loop.call_later(max(0.0, delay), callback))


class _InertTimer(TimerHandle):
    __slots__ = ("_cancelled",)

    def __init__(self) -> None:
        self._cancelled = False

    def cancel(self) -> None:
        self._cancelled = True

    @property
    def cancelled(self) -> bool:
        return self._cancelled


class _LoopTimer(TimerHandle):
    __slots__ = ("_handle",)

    def __init__(self, handle: asyncio.TimerHandle) -> None:
        self._handle = handle

    def cancel(self) -> None:
        self._handle.cancel()

    @property
    def cancelled(self) -> bool:
        return self._handle.cancelled()


@dataclass(order=True)
class _VirtualTimer(TimerHandle):
    due: float
    serial: int
    callback: Callable[[], None] = field(compare=False)
    _cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self._cancelled = True

    @property
    def cancelled(self) -> bool:
        return self._cancelled


class VirtualClock(Clock):
    """Virtual time: nothing happens until :meth:`advance` or :meth:`run_until`; timers fire in order."""

    def __init__(self, start: float = 0.0, wall_start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._wall_offset = wall_start - start
        self._timers: list[_VirtualTimer] = []
        self._serial = itertools.count()

    def monotonic(self) -> float:
        return self._now

    def wall(self) -> float:
        return self._now + self._wall_offset

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        timer = _VirtualTimer(self._now + max(0.0, delay), next(self._serial), callback)
        heapq.heappush(self._timers, timer)
        return timer

    def next_due(self) -> float | None:
        while self._timers and self._timers[0].cancelled:
            heapq.heappop(self._timers)
        return self._timers[0].due if self._timers else None

    def pending(self) -> int:
        return sum(not t.cancelled for t in self._timers)

    def run_until(self, when: float) -> int:
        """Fire every timer due at or before ``when`` (including ones they schedule); return how many."""
        fired = 0
        while True:
            due = self.next_due()
            if due is None or due > when:
                break
            timer = heapq.heappop(self._timers)
            self._now = max(self._now, timer.due)
            timer.callback()
            fired += 1
        self._now = max(self._now, when)
        return fired

    def advance(self, seconds: float) -> int:
        return self.run_until(self._now + seconds)
