"""What a comparison could have seen: the smallest detectable ratio of a timing, and the ratio
estimate that goes with Mann-Whitney U.

**The ratio** of a timing is the Hodges-Lehmann estimate, the median of all pairwise ratios ``new_j /
base_i``: the multiplicative shift that makes the Mann-Whitney U statistic central. It agrees with the test
and is steadier than a ratio of two medians when samples are few or bimodal (a ratio of medians jumps when
one median changes mode), so fewer identical revisions land beyond the factor by chance.

**The smallest detectable ratio.** The NEW samples are rescaled by that estimate (``c = new / ratio``: the
observed spread without the observed shift). The smallest detectable ratio is the smallest factor ``r``
by which ``c`` must be multiplied (divided, when higher is better) for the two-sided Mann-Whitney U test
against BASE to give ``p < alpha``. U only changes where a rescaled sample crosses a BASE sample, so the
candidates are the pairwise ratios ``base_i / c_j``; U grows monotonically with ``r``, so a binary search
over the sorted candidates finds the exact threshold. ``None`` means no ratio can do it: the sample counts
are too small for ``p < alpha`` at all (e.g. 3 against 3 at 0.05).

It depends on the sample counts and the spread, not on the observed shift: a headline whose ratio is
beyond the factor but below its detectable ratio is exactly one whose test could not reach significance.

**Paired rounds** (``perfsuite ab``: round ``i`` runs BASE's and HEAD's sample ``i`` back to back, in a
random order, so a slow spell of the machine hits both): the per-round log ratios ``d_i = log(new_i /
base_i)`` are tested with the Wilcoxon signed-rank test, and the ratio is ``exp`` of their Hodges-Lehmann
estimate (the median of the Walsh averages ``(d_i + d_j) / 2``, ``i <= j``), the shift that makes the
signed-rank statistic central. The machine's drift between rounds cancels in ``d_i``; measured on 18 A/A
runs of this machine, pairing caught a +20% shift in 16 rounds about as often as the unpaired rule did in
24-32 (``scripts/acceptance/ab_simulate.py`` reproduces it from A/A pairings). The paired smallest
detectable ratio is found the
same way: ``d`` is centred on its estimate, and the smallest ``log r`` added to it (subtracted, when higher
is better) for which the test reaches ``p < alpha`` is searched over the points where the statistic
changes (the Walsh averages of the centred ``d``). ``n`` rounds can never go below ``p = 2 / 2**n``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = [
    "hodges_lehmann_ratio",
    "paired_detectable_ratio",
    "paired_ratio",
    "signed_rank_p",
    "smallest_detectable_ratio",
]

_NUDGE = 1e-6  # just past a crossing: the ratio reported is inside the interval where the test succeeds


def hodges_lehmann_ratio(base: ArrayLike, new: ArrayLike) -> float | None:
    """The median of all pairwise ratios ``new_j / base_i``; ``None`` unless every value is positive."""
    import numpy as np

    b = np.asarray(base, dtype=float)
    n = np.asarray(new, dtype=float)
    if b.size < 1 or n.size < 1 or np.any(b <= 0) or np.any(n <= 0):
        return None
    return float(np.median(np.divide.outer(n, b)))


def smallest_detectable_ratio(
    base: ArrayLike, new: ArrayLike, alpha: float, *, higher_is_better: bool = False
) -> float | None:
    """The smallest ratio (> 1) of a shift towards "worse" that reaches ``p < alpha``; see the module docstring."""
    import numpy as np

    from perfsuite._extras import require

    require("report", "scipy")
    from scipy.stats import mannwhitneyu

    b = np.asarray(base, dtype=float)
    n = np.asarray(new, dtype=float)
    if b.size < 1 or n.size < 1:
        return None
    ratio = hodges_lehmann_ratio(b, n)
    if ratio is None:
        return None
    c = n / ratio
    mean_u = b.size * n.size / 2.0

    def shifted(r: float) -> np.ndarray:
        return c / r if higher_is_better else c * r

    def detected(r: float) -> bool:
        res = mannwhitneyu(shifted(r), b, alternative="two-sided")
        u = float(res.statistic)  # U of the shifted sample: grows with r (shrinks when divided)
        beyond = u < mean_u if higher_is_better else u > mean_u
        return beyond and float(res.pvalue) < alpha

    pairs = (c[None, :] / b[:, None]) if higher_is_better else (b[:, None] / c[None, :])
    candidates = np.unique(pairs[pairs > 1.0].ravel())
    return _first_detected([float(x) * (1.0 + _NUDGE) for x in candidates], 1.0 + _NUDGE, detected)


def _first_detected(candidates: list[float], least: float, detected: Callable[[float], bool]) -> float | None:
    """The smallest of the ascending ``candidates`` for which the monotone ``detected`` holds (``least`` when
    even it does), by binary search; ``None`` when not even the largest does."""
    if not candidates or not detected(candidates[-1]):
        return None
    if detected(least):
        return least
    lo, hi = 0, len(candidates) - 1  # invariant: detected(candidates[hi]) holds
    while lo < hi:
        mid = (lo + hi) // 2
        if detected(candidates[mid]):
            hi = mid
        else:
            lo = mid + 1
    return candidates[hi]


def _log_ratios(base: ArrayLike, new: ArrayLike) -> object | None:
    import numpy as np

    b = np.asarray(base, dtype=float)
    n = np.asarray(new, dtype=float)
    if b.size < 1 or b.size != n.size or np.any(b <= 0) or np.any(n <= 0):
        return None
    return np.log(n / b)


def _walsh_median(d: object) -> float:
    import numpy as np

    x = np.asarray(d, dtype=float)
    upper = np.triu_indices(x.size)
    return float(np.median(((x[:, None] + x[None, :]) / 2.0)[upper]))


def signed_rank_p(d: ArrayLike) -> tuple[float, float]:
    """(two-sided Wilcoxon signed-rank p, the statistic's distance above its mean) of the differences ``d``:
    positive when the differences lean positive. All-zero differences give ``(1.0, 0.0)``."""
    import numpy as np

    from perfsuite._extras import require

    require("report", "scipy")
    from scipy.stats import rankdata, wilcoxon

    x = np.asarray(d, dtype=float)
    x = x[x != 0.0]
    if x.size == 0:
        return 1.0, 0.0
    ranks = rankdata(np.abs(x))
    lean = float(ranks[x > 0].sum() - ranks.sum() / 2.0)
    p = float(wilcoxon(x, alternative="two-sided").pvalue)
    return (1.0 if np.isnan(p) else p), lean


def paired_ratio(base: ArrayLike, new: ArrayLike) -> float | None:
    """``exp`` of the Hodges-Lehmann estimate of the per-round log ratios; ``None`` unless every value is
    positive and the two sides have one value per round each."""
    import numpy as np

    d = _log_ratios(base, new)
    return None if d is None else float(np.exp(_walsh_median(d)))


def paired_detectable_ratio(
    base: ArrayLike, new: ArrayLike, alpha: float, *, higher_is_better: bool = False
) -> float | None:
    """The smallest ratio (> 1) of a shift towards "worse" the signed-rank test on these rounds would call
    significant at ``alpha``; ``None`` when none can (too few rounds); see the module docstring."""
    import numpy as np

    d = _log_ratios(base, new)
    if d is None:
        return None
    x = np.asarray(d, dtype=float)
    centred = x - _walsh_median(x)
    sign = -1.0 if higher_is_better else 1.0

    def detected(log_r: float) -> bool:
        p, lean = signed_rank_p(centred + sign * log_r)
        return p < alpha and sign * lean > 0

    walsh = (centred[:, None] + centred[None, :]) / 2.0
    points = np.unique((-sign * walsh[np.triu_indices(x.size)]).ravel())
    candidates = [float(v) + max(abs(float(v)), 1e-9) * _NUDGE for v in points if v > 0]
    top = float(np.max(np.abs(centred))) * 2.0 + 1.0  # every shifted round on the worse side
    candidates.append(top)
    found = _first_detected(candidates, _NUDGE, detected)
    return None if found is None else float(np.exp(found))
