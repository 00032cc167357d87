"""Which metrics the gate compares, and how: directions, the cost registry and the timing headlines.

Two kinds of gating metric (SPEC section 5 ``perfsuite ab``):

* **costs** (:data:`COST_METRICS`): counts that do not depend on timing: bytes and allocations from the
  allocation pass (M3), bytes written and the per-publication fsync / directory fsync / rename / create
  counts from the recording I/O layer (E1), and the instructions from submission to acknowledgement
  counted under valgrind (in total and on the loop thread; pinned passes spread by under 1%).
  A change of the median beyond the tolerance (``relative`` of the base and at least ``floor``) is a change,
  whatever a test says, while the samples are steady (deterministic to a few bytes; instructions: a fraction
  of a percent); a count whose samples vary gates on its median when a rank test on the counts confirms the
  shift, or beyond its range plus the tolerance (:mod:`perfsuite.report._costs`);
* **timings** (:data:`TIMING_HEADLINES`, plus recipe metrics with a known direction): Mann-Whitney U and
  the ratio of medians must agree, with the smallest detectable ratio stated: slower is "regressed", faster
  "improved" (never failing the gate); a headline beyond the factor the worse way whose test cannot reach
  significance is "inconclusive" (exit 3), never a pass. ``min_change_ms`` is an
  absolute floor under which a shift of medians is below the heartbeat's resolution and never a change.

Both registries are plain dicts keyed by the flattened metric name (``metrics.x``, ``allocation.x``, or a
sample field such as ``max_gap_ms``): another instrument joins the gate with :func:`register_cost_metric`
or :func:`register_timing_headline` (e.g. Valgrind's instruction count, a loop-stall metric, M9).
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

__all__ = [
    "COST_METRICS",
    "HIGHER",
    "LOWER",
    "METRIC_DIRECTIONS",
    "SHOWN_METRICS",
    "TIMING_HEADLINES",
    "CostMetric",
    "TimingHeadline",
    "cost_metric",
    "metric_direction",
    "register_cost_metric",
    "register_timing_headline",
    "timing_headline",
]

LOWER = "lower"
HIGHER = "higher"

#: first matching pattern wins (``fnmatch`` on the flattened metric name); no match = no direction
METRIC_DIRECTIONS: tuple[tuple[str, str], ...] = (
    ("metrics.*per_s", HIGHER),
    ("metrics.*per_sec", HIGHER),
    ("metrics.*_per_second", HIGHER),
    ("metrics.*throughput*", HIGHER),
    ("metrics.ops*", HIGHER),
    ("metrics.*_ops", HIGHER),
    ("*_ms", LOWER),
    ("*_us", LOWER),
    ("phases_ms.*", LOWER),
    ("lag_us.*", LOWER),
    ("lag_us_uncorrected.*", LOWER),
    ("gc.*", LOWER),
    ("allocation.*", LOWER),
    ("metrics.*bytes*", LOWER),
    ("metrics.generations*", LOWER),
    ("metrics.chunks*", LOWER),
    ("metrics.publications*", LOWER),
)


@dataclass(frozen=True, slots=True)
class CostMetric:
    """A deterministic cost: changed when ``|new - base| >= max(relative * base, floor)`` (and not zero)."""

    name: str
    kind: str = "count"  # "bytes", "count" or "instructions": how values and the floor are printed
    floor: float = 1.0  # 1 KiB for bytes, 1 operation for counts
    relative: float = 0.01
    direction: str = LOWER

    def tolerance(self, base: float) -> float:
        """The smallest change that counts, for this base value."""
        return max(self.relative * abs(base), self.floor)

    def describe(self) -> str:
        """``1% and at least 1 KiB`` / ``... 1 operation`` (the rule, for tables and READMEs)."""
        unit = "instruction" if self.kind == "instructions" else "operation"
        floor = f"{self.floor / 1024:g} KiB" if self.kind == "bytes" else f"{self.floor:g} {unit}"
        if self.kind != "bytes" and self.floor != 1:
            floor += "s"
        return f"{self.relative:.0%} and at least {floor}"


@dataclass(frozen=True, slots=True)
class TimingHeadline:
    """A headline timing of a sample (lower is better): gated by Mann-Whitney U and the factor, exit 3 when
    beyond the factor the worse way but not significant; shifts of the medians under ``min_change_ms`` never count."""

    name: str
    min_change_ms: float = 0.5
    direction: str = LOWER


_KIB = 1024.0

#: name -> cost (allocation, bytes written, and the recording I/O layer's per-publication counts)
COST_METRICS: dict[str, CostMetric] = {
    m.name: m
    for m in (
        CostMetric("allocation.total_bytes", "bytes", _KIB),
        CostMetric("allocation.peak_bytes", "bytes", _KIB),
        CostMetric("allocation.allocations", "count", 1.0),
        CostMetric("metrics.bytes_written", "bytes", _KIB),
        CostMetric("metrics.fsyncs", "count", 1.0),
        CostMetric("metrics.fdatasyncs", "count", 1.0),
        CostMetric("metrics.dir_fsyncs", "count", 1.0),
        CostMetric("metrics.renames", "count", 1.0),
        CostMetric("metrics.files_created", "count", 1.0),
        CostMetric("metrics.durability_points", "count", 1.0),  # fsync + fdatasync + dir fsync + rename
        CostMetric("instructions.total", "instructions", 1.0),  # 1%, whatever the sample count
        CostMetric("instructions.loop_thread", "instructions", 1.0),
    )
}

#: name -> headline timing (M1, M5): the heartbeat's max gap, submission, acknowledgement and drain
TIMING_HEADLINES: dict[str, TimingHeadline] = {
    m.name: m
    for m in (
        TimingHeadline("max_gap_ms"),
        TimingHeadline("stalls.longest_ms"),  # M9: loop stalls, the heartbeat's companion, gated like the max gap
        TimingHeadline("submission_ms"),
        TimingHeadline("ack_ms"),
        TimingHeadline("drain_ms"),
    )
}

#: shown in tables even when unchanged, besides the timing headlines (the rest only when changed, or ``--all``)
SHOWN_METRICS: tuple[str, ...] = (
    "lag_us.p99",
    "metrics.bytes_written",
    "metrics.fsyncs",
    "metrics.durability_points",
    "allocation.total_bytes",
    "allocation.peak_bytes",
    "instructions.total",
    "instructions.loop_thread",
)


def register_cost_metric(metric: CostMetric) -> None:
    """Add (or replace) a cost in the gate's registry, e.g. ``CostMetric("metrics.instructions")``."""
    COST_METRICS[metric.name] = metric


def register_timing_headline(metric: TimingHeadline) -> None:
    """Add (or replace) a headline timing, e.g. ``TimingHeadline("loop_stall_max_ms")`` (M9)."""
    TIMING_HEADLINES[metric.name] = metric


def cost_metric(metric: str) -> CostMetric | None:
    """The registered cost called ``metric``, if any."""
    return COST_METRICS.get(metric)


def timing_headline(metric: str) -> TimingHeadline | None:
    """The registered headline timing called ``metric``, if any."""
    return TIMING_HEADLINES.get(metric)


def metric_direction(metric: str) -> str | None:
    """``"lower"`` or ``"higher"`` (which way is better) for a flattened metric name, else ``None``."""
    registered = COST_METRICS.get(metric) or TIMING_HEADLINES.get(metric)
    if registered is not None:
        return registered.direction
    for pattern, direction in METRIC_DIRECTIONS:
        if fnmatchcase(metric, pattern):
            return direction
    return None
