"""Which metrics of two documents of one recipe are compared, and with which values (:func:`metric_inputs`):
every metric both sides measured, the idle control on its gap, stall, lag and GC metrics only, round by round
when an A/B pairing's rounds match (see :mod:`perfsuite.report._compare`)."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from perfsuite.report._conditions import conditions_of
from perfsuite.report._load import Result
from perfsuite.report._metrics import COST_METRICS

__all__ = ["CONTROL_METRICS", "EXCLUDED_METRICS", "EXCLUDED_PATTERNS", "MetricInput", "metric_inputs"]

#: metrics left out of comparisons: ``window_ms`` is the acknowledgement plus a constant tail
EXCLUDED_METRICS = frozenset({"window_ms"})
#: left out too: the simulated-storage counters describe the M10 condition, not the system under test
EXCLUDED_PATTERNS = ("metrics.storage.*",)
#: what the idle control is compared on (its submission and acknowledgement are a timer's)
CONTROL_METRICS = ("max_gap_ms", "stalls.*", "lag_us.*", "lag_us_uncorrected.*", "gc.*")


def _conditions_text(result: Result) -> str:
    return "; ".join(conditions_of(result).lines) or "the machine as it is"


@dataclass(frozen=True, slots=True)
class MetricInput:
    """One metric of one mode, ready to compare: its two sets of values (aligned by round when ``paired``)."""

    recipe: str
    mode: str
    metric: str
    base: tuple[float, ...]
    new: tuple[float, ...]
    reference: str | None
    paired: bool

    @property
    def cost(self) -> bool:
        """Whether it is compared as a cost (:mod:`._costs`): a registered cost of a measured mode."""
        return self.metric in COST_METRICS and self.mode != "control"


def _aligned(b: Result, n: Result, mode: str, metric: str) -> tuple[list[float], list[float]] | None:
    """BASE's and HEAD's values of ``metric`` round by round, when both sides hold the same rounds."""
    rb, rn = b.rounds(mode).get(metric) or {}, n.rounds(mode).get(metric) or {}
    if len(rb) < 2 or set(rb) != set(rn) or len(rb) != len(b.samples(mode)) or len(rn) != len(n.samples(mode)):
        return None
    keys = sorted(rb)
    return [rb[k] for k in keys], [rn[k] for k in keys]


def _tracker(result: Result, mode: str) -> str | None:
    """The method of ``mode``'s allocation pass (older documents name none: every pass was memray's then), None
    if absent."""
    section = (result.data.get("modes", {}).get(mode) or {}).get("allocation") if mode != "control" else None
    return str(section.get("tracker") or "memray") if isinstance(section, dict) else None


def metric_inputs(b: Result, n: Result, base_name: str, new_name: str, notes: list[str],
                  paired: bool) -> list[MetricInput]:
    """Every metric both documents of one recipe hold, ready to compare; what cannot be compared (a mode or a
    metric one side lacks, two allocation trackers, rounds that do not pair) is said in ``notes``."""
    inputs: list[MetricInput] = []
    modes = [m for m in b.modes if m in n.modes]
    for side, result, other in ((base_name, b, n), (new_name, n, b)):
        for mode in result.modes:
            if mode not in other.modes:
                notes.append(f"{b.recipe}: mode {mode!r} only in {side}")
    if conditions_of(b) != conditions_of(n):  # M10: e.g. two storage profiles are not a regression
        notes.append(f"{b.recipe}: measured under different conditions ({_conditions_text(b)} vs "
                     f"{_conditions_text(n)})")
    bd, nd = (b.data.get("fixture") or {}).get("digest"), (n.data.get("fixture") or {}).get("digest")
    if bd and nd and bd != nd:
        notes.append(f"{b.recipe}: the fixtures differ (digest {bd[:19]} in {base_name}, {nd[:19]} in {new_name})")
    unpaired: list[str] = []
    for mode in [*modes, "control"]:
        vb, vn = b.values(mode), n.values(mode)
        trackers = (_tracker(b, mode), _tracker(n, mode))
        mixed = None not in trackers and trackers[0] != trackers[1]
        if mixed:  # tracemalloc's bytes beside memray's are two methods, never a regression
            notes.append(f"{b.recipe}/{mode}: allocation pass by {trackers[0]} in {base_name}, {trackers[1]} in "
                         f"{new_name}: allocation.* not compared (set PERFSUITE_ALLOCATION_TRACKER alike)")
        for metric in sorted(set(vb) | set(vn)):
            if metric in EXCLUDED_METRICS or any(fnmatchcase(metric, p) for p in EXCLUDED_PATTERNS):
                continue
            if mixed and metric.startswith("allocation."):
                continue
            if mode == "control" and not any(fnmatchcase(metric, p) for p in CONTROL_METRICS):
                continue
            if metric not in vb or metric not in vn:  # absent (an older document) or null: not measured
                side = new_name if metric in vb else base_name
                notes.append(f"{b.recipe}/{mode}: {metric} not measured in {side}")
                continue
            reference = n.reference(mode) or b.reference(mode)
            values: tuple[list[float], list[float]] | None = (vb[metric], vn[metric])
            together = False
            if paired and not (metric in COST_METRICS and mode != "control"):
                rounds = _aligned(b, n, mode, metric)
                if rounds is None:
                    if mode not in unpaired:
                        unpaired.append(mode)
                else:
                    values, together = rounds, True
            assert values is not None
            inputs.append(MetricInput(b.recipe, mode, metric, tuple(values[0]), tuple(values[1]), reference, together))
    if unpaired:
        notes.append(f"{b.recipe}: {', '.join(unpaired)}: the two sides do not hold the same rounds; compared "
                     "unpaired (Mann-Whitney U)")
    return inputs
