"""M1: how loaded the machine was during a run, read off its own idle control.

Every run interleaves idle-control windows (the heartbeat with no workload, one per round). On an idle
machine a 5 ms timer fires within a few tenths of a millisecond of its deadline, so each window's max gap
sits just above the period; when the machine runs more than it has cores, the heartbeat waits for a
scheduler time slice and the typical window's max gap moves up by milliseconds. Measured on the project's
2-core machine (``perfsuite run idle-control --samples 12``, 12 control windows each; the commands and
figures are in docs/run.md, "Loaded machines"): medians 5.30 ms idle, 5.29 ms with one CPU hog,
5.22 ms with two, 8.86 ms with four (twice the cores); the committed baseline's runs 5.45-11.0 ms.

The rule (:data:`LOADED_EXCESS_MS`): a run is **loaded** when the median of its idle-control windows' max
gaps exceeds the heartbeat period by more than 1 ms: far above an idle machine's jitter (0.2-0.3 ms), far
below a time slice of an oversubscribed one (3.5 ms here). The median, not the worst window, decides: one
late window in twelve happens on an idle machine too (7.24 ms above). Like ``pyperf check``, this warns
about a run; it never changes a measured value.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["BASELINE_DIR_NAME", "LOADED_EXCESS_MS", "LOAD_RULE", "MachineLoad", "machine_load"]

#: loaded: the median idle-control window's max gap is more than this over the heartbeat period (ms)
LOADED_EXCESS_MS = 1.0
#: the rule in words, as documents and reports state it
LOAD_RULE = (f"loaded when the median idle-control window's max gap exceeds the heartbeat period by more "
             f"than {LOADED_EXCESS_MS:g} ms")


@dataclass(frozen=True, slots=True)
class MachineLoad:
    """A run's idle control against the machine's floor (the heartbeat period): the windows measured, their
    median and worst max gap, how many were late by more than the rule's margin, and the verdict."""

    windows: int
    period_ms: float
    median_gap_ms: float | None
    worst_gap_ms: float | None
    late_windows: int

    @property
    def threshold_ms(self) -> float:
        """The median max gap above which the run is loaded."""
        return self.period_ms + LOADED_EXCESS_MS

    @property
    def excess_ms(self) -> float | None:
        """How far the median window's max gap is over the period."""
        return None if self.median_gap_ms is None else self.median_gap_ms - self.period_ms

    @property
    def loaded(self) -> bool | None:
        """Whether the run was loaded; ``None`` when it has no idle-control window (not measured)."""
        return None if self.median_gap_ms is None else self.median_gap_ms > self.threshold_ms

    @property
    def word(self) -> str:
        """``loaded``, ``quiet`` or ``not measured``."""
        return {True: "loaded", False: "quiet", None: "not measured"}[self.loaded]

    def describe(self) -> str:
        """``quiet: idle control median 5.30 ms, 0.30 ms over the 5 ms period (1 of 12 windows late, worst
        7.24 ms)``: the verdict and the figures it rests on, one line."""
        if self.median_gap_ms is None or self.excess_ms is None:
            return "machine load not measured (no idle-control window)"
        word = "LOADED" if self.loaded else "quiet"
        return (f"{word}: idle control median {self.median_gap_ms:.2f} ms, {self.excess_ms:.2f} ms over the "
                f"{self.period_ms:g} ms period ({self.late_windows} of {self.windows} windows over "
                f"{self.threshold_ms:g} ms, worst {self.worst_gap_ms:.2f} ms)")

    def to_dict(self) -> dict[str, Any]:
        """The results document's ``load`` section."""
        return {
            "loaded": self.loaded,
            "windows": self.windows,
            "period_ms": self.period_ms,
            "median_gap_ms": self.median_gap_ms,
            "worst_gap_ms": self.worst_gap_ms,
            "late_windows": self.late_windows,
            "threshold_ms": self.threshold_ms,
            "rule": LOAD_RULE,
        }


def machine_load(control_samples: Iterable[Mapping[str, Any]], period_ms: float = 5.0) -> MachineLoad:
    """The load of a run from its idle-control windows (``control.samples``: each with ``max_gap_ms``)."""
    gaps = [float(s["max_gap_ms"]) for s in control_samples if isinstance(s.get("max_gap_ms"), int | float)]
    if not gaps:
        return MachineLoad(0, float(period_ms), None, None, 0)
    threshold = float(period_ms) + LOADED_EXCESS_MS
    return MachineLoad(len(gaps), float(period_ms), float(statistics.median(gaps)), max(gaps),
                       sum(1 for g in gaps if g > threshold))


#: what a baseline directory is called (``results/baseline``): ``perfsuite run`` checks the machine first there
BASELINE_DIR_NAME = "baseline"
