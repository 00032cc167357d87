"""Matplotlib figures for the dashboard (Agg, no pyplot state): history, strips, timelines, lag CDFs.

Each function returns a ``matplotlib.figure.Figure``; the caller saves it. Figures never read files:
they take loaded :class:`~perfsuite.report.Result` objects and history :class:`Series`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from perfsuite._extras import require
from perfsuite.report._format import fmt_level, short_commit
from perfsuite.report._history import Series
from perfsuite.report._load import Result

__all__ = [
    "CDF_PERCENTILES",
    "has_tick_data",
    "history_figure",
    "lag_cdf_figure",
    "strip_figure",
    "timeline_figure",
]

#: the lag CDF's x positions: 0% .. 99.99% on a log(1 / (1 - p)) axis
CDF_PERCENTILES = (0.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99)
_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
_LABELS = {
    "max_gap_ms": "max heartbeat gap (ms)",
    "submission_ms": "submission (ms)",
    "ack_ms": "acknowledgement (ms)",
    "drain_ms": "drain (ms)",
    "lag_us.p99": "heartbeat lag p99 (us)",
}


def _figure(width: float, height: float) -> Any:
    require("report", "matplotlib")
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _color(i: int) -> str:
    return _COLORS[i % len(_COLORS)]


def _label(metric: str) -> str:
    return _LABELS.get(metric, metric)


def history_figure(
    metric: str,
    series: Sequence[Series],
    runs: Sequence[Result],
    *,
    target_ms: float | None = None,
    control: Sequence[tuple[int, float]] = (),
) -> Any:
    """One metric over the runs: median per mode (bars from min to max), steps, the target line.

    ``runs`` fixes the x axis (run index, labelled by short commit); ``control`` adds the idle control's
    median max gap as ``(run index, value)`` pairs.
    """
    fig = _figure(8.0, 3.4)
    ax = fig.subplots()
    index = {id(r): i for i, r in enumerate(runs)}
    for k, s in enumerate(series):
        xs = [index[id(p.result)] for p in s.points]
        med = [p.median for p in s.points]
        lo = [p.median - p.min for p in s.points]
        hi = [p.max - p.median for p in s.points]
        ax.errorbar(xs, med, yerr=[lo, hi], fmt="o-", ms=4, lw=1.2, capsize=2, color=_color(k), label=s.mode)
        for step in s.steps:
            x = xs[step.index] - 0.5
            ax.axvline(x, color=_color(k), ls="--", lw=1)
            ax.annotate(
                f"{step.kind} at {short_commit(step.commit)}\n{fmt_level(step.before)} -> {fmt_level(step.after)}",
                (x, 1.0),
                xycoords=("data", "axes fraction"),
                xytext=(-3 if x > len(runs) / 2 else 3, -3 - 18 * k),
                textcoords="offset points",
                va="top",
                ha="right" if x > len(runs) / 2 else "left",
                fontsize=7,
                color=_color(k),
            )
    if control:
        ax.plot([x for x, _ in control], [v for _, v in control], "s:", ms=3, color="0.55", label="idle control")
    if target_ms is not None:
        ax.axhline(target_ms, color="#d62728", lw=1, ls="-", alpha=0.7, label=f"target {target_ms:g} ms")
    ax.set_ylabel(_label(metric))
    ax.set_xticks(range(len(runs)))
    ax.set_xticklabels([short_commit(r.commit) for r in runs], rotation=60, fontsize=7, family="monospace")
    ax.set_xlabel("run (commit), oldest first")
    ax.grid(True, alpha=0.3)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, loc="best")
    ax.set_title(f"{runs[0].recipe if runs else ''}: {metric} per run (median, min-max)", fontsize=9)
    return fig


def strip_figure(result: Result) -> Any:
    """Sync vs async (every mode) strip plots of max gap, submission and acknowledgement, latest run.

    Samples that saw GC are drawn as red crosses; the gap panel carries the target line and the idle
    control. Log scale when a panel spans more than a factor of 20.
    """
    import numpy as np

    rng = np.random.default_rng(0)  # jitter only
    metrics = ("max_gap_ms", "submission_ms", "ack_ms")
    fig = _figure(9.0, 3.4)
    axes = fig.subplots(1, len(metrics))
    modes = [*result.modes, "control"]
    for ax, metric in zip(axes, metrics):
        shown = []
        for k, mode in enumerate(modes):
            if mode == "control" and metric != "max_gap_ms":
                continue
            samples = result.samples(mode)
            values = [float(s[metric]) for s in samples]
            gc = [bool(s["gc"]["collections"]) for s in samples]
            x = len(shown) + rng.uniform(-0.12, 0.12, size=len(values))
            color = "0.55" if mode == "control" else _color(k)
            for xi, v, g in zip(x, values, gc):
                ax.plot(xi, v, "x" if g else "o", color="#d62728" if g else color, ms=6 if g else 5, alpha=0.8)
            shown.append("idle control" if mode == "control" else mode)
        ax.set_xticks(range(len(shown)))
        ax.set_xticklabels(shown, fontsize=8)
        ax.set_xlim(-0.5, len(shown) - 0.5)
        if metric == "max_gap_ms":
            ax.axhline(float(result.data["recipe"]["target_ms"]), color="#d62728", lw=1, alpha=0.7)
        values = [float(s[metric]) for m in modes for s in result.samples(m) if float(s[metric]) > 0]
        if values and max(values) / min(values) > 20:
            ax.set_yscale("log")
        ax.set_title(_label(metric), fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
    title = f"{result.recipe} {result.date[:10]} ({short_commit(result.commit)}): every sample; x = saw GC"
    fig.suptitle(title, fontsize=9)
    return fig


def has_tick_data(result: Result) -> bool:
    """Whether the samples carry per-tick gaps (``gaps_ms``: ``[[start_ms, gap_ms], ...]`` per sample)."""
    return any(s.get("gaps_ms") for m in result.modes for s in result.samples(m))


def timeline_figure(result: Result) -> Any:
    """Per-sample heartbeat timelines of the latest run.

    With per-tick data (``gaps_ms``) every tick-to-tick gap is drawn against time. Without it (the
    harness records only each window's largest gap), one bar per sample: window, submission, the
    largest gap where it happened, GC collections, and the acknowledgement.
    """
    if has_tick_data(result):
        return _tick_timeline(result)
    rows = [(mode, s) for mode in result.modes for s in result.samples(mode)]
    fig = _figure(9.0, max(2.2, 0.28 * len(rows) + 1.2))
    ax = fig.subplots()
    for y, (mode, s) in enumerate(rows):
        k = result.modes.index(mode)
        ax.barh(y, float(s.get("window_ms", s["ack_ms"])), left=0, height=0.7, color="0.92", edgecolor="0.8")
        ax.barh(y, float(s["submission_ms"]), left=0, height=0.35, color=_color(k), alpha=0.9)
        start = float(s.get("max_gap_at_ms", 0.0))
        ax.barh(y, float(s["max_gap_ms"]), left=start, height=0.7, color="none", edgecolor="#d62728", lw=1.2)
        for event in s["gc"].get("events", []):
            ax.barh(y, float(event["duration_ms"]), left=float(event["start_ms"]), height=0.7, color="k", alpha=0.5)
        ax.plot(float(s["ack_ms"]), y, "|", color="k", ms=12, mew=2)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{mode} #{s['index']}" for mode, s in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ms from just before submission")
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title(
        "per-sample window: submission (filled), largest heartbeat gap (red outline), GC (black), ack (|)",
        fontsize=9,
    )
    return fig


def _tick_timeline(result: Result) -> Any:
    fig = _figure(9.0, 2.6 * len(result.modes) + 0.4)
    axes = fig.subplots(len(result.modes), 1, squeeze=False)[:, 0]
    for ax, mode in zip(axes, result.modes):
        for s in result.samples(mode):
            gaps = s.get("gaps_ms") or []
            if gaps:
                ax.step([g[0] for g in gaps], [g[1] for g in gaps], where="post", lw=1, label=f"#{s['index']}")
        ax.axhline(float(result.data["recipe"]["target_ms"]), color="#d62728", lw=1, alpha=0.7)
        ax.set_ylabel(f"{mode}: gap (ms)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6, ncol=6)
    axes[-1].set_xlabel("ms from just before submission")
    return fig


def _cdf_points(samples: Sequence[Mapping[str, Any]]) -> tuple[list[float], list[float], str]:
    """(percentiles, lag in ms, source) for a mode: merged HDR histograms, else the recorded percentiles."""
    blobs = [s["hdr"]["corrected"] for s in samples if (s.get("hdr") or {}).get("corrected")]
    if blobs:
        from hdrh.histogram import HdrHistogram

        merged = None
        for blob in blobs:
            h = HdrHistogram.decode(blob)
            if merged is None:
                merged = h
            else:
                merged.add(h)
        if merged is not None and merged.get_total_count() > 0:
            ps = list(CDF_PERCENTILES)
            values = [merged.get_value_at_percentile(p) / 1e3 for p in ps]
            return ps, values, "HDR histograms"
    import numpy as np

    keys = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p999", 99.9))
    ps, values = [], []
    for key, p in keys:
        column = [s["lag_us"][key] for s in samples if key in (s.get("lag_us") or {})]
        if column:
            ps.append(p)
            values.append(float(np.median(column)) / 1e3)
    return ps, values, "median of recorded percentiles"


def lag_cdf_figure(result: Result) -> Any:
    """Heartbeat lag (CO-corrected) against percentile on a log(1 / (1 - p)) axis, per mode and control."""
    import numpy as np

    fig = _figure(8.0, 3.4)
    ax = fig.subplots()
    sources = set()
    for k, mode in enumerate([*result.modes, "control"]):
        ps, values, source = _cdf_points(result.samples(mode))
        if not ps:
            continue
        sources.add(source)
        x = 1.0 / (1.0 - np.asarray(ps) / 100.0)
        color = "0.55" if mode == "control" else _color(k)
        ax.plot(x, values, "o-", ms=3, lw=1.2, color=color, label="idle control" if mode == "control" else mode)
    ax.set_xscale("log")
    ticks = [1, 2, 10, 100, 1000, 10000]
    ax.set_xticks(ticks)
    ax.set_xticklabels(["0%", "50%", "90%", "99%", "99.9%", "99.99%"])
    ax.set_xlim(0.9, 12000)
    ax.set_xlabel("percentile")
    ax.set_ylabel("heartbeat lag (ms)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(f"lag distribution, all samples of the latest run ({', '.join(sorted(sources))})", fontsize=9)
    return fig
