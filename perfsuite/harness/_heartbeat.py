"""M1: the heartbeat, a repeating event-loop timer whose tick-to-tick gaps measure loop stalls.

The timer runs against absolute deadlines (``t0 + k * period``), so it never drifts; after a late
tick it schedules the next deadline still in the future instead of bursting to catch up. Each tick
stores ``time.perf_counter_ns()`` into a preallocated ring buffer: the tick path is the instrument,
so it allocates nothing of its own beyond the timestamp and asyncio's timer handle.

Window convention (documented choice): a window ``[start_ns, end_ns]`` covers every gap between
consecutive ticks that *overlaps* it, from the last tick at or before ``start_ns`` to the first tick
at or after ``end_ns``. A stall that straddles either edge is therefore counted whole: a loop blocked
across the acknowledgement tail is not cut short at ``end_ns``. Callers wait for the first tick past
``end_ns`` (:meth:`Heartbeat.wait_past`) before asking for the window; if none has arrived yet the
query time closes the open gap, and if no tick precedes the window ``start_ns`` opens it.
"""

from __future__ import annotations

import asyncio
import math
import time
from array import array
from dataclasses import dataclass

from hdrh.histogram import HdrHistogram

__all__ = ["LAG_HIGHEST_US", "GapWindow", "Heartbeat", "LagPercentiles"]

#: HDR histogram range for lag in integer microseconds: 1 us .. 10 minutes, 3 significant figures.
#: hdrhistogram silently drops out-of-range values, so lags are clamped to this before recording.
LAG_LOWEST_US = 1
LAG_HIGHEST_US = 600_000_000
LAG_SIGNIFICANT_FIGURES = 3

_PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p999", 99.9))


def new_lag_histogram() -> HdrHistogram:
    """An empty lag histogram with the suite's fixed range (integer microseconds)."""
    return HdrHistogram(LAG_LOWEST_US, LAG_HIGHEST_US, LAG_SIGNIFICANT_FIGURES)


@dataclass(frozen=True, slots=True)
class LagPercentiles:
    """Percentiles of per-tick lag in integer microseconds (M1, M5), as hdrhistogram reports them."""

    p50: int
    p90: int
    p99: int
    p999: int
    max: int
    count: int

    @classmethod
    def of(cls, histogram: HdrHistogram) -> LagPercentiles:
        """Read the percentiles of ``histogram`` in one pass."""
        values = histogram.get_percentile_to_value_dict([p for _, p in _PERCENTILES])
        picked = {name: int(values[p]) for name, p in _PERCENTILES}
        return cls(max=int(histogram.get_max_value()), count=int(histogram.get_total_count()), **picked)

    def to_dict(self) -> dict[str, int]:
        """JSON form: ``{"p50", "p90", "p99", "p999", "max", "count"}``."""
        return {
            "p50": self.p50,
            "p90": self.p90,
            "p99": self.p99,
            "p999": self.p999,
            "max": self.max,
            "count": self.count,
        }


@dataclass(frozen=True, slots=True)
class GapWindow:
    """What the heartbeat saw in one window (M1): the largest gap, and lag with and without CO correction.

    ``hdr_corrected``/``hdr_uncorrected`` are the encoded HDR histograms (base64 "HISTF..." blobs), so
    a window measured in a worker process travels as JSON and ends up in the ``.hlog`` export.
    """

    start_ns: int
    end_ns: int
    period_ns: int
    ticks: int
    gaps: int
    max_gap_ns: int
    max_gap_start_ns: int
    max_gap_end_ns: int
    lag_us: LagPercentiles
    lag_us_uncorrected: LagPercentiles
    hdr_corrected: str
    hdr_uncorrected: str

    @property
    def max_gap_ms(self) -> float:
        """The largest tick-to-tick interval overlapping the window, in milliseconds."""
        return self.max_gap_ns / 1e6


class Heartbeat:
    """M1: a 5 ms (by default) loop timer that records every tick into a preallocated ring buffer.

    Use inside a running event loop: ``hb.start()`` ... ``hb.window(a, b)`` ... ``hb.stop()``, or
    ``async with Heartbeat() as hb:``. One heartbeat serves many windows.
    """

    def __init__(self, period_ms: float = 5.0, capacity: int = 1 << 16) -> None:
        if not period_ms > 0:
            raise ValueError(f"period_ms must be positive, got {period_ms!r}")
        if capacity < 16 or capacity & (capacity - 1):
            raise ValueError(f"capacity must be a power of two >= 16, got {capacity!r}")
        self.period_ms = float(period_ms)
        self.period_ns = round(period_ms * 1e6)
        self._period_s = period_ms / 1e3
        self._mask = capacity - 1
        self._capacity = capacity
        self._buf = array("q", bytes(8 * capacity))  # preallocated: the tick never grows it
        self._count = 0
        self._k = 0
        self._t0 = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None

    @classmethod
    def from_ticks(cls, ticks_ns: list[int], period_ms: float = 5.0) -> Heartbeat:
        """A stopped heartbeat holding recorded ticks, for offline analysis (and the harness's tests)."""
        capacity = 16
        while capacity < len(ticks_ns):
            capacity <<= 1
        hb = cls(period_ms, capacity)
        for t in sorted(ticks_ns):
            hb._buf[hb._count & hb._mask] = t
            hb._count += 1
        return hb

    # -- the timer ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Start ticking on the running loop; the first tick is one period from now."""
        if self._handle is not None:
            return
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._t0 = loop.time()
        self._k = 1
        self._handle = loop.call_at(self._t0 + self._period_s, self._tick)

    def stop(self) -> None:
        """Stop ticking; recorded ticks stay queryable."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    @property
    def running(self) -> bool:
        """Whether the timer is scheduled."""
        return self._handle is not None

    def _tick(self) -> None:
        # M1: the instrument. Record first, then schedule the next absolute deadline t0 + k*period;
        # after a late tick, skip to the first deadline still in the future (no burst catch-up).
        now_ns = time.perf_counter_ns()
        i = self._count
        self._buf[i & self._mask] = now_ns
        self._count = i + 1
        loop = self._loop
        assert loop is not None
        k = self._k + 1
        deadline = self._t0 + k * self._period_s
        now = loop.time()
        if deadline <= now:
            k = math.floor((now - self._t0) / self._period_s) + 1
            deadline = self._t0 + k * self._period_s
        self._k = k
        self._handle = loop.call_at(deadline, self._tick)

    async def __aenter__(self) -> Heartbeat:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop()

    # -- queries ----------------------------------------------------------------------------------

    @property
    def tick_count(self) -> int:
        """Ticks recorded since construction."""
        return self._count

    def last_tick_ns(self) -> int | None:
        """The most recent tick's ``perf_counter_ns``, or ``None`` before the first tick."""
        if self._count == 0:
            return None
        return self._buf[(self._count - 1) & self._mask]

    async def wait_past(self, t_ns: int, timeout_s: float = 10.0) -> None:
        """Sleep until a tick at or after ``t_ns`` has been recorded (closes the window's last gap)."""
        deadline = time.perf_counter_ns() + int(timeout_s * 1e9)
        while True:
            last = self.last_tick_ns()
            if last is not None and last >= t_ns:
                return
            now = time.perf_counter_ns()
            if now >= deadline or not self.running:
                return
            ahead = max(t_ns - now, 0) / 1e9
            await asyncio.sleep(max(ahead, self._period_s / 2))

    def ticks_between(self, start_ns: int, end_ns: int) -> list[int]:
        """Ticks from the last one at or before ``start_ns`` to the first at or after ``end_ns``."""
        count = self._count
        oldest = max(0, count - self._capacity)
        buf, mask = self._buf, self._mask
        # walk back from the newest tick: windows are short and recent
        i = count - 1
        while i >= oldest and buf[i & mask] > end_ns:
            i -= 1
        if i >= oldest and buf[i & mask] == end_ns:
            last = i
        else:
            last = min(i + 1, count - 1)  # first tick after end_ns, if one is recorded yet
        while i >= oldest and buf[i & mask] > start_ns:
            i -= 1
        if i < oldest and count > self._capacity:
            raise RuntimeError("heartbeat ring buffer overrun: window older than its capacity")
        first = max(i, oldest)
        if count == 0:
            return []
        return [buf[j & mask] for j in range(first, last + 1)]

    def window(self, start_ns: int, end_ns: int) -> GapWindow:
        """M1: max gap and lag histograms (CO-corrected and raw) for the gaps overlapping the window."""
        if end_ns < start_ns:
            raise ValueError("window ends before it starts")
        ticks = self.ticks_between(start_ns, end_ns)
        if not ticks or ticks[0] > start_ns:
            ticks.insert(0, start_ns)  # no tick precedes the window: its start opens the first gap
        if ticks[-1] < end_ns:
            ticks.append(max(time.perf_counter_ns(), end_ns))  # open gap closed by the query time
        period_ns = self.period_ns
        period_us = max(1, period_ns // 1000)
        corrected = new_lag_histogram()
        raw = new_lag_histogram()
        max_gap = -1
        max_at = 0
        for j in range(1, len(ticks)):
            gap = ticks[j] - ticks[j - 1]
            if gap > max_gap:
                max_gap, max_at = gap, j
            # integer microseconds, clamped: hdrhistogram truncates floats and drops out-of-range values
            lag_us = min(max(0, gap - period_ns) // 1000, LAG_HIGHEST_US)
            raw.record_value(lag_us)
            corrected.record_corrected_value(lag_us, period_us)  # correct the lag, never the raw gap
        inside = sum(1 for t in ticks if start_ns <= t <= end_ns)
        return GapWindow(
            start_ns=start_ns,
            end_ns=end_ns,
            period_ns=period_ns,
            ticks=inside,
            gaps=len(ticks) - 1,
            max_gap_ns=max_gap,
            max_gap_start_ns=ticks[max_at - 1],
            max_gap_end_ns=ticks[max_at],
            lag_us=LagPercentiles.of(corrected),
            lag_us_uncorrected=LagPercentiles.of(raw),
            hdr_corrected=corrected.encode().decode("ascii"),
            hdr_uncorrected=raw.encode().decode("ascii"),
        )
