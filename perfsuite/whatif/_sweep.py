"""The settings grid, the sweep over it and what each setting reports (SPEC section 6).

Per setting: publications per minute (mean over the trace, peak in one fixed minute), bytes written and
allocated (this machine's measured per-publication costs, M3), the crash-loss window (longest time a
change stays unpublished) and the notification delay (offer to run, E6). Pareto-optimal settings are
those no other setting beats on both publications per minute and the loss window.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from perfsuite._limits import LIMITS, check_limit
from perfsuite.cluster import Runner, Task, stream
from perfsuite.errors import PerfsuiteError
from perfsuite.whatif._costs import PublicationCosts
from perfsuite.whatif._simulate import (
    DEFAULT_DURATIONS_S,
    Publication,
    Replay,
    Setting,
    TraceSummary,
    cost_kind,
    per_minute,
    replay,
    summarize_trace,
)
from perfsuite.workloads.traces import Trace

DEFAULT_DEBOUNCE_S = (0.1, 0.5, 1.0, 2.0, 5.0, 10.0)
DEFAULT_CHECKPOINT_S = (30.0,)
DEFAULT_NOTIFY_MAX_S = (0.5,)
#: the engine's publication kinds, as the costs file and the table name them
ENGINE_KINDS = ("registry", "checkpoint", "mail")


def parse_intervals(text: str, option: str, *, allow_zero: bool = True) -> tuple[float, ...]:
    """``"0.1,0.5,2"`` -> (0.1, 0.5, 2.0); a negative, zero (unless allowed) or non-number value is a
    one-line error naming ``option``."""
    values: list[float] = []
    for part in text.split(","):
        item = part.strip()
        if not item:
            raise PerfsuiteError(f"{option}: empty value in {text!r}; expected comma-separated seconds")
        try:
            value = float(item)
        except ValueError:
            raise PerfsuiteError(f"{option}: {item!r} is not a number of seconds") from None
        if not math.isfinite(value):
            raise PerfsuiteError(f"{option}: {item!r} is not a finite number of seconds")
        if value < 0:
            raise PerfsuiteError(f"{option}: {item} is negative; intervals must be >= 0 s")
        if value == 0 and not allow_zero:
            raise PerfsuiteError(f"{option}: intervals must be > 0 s, got {item}")
        values.append(value)
    return tuple(dict.fromkeys(values))


def make_grid(debounce: Iterable[float] = DEFAULT_DEBOUNCE_S, checkpoint: Iterable[float] = DEFAULT_CHECKPOINT_S,
              notify_max: Iterable[float] = DEFAULT_NOTIFY_MAX_S) -> tuple[Setting, ...]:
    """Every combination, debounce varying fastest within a checkpoint interval; at most
    ``LIMITS["grid_settings"]`` of them (the product was built in memory, however large)."""
    debounce, checkpoint, notify_max = tuple(debounce), tuple(checkpoint), tuple(notify_max)
    size = len(debounce) * len(checkpoint) * len(notify_max)
    if check_limit("grid_settings", size):
        raise PerfsuiteError(f"the grid has {size} settings ({len(debounce)} debounce x {len(checkpoint)} checkpoint x "
                             f"{len(notify_max)} notify-max intervals); at most {LIMITS['grid_settings'].high:g}")
    return tuple(Setting(d, c, n) for c, n, d in itertools.product(tuple(checkpoint), tuple(notify_max),
                                                                   tuple(debounce)))


@dataclass(frozen=True, slots=True)
class SettingResult:
    """What one setting did to the trace."""

    setting: Setting
    publications: int
    by_kind: Mapping[str, int]
    generations: int  # adopted; the rest were empty selections (E4 no-ops)
    per_minute_mean: float
    per_minute_peak: int
    generations_per_minute: float
    bytes_written: int | None
    bytes_allocated: int | None
    loss_window_s: float  # the longest any change (observational or streamed text) stayed unpublished
    observational_loss_max_s: float | None
    observational_loss_mean_s: float | None
    text_loss_max_s: float | None
    notify_delay_max_s: float | None
    notify_delay_mean_s: float | None
    notifications: int
    unpublished: int
    debounce_fired: int | None  # the engine's scheduler counters; None through a team's own target
    debounce_absorbed: int | None
    debounce_deferred: int | None
    checkpoint_ticks: int | None
    pareto: bool = False

    def row(self, kinds: Sequence[str] = ENGINE_KINDS) -> dict[str, Any]:
        """A flat record (CSV columns, JSON entries): one ``publications_KIND`` column per kind."""
        s = self.setting
        return {
            "debounce_s": s.debounce_s, "checkpoint_interval_s": s.checkpoint_interval_s,
            "notify_first_s": s.notify_first_s, "notify_max_s": s.notify_max_s,
            "publications": self.publications,
            **{f"publications_{k}": self.by_kind.get(k, 0) for k in kinds},
            "generations": self.generations, "noops": self.publications - self.generations,
            "per_minute_mean": round(self.per_minute_mean, 4), "per_minute_peak": self.per_minute_peak,
            "generations_per_minute": round(self.generations_per_minute, 4),
            "bytes_written": self.bytes_written, "bytes_allocated": self.bytes_allocated,
            "loss_window_s": round(self.loss_window_s, 6),
            "observational_loss_max_s": _r(self.observational_loss_max_s),
            "observational_loss_mean_s": _r(self.observational_loss_mean_s),
            "text_loss_max_s": _r(self.text_loss_max_s),
            "notify_delay_max_s": _r(self.notify_delay_max_s), "notify_delay_mean_s": _r(self.notify_delay_mean_s),
            "notifications": self.notifications, "unpublished": self.unpublished,
            "debounce_fired": self.debounce_fired, "debounce_absorbed": self.debounce_absorbed,
            "debounce_deferred": self.debounce_deferred, "checkpoint_ticks": self.checkpoint_ticks,
            "pareto": self.pareto,
        }


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _max(values: Sequence[float]) -> float | None:
    return max(values) if values else None


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _bytes(pubs: Sequence[Publication], costs: PublicationCosts | None, kind_of: Callable[[str], str],
           field_name: str) -> int | None:
    """The total of one byte count: what each publication reported, else its kind's cost (adopted:
    ``bytes_written``, an empty selection or a failure: ``staged_bytes``); None (not measured) when a
    publication has neither."""
    total = 0
    for p in pubs:
        reported = getattr(p, field_name)
        if reported is not None:
            total += reported
            continue
        if costs is None:
            return None
        kind = kind_of(p.kind)
        cost = costs.kinds.get(kind)
        if cost is None:
            raise PerfsuiteError(f"{costs.source or 'the costs'}: no costs for publication kind {kind!r} "
                                 f"(it has {', '.join(costs.kinds)})")
        if field_name == "bytes_allocated":
            if cost.allocated_bytes is None:  # a tracemalloc pass: not measured, never 0
                return None
            total += cost.allocated_bytes
        else:
            total += cost.bytes_written if p.outcome == "adopted" else cost.staged_bytes
    return total


def result_of(run: Replay, costs: PublicationCosts | None,
              kind_of: Callable[[str], str] = cost_kind) -> SettingResult:
    """Reduce one replay to its figures; bytes from what publications reported, else from ``costs``
    (``kind_of`` maps a publication's kind to its cost kind: the engine's three, or a target's own)."""
    pubs = run.publications
    by_kind = collections.Counter(kind_of(p.kind) for p in pubs)
    adopted = [p for p in pubs if p.outcome == "adopted"]
    mean, peak = per_minute([p.done_at for p in pubs], run.duration_s)
    written = _bytes(pubs, costs, kind_of, "bytes_written")
    allocated = _bytes(pubs, costs, kind_of, "bytes_allocated")
    obs, text = run.observational_losses, run.text_losses
    return SettingResult(
        setting=run.setting, publications=len(pubs), by_kind=dict(by_kind), generations=len(adopted),
        per_minute_mean=mean, per_minute_peak=peak,
        generations_per_minute=per_minute([p.done_at for p in adopted], run.duration_s)[0],
        bytes_written=written, bytes_allocated=allocated,
        loss_window_s=max(_max(obs) or 0.0, _max(text) or 0.0),
        observational_loss_max_s=_max(obs), observational_loss_mean_s=_mean(obs), text_loss_max_s=_max(text),
        notify_delay_max_s=_max(run.notification_waits), notify_delay_mean_s=_mean(run.notification_waits),
        notifications=len(run.notification_waits), unpublished=run.unpublished,
        debounce_fired=run.debounce_fired, debounce_absorbed=run.debounce_absorbed,
        debounce_deferred=run.debounce_deferred, checkpoint_ticks=run.checkpoint_ticks,
    )


def pareto_front(points: Sequence[tuple[float, float]]) -> list[bool]:
    """Whether each (cost, risk) point is Pareto-optimal (minimising both): no other point is <= on
    both and < on one. Equal points are all optimal."""
    flags = []
    for i, (x, y) in enumerate(points):
        dominated = any((x2 <= x and y2 <= y) and (x2 < x or y2 < y) for j, (x2, y2) in enumerate(points) if j != i)
        flags.append(not dominated)
    return flags


@dataclass(frozen=True, slots=True)
class WhatIf:
    """A sweep: the trace summary, one result per setting (grid order), costs and how long it took."""

    trace: TraceSummary
    results: tuple[SettingResult, ...]
    costs: PublicationCosts | None
    simulate_s: float
    durations_s: Mapping[str, float] = field(default_factory=dict)
    kinds: tuple[str, ...] = ENGINE_KINDS  # the publication kinds, in column order
    target: str | None = None  # a team's own replay target (``module:Class``), None: the engine's sessions

    def to_json(self) -> dict[str, Any]:
        t = self.trace
        return {
            "target": self.target,
            "trace": {"source": t.source, "duration_s": t.duration_s, "sessions": t.sessions, "events": t.events,
                      "observational_changes": t.observational, "messages": t.messages, "mail": t.mail,
                      "requests": t.requests, "recorded_publications": t.recorded_publications,
                      "every_transition_per_minute": round(t.every_transition_per_minute, 4),
                      "every_transition_peak_per_minute": t.every_transition_peak, "user_events": t.user_events,
                      "meta": dict(t.meta)},
            "costs": None if self.costs is None else {**self.costs.to_json(), "note": self.costs.describe()},
            "publication_durations_s": dict(self.durations_s),
            "simulate_s": round(self.simulate_s, 4),
            "minute_windows": "fixed minutes from the trace start: [60k, 60k+60)",
            "results": [r.row(self.kinds) for r in self.results],
        }


def check_settings(trace: Trace, settings: Sequence[Setting]) -> None:
    """A checkpoint interval so small that its in-flight timer would fire more than
    ``LIMITS["timer_firings"]`` times over the trace (0.0001 s over a 100 s request: a million firings, the
    replay hung) is one line naming it and the smallest interval this trace allows, before any replay."""
    most = LIMITS["timer_firings"].high
    for setting in settings:
        firings = trace.duration_s / setting.checkpoint_interval_s
        if firings > most:
            raise PerfsuiteError(
                f"--checkpoint-interval {setting.checkpoint_interval_s:g}: its timer would fire up to {firings:.3g} "
                f"times over the {trace.duration_s:g} s trace (at most {most:g}); give at least "
                f"{trace.duration_s / most:.3g} s for this trace")


def sweep(trace: Trace, settings: Sequence[Setting], costs: PublicationCosts | None = None,
          durations: Mapping[str, float] | None = None, *, runner: Runner | None = None) -> WhatIf:
    """Replay ``trace`` once per setting in virtual time; mark the Pareto-optimal settings. With a
    ``runner`` (a local pool or a Dask cluster) the settings are replayed there, a few per task,
    and come back in grid order: the simulation is deterministic, so the results are the same."""
    if not settings:
        raise PerfsuiteError("the settings grid is empty")
    check_settings(trace, settings)
    if durations is None and costs is not None:
        durations = costs.durations_s()
    started = time.perf_counter()
    if runner is None:
        results = [result_of(replay(trace, s, durations), costs) for s in settings]
    else:
        results = []
        per = max(1, min(GRID_TASK, math.ceil(len(settings) / max(1, runner.slots))))
        chunks = (Task(k, replay_settings, (trace, tuple(settings[i : i + per]), costs, durations))
                  for k, i in enumerate(range(0, len(settings), per)))
        stream(runner, chunks, lambda task, chunk: results.extend(chunk))
    elapsed = time.perf_counter() - started
    return WhatIf(summarize_trace(trace), mark_pareto(results), costs, elapsed, dict(durations or DEFAULT_DURATIONS_S))


#: settings per task at most when a grid runs on a runner (a replay of the storm takes tens of milliseconds)
GRID_TASK = 8


def replay_settings(trace: Trace, settings: Sequence[Setting], costs: PublicationCosts | None,
                    durations: Mapping[str, float] | None) -> list[SettingResult]:
    """Worker task: one slice of a grid, in order."""
    return [result_of(replay(trace, s, durations), costs) for s in settings]


def mark_pareto(results: Sequence[SettingResult]) -> tuple[SettingResult, ...]:
    """The results with their Pareto flags (publications per minute against the crash-loss window)."""
    flags = pareto_front([(r.per_minute_mean, r.loss_window_s) for r in results])
    return tuple(dataclasses.replace(r, pareto=f) for r, f in zip(results, flags))
