"""M11 inside the watched process: every asyncio loop the program creates is instrumented, window by window.

The program's loops come from :class:`WatchPolicy`, an event loop policy installed before the program's first
line runs (the way jHiccup's ``-javaagent`` is in the JVM before ``main``): ``asyncio.run``, ``new_event_loop``
and ``get_event_loop`` all ask the policy, so the program runs unchanged on :class:`WatchedLoop`, the harness's
:class:`~perfsuite.harness.InstrumentedLoop` (M9: every callback timed and named) plus a :class:`LoopWatch`
that runs the M1 heartbeat in it and cuts its time into windows.

Windows are aligned to one origin for the whole watch (the parent's launch, shared through the environment, on
``perf_counter_ns``, which is the system's monotonic clock): window ``k`` is ``[origin + k*W, origin + (k+1)*W]``
in every loop of the program *and* in the idle control process, so window ``k`` of a thread and window ``k`` of
the control are the same stretch of time. The stretch from a loop's first start (plus ``--delay``) to the first
boundary is its **startup** (reported, never a sample: imports and first renders are not steady state); each
whole window is a sample; the stretch from the last boundary to the end of a run of the loop (or to the stop
instant, when perfsuite stopped the program: the shutdown after it is not part of the watch) is a partial window,
a sample too when it lasts at least two heartbeat periods. Windows follow the heartbeat's convention: a gap or a
callback straddling a boundary counts, whole, in both windows (:meth:`~perfsuite.harness.StallMonitor.trim`).

Each window is reduced in a loop callback just after its end (``LoopWatch._close``): the heartbeat window, the
callbacks' window and the GC window, into the results document's sample shape, sent to the parent as one line.
That reduction is the instrument's own cost on the program's loop; it is timed, reported in the next window as
``metrics.instrument_ms``, and appears under its own name among the longest callbacks when it is long. The same
agent runs in the idle control process, so the control carries the same cost: the floor includes the instrument.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Mapping
from typing import Any, Protocol

from perfsuite.harness import GcRecorder, Heartbeat, InstrumentedLoop, StallMonitor


class Agent(Protocol):
    """What a loop's watch needs of the process-wide agent (:class:`perfsuite.watch._agent.Agent`)."""

    period_ms: float
    delay_ns: int
    tick_capacity: int
    recorder: GcRecorder

    def owns_process(self) -> bool: ...
    def boundary(self, index: int) -> int: ...
    def index_at(self, t_ns: int) -> int: ...
    def stop_ns(self) -> int | None: ...
    def stopped_before(self, t_ns: int) -> bool: ...
    def register(self, watch: LoopWatch, thread: threading.Thread) -> str: ...
    def send_window(self, watch: LoopWatch, index: int, raw: Mapping[str, Any]) -> None: ...
    def send_startup(self, watch: LoopWatch, raw: Mapping[str, Any]) -> None: ...
    def window_closed(self, watch: LoopWatch, index: int) -> None: ...
    def dropped(self, mode: str | None, ms: float) -> None: ...

__all__ = ["MAIN_MODE", "Agent", "LoopWatch", "WatchPolicy", "WatchedLoop", "mode_for_thread"]

#: the mode of a loop running on the program's main thread; loops of other threads are ``live@<thread name>``
MAIN_MODE = "live"


def mode_for_thread(thread: threading.Thread) -> str:
    """``live`` for the main thread, ``live@<name>`` (file-name safe) for any other thread."""
    if thread is threading.main_thread():
        return MAIN_MODE
    return f"{MAIN_MODE}@" + (re.sub(r"[^A-Za-z0-9_.-]+", "-", thread.name).strip("-") or "thread")


class LoopWatch:
    """The heartbeat and the windows of one instrumented loop (see the module docstring)."""

    def __init__(self, agent: Agent, loop: WatchedLoop) -> None:
        self.agent = agent
        self.loop = loop
        self.monitor: StallMonitor = loop.stall_monitor
        self.mode: str | None = None
        self.thread: threading.Thread | None = None
        self.heartbeat: Heartbeat | None = None
        self.runs = 0
        self.run_start_ns = 0
        self.index = 0  # the window in progress: [origin + index*W, ...]
        self.window_start: int | None = None  # ns; None: nothing is being recorded
        self.boundary = 0  # ns: where the window in progress ends
        self.startup = False  # the stretch in progress is the startup, not a window
        self.cost_ns = 0  # the last reduction's duration: reported in the window it ran in
        self.closer: asyncio.TimerHandle | None = None
        self.lock = threading.Lock()  # the loop's thread and the agent's final flush never reduce at once

    # -- the loop's life ----------------------------------------------------------------------------

    def run_starting(self) -> None:
        """``run_forever`` is about to run the loop (in the loop's thread): start the instruments in it.

        The heartbeat needs the running loop, so it starts in the loop's first callback; but what is already
        queued (``asyncio.run``'s main task's first step, often the program's longest) runs before it. So the
        stretch starts here: the stall monitor is armed now (it times that first step), and the first heartbeat gap
        opens here (M1: no tick before a window's start, the start opens its first gap)."""
        if self.thread is None:
            self.thread = threading.current_thread()
            self.mode = self.agent.register(self, self.thread)
        self.run_start_ns = time.perf_counter_ns()
        if self.runs == 0:
            self.monitor.arm()  # armed for the loop's life; each window close trims what it no longer needs
        self.loop.call_soon(self._start)

    def _start(self) -> None:
        agent = self.agent
        now = self.run_start_ns
        if agent.stopped_before(now):
            return  # perfsuite stopped the program: what runs now (its shutdown) is not part of the watch
        heartbeat = Heartbeat(agent.period_ms, capacity=agent.tick_capacity)  # a ring that holds two windows
        heartbeat.start()
        with self.lock:
            self.heartbeat = heartbeat
            first = self.runs == 0
            self.runs += 1
            index = agent.index_at(now + (agent.delay_ns if first else 0))
            self.startup = first
            self.index = index - 1 if not first else index
            self.window_start = now
            self.boundary = agent.boundary(index)
        self._schedule()

    def run_stopped(self) -> None:
        """``run_forever`` returned (in the loop's thread, the loop no longer running): the stretch since the last
        boundary is a partial window, ended at the stop instant when perfsuite stopped the program before."""
        if self.closer is not None:
            self.closer.cancel()
            self.closer = None
        if self.heartbeat is not None:
            self.heartbeat.stop()
        self.flush(time.perf_counter_ns())

    def flush(self, end_ns: int) -> None:
        """Emit what is being recorded as a partial window ending at ``end_ns`` (or the stop instant, if earlier),
        then record nothing more until the loop runs again. Also the agent's last act for a loop still running."""
        with self.lock:
            start = self.window_start
            if start is None or self.heartbeat is None:
                return
            self.window_start = None
            stop = self.agent.stop_ns()
            end = min(end_ns, stop) if stop is not None else end_ns
            if end - start < 2 * self.heartbeat.period_ns:
                if end > start:
                    self.agent.dropped(self.mode, (end - start) / 1e6)
                return
            self._emit(start, end, self.index, whole=False)

    # -- windows ---------------------------------------------------------------------------------------

    def _schedule(self) -> None:
        # one heartbeat period after the boundary, so the tick that closes the window's last gap has run
        delay_s = (self.boundary + self.heartbeat.period_ns - time.perf_counter_ns()) / 1e9  # type: ignore[union-attr]
        self.closer = self.loop.call_at(self.loop.time() + max(delay_s, 0.0), self._close)

    def _close(self) -> None:
        heartbeat = self.heartbeat
        assert heartbeat is not None
        boundary = self.boundary
        last = heartbeat.last_tick_ns()
        stop = self.agent.stop_ns()
        if stop is not None and stop < boundary:
            self.closer = None
            self.flush(stop)  # perfsuite stopped the program inside this window
            return
        if last is None or last < boundary:  # the tick past the boundary has not run yet: look again shortly
            self.closer = self.loop.call_at(self.loop.time() + heartbeat.period_ns / 4e9, self._close)
            return
        t0 = time.perf_counter_ns()
        with self.lock:
            start = self.window_start
            if start is None:
                return
            if self.startup:
                self.agent.send_startup(self, self._raw(start, boundary, self.index, whole=False))
            else:  # whole unless the loop started running again inside it (a partial start)
                self._emit(start, boundary, self.index, whole=start == self.agent.boundary(self.index))
            self.monitor.trim(boundary)
            self.index += 1 if not self.startup else 0
            self.startup = False
            self.window_start = boundary
            self.boundary = self.agent.boundary(self.index + 1)
            self.agent.window_closed(self, self.index)
        self.cost_ns = time.perf_counter_ns() - t0
        self._schedule()

    def _emit(self, start: int, end: int, index: int, *, whole: bool) -> None:
        self.agent.send_window(self, index, self._raw(start, end, index, whole=whole))

    def _raw(self, start: int, end: int, index: int, *, whole: bool) -> dict[str, Any]:
        """The window as the agent sends it (:mod:`perfsuite.watch._protocol` makes it a sample in the parent):
        the ticks overlapping it, the callbacks reduced (count, busy, the longest named), the collections."""
        heartbeat = self.heartbeat
        assert heartbeat is not None
        ticks = heartbeat.ticks_between(start, end)
        if not ticks or ticks[-1] < end:
            ticks.append(max(time.perf_counter_ns(), end))  # the open last gap, closed by the query time (M1)
        stalls = self.monitor.window(start, end)
        # the collections overlapping the window, and those inside its longest callbacks (one that straddles the
        # window's start may have collected before it: its gc_ms counts the whole callback, like its ms)
        since = min([start, *(e.start_ns for e in stalls.top)])
        collections = [[e.generation, e.start_ns, e.duration_ns, e.collected, e.uncollectable]
                       for e in self.agent.recorder.events_since(since) if e.start_ns <= end]
        return {
            "index": index, "start_ns": start, "end_ns": end, "whole": whole,
            "started_at": time.time() - (time.perf_counter_ns() - start) / 1e9,
            "thread": self.thread.name if self.thread else "?", "instrument_ns": self.cost_ns,
            "ticks": ticks, "callbacks": stalls.callbacks, "busy_ns": stalls.busy_ns,
            "top": [[e.name, e.start_ns, e.duration_ns] for e in stalls.top], "gc": collections,
        }


class WatchedLoop(InstrumentedLoop):
    """The harness's instrumented selector loop with a :class:`LoopWatch` (heartbeat and windows) attached."""

    def __init__(self, agent: Agent) -> None:
        super().__init__(StallMonitor())
        self.watch = LoopWatch(agent, self)

    def run_forever(self) -> None:
        self.watch.run_starting()
        try:
            super().run_forever()
        finally:
            self.watch.run_stopped()


class WatchPolicy(asyncio.DefaultEventLoopPolicy):
    """The default policy (its child watchers and ``get_event_loop`` rules) whose new loops are watched."""

    def __init__(self, agent: Agent) -> None:
        super().__init__()
        self._agent = agent

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        if not self._agent.owns_process():  # a forked child keeps our policy: it gets a plain loop
            return asyncio.SelectorEventLoop()
        return WatchedLoop(self._agent)

