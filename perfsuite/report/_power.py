"""What a comparison could have seen: the smallest detectable ratio of a timing (issue 15), and the ratio
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
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["hodges_lehmann_ratio", "smallest_detectable_ratio"]

_NUDGE = 1e-6  # just past a crossing: the ratio reported is inside the interval where the test succeeds


def hodges_lehmann_ratio(base: Sequence[float], new: Sequence[float]) -> float | None:
    """The median of all pairwise ratios ``new_j / base_i``; ``None`` unless every value is positive."""
    import numpy as np

    b = np.asarray(base, dtype=float)
    n = np.asarray(new, dtype=float)
    if b.size < 1 or n.size < 1 or np.any(b <= 0) or np.any(n <= 0):
        return None
    return float(np.median(np.divide.outer(n, b)))


def smallest_detectable_ratio(
    base: Sequence[float], new: Sequence[float], alpha: float, *, higher_is_better: bool = False
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
    candidates = [float(x) * (1.0 + _NUDGE) for x in candidates]
    if not candidates or not detected(candidates[-1]):
        return None
    lo, hi = 0, len(candidates) - 1  # invariant: detected(candidates[hi]) holds
    if detected(1.0 + _NUDGE):
        return 1.0 + _NUDGE
    while lo < hi:
        mid = (lo + hi) // 2
        if detected(candidates[mid]):
            hi = mid
        else:
            lo = mid + 1
    return candidates[hi]
