"""Change-point detection over a series of runs (SPEC section 5, ``perfsuite history``).

Results are ordered by run date (``environment.date``, then ``created_epoch``, then path); each run
contributes the median of its samples per recipe, mode and metric. Steps are found with ``ruptures``:
PELT on the L2 cost (a change in mean) of the series standardised by its noise, with

* noise sigma = the normal-consistent MAD of the first differences over sqrt(2) (robust to the steps
  themselves), floored at :data:`NOISE_FLOOR` of the series' median level so a perfectly quiet series
  does not turn every wiggle into a step;
* penalty = :data:`PENALTY_PER_LOG_N` x ln(n) per change point (BIC-like, stricter than the usual
  2 ln n to favour fewer, real steps on noisy runners);
* segments of at least :data:`MIN_SEGMENT` runs, and a step is reported only when the medians of the
  segments on either side differ by at least :data:`MIN_CHANGE` (relative; ``compare``'s 1.10 factor)
  and at least :data:`SEGMENT_AGREEMENT` of each segment's runs lie nearer its own median than the
  other's (so one slow run at the end of the history, or a one-run spike, is not read as a step).

Calibration (300 seeded series per figure, lognormal noise, a loop over :func:`detect_steps`): with 5%
noise a 30% step in the middle is found at the right run in 97-98% of series of 12 to 30 runs (83% of
6, 91% of 8) and some step is reported in 0-2% of step-free series; with 10% noise (a 3-sigma step)
it is found in 57-74%; a 20% step with 3% noise in 91-100%. A single x1.6 run at the end, or a x3
spike in the second run, reads as a step in 0-2% of series (before the agreement rule: 92-100%, one
run away from where it happened).

**Short histories** (fewer than :data:`MIN_PELT_RUNS` runs of a series: the baseline plus one run, a
new machine) give PELT nothing to estimate the run-to-run noise from, and no segment of two runs at
either end. There a step is found by the gate's own test, run against run: consecutive runs whose
samples :func:`~perfsuite.report.compare_results` calls regressed, improved or changed (Mann-Whitney U
p < 0.05 and a median ratio beyond 1 + ``min_change``), provided every earlier run lies nearer the old
level and every later run nearer the new one (a one-run spike is not a step, in either direction).
Why 6: below it PELT's noise estimate rests on fewer than 5 run-to-run differences (with 5% noise and
a 30% step it finds the step in 75% of 4-run series), and it can never place a step at the first or
the last run, which is where a short history's news is.

**Machines.** Series never mix machines: runs are grouped by :func:`~perfsuite.report.machine_fingerprint`
first, and every series and step names its machine (``Series.machine``, ``LevelStep.machine``: the key).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite._extras import require
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import did_you_mean
from perfsuite.report._compare import compare_results
from perfsuite.report._load import Result
from perfsuite.report._machine import Machine, machine_of
from perfsuite.report._metrics import LOWER, metric_direction
from perfsuite.report._store import read_source

__all__ = [
    "HISTORY_METRICS",
    "MIN_CHANGE",
    "MIN_PELT_RUNS",
    "MIN_SEGMENT",
    "NOISE_FLOOR",
    "PENALTY_PER_LOG_N",
    "SEGMENT_AGREEMENT",
    "History",
    "LevelStep",
    "Point",
    "Series",
    "detect_steps",
    "history",
    "history_results",
    "order_results",
]

PENALTY_PER_LOG_N = 5.0
NOISE_FLOOR = 0.01
MIN_SEGMENT = 2
MIN_CHANGE = 0.10
#: share of a segment's runs that must lie nearer its own level than the neighbour's (see ``_segments_hold``)
SEGMENT_AGREEMENT = 2 / 3
#: a series with fewer runs is judged run against run by the gate's test (see "Short histories")
MIN_PELT_RUNS = 6
#: comparison statuses that make a step in a short history
_CHANGED = frozenset({"regressed", "improved", "changed"})
#: metrics followed by default (plus every ``metrics.*``, ``allocation.*`` and ``instructions.*`` the runs report)
HISTORY_METRICS = ("max_gap_ms", "stalls.longest_ms", "submission_ms", "ack_ms", "drain_ms", "lag_us.p99")


@dataclass(frozen=True, slots=True)
class Point:
    """One run's value of a series: the median of its samples, with their min and max."""

    result: Result
    median: float
    min: float
    max: float

    @property
    def commit(self) -> str | None:
        """The run's git commit."""
        return self.result.commit

    @property
    def date(self) -> str:
        """The run's date."""
        return self.result.date


@dataclass(frozen=True, slots=True)
class LevelStep:
    """A detected change in level: the first run of the new level, its commit (and the one before: the
    range the change happened in), the levels on either side, the machine and the method that found it
    (``pelt``, or ``run-to-run`` for a short history)."""

    recipe: str
    mode: str
    metric: str
    index: int
    commit: str | None
    previous_commit: str | None
    date: str
    before: float
    after: float
    direction: str | None
    machine: str
    method: str

    @property
    def ratio(self) -> float:
        """after / before (``inf`` from a zero level)."""
        if self.before == 0:
            return 1.0 if self.after == 0 else math.inf
        return self.after / self.before

    @property
    def kind(self) -> str:
        """``regression``, ``improvement`` or ``shift`` (no known direction)."""
        if self.direction is None:
            return "shift"
        return "regression" if (self.after > self.before) == (self.direction == LOWER) else "improvement"

    def to_json(self) -> dict[str, Any]:
        """`history --format json`: one step, its levels and ratio unrounded."""
        return {"machine": self.machine, "recipe": self.recipe, "mode": self.mode, "metric": self.metric,
                "commit": self.commit, "previous_commit": self.previous_commit, "date": self.date,
                "before": self.before, "after": self.after, "ratio": self.ratio, "kind": self.kind,
                "method": self.method}


@dataclass(frozen=True, slots=True)
class Series:
    """One machine's recipe/mode/metric over its runs, with its detected steps."""

    recipe: str
    mode: str
    metric: str
    points: tuple[Point, ...]
    steps: tuple[LevelStep, ...]
    machine: str


@dataclass(frozen=True, slots=True)
class History:
    """Every series of a set of runs (per machine), the machines, and the detection settings used."""

    series: tuple[Series, ...]
    runs: int
    penalty_per_log_n: float
    min_change: float
    machines: tuple[Machine, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """`history --format json`: the detected steps and the method's parameters."""
        return {
            "runs": self.runs,
            "series": len(self.series),
            "penalty_per_log_n": self.penalty_per_log_n,
            "min_change": self.min_change,
            "machines": [{"key": m.key, "label": m.label} for m in self.machines],
            "steps": [step.to_json() for step in self.steps],
        }

    @property
    def steps(self) -> tuple[LevelStep, ...]:
        """All steps, in series order."""
        return tuple(step for s in self.series for step in s.steps)

    def get(self, recipe: str, mode: str, metric: str, machine: str | None = None) -> Series | None:
        """The series of ``recipe``/``mode``/``metric`` (on ``machine``, a key, when several), if any."""
        for s in self.series:
            if (s.recipe, s.mode, s.metric) == (recipe, mode, metric) and machine in (None, s.machine):
                return s
        return None


def order_results(results: Iterable[Result]) -> list[Result]:
    """Runs in time order: date, creation time, then path."""
    return sorted(results, key=lambda r: (r.date, r.created_epoch or 0.0, str(r.path or "")))


def detect_steps(
    values: Sequence[float],
    *,
    penalty_per_log_n: float = PENALTY_PER_LOG_N,
    min_segment: int = MIN_SEGMENT,
    min_change: float = MIN_CHANGE,
) -> list[int]:
    """Indices where a new level starts in ``values``: PELT (see the module docstring for the method)."""
    import numpy as np

    require("report", "ruptures", "scipy")
    import ruptures as rpt
    from scipy.stats import median_abs_deviation

    y = np.asarray(values, dtype=float)
    n = y.size
    if n < 2 * min_segment or float(np.ptp(y)) == 0.0:
        return []
    level = float(np.median(y))
    sigma = float(median_abs_deviation(np.diff(y), scale="normal")) / math.sqrt(2.0)
    sigma = max(sigma, NOISE_FLOOR * abs(level), 1e-12)
    z = (y - level) / sigma
    algo = rpt.Pelt(model="l2", min_size=min_segment, jump=1).fit(z.reshape(-1, 1))
    ends = [int(b) for b in algo.predict(pen=penalty_per_log_n * math.log(n))]
    starts = [0, *ends[:-1]]
    found = []
    for k in range(1, len(starts)):
        a, b = y[starts[k - 1] : starts[k]], y[starts[k] : ends[k]]
        before, after = float(np.median(a)), float(np.median(b))
        relative = math.inf if before == 0 else abs(after / before - 1.0)
        if relative >= min_change and _segments_hold(a, b, before, after):
            found.append(starts[k])
    return found


def _segments_hold(a: Any, b: Any, before: float, after: float) -> bool:
    """Whether at least :data:`SEGMENT_AGREEMENT` of each segment's runs lie nearer its own level.

    PELT's segments of two runs can be one outlier and one ordinary run: a single slow run at either end
    of the history (or a one-run spike) otherwise reads as a step one run away from where it is.
    """
    near_a = sum(1 for v in a if abs(v - before) < abs(v - after)) / len(a)
    near_b = sum(1 for v in b if abs(v - after) < abs(v - before)) / len(b)
    return near_a >= SEGMENT_AGREEMENT and near_b >= SEGMENT_AGREEMENT


class _RunToRun:
    """The gate's verdicts between consecutive runs of a short history, computed once per pair."""

    def __init__(self, min_change: float) -> None:
        self.factor = 1.0 + min_change
        self._cache: dict[tuple[int, int], frozenset[tuple[str, str]]] = {}

    def changed(self, before: Result, after: Result) -> frozenset[tuple[str, str]]:
        """(mode, metric) pairs the comparison of ``before`` -> ``after`` calls changed."""
        key = (id(before), id(after))
        if not all(r.data.get("status") == "complete" for r in (before, after)):
            return frozenset()  # the gate judges finished runs only
        if key not in self._cache:
            comparison = compare_results([before], [after], factor=self.factor)
            self._cache[key] = frozenset((c.mode, c.metric) for c in comparison.changes if c.status in _CHANGED)
        return self._cache[key]


def run_to_run_steps(points: Sequence[Point], mode: str, metric: str, judge: _RunToRun) -> list[int]:
    """Steps of a short series: the gate's test between consecutive runs, kept when the earlier runs lie
    near the old level and the later ones near the new (see "Short histories" in the module docstring)."""
    values = [p.median for p in points]
    found = []
    for i in range(1, len(points)):
        if (mode, metric) not in judge.changed(points[i - 1].result, points[i].result):
            continue
        before, after = values[i - 1], values[i]
        earlier_stay = all(abs(v - before) < abs(v - after) for v in values[: i - 1])
        later_stay = all(abs(v - after) < abs(v - before) for v in values[i + 1 :])
        if earlier_stay and later_stay:
            found.append(i)
    return found


def _series_points(runs: Sequence[Result], mode: str, metric: str) -> list[Point]:
    points = []
    for run in runs:
        if mode not in run.modes:
            continue
        stat = run.stat(mode, metric)
        if stat is not None:
            points.append(Point(run, stat.median, stat.min, stat.max))
    return points


def _metrics(runs: Sequence[Result], mode: str, metrics: Sequence[str] | None) -> list[str]:
    seen: set[str] = set()
    for run in runs:
        if mode in run.modes:
            seen.update(run.values(mode))
    if metrics is not None:
        return [m for m in metrics if m in seen]
    extra = sorted(m for m in seen if m.startswith(("metrics.", "allocation.", "instructions.")))
    return [m for m in HISTORY_METRICS if m in seen] + extra


def _steps(
    key: str, recipe: str, mode: str, metric: str, points: Sequence[Point], found: Sequence[int], method: str
) -> list[LevelStep]:
    import numpy as np

    values = [p.median for p in points]
    bounds = [0, *found, len(values)]
    return [
        LevelStep(
            recipe=recipe,
            mode=mode,
            metric=metric,
            index=i,
            commit=points[i].commit,
            previous_commit=points[i - 1].commit,
            date=points[i].date,
            before=float(np.median(values[bounds[k] : i])),
            after=float(np.median(values[i : bounds[k + 2]])),
            direction=metric_direction(metric),
            machine=key,
            method=method,
        )
        for k, i in enumerate(found)
    ]


def history_results(
    results: Iterable[Result],
    *,
    metrics: Sequence[str] | None = None,
    penalty_per_log_n: float = PENALTY_PER_LOG_N,
    min_change: float = MIN_CHANGE,
) -> History:
    """Series and steps per machine for loaded results (every recipe and mode; ``metrics`` narrows them)."""
    if not min_change > 0:
        raise PerfsuiteError(f"--min-change must be greater than 0, got {min_change:g}")
    runs = order_results(results)
    machines: dict[str, Machine] = {}
    grouped: dict[tuple[str, str], list[Result]] = {}
    for run in runs:
        machine = machine_of(run)
        machines.setdefault(machine.key, machine)
        grouped.setdefault((machine.key, run.recipe), []).append(run)
    judge = _RunToRun(min_change)
    series = []
    for (key, recipe), recipe_runs in sorted(grouped.items()):
        modes = list(dict.fromkeys(m for run in recipe_runs for m in run.modes))
        for mode in modes:
            for metric in _metrics(recipe_runs, mode, metrics):
                points = _series_points(recipe_runs, mode, metric)
                if len(points) >= MIN_PELT_RUNS:
                    values = [p.median for p in points]
                    found = detect_steps(values, penalty_per_log_n=penalty_per_log_n, min_change=min_change)
                    method = "pelt"
                else:
                    found, method = run_to_run_steps(points, mode, metric, judge), "run-to-run"
                steps = _steps(key, recipe, mode, metric, points, found, method)
                series.append(Series(recipe, mode, metric, tuple(points), tuple(steps), key))
    if metrics is not None:  # a metric no run reports is a typo, not an empty history
        followed = {s.metric for s in series}
        missing = [m for m in metrics if m not in followed]
        if missing:
            known = sorted({m for (_key, _recipe), rs in grouped.items() for run in rs for mode in run.modes
                            for m in run.values(mode)})
            shown = ", ".join(known[:12]) + (", ..." if len(known) > 12 else "")
            raise PerfsuiteError(f"--metric {missing[0]!r}: no run reports it{did_you_mean(missing[0], known)} "
                                 f"(metrics: {shown or 'none'})")
    ordered = tuple(machines[k] for k in sorted(machines))
    return History(tuple(series), len(runs), penalty_per_log_n, min_change, ordered)


def history(
    source: Path | str,
    *,
    metrics: Sequence[str] | None = None,
    machine: str | None = None,
    penalty_per_log_n: float = PENALTY_PER_LOG_N,
    min_change: float = MIN_CHANGE,
) -> History:
    """Detect steps over every results file under ``source`` (a directory, a file, or a results store),
    per machine (only ``machine``'s runs when given: a key, key prefix or host label)."""
    return history_results(
        read_source(source, machine=machine),
        metrics=metrics,
        penalty_per_log_n=penalty_per_log_n,
        min_change=min_change,
    )
