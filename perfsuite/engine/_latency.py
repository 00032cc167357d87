"""E1 / M10: the latency-injecting layer. Adds a drawn delay where the real call happens.

A :class:`DelayModel` holds one :class:`Distribution` per operation kind (file fsync, directory fsync,
rename/replace, exclusive create) and *tops up* each real call: after the call returns, the issuing
thread sleeps for ``max(0, drawn - real duration)``, so the operation lasts at least the drawn latency
and a delayed fsync blocks (and, with the default ``time.sleep``, releases the GIL on) the thread that
issued it, like a real one. :class:`LatencyFileSystem` applies a model to any :class:`FileSystem`; raw
callers (the suite's fsync floor) use :meth:`DelayModel.settle` directly so both see one delay model.

The layer knows nothing about named device profiles: those are data, owned by the suite. It composes
with the recording and fault layers in any order (it overrides primitives only, like they do). A
failing call propagates at once, without a delay: failure latency is not modelled.
"""

from __future__ import annotations

import bisect
import itertools
import math
import os
import random
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from perfsuite.engine._fs import DelegatingFileSystem, FileSystem

__all__ = [
    "LATENCY_OPS",
    "DelayModel",
    "Distribution",
    "FixedDelay",
    "LatencyFileSystem",
    "LatencyStats",
    "LogNormalDelay",
    "QuantileDelay",
    "UniformDelay",
]

#: the operation kinds a model may delay (M10: fsync, directory fsync, rename, create)
LATENCY_OPS: tuple[str, ...] = ("fsync", "fsync_dir", "replace", "create")

Sleep = Callable[[float], None]
Clock = Callable[[], float]


class Distribution(ABC):
    """A distribution of one operation's latency, in milliseconds; draws take an explicit RNG."""

    @abstractmethod
    def draw_ms(self, rng: random.Random) -> float:
        """One latency in ms (never negative)."""

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """JSON form, recorded beside results."""


@dataclass(frozen=True, slots=True)
class FixedDelay(Distribution):
    """Always ``ms`` (a vendor's single typical figure, or 0 for "no device wait")."""

    ms: float

    def draw_ms(self, rng: random.Random) -> float:
        return max(0.0, self.ms)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "fixed", "ms": self.ms}


@dataclass(frozen=True, slots=True)
class UniformDelay(Distribution):
    """Uniform on ``[low_ms, high_ms]`` (e.g. a fixed seek plus a uniform rotational delay)."""

    low_ms: float
    high_ms: float

    def draw_ms(self, rng: random.Random) -> float:
        return max(0.0, rng.uniform(self.low_ms, self.high_ms))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "uniform", "low_ms": self.low_ms, "high_ms": self.high_ms}


@dataclass(frozen=True, slots=True)
class QuantileDelay(Distribution):
    """A published percentile table, sampled by inverse CDF with linear interpolation between points.

    ``points`` are ``(percentile, ms)`` pairs with percentiles from 0 (the minimum) to 100 (the maximum).
    """

    points: tuple[tuple[float, float], ...]
    _pcts: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        pts = tuple((float(p), float(v)) for p, v in self.points)
        if len(pts) < 2 or pts[0][0] != 0.0 or pts[-1][0] != 100.0:
            raise ValueError("quantile points must run from percentile 0 to percentile 100")
        if any(b[0] <= a[0] or b[1] < a[1] for a, b in itertools.pairwise(pts)):
            raise ValueError("quantile points must increase in percentile and never decrease in ms")
        object.__setattr__(self, "points", pts)
        object.__setattr__(self, "_pcts", tuple(p for p, _ in pts))

    def quantile_ms(self, pct: float) -> float:
        """The latency at percentile ``pct`` (0-100), interpolated."""
        i = bisect.bisect_right(self._pcts, pct)
        if i <= 0:
            return self.points[0][1]
        if i >= len(self.points):
            return self.points[-1][1]
        (p0, v0), (p1, v1) = self.points[i - 1], self.points[i]
        return v0 + (v1 - v0) * (pct - p0) / (p1 - p0)

    def draw_ms(self, rng: random.Random) -> float:
        return max(0.0, self.quantile_ms(rng.random() * 100.0))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "quantiles", "points": [list(p) for p in self.points]}


@dataclass(frozen=True, slots=True)
class LogNormalDelay(Distribution):
    """Log-normal with median ``median_ms`` and shape ``sigma`` (see :meth:`from_mean_p99`)."""

    median_ms: float
    sigma: float

    @classmethod
    def from_mean_p99(cls, mean_ms: float, p99_ms: float) -> LogNormalDelay:
        """The log-normal whose mean and 99th percentile are the published ones (needs p99 > mean)."""
        if not (mean_ms > 0 and p99_ms > mean_ms):
            raise ValueError("a log-normal fit needs 0 < mean < p99")
        z = 2.326347874  # standard normal 99th percentile
        # ln(p99) - ln(mean) = z*s - s^2/2; the smaller root keeps the body near the mean
        gap = math.log(p99_ms / mean_ms)
        disc = z * z - 2 * gap
        if disc < 0:
            raise ValueError("no log-normal has this mean and p99 (p99 too far above the mean)")
        sigma = z - math.sqrt(disc)
        return cls(median_ms=mean_ms * math.exp(-sigma * sigma / 2), sigma=sigma)

    def draw_ms(self, rng: random.Random) -> float:
        return self.median_ms * math.exp(self.sigma * rng.gauss(0.0, 1.0))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "lognormal", "median_ms": self.median_ms, "sigma": self.sigma}


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """What a model injected: per operation kind, calls seen, calls delayed, ms slept, and calls whose
    real duration already exceeded the draw (the device here was slower than the profile)."""

    calls: Mapping[str, int]
    delayed: Mapping[str, int]
    injected_ms: Mapping[str, float]
    real_exceeded: Mapping[str, int]

    @property
    def total_injected_ms(self) -> float:
        """Milliseconds slept over every kind."""
        return float(sum(self.injected_ms.values()))

    @property
    def total_calls(self) -> int:
        """Operations the model saw."""
        return int(sum(self.calls.values()))

    def minus(self, before: LatencyStats) -> LatencyStats:
        """The difference since ``before`` (a per-sample figure from two snapshots)."""
        return LatencyStats(
            {k: self.calls.get(k, 0) - before.calls.get(k, 0) for k in LATENCY_OPS},
            {k: self.delayed.get(k, 0) - before.delayed.get(k, 0) for k in LATENCY_OPS},
            {k: self.injected_ms.get(k, 0.0) - before.injected_ms.get(k, 0.0) for k in LATENCY_OPS},
            {k: self.real_exceeded.get(k, 0) - before.real_exceeded.get(k, 0) for k in LATENCY_OPS},
        )


class DelayModel:
    """Draws one delay per operation from its distribution and sleeps on the calling thread.

    ``sleep`` (default ``time.sleep``: releases the GIL like a real fsync) and ``clock`` are injectable,
    as is ``rng`` (default ``random.Random(seed)``), so tests observe every pause without timing.
    Kinds without a distribution pass through undelayed.
    """

    def __init__(
        self,
        delays: Mapping[str, Distribution],
        *,
        seed: int = 0,
        rng: random.Random | None = None,
        sleep: Sleep = time.sleep,
        clock: Clock = time.perf_counter,
        name: str = "",
    ) -> None:
        unknown = set(delays) - set(LATENCY_OPS)
        if unknown:
            raise ValueError(f"unknown operation kinds {sorted(unknown)} (expected {', '.join(LATENCY_OPS)})")
        self.delays = dict(delays)
        self.name = name
        self.seed = seed
        self.rng = rng if rng is not None else random.Random(seed)
        self.sleep = sleep
        self.clock = clock
        self._calls = dict.fromkeys(LATENCY_OPS, 0)
        self._delayed = dict.fromkeys(LATENCY_OPS, 0)
        self._injected = dict.fromkeys(LATENCY_OPS, 0.0)
        self._exceeded = dict.fromkeys(LATENCY_OPS, 0)
        self._stats_lock = threading.Lock()

    def __getstate__(self) -> dict[str, object]:
        # picklable for a worker process (E4 process offload): the lock is rebuilt, not copied
        return {k: v for k, v in self.__dict__.items() if k != "_stats_lock"}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._stats_lock = threading.Lock()

    def start(self) -> float:
        """The clock reading to pass to :meth:`settle` once the real call has returned."""
        return self.clock()

    def settle(self, kind: str, started: float) -> float:
        """Top up the operation ``kind`` begun at ``started``: sleep ``max(0, draw - elapsed)`` seconds
        on this thread; return the seconds slept."""
        distribution = self.delays.get(kind)
        if distribution is None:
            return 0.0
        with self._stats_lock:  # one draw order per model, whatever thread asks
            drawn_s = distribution.draw_ms(self.rng) / 1e3
            self._calls[kind] += 1
        elapsed = self.clock() - started
        pause = drawn_s - elapsed
        if pause <= 0:
            with self._stats_lock:
                self._exceeded[kind] += 1 if drawn_s > 0 else 0
            return 0.0
        self.sleep(pause)
        with self._stats_lock:
            self._delayed[kind] += 1
            self._injected[kind] += pause * 1e3
        return pause

    def stats(self) -> LatencyStats:
        """A snapshot of what was injected so far."""
        with self._stats_lock:
            return LatencyStats(dict(self._calls), dict(self._delayed), dict(self._injected), dict(self._exceeded))

    def to_dict(self) -> dict[str, Any]:
        """The model as data: name and one distribution per delayed kind."""
        return {"name": self.name, "seed": self.seed, "delays": {k: d.to_dict() for k, d in self.delays.items()}}


def _creates_exclusively(flags: int) -> bool:
    return bool(flags & os.O_CREAT) and bool(flags & os.O_EXCL)


class LatencyFileSystem(DelegatingFileSystem):
    """Wraps ``inner`` and tops up fsync (file and directory), fdatasync (the fsync distribution), replace
    and exclusive create with the model's drawn delays, on the thread that issued the call. Everything
    else passes through."""

    def __init__(self, inner: FileSystem, model: DelayModel) -> None:
        super().__init__(inner)
        self.model = model

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        if not _creates_exclusively(flags):
            return super().open(path, flags, mode)
        started = self.model.start()
        fd = super().open(path, flags, mode)
        self.model.settle("create", started)
        return fd

    def open_at(self, dir_fd: int, name: str, flags: int, mode: int = 0o644) -> int:
        if not _creates_exclusively(flags):
            return super().open_at(dir_fd, name, flags, mode)
        started = self.model.start()
        fd = super().open_at(dir_fd, name, flags, mode)
        self.model.settle("create", started)
        return fd

    def fsync(self, fd: int) -> None:
        is_dir = self.path_of(fd)[1]
        started = self.model.start()
        super().fsync(fd)
        self.model.settle("fsync_dir" if is_dir else "fsync", started)

    def fdatasync(self, fd: int) -> None:
        """A data sync draws the file fsync distribution: the device cost of a flush is the same (M10)."""
        started = self.model.start()
        super().fdatasync(fd)
        self.model.settle("fsync", started)

    def replace(self, src: str, dst: str) -> None:
        started = self.model.start()
        super().replace(src, dst)
        self.model.settle("replace", started)

    def for_worker(self) -> FileSystem:
        """A worker process keeps the simulated device (its own copy of the model, same seed)."""
        return LatencyFileSystem(self.inner.for_worker(), self.model)
