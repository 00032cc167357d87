"""One metric of one mode compared: the row every comparison is made of (:class:`MetricChange`), a timing by
Mann-Whitney U (the signed-rank test on paired rounds) and the Hodges-Lehmann ratio with its smallest
detectable ratio and the one line saying why, and the Holm step over a comparison's gating timings (costs:
:mod:`perfsuite.report._costs`; the rules and why: :mod:`perfsuite.report._compare`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cache
from typing import Any, Literal

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
from perfsuite.report._power import (
    hodges_lehmann_ratio,
    paired_detectable_ratio,
    paired_ratio,
    signed_rank_p,
    smallest_detectable_ratio,
)

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_FACTOR",
    "GATING_METRICS",
    "ChangeStatus",
    "MetricChange",
    "holm",
    "in_family",
    "is_gating",
    "median_ratio",
    "min_mann_whitney_p",
    "timing_change",
]

DEFAULT_ALPHA = 0.05
DEFAULT_FACTOR = 1.10

#: recipe metrics whose regression fails the gate besides the registries (a direction is needed too)
GATING_METRICS = ("metrics.*",)


@cache
def min_mann_whitney_p(n_base: int, n_new: int) -> float:
    """The smallest two-sided p-value Mann-Whitney U can give for these sample sizes (fully separated)."""
    require("report", "scipy")
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(range(n_base), range(n_base, n_base + n_new), alternative="two-sided").pvalue)


#: a compared metric's verdict; "changed": beyond the threshold, for a metric with no better direction
ChangeStatus = Literal["unchanged", "regressed", "improved", "inconclusive", "changed"]


@dataclass(frozen=True, slots=True)
class MetricChange:
    """One recipe/mode/metric: medians, ratio (Hodges-Lehmann for timings, of medians for costs) and the
    verdict: ``regressed``, ``improved``, ``changed`` (no known direction), ``inconclusive`` (a gating timing
    beyond the factor the worse way whose test did not reach alpha) or ``unchanged``. ``kind`` is ``cost`` (tolerance;
    ``p_value`` is ``None``) or ``timing`` (``test``: ``mann-whitney`` on two sets of samples, or
    ``signed-rank`` on paired rounds; ``detectable`` is the smallest ratio the test could have seen, ``None``
    when none at these counts; ``p_adjusted`` is the Holm-adjusted p-value the verdict used, when the
    comparison controls its error rate over its gating timings). ``reason`` is the verdict in one line: the
    figures, the rule that decided and the status (``perfsuite compare --explain``)."""

    recipe: str
    mode: str
    metric: str
    direction: str | None
    base: Stat
    new: Stat
    ratio: float
    p_value: float | None
    status: ChangeStatus
    gating: bool
    underpowered: bool
    kind: str = "timing"
    detectable: float | None = None
    tolerance: float | None = None
    reference: str | None = None  # a by-design reference mode: compared, shown as such, never gating
    test: str | None = None
    p_adjusted: float | None = None
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        """`compare` / `ab` ``--format json``: one compared metric, its figures unrounded."""
        return {
            "recipe": self.recipe,
            "mode": self.mode,
            "metric": self.metric,
            "base": self.base.to_json(),
            "new": self.new.to_json(),
            "ratio": self.ratio,
            "p_value": self.p_value,
            "status": self.status,
            "gating": bool(self.gating),
            "headline": self.headline,
            "underpowered": self.underpowered,
            "kind": self.kind,
            "detectable": self.detectable,
            "tolerance": self.tolerance,
            "reference": self.reference,
            "test": self.test,
            "p_adjusted": self.p_adjusted,
            "reason": self.reason,
        }

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


def median_ratio(mb: float, mn: float) -> float:
    """NEW over BASE (1 when equal, infinite from 0): the ratio of a cost, or of a timing's medians."""
    if mb == mn:
        return 1.0
    if mb == 0:
        return math.inf
    return mn / mb


def is_gating(metric: str, mode: str, direction: str | None, reference: str | None = None) -> bool:
    """Whether a metric of a mode may fail the gate (a cost, a timing headline or a directed recipe metric)."""
    if direction is None or mode == "control" or reference is not None:
        return False
    return metric in COST_METRICS or metric in TIMING_HEADLINES or any(fnmatchcase(metric, p) for p in GATING_METRICS)


def timing_change(
    recipe: str, mode: str, metric: str, base: Sequence[float], new: Sequence[float], alpha: float, factor: float,
    gate: str = "all",
    reference: str | None = None,
    *,
    paired: bool = False,
    detect_alpha: float | None = None,
) -> MetricChange:
    """A timing: the test and the Hodges-Lehmann ratio must agree; beyond the factor the worse way but not
    significant is inconclusive for a gating metric (exit 3), the better way unchanged. ``paired``:
    ``base[i]`` and ``new[i]`` are one round (the signed-rank test on log ratios; the unpaired rule when a
    value is not positive).
    ``detect_alpha`` is the level of the smallest detectable ratio (default ``alpha``)."""
    import numpy as np

    require("report", "scipy")
    from scipy.stats import mannwhitneyu

    b, n = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    sb, sn = Stat.from_values(b), Stat.from_values(n)
    direction = metric_direction(metric)
    gating = is_gating(metric, mode, direction, reference) and gate == "all"
    level = alpha if detect_alpha is None else detect_alpha
    estimate = paired_ratio(b, n) if paired else None
    if estimate is not None:  # paired rounds: a slow spell of the machine hits both sides of a round
        test = "signed-rank"
        p, _ = signed_rank_p(np.log(n / b))
        underpowered = 2.0 / 2.0 ** b.size >= alpha
        detectable = (paired_detectable_ratio(b, n, level, higher_is_better=direction == HIGHER)
                      if gating else None)
    else:
        test = "mann-whitney"
        estimate = hodges_lehmann_ratio(b, n)
        p = float(mannwhitneyu(b, n, alternative="two-sided").pvalue)
        underpowered = min_mann_whitney_p(b.size, n.size) >= alpha
        detectable = (smallest_detectable_ratio(b, n, level, higher_is_better=direction == HIGHER)
                      if gating else None)
    ratio = median_ratio(sb.median, sn.median) if estimate is None else estimate
    if math.isnan(p):
        p = 1.0
    change = MetricChange(
        recipe=recipe,
        mode=mode,
        metric=metric,
        direction=direction,
        base=sb,
        new=sn,
        ratio=ratio,
        p_value=p,
        status=_timing_status(_beyond(metric, mode, ratio, sb.median, factor), p, alpha, gating, direction, ratio),
        gating=gating,
        underpowered=underpowered,
        kind="timing",
        detectable=detectable,
        reference=reference,
        test=test,
    )
    return dataclasses.replace(change, reason=timing_reason(change, alpha, factor))


def _floor(metric: str, mode: str) -> float:
    """The smallest shift of the medians a headline counts (ms): under it, the heartbeat cannot resolve it."""
    headline = TIMING_HEADLINES.get(metric)
    return headline.min_change_ms if headline is not None and mode != "control" else 0.0


def _beyond(metric: str, mode: str, ratio: float, base_median: float, factor: float) -> bool:
    """Whether the ratio is beyond the factor either way, by a shift of at least the headline's floor."""
    return (ratio >= factor or ratio <= 1.0 / factor) and abs(ratio - 1.0) * abs(base_median) >= _floor(metric, mode)


def _timing_status(beyond: bool, p: float, alpha: float, gating: bool, direction: str | None, ratio: float
                   ) -> ChangeStatus:
    """The verdict of a timing. The same test decides both ways: beyond the factor and significant is a
    regression or an improvement. Beyond it the worse way but not significant is inconclusive for a gating
    metric (never a pass); the better way it is no change for the gate, never inconclusive, so a faster row
    never reads as "cannot tell" nor earns a sequential A/B another look (it could only ever pass)."""
    if not beyond:
        return "unchanged"
    worse = direction is not None and (ratio > 1.0) == (direction == LOWER)
    if p >= alpha:
        return "inconclusive" if gating and worse else "unchanged"
    if direction is None:
        return "changed"
    return "regressed" if worse else "improved"


def _ratio_text(ratio: float) -> str:
    return "inf" if math.isinf(ratio) else f"{ratio:.2f}x"


def timing_reason(change: MetricChange, alpha: float, factor: float) -> str:
    """Why a timing got its verdict, in one line: the ratio against the factor (and the floor), then what the
    test said at ``alpha`` (the adjusted p when Holm decided), then the status."""
    c = change
    if c.direction is None:
        way = ""
    elif c.direction == LOWER:
        way = " slower" if c.worse else " faster"
    else:
        way = " worse" if c.worse else " better"
    head = f"{c.metric}: {_ratio_text(c.ratio)}"
    tail = "" if c.gating else " (information, never gating)"
    if not (c.ratio >= factor or c.ratio <= 1.0 / factor):
        return f"{head}, within {factor:g}x either way: {c.status}{tail}"
    floor = _floor(c.metric, c.mode)
    shift = abs(c.ratio - 1.0) * abs(c.base.median)
    if shift < floor:
        return f"{head}{way}, but a shift of {shift:.2g} ms, under the {floor:g} ms floor: {c.status}{tail}"
    test = "the signed-rank test on paired rounds" if c.test == "signed-rank" else "Mann-Whitney U"
    p = float(c.p_value if c.p_value is not None else 1.0)
    p_text = f"p = {p:.2g}" if c.p_adjusted is None else f"p = {p:.2g}, Holm-adjusted {c.p_adjusted:.2g}"
    decided = p if c.p_adjusted is None else c.p_adjusted
    size = f"{head}{way}, beyond {factor:g}x"
    if decided < alpha:
        note = ", which never fails the gate" if c.status == "improved" else ""
        return f"{size}, and {test} confirms it ({p_text} < {alpha:g}): {c.status}{note}{tail}"
    if c.status == "inconclusive":
        return f"{size}, but {test} cannot confirm it ({p_text} >= {alpha:g}): inconclusive, never a pass{tail}"
    note = " (an unconfirmed improvement cannot fail the gate)" if c.gating and c.direction is not None else ""
    return f"{size}, but not confirmed by {test} ({p_text} >= {alpha:g}): {c.status}{note}{tail}"


def in_family(change: MetricChange) -> bool:
    """Whether a change is one of the gating timing headlines :func:`holm` adjusts together."""
    return (change.kind == "timing" and change.gating and change.p_value is not None
            and change.metric in TIMING_HEADLINES)


def holm(changes: Sequence[MetricChange], alpha: float, factor: float = DEFAULT_FACTOR) -> list[MetricChange]:
    """Holm's step-down over the gating timing headlines of one comparison (max gap, longest stall,
    submission, acknowledgement, drain of every mode): each gets its adjusted p-value (``p_adjusted``), its
    verdict again at ``alpha`` on it and its reason, so the chance that any of them is called changed when
    none changed stays under ``alpha`` (a comparison gates on 8 or more of them per recipe: at 0.05 each, an
    identical revision fails every few runs). ``factor`` is the one the changes were compared with. A
    recipe's own directed metrics (``metrics.*``, mostly counts that do not vary), costs and information rows
    are left as they are."""
    family = [i for i, c in enumerate(changes) if in_family(c)]
    ordered = sorted(family, key=lambda i: float(changes[i].p_value or 0.0))
    out = list(changes)
    running = 0.0
    size = len(ordered)
    for rank, i in enumerate(ordered):
        c = changes[i]
        running = max(running, min(1.0, (size - rank) * float(c.p_value or 0.0)))
        beyond = _beyond(c.metric, c.mode, c.ratio, c.base.median, factor)
        adjusted = dataclasses.replace(c, p_adjusted=running, status=_timing_status(
            beyond, running, alpha, c.gating, c.direction, c.ratio))
        out[i] = dataclasses.replace(adjusted, reason=timing_reason(adjusted, alpha, factor))
    return out
