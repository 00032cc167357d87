"""M2: garbage-collection accounting from ``gc.callbacks``, and the per-sample GC policies.

The recorder keeps every collection (generation, start, duration) in preallocated arrays, so a
window can later ask which collections it overlapped, how much GC time fell inside it, and whether
a collection overlapped its largest heartbeat gap (the question the seed's GC samples raised).
"""

from __future__ import annotations

import asyncio
import gc
import time
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["GC_POLICIES", "GcEvent", "GcPolicy", "GcRecorder", "GcWindow", "apply_gc_policy"]

GcPolicy = Literal["collect-before", "natural"]
#: M2 policies: a full collection then a settle before each sample, or nothing forced.
GC_POLICIES: tuple[str, ...] = ("collect-before", "natural")


@dataclass(frozen=True, slots=True)
class GcEvent:
    """One collection as ``gc.callbacks`` reported it (times in ``perf_counter_ns``)."""

    generation: int
    start_ns: int
    duration_ns: int
    collected: int
    uncollectable: int

    @property
    def end_ns(self) -> int:
        """When the collection finished."""
        return self.start_ns + self.duration_ns


@dataclass(frozen=True, slots=True)
class GcWindow:
    """M2 for one sample: collections overlapping the window, GC time inside it, and the max-gap test."""

    collections: int
    gc_ms: float
    in_max_gap: bool
    by_generation: Mapping[str, int]
    events: tuple[GcEvent, ...]

    def to_dict(self, origin_ns: int) -> dict[str, object]:
        """JSON form; event times are made relative to ``origin_ns`` (the window start) in ms."""
        return {
            "collections": self.collections,
            "gc_ms": round(self.gc_ms, 6),
            "in_max_gap": self.in_max_gap,
            "by_generation": dict(self.by_generation),
            "events": [
                {
                    "generation": e.generation,
                    "start_ms": round((e.start_ns - origin_ns) / 1e6, 6),
                    "duration_ms": round(e.duration_ns / 1e6, 6),
                    "collected": e.collected,
                    "uncollectable": e.uncollectable,
                }
                for e in self.events
            ],
        }


def _overlap(a0: int, a1: int, b0: int, b1: int) -> int:
    return max(0, min(a1, b1) - max(a0, b0))


class GcRecorder:
    """M2: records every collection through ``gc.callbacks`` while installed.

    Use as a context manager (``with GcRecorder() as rec:``) or ``install()``/``uninstall()``.
    The callback writes into preallocated arrays (a ring of ``capacity`` collections).
    """

    def __init__(self, capacity: int = 4096) -> None:
        if capacity < 16 or capacity & (capacity - 1):
            raise ValueError(f"capacity must be a power of two >= 16, got {capacity!r}")
        self._mask = capacity - 1
        self._capacity = capacity
        self._start = array("q", bytes(8 * capacity))
        self._duration = array("q", bytes(8 * capacity))
        self._generation = array("q", bytes(8 * capacity))
        self._collected = array("q", bytes(8 * capacity))
        self._uncollectable = array("q", bytes(8 * capacity))
        self._count = 0
        self._pending_start = 0
        self._installed = False

    @classmethod
    def from_events(cls, events: list[GcEvent]) -> GcRecorder:
        """A recorder holding collections recorded elsewhere (another process: a live watch's agent, M11), for
        :meth:`window` offline; never installed."""
        capacity = 16
        while capacity < len(events):
            capacity <<= 1
        rec = cls(capacity)
        for n, e in enumerate(sorted(events, key=lambda e: e.start_ns)):
            rec._start[n], rec._duration[n], rec._generation[n] = e.start_ns, e.duration_ns, e.generation
            rec._collected[n], rec._uncollectable[n] = e.collected, e.uncollectable
            rec._count = n + 1
        return rec

    def events_since(self, start_ns: int) -> list[GcEvent]:
        """Retained collections that ended at or after ``start_ns``, oldest first (what a window from there needs)."""
        return self._ending_since(start_ns)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        # M2: the measuring path; keep it to clock reads and array stores
        now = time.perf_counter_ns()
        if phase == "start":
            self._pending_start = now
            return
        i = self._count & self._mask
        self._start[i] = self._pending_start
        self._duration[i] = now - self._pending_start
        self._generation[i] = info.get("generation", -1)
        self._collected[i] = info.get("collected", 0)
        self._uncollectable[i] = info.get("uncollectable", 0)
        self._count += 1

    def install(self) -> None:
        """Start recording (idempotent)."""
        if not self._installed:
            gc.callbacks.append(self._callback)
            self._installed = True

    def uninstall(self) -> None:
        """Stop recording; recorded collections stay queryable."""
        if self._installed:
            try:
                gc.callbacks.remove(self._callback)
            except ValueError:
                pass
            self._installed = False

    def __enter__(self) -> GcRecorder:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    @property
    def count(self) -> int:
        """Collections recorded since construction."""
        return self._count

    def events(self) -> list[GcEvent]:
        """Every retained collection, oldest first."""
        first = max(0, self._count - self._capacity)
        out = []
        for n in range(first, self._count):
            i = n & self._mask
            out.append(
                GcEvent(
                    int(self._generation[i]),
                    self._start[i],
                    self._duration[i],
                    int(self._collected[i]),
                    int(self._uncollectable[i]),
                )
            )
        return out

    def _ending_since(self, start_ns: int) -> list[GcEvent]:
        """Retained collections that ended at or after ``start_ns``, oldest first. Collections never overlap (the
        collector holds the GIL), so walking back from the newest stops at the first older one: a live watch (M11)
        asks about its last window every second, and must not rebuild the whole ring each time."""
        first = max(0, self._count - self._capacity)
        out = []
        n = self._count - 1
        while n >= first:
            i = n & self._mask
            start, duration = self._start[i], self._duration[i]
            if start + duration < start_ns:
                break
            out.append(GcEvent(int(self._generation[i]), start, duration, int(self._collected[i]),
                               int(self._uncollectable[i])))
            n -= 1
        out.reverse()
        return out

    def window(self, start_ns: int, end_ns: int, max_gap: tuple[int, int] | None = None) -> GcWindow:
        """M2: collections overlapping ``[start_ns, end_ns]``, GC ms inside it, and overlap with ``max_gap``."""
        hits = [e for e in self._ending_since(start_ns) if e.start_ns <= end_ns]
        gc_ns = sum(_overlap(e.start_ns, e.end_ns, start_ns, end_ns) for e in hits)
        by_gen = {"0": 0, "1": 0, "2": 0}
        for e in hits:
            key = str(e.generation)
            by_gen[key] = by_gen.get(key, 0) + 1
        in_gap = False
        if max_gap is not None:
            g0, g1 = max_gap
            in_gap = any(e.end_ns >= g0 and e.start_ns <= g1 for e in hits)
        return GcWindow(len(hits), gc_ns / 1e6, in_gap, by_gen, tuple(hits))


async def apply_gc_policy(policy: str, settle_s: float) -> None:
    """M2: ``collect-before`` runs a full collection then lets the loop settle; ``natural`` only settles.

    The settle is never skipped: the window's first gap must start from an ordinary tick, not from
    the stall of the forced collection or of the sample's set-up.
    """
    if policy == "collect-before":
        gc.collect()
    elif policy != "natural":
        raise ValueError(f"unknown GC policy {policy!r} (expected one of {', '.join(GC_POLICIES)})")
    await asyncio.sleep(settle_s)
