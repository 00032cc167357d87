"""E6/E7: the session's schedulers, each on an injectable :class:`Clock` so tests and the what-if
simulator run the real code in virtual time. They decide *when*; the session decides *what*.

- :class:`Debouncer`: one observational registry save per window (2 s default).
- :class:`NotificationQueue`: one coalesced FIFO and at most one timer (50 ms doubling to 500 ms).
- :class:`CheckpointTimer`: a repeating timer while any request is in flight (30 s default).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from perfsuite.engine._clock import Clock, TimerHandle

#: (what, delay_s): "fired" or "deferred" (with the deferral); the session turns it into an engine event
SchedulerObserver = Callable[[str, float], None]


class Debouncer:
    """Armed by the first change, not extended by later ones, so the crash-loss window is bounded by
    ``delay`` plus deferrals. When due, ``is_deferred()`` (an active publication) re-arms it after
    ``defer_s``; otherwise ``action()`` runs once for every change since arming (E7)."""

    def __init__(self, clock: Clock, delay: float, action: Callable[[], None], *,
                 is_deferred: Callable[[], bool] = lambda: False, defer_s: float = 0.05,
                 observe: SchedulerObserver | None = None) -> None:
        if delay < 0 or defer_s <= 0:
            raise ValueError("debounce delay must be >= 0 and the deferral > 0")
        self.clock = clock
        self.delay = delay
        self.action = action
        self.is_deferred = is_deferred
        self.defer_s = defer_s
        self._timer: TimerHandle | None = None
        self.pending_since: float | None = None  # when the oldest unpublished change happened
        self.fired = 0
        self.absorbed = 0
        self.deferred = 0
        self.observe = observe

    @property
    def pending(self) -> bool:
        return self.pending_since is not None

    def touch(self) -> None:
        """An observational change happened now."""
        if self.pending_since is None:
            self.pending_since = self.clock.monotonic()
        if self._timer is None:
            self._timer = self.clock.call_later(self.delay, self._due)

    def _due(self) -> None:
        self._timer = None
        if self.pending_since is None:
            return
        if self.is_deferred():
            self.deferred += 1
            self._timer = self.clock.call_later(self.defer_s, self._due)
            if self.observe is not None:
                self.observe("deferred", self.defer_s)
            return
        self.pending_since = None
        self.fired += 1
        if self.observe is not None:
            self.observe("fired", 0.0)
        self.action()

    def absorb(self) -> None:
        """A commit that captured the changes publishes them: nothing left to save (E7)."""
        if self.pending_since is not None:
            self.absorbed += 1
        self.pending_since = None
        self.cancel()

    def flush(self) -> bool:
        """Shutdown: run the pending save now. Returns whether there was one."""
        if self.pending_since is None:
            return False
        self.cancel()
        self.pending_since = None
        self.fired += 1
        self.action()
        return True

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


@dataclass
class Observations:
    """Fresh per callback: what the callback's transaction has seen (E6)."""

    serial: int
    seen: dict[str, Any] = field(default_factory=dict)


Notification = Callable[[Observations], None]


class NotificationQueue:
    """E6: notifications never enter the preparation queue and never run under a token.

    A notification runs at once only when ``gate_idle()``, ``transport_idle()`` and nothing is already
    pending; otherwise it joins the FIFO (a later acknowledgement never overtakes an earlier one). The
    timer starts at 50 ms and doubles up to 500 ms while the gate or transport stays busy, then flushes
    in order, only while ``live()`` (root conversation live, session not stopping)."""

    def __init__(self, clock: Clock, *, gate_idle: Callable[[], bool], transport_idle: Callable[[], bool],
                 live: Callable[[], bool], first_delay: float = 0.05, max_delay: float = 0.5,
                 observe: SchedulerObserver | None = None) -> None:
        self.clock = clock
        self.observe = observe
        self.gate_idle = gate_idle
        self.transport_idle = transport_idle
        self.live = live
        self.first_delay = first_delay
        self.max_delay = max_delay
        self.fifo: collections.deque[tuple[Notification, float]] = collections.deque()
        self._timer: TimerHandle | None = None
        self._delay = first_delay
        self._serial = 0
        self.delays: list[float] = []  # every timer delay armed, for tests and the what-if report
        self.waits: list[float] = []  # offer-to-run delay of every notification that ran
        self.stopped = False

    @property
    def timer_armed(self) -> bool:
        return self._timer is not None

    def offer(self, notification: Notification) -> bool:
        """Run now (immediate-run rule) or queue. Returns whether it ran now."""
        if not self.fifo and not self.stopped and self.gate_idle() and self.transport_idle() and self.live():
            self._invoke(notification, self.clock.monotonic())
            return True
        self.fifo.append((notification, self.clock.monotonic()))
        if not self.stopped:
            self._arm()
        return False

    def _arm(self) -> None:
        if self._timer is None:
            self.delays.append(self._delay)
            self._timer = self.clock.call_later(self._delay, self._fire)

    def _fire(self) -> None:
        self._timer = None
        if not self.fifo or self.stopped:
            return
        if not (self.gate_idle() and self.transport_idle()):
            self._delay = min(self._delay * 2, self.max_delay)
            self._arm()
            if self.observe is not None:
                self.observe("deferred", self._delay)
            return
        self._delay = self.first_delay
        if not self.live():
            return  # retained; a later offer or re-arm flushes them
        if self.observe is not None:
            self.observe("fired", 0.0)
        while self.fifo:
            notification, offered = self.fifo.popleft()
            self._invoke(notification, offered)

    def _invoke(self, notification: Notification, offered: float) -> None:
        self._serial += 1
        self.waits.append(self.clock.monotonic() - offered)
        notification(Observations(self._serial))

    def stop_temporarily(self) -> None:
        """Retain the offers, without a timer."""
        self.stopped = True
        self._cancel()

    def vetoed_close(self) -> None:
        """A close was vetoed: re-arm the same FIFO once (no new wake is invented)."""
        self.stopped = False
        if self.fifo:
            self._delay = self.first_delay
            self._arm()

    def close(self, *, proceed: bool) -> int:
        """An idle close schedules nothing; a proceeding close cancels the timer and discards the
        offers without invoking them (the mail itself stays durable). Returns how many were dropped."""
        if not proceed:
            return 0
        dropped = len(self.fifo)
        self.fifo.clear()
        self._cancel()
        self.stopped = True
        return dropped

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class CheckpointTimer:
    """E7 in-flight checkpoints: while any request is in flight, every ``interval`` seconds
    ``on_tick(conversations in flight)`` runs; the timer stops when none is in flight."""

    def __init__(self, clock: Clock, interval: float, on_tick: Callable[[frozenset[str]], None], *,
                 observe: SchedulerObserver | None = None) -> None:
        if interval <= 0:
            raise ValueError("checkpoint interval must be > 0")
        self.clock = clock
        self.interval = interval
        self.on_tick = on_tick
        self.in_flight: collections.Counter[str] = collections.Counter()
        self._timer: TimerHandle | None = None
        self.ticks = 0
        self.observe = observe

    @property
    def running(self) -> bool:
        return self._timer is not None

    def request_started(self, conversation: str) -> None:
        self.in_flight[conversation] += 1
        if self._timer is None:
            self._timer = self.clock.call_later(self.interval, self._tick)

    def request_finished(self, conversation: str) -> None:
        if self.in_flight[conversation] > 0:
            self.in_flight[conversation] -= 1
        if self.in_flight[conversation] == 0:
            del self.in_flight[conversation]
        if not self.in_flight:
            self.stop()

    def _tick(self) -> None:
        self._timer = None
        if not self.in_flight:
            return
        self.ticks += 1
        self._timer = self.clock.call_later(self.interval, self._tick)
        if self.observe is not None:
            self.observe("fired", 0.0)
        self.on_tick(frozenset(self.in_flight))

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
