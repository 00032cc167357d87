"""The CI gate: compare two runs per recipe, mode and metric (SPEC section 5, ``perfsuite compare``).

A metric **changed** only when both tests agree: the two-sided Mann-Whitney U test on the samples
(``scipy.stats.mannwhitneyu``) gives p < ``alpha``, and the ratio of medians (new / base) is at least
``factor`` or at most ``1 / factor``. Whether a change is a regression follows the metric's direction
(:data:`METRIC_DIRECTIONS`: lower is better for latency, lag, GC, bytes and allocation; higher for
throughput).

Only the :data:`GATING_METRICS` (the headline latencies, the recipe's own ``metrics.*`` and the
allocation pass) can fail the gate. The rest (lag percentiles, phases, GC) are compared and shown as
``(info)`` for diagnosis: with some 25 metrics per mode, gating on all of them at p < 0.05 would raise
false alarms on every few runs, and they move with the headline figures anyway. Metrics without a
known direction, and the idle control (``control``: it measures the machine, not the code), never gate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cache
from pathlib import Path

from perfsuite._extras import require
from perfsuite.errors import PerfsuiteError
from perfsuite.report._conditions import conditions_of
from perfsuite.report._format import fmt_bytes, fmt_ms
from perfsuite.report._load import Result, Stat, latest_by_recipe, read_results

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_FACTOR",
    "GATING_METRICS",
    "HEADLINE_METRICS",
    "HIGHER",
    "LOWER",
    "METRIC_DIRECTIONS",
    "Comparison",
    "MetricChange",
    "compare",
    "compare_markdown",
    "compare_results",
    "compare_table",
    "metric_direction",
]

DEFAULT_ALPHA = 0.05
DEFAULT_FACTOR = 1.10
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
#: metrics whose significant regression fails the gate (``fnmatch`` patterns; a direction is needed too)
GATING_METRICS = ("max_gap_ms", "stalls.longest_ms", "submission_ms", "ack_ms", "drain_ms", "metrics.*", "allocation.*")
#: metrics left out of comparisons: ``window_ms`` is the acknowledgement plus a constant tail
EXCLUDED_METRICS = frozenset({"window_ms"})
#: left out too: the simulated-storage counters describe the M10 condition, not the system under test
EXCLUDED_PATTERNS = ("metrics.storage.*",)
#: what the idle control is compared on (its submission and acknowledgement are a timer's)
CONTROL_METRICS = ("max_gap_ms", "stalls.*", "lag_us.*", "lag_us_uncorrected.*", "gc.*")
#: shown in the terminal and Markdown tables even when unchanged (the rest only when changed, or ``--all``)
HEADLINE_METRICS = (
    "max_gap_ms",
    "stalls.longest_ms",  # M9: loop stalls, the heartbeat's companion, gated like the max gap
    "submission_ms",
    "ack_ms",
    "drain_ms",
    "lag_us.p99",
    "metrics.bytes_written",
    "allocation.total_bytes",
    "allocation.peak_bytes",
)


def _conditions_text(result: Result) -> str:
    return "; ".join(conditions_of(result).lines) or "the machine as it is"


def metric_direction(metric: str) -> str | None:
    """``"lower"`` or ``"higher"`` (which way is better) for a flattened metric name, else ``None``."""
    for pattern, direction in METRIC_DIRECTIONS:
        if fnmatchcase(metric, pattern):
            return direction
    return None


@cache
def _min_p(n_base: int, n_new: int) -> float:
    """The smallest two-sided p-value Mann-Whitney U can give for these sample sizes (fully separated)."""
    require("report", "scipy")
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(range(n_base), range(n_base, n_base + n_new), alternative="two-sided").pvalue)


@dataclass(frozen=True, slots=True)
class MetricChange:
    """One recipe/mode/metric: medians, ratio, p-value and the verdict: ``regressed``, ``improved``,
    ``changed`` (no known direction), ``inconclusive`` (ratio beyond the factor, but too few samples for
    the test ever to reach ``alpha``) or ``unchanged``."""

    recipe: str
    mode: str
    metric: str
    direction: str | None
    base: Stat
    new: Stat
    ratio: float
    p_value: float
    status: str
    gating: bool
    underpowered: bool
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
        return self.metric in HEADLINE_METRICS


@dataclass(frozen=True, slots=True)
class Comparison:
    """Every compared metric, the thresholds, and notes on what could not be compared."""

    base: str
    new: str
    alpha: float
    factor: float
    changes: tuple[MetricChange, ...]
    notes: tuple[str, ...]

    @property
    def regressions(self) -> tuple[MetricChange, ...]:
        """Significant regressions in gating metrics (they make the exit status 1)."""
        return tuple(c for c in self.changes if c.status == "regressed" and c.gating)

    @property
    def improvements(self) -> tuple[MetricChange, ...]:
        """Significant improvements in gating metrics."""
        return tuple(c for c in self.changes if c.status == "improved" and c.gating)

    @property
    def exit_status(self) -> int:
        """1 on a significant regression, else 0 (the CI gate)."""
        return 1 if self.regressions else 0

    def shown(self, everything: bool = False) -> tuple[MetricChange, ...]:
        """Headline metrics plus every metric that changed (all of them with ``everything``)."""
        return tuple(c for c in self.changes if everything or c.headline or c.status != "unchanged")


def _change(
    recipe: str, mode: str, metric: str, base: Sequence[float], new: Sequence[float], alpha: float, factor: float,
    reference: str | None = None,
) -> MetricChange:
    import numpy as np
    require("report", "scipy")
    from scipy.stats import mannwhitneyu

    b, n = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    mb, mn = float(np.median(b)), float(np.median(n))
    if mb == mn:
        ratio = 1.0
    elif mb == 0:
        ratio = math.inf
    else:
        ratio = mn / mb
    p = float(mannwhitneyu(b, n, alternative="two-sided").pvalue)
    if math.isnan(p):
        p = 1.0
    direction = metric_direction(metric)
    beyond = ratio >= factor or ratio <= 1.0 / factor
    underpowered = _min_p(b.size, n.size) >= alpha
    if not (p < alpha and beyond):
        status = "inconclusive" if beyond and underpowered else "unchanged"
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
        base=Stat.from_values(b),
        new=Stat.from_values(n),
        ratio=ratio,
        p_value=p,
        status=status,
        gating=direction is not None and mode != "control" and reference is None
        and any(fnmatchcase(metric, p) for p in GATING_METRICS),
        underpowered=underpowered,
        reference=reference,
    )


def _pair(base: Sequence[Result], new: Sequence[Result], base_name: str, new_name: str) -> list[tuple[Result, Result]]:
    """Match results by recipe: one file each side may name different files but must hold the same recipe."""
    lb, ln = latest_by_recipe(base), latest_by_recipe(new)
    for recipe in ln:
        if recipe not in lb:
            raise PerfsuiteError(f"recipe {recipe!r} is in {new_name} but absent from {base_name}")
    for recipe in lb:
        if recipe not in ln:
            raise PerfsuiteError(f"recipe {recipe!r} is in {base_name} but absent from {new_name}")
    return [(lb[r], ln[r]) for r in lb]


def compare_results(
    base: Sequence[Result],
    new: Sequence[Result],
    *,
    alpha: float = DEFAULT_ALPHA,
    factor: float = DEFAULT_FACTOR,
    base_name: str = "BASE",
    new_name: str = "NEW",
) -> Comparison:
    """Compare loaded results (the latest of each recipe per side); see the module docstring."""
    if not 0 < alpha < 1:
        raise PerfsuiteError(f"--alpha must be between 0 and 1, got {alpha:g}")
    if not factor > 1:
        raise PerfsuiteError(f"--factor must be greater than 1, got {factor:g}")
    changes: list[MetricChange] = []
    notes: list[str] = []
    for b, n in _pair(base, new, base_name, new_name):
        modes = [m for m in b.modes if m in n.modes]
        if conditions_of(b) != conditions_of(n):  # M10: e.g. two storage profiles are not a regression
            notes.append(f"{b.recipe}: measured under different conditions ({_conditions_text(b)} vs "
                         f"{_conditions_text(n)})")
        for side, result, other in ((base_name, b, n), (new_name, n, b)):
            for mode in result.modes:
                if mode not in other.modes:
                    notes.append(f"{b.recipe}: mode {mode!r} only in {side}")
        for mode in [*modes, "control"]:
            vb, vn = b.values(mode), n.values(mode)
            for metric in sorted(set(vb) | set(vn)):
                if metric in EXCLUDED_METRICS or any(fnmatchcase(metric, p) for p in EXCLUDED_PATTERNS):
                    continue
                if mode == "control" and not any(fnmatchcase(metric, p) for p in CONTROL_METRICS):
                    continue
                if metric not in vb or metric not in vn:  # absent (an older document) or null: not measured
                    side = new_name if metric in vb else base_name
                    notes.append(f"{b.recipe}/{mode}: {metric} not measured in {side}")
                    continue
                changes.append(_change(b.recipe, mode, metric, vb[metric], vn[metric], alpha, factor,
                                       n.reference(mode) or b.reference(mode)))
    if any(c.underpowered and c.gating for c in changes):
        sizes = sorted({(c.base.n, c.new.n) for c in changes if c.underpowered and c.gating})
        notes.append(
            "too few samples for p < {:g} with {} (Mann-Whitney U cannot reach it): those metrics cannot change".format(
                alpha, ", ".join(f"{x} vs {y}" for x, y in sizes)
            )
        )
    return Comparison(base_name, new_name, alpha, factor, tuple(changes), tuple(notes))


def compare(
    base: Path | str, new: Path | str, *, alpha: float = DEFAULT_ALPHA, factor: float = DEFAULT_FACTOR
) -> Comparison:
    """Compare two results files or directories of results (matched by recipe name).

    Directory against directory (or file against file) must hold the same recipes; a single file
    against a directory compares that file's recipe only.
    """
    b, n = read_results(base), read_results(new)
    if Path(base).is_dir() != Path(new).is_dir():
        recipe = (n if Path(base).is_dir() else b)[0].recipe
        b, n = [r for r in b if r.recipe == recipe], [r for r in n if r.recipe == recipe]
        for side, name in ((b, base), (n, new)):
            if not side:
                raise PerfsuiteError(f"recipe {recipe!r} is absent from {name}")
    return compare_results(b, n, alpha=alpha, factor=factor, base_name=str(base), new_name=str(new))


# -- rendering ------------------------------------------------------------------------------------


def _value(metric: str, value: float) -> str:
    if "bytes" in metric or "allocations" in metric:
        return fmt_bytes(value)
    if metric.endswith("_ms") or metric.startswith("phases_ms."):
        return fmt_ms(value)
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _ratio(ratio: float) -> str:
    return "inf" if math.isinf(ratio) else f"{ratio:.2f}x"


def _p(p: float) -> str:
    return f"{p:.2g}" if p < 0.001 else f"{p:.3f}"


_STYLE = {
    "regressed": "bold red",
    "improved": "green",
    "changed": "yellow",
    "inconclusive": "yellow",
    "unchanged": "dim",
}


def _rows(changes: Iterable[MetricChange]) -> list[list[str]]:
    return [
        [
            c.recipe,
            c.mode_label,
            c.metric,
            _value(c.metric, c.base.median),
            _value(c.metric, c.new.median),
            _ratio(c.ratio),
            _p(c.p_value),
            c.status + ("" if c.gating or c.status == "unchanged" else " (info)"),
        ]
        for c in changes
    ]


_HEADER = ["recipe", "mode", "metric", "base median", "new median", "ratio", "p", "status"]


def _headline(comparison: Comparison) -> str:
    n = len(comparison.regressions)
    if n:
        return f"{n} significant regression{'s' if n != 1 else ''}"
    return "no significant regression"


def _rule(comparison: Comparison) -> str:
    return (
        f"changed = Mann-Whitney U p < {comparison.alpha:g} and a median ratio beyond {comparison.factor:g}x "
        "either way; direction-aware"
    )


def compare_table(comparison: Comparison, everything: bool = False) -> object:
    """A rich ``Table`` of the headline and changed metrics (every metric with ``everything``)."""
    from rich import box
    from rich.table import Table

    table = Table(
        title=f"perfsuite compare: {_headline(comparison)}",
        caption=_rule(comparison) + "".join(f"\n{note}" for note in comparison.notes),
        box=box.SIMPLE_HEAD,
        title_justify="left",
        caption_justify="left",
    )
    for column in _HEADER:
        table.add_column(column, justify="right" if column in ("base median", "new median", "ratio", "p") else "left")
    shown = comparison.shown(everything)
    for change, row in zip(shown, _rows(shown)):
        style = _STYLE[change.status]
        table.add_row(*row[:-1], f"[{style}]{row[-1]}[/]")
    return table


def _md_table(changes: Sequence[MetricChange]) -> list[str]:
    lines = ["| " + " | ".join(_HEADER) + " |", "|---|---|---|---:|---:|---:|---:|---|"]
    for change, row in zip(changes, _rows(changes)):
        if change.status == "regressed" and change.gating:
            row[-1] = f"**{row[-1]}**"
        row[:3] = [f"`{cell}`" for cell in row[:3]]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def compare_markdown(comparison: Comparison, everything: bool = False) -> str:
    """A Markdown report for a PR comment or a job summary: verdict, regressions, table, full details."""
    lines = [f"### perfsuite compare: {_headline(comparison)}", ""]
    for c in comparison.regressions:
        lines.append(
            f"- **regressed** `{c.recipe}` `{c.mode}` `{c.metric}`: {_value(c.metric, c.base.median)} -> "
            f"{_value(c.metric, c.new.median)} (median ratio {_ratio(c.ratio)}, p = {_p(c.p_value)})"
        )
    for c in comparison.improvements:
        lines.append(
            f"- improved `{c.recipe}` `{c.mode}` `{c.metric}`: {_value(c.metric, c.base.median)} -> "
            f"{_value(c.metric, c.new.median)} (median ratio {_ratio(c.ratio)}, p = {_p(c.p_value)})"
        )
    if comparison.regressions or comparison.improvements:
        lines.append("")
    lines += [f"`{comparison.base}` -> `{comparison.new}`; {_rule(comparison)}.", ""]
    lines += _md_table(comparison.shown(everything))
    if comparison.notes:
        lines += ["", *(f"- {note}" for note in comparison.notes)]
    if not everything and len(comparison.changes) > len(comparison.shown()):
        lines += ["", f"<details><summary>All {len(comparison.changes)} metrics</summary>", ""]
        lines += _md_table(comparison.changes)
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"
