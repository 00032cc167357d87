"""One cost of one mode compared (allocations, bytes written, fsync and other counts, instructions): the rule,
and the one line that says which part of it decided (see :mod:`perfsuite.report._compare` for the gate).

* **Steady samples** (each side's range under the cost's tolerance: memray's totals agree to a few bytes, an
  fsync count is the same every time) gate exactly on the median: a change of at least the tolerance is a
  change, whatever a test would say (3 allocation samples against 3 can never reach p < 0.05).
* **Samples that vary** (a side's range reaches the tolerance: a writer thread that wakes the loop, or not,
  allocates 16 objects more; a background flush adds an fsync to one sample) gate on their typical value,
  the median, too. The median must move by the tolerance, and the shift must be more than the spread could
  give: either a rank test on the counts (Mann-Whitney U, at the comparison's level) confirms it, or it goes
  beyond the widest range either side shows plus the tolerance (which needs no sample count). The range
  alone let one stray sample hide a shift: BASE 1 fsync six times, NEW 2, 3, 2, 2, 2, 2 was "unchanged";
  the median alone would let 3 bimodal samples a side (the medians on opposite modes by chance) fail a gate,
  and the rank test cannot confirm that at 3 against 3 (p >= 0.1).
* **One sample a side** cannot show either: it gates exactly, and its reason says the spread is not known
  (an allocation pass of 1 sample let a writer thread's rare wake-up, 597 against 613 allocations, fail
  unchanged code; the default of 3 gates on a median).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from perfsuite._extras import require
from perfsuite.report._change import ChangeStatus, MetricChange, is_gating, median_ratio, min_mann_whitney_p
from perfsuite.report._format import fmt_bytes
from perfsuite.report._load import Stat
from perfsuite.report._metrics import COST_METRICS, LOWER, CostMetric

__all__ = ["cost_change", "rank_p", "varying_note"]


def rank_p(base: Sequence[float], new: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U on the counts, never below what the exact test can give at these sample counts.
    Counts tie heavily and the tie-corrected normal approximation is optimistic at 3 against 3 (0.059 where
    no arrangement of 6 samples gets under 0.1), so that floor keeps a few samples from confirming anything."""
    require("report", "scipy")
    from scipy.stats import mannwhitneyu

    p = float(mannwhitneyu(base, new, alternative="two-sided").pvalue)
    return max(1.0 if math.isnan(p) else p, min_mann_whitney_p(len(base), len(new)))


def _amount(cost: CostMetric, value: float) -> str:
    """A cost's value as its table shows it: bytes with separators, counts exactly when whole."""
    if cost.kind == "bytes":
        return f"{fmt_bytes(value)} B"  # exact to the byte, as the table shows it
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.4g}"


def _signed(cost: CostMetric, delta: float) -> str:
    return "no change" if delta == 0 else f"{'+' if delta > 0 else '-'}{_amount(cost, abs(delta))}"


def _ranges(base: Sequence[float], new: Sequence[float]) -> tuple[float, float]:
    return float(max(base) - min(base)), float(max(new) - min(new))


def _varying(ranges: tuple[float, float], tolerance: float) -> list[str]:
    """The sides whose samples spread by at least the tolerance (their count is not the same every time)."""
    return [side for side, spread in zip(("BASE", "NEW"), ranges) if spread >= tolerance]


def _decide(cost: CostMetric, base: Sequence[float], new: Sequence[float], delta: float, tolerance: float,
            alpha: float) -> tuple[bool, str]:
    """Whether the median moved, by the rule of the module docstring, and the rule's words (after the delta)."""
    tol = _amount(cost, tolerance)
    moved = delta != 0 and abs(delta) >= tolerance
    ranges = _ranges(base, new)
    sides = _varying(ranges, tolerance)
    if not sides:
        if min(len(base), len(new)) == 1:  # one value says nothing of its spread: a thread's wake-up moves it
            return moved, (f"one sample in {'BASE' if len(base) == 1 else 'NEW'}, so whether the count varies is "
                           f"not known: gated exactly on it, tolerance {tol} (3 or more gate on a median)")
        return moved, f"steady samples gate exactly on their median, tolerance {tol}"
    vary = f"samples vary (range {_amount(cost, max(ranges))} in {' and '.join(sides)})"
    widest = _amount(cost, max(ranges) + tolerance)
    if not moved:
        return False, f"{vary}: gated on the median, tolerance {tol}"
    if abs(delta) >= max(ranges) + tolerance:
        return True, f"{vary}: beyond the widest range plus the tolerance, {widest}"
    p = rank_p(base, new)
    if p < alpha:
        return True, (f"{vary}: gated on the median, tolerance {tol}, and a rank test on the counts confirms the "
                      f"shift, p = {p:.2g} < {alpha:g}")
    return False, (f"at least the tolerance {tol}, but {vary} and neither a rank test on the counts "
                   f"(p = {p:.2g} >= {alpha:g}) nor the widest range plus the tolerance ({widest}) confirms it")


def cost_change(recipe: str, mode: str, metric: str, base: Sequence[float], new: Sequence[float],
                reference: str | None = None, *, alpha: float = 0.05) -> MetricChange:
    """A cost by the rule of the module docstring; ``alpha`` is the level of the rank test on samples that
    vary (the comparison's, ``alpha / looks`` in a sequential A/B). ``reason`` says which part decided."""
    cost = COST_METRICS[metric]
    b, n = Stat.from_values(base), Stat.from_values(new)
    delta = n.median - b.median
    tolerance = cost.tolerance(b.median)
    changed, rule = _decide(cost, base, new, delta, tolerance, alpha)
    why = (f"{metric}: median {_amount(cost, b.median)} -> {_amount(cost, n.median)} per operation "
           f"({_signed(cost, delta)}, {rule})")
    status: ChangeStatus = ("unchanged" if not changed else
                            "regressed" if (delta > 0) == (cost.direction == LOWER) else "improved")
    gating = is_gating(metric, mode, cost.direction, reference)
    return MetricChange(
        recipe=recipe,
        mode=mode,
        metric=metric,
        direction=cost.direction,
        base=b,
        new=n,
        ratio=median_ratio(b.median, n.median),
        p_value=None,
        status=status,
        gating=gating,
        underpowered=False,
        kind="cost",
        tolerance=float(tolerance),
        reference=reference,
        reason=f"{why}: {status}" + ("" if gating else " (information, never gating)"),
    )


def varying_note(change: MetricChange, base: Sequence[float], new: Sequence[float]) -> str | None:
    """The comparison's note for a cost whose samples vary (``None`` when they are steady)."""
    tolerance = change.tolerance or 0.0
    ranges = _ranges(base, new)
    sides = _varying(ranges, tolerance)
    if not sides:
        return None
    return (f"{change.label}: not deterministic in {' and '.join(sides)} (range {max(ranges):g} >= tolerance "
            f"{tolerance:g}); gated on its median when a rank test on the counts confirms the shift, else only "
            "beyond that range plus the tolerance")
