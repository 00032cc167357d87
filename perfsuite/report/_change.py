"""One metric of one mode compared (split from ``_compare``, issue 19): a deterministic cost against its
tolerance, or a timing by Mann-Whitney U and the Hodges-Lehmann ratio with its smallest detectable ratio
(see :mod:`perfsuite.report._compare` for the rules and why)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cache

from perfsuite._extras import require
from perfsuite.report._load import Stat
from perfsuite.report._metrics import (
    COST_METRICS,
    HIGHER,
    LOWER,
    SHOWN_METRICS,
    TIMING_HEADLINES,
    metric_direction,
)
from perfsuite.report._power import hodges_lehmann_ratio, smallest_detectable_ratio

__all__ = ["GATING_METRICS", "MetricChange", "cost_change", "timing_change"]

#: recipe metrics whose regression fails the gate besides the registries (a direction is needed too)
GATING_METRICS = ("metrics.*",)


@cache
def _min_p(n_base: int, n_new: int) -> float:
    """The smallest two-sided p-value Mann-Whitney U can give for these sample sizes (fully separated)."""
    require("report", "scipy")
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(range(n_base), range(n_base, n_base + n_new), alternative="two-sided").pvalue)


@dataclass(frozen=True, slots=True)
class MetricChange:
    """One recipe/mode/metric: medians, ratio (Hodges-Lehmann for timings, of medians for costs) and the
    verdict: ``regressed``, ``improved``, ``changed`` (no known direction), ``inconclusive`` (a gating timing
    beyond the factor whose test did not reach alpha) or ``unchanged``. ``kind`` is ``cost`` (tolerance;
    ``p_value`` is ``None``) or ``timing`` (Mann-Whitney U; ``detectable`` is the smallest ratio the test
    could have seen, ``None`` when none at these counts)."""

    recipe: str
    mode: str
    metric: str
    direction: str | None
    base: Stat
    new: Stat
    ratio: float
    p_value: float | None
    status: str
    gating: bool
    underpowered: bool
    kind: str = "timing"
    detectable: float | None = None
    tolerance: float | None = None
    reference: str | None = None  # a by-design reference mode: compared, shown as such, never gating

    @property
    def mode_label(self) -> str:
        """The mode, or ``mode (reference: why)`` for a by-design reference mode."""
        return f"{self.mode} (reference: {self.reference})" if self.reference else self.mode

    @property
    def label(self) -> str:
        """``recipe/mode metric``."""
        return f"{self.recipe}/{self.mode} {self.metric}"

    @property
    def headline(self) -> bool:
        """Whether the metric is shown even when unchanged."""
        return self.metric in TIMING_HEADLINES or self.metric in SHOWN_METRICS

    @property
    def worse(self) -> bool:
        """Whether the new median lies on the worse side of the base (direction-aware)."""
        if self.direction is None or self.ratio == 1.0:
            return False
        return (self.ratio > 1.0) == (self.direction == LOWER)


# -- one metric -------------------------------------------------------------------------------------------


def _ratio(mb: float, mn: float) -> float:
    if mb == mn:
        return 1.0
    if mb == 0:
        return math.inf
    return mn / mb


def _gating(metric: str, mode: str, direction: str | None, reference: str | None = None) -> bool:
    if direction is None or mode == "control" or reference is not None:
        return False
    return metric in COST_METRICS or metric in TIMING_HEADLINES or any(fnmatchcase(metric, p) for p in GATING_METRICS)


def cost_change(recipe: str, mode: str, metric: str, base: Sequence[float], new: Sequence[float],
                reference: str | None = None) -> MetricChange:
    """A deterministic cost: changed beyond its tolerance, whatever a test would say (issue 15)."""
    cost = COST_METRICS[metric]
    b, n = Stat.from_values(base), Stat.from_values(new)
    delta = n.median - b.median
    tolerance = cost.tolerance(b.median)
    if delta == 0 or abs(delta) < tolerance:
        status = "unchanged"
    elif (delta > 0) == (cost.direction == LOWER):
        status = "regressed"
    else:
        status = "improved"
    return MetricChange(
        recipe=recipe,
        mode=mode,
        metric=metric,
        direction=cost.direction,
        base=b,
        new=n,
        ratio=_ratio(b.median, n.median),
        p_value=None,
        status=status,
        gating=_gating(metric, mode, cost.direction, reference),
        underpowered=False,
        kind="cost",
        tolerance=float(tolerance),
        reference=reference,
    )


def timing_change(
    recipe: str, mode: str, metric: str, base: Sequence[float], new: Sequence[float], alpha: float, factor: float,
    gate: str = "all",
    reference: str | None = None,
) -> MetricChange:
    """A timing: Mann-Whitney U and the Hodges-Lehmann ratio must agree; beyond the factor but not
    significant is inconclusive for a gating metric (exit 3, issue 15)."""
    import numpy as np

    require("report", "scipy")
    from scipy.stats import mannwhitneyu

    b, n = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    sb, sn = Stat.from_values(b), Stat.from_values(n)
    estimate = hodges_lehmann_ratio(b, n)
    ratio = _ratio(sb.median, sn.median) if estimate is None else estimate
    p = float(mannwhitneyu(b, n, alternative="two-sided").pvalue)
    if math.isnan(p):
        p = 1.0
    direction = metric_direction(metric)
    gating = _gating(metric, mode, direction, reference) and gate == "all"
    headline = TIMING_HEADLINES.get(metric)
    floor = headline.min_change_ms if headline is not None and mode != "control" else 0.0
    beyond = (ratio >= factor or ratio <= 1.0 / factor) and abs(ratio - 1.0) * abs(sb.median) >= floor
    underpowered = _min_p(b.size, n.size) >= alpha
    detectable = None
    if gating:
        detectable = smallest_detectable_ratio(b, n, alpha, higher_is_better=direction == HIGHER)
    if not beyond:
        status = "unchanged"
    elif p >= alpha:
        status = "inconclusive" if gating else "unchanged"
    elif direction is None:
        status = "changed"
    elif (ratio > 1.0) == (direction == LOWER):
        status = "regressed"
    else:
        status = "improved"
    return MetricChange(
        recipe=recipe,
        mode=mode,
        metric=metric,
        direction=direction,
        base=sb,
        new=sn,
        ratio=ratio,
        p_value=p,
        status=status,
        gating=gating,
        underpowered=underpowered,
        kind="timing",
        detectable=detectable,
        reference=reference,
    )
