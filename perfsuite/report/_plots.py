"""Inline SVG charts for the dashboard: history, sparklines, sync vs async strips, lag CDFs, timelines.

Written directly as SVG text (no matplotlib, no script library, no CDN): a page opens from ``file://``
and costs milliseconds to draw, where a matplotlib PNG cost about 0.2 s of CPU each (284 of
them took 59 s). Every data mark carries a ``<title>`` with its value, so hovering shows the number
(natively, or through the page's small tooltip script); history points are links to their results file.
Functions take loaded :class:`~perfsuite.report.Result` objects and return an SVG string.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from perfsuite.report._format import fmt_level, short_commit
from perfsuite.report._history import Series
from perfsuite.report._load import Result

__all__ = [
    "CDF_PERCENTILES",
    "fmt_value",
    "has_tick_data",
    "history_svg",
    "lag_cdf_svg",
    "sparkline_svg",
    "strip_svg",
    "timeline_svg",
]

#: the lag CDF's x positions: 0% .. 99.99% on a log(1 / (1 - p)) axis
CDF_PERCENTILES = (0.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99)
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
GREY = "#9a9a9a"
RED = "#cf222e"
LABELS = {
    "max_gap_ms": "max heartbeat gap (ms)",
    "stalls.longest_ms": "longest loop callback (ms)",
    "submission_ms": "submission (ms)",
    "ack_ms": "acknowledgement (ms)",
    "drain_ms": "drain (ms)",
    "lag_us.p99": "heartbeat lag p99 (µs)",
    "metrics.bytes_written": "bytes written",
    "allocation.total_bytes": "bytes allocated",
}


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def label(metric: str) -> str:
    """A metric's axis label."""
    return LABELS.get(metric, metric)


def fmt_value(metric: str, value: float) -> str:
    """A value with its unit, for hover text: ``112.3 ms``, ``2,801 µs``, ``38,732 B``."""
    if metric.endswith("_ms") or metric.startswith("phases_ms."):
        return f"{fmt_level(value)} ms"
    if metric.startswith(("lag_us", "lag_us_uncorrected")) or metric.endswith("_us"):
        return f"{fmt_level(value)} µs"
    if "bytes" in metric:
        return f"{value:,.0f} B"
    return fmt_level(value)


class _Scale:
    """Data -> pixels on one axis, linear or log10."""

    def __init__(self, lo: float, hi: float, a: float, b: float, log: bool = False) -> None:
        self.log = log
        if log:
            lo, hi = math.log10(max(lo, 1e-12)), math.log10(max(hi, 1e-12))
        if hi <= lo:
            hi = lo + (abs(lo) or 1.0)
        self.lo, self.hi, self.a, self.b = lo, hi, a, b

    def __call__(self, v: float) -> float:
        x = math.log10(max(v, 1e-12)) if self.log else v
        return self.a + (x - self.lo) / (self.hi - self.lo) * (self.b - self.a)

    def ticks(self) -> list[float]:
        """About five round values inside the range (decades on a log axis)."""
        if self.log:
            return [10.0**k for k in range(math.ceil(self.lo), math.floor(self.hi) + 1)]
        span = self.hi - self.lo
        raw = span / 5
        mag = 10 ** math.floor(math.log10(raw))
        step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
        first = math.ceil(self.lo / step) * step
        return [first + i * step for i in range(int((self.hi - first) / step + 1e-9) + 1)]


def _range(values: Sequence[float], *, zero: bool) -> tuple[float, float, bool]:
    """(low, high, log): a log axis when positive values span more than a factor of 20."""
    positive = [v for v in values if v > 0]
    if positive and min(positive) > 0 and max(positive) / min(positive) > 20 and len(positive) == len(values):
        return min(positive) / 1.3, max(positive) * 1.3, True
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    lo = 0.0 if zero and lo >= 0 else lo
    pad = (hi - lo) * 0.08 or abs(hi) * 0.1 or 1.0
    return (lo if zero else lo - pad), hi + pad, False


def _svg(width: int, height: int, body: Sequence[str], title: str, cls: str = "chart") -> str:
    return (
        f"<svg class='{cls}' xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' role='img' aria-label='{_e(title)}'>" + "".join(body) + "</svg>"
    )


def _y_axis(y: _Scale, left: float, right: float, fmt: Callable[[float], str] = fmt_level) -> list[str]:
    out = []
    for t in y.ticks():
        py = y(t)
        out.append(f"<line x1='{left:.1f}' x2='{right:.1f}' y1='{py:.1f}' y2='{py:.1f}' class='grid'/>")
        out.append(f"<text x='{left - 4:.1f}' y='{py + 3:.1f}' class='tick' text-anchor='end'>{_e(fmt(t))}</text>")
    return out


def _point(x: float, y: float, color: str, tip: str, *, href: str | None = None, r: float = 3.5,
           cross: bool = False) -> str:
    if cross:
        d = 3.5
        mark = (f"<path d='M{x - d:.1f},{y - d:.1f}L{x + d:.1f},{y + d:.1f}M{x - d:.1f},{y + d:.1f}L{x + d:.1f},"
                f"{y - d:.1f}' stroke='{RED}' stroke-width='2' class='pt'><title>{_e(tip)}</title></path>")
    else:
        mark = (f"<circle cx='{x:.1f}' cy='{y:.1f}' r='{r}' fill='{color}' class='pt'>"
                f"<title>{_e(tip)}</title></circle>")
    return f"<a href='{_e(href)}'>{mark}</a>" if href else mark


def history_svg(
    metric: str,
    series: Sequence[Series],
    runs: Sequence[Result],
    *,
    href: Callable[[Result], str | None],
    commit_href: Callable[[str | None], str | None],
    colors: Mapping[str, str],
    target_ms: float | None = None,
) -> str:
    """One metric over one machine's runs: median per mode (whiskers min to max), steps as dashed lines.

    Each point links to its results file (``href``) and says its value, commit and date on hover; the x
    axis names every run's commit, linked by ``commit_href`` when it gives a URL.
    """
    width, height, left, right, top, bottom = 880, 250, 64, 16, 22, 64
    index = {id(r): i for i, r in enumerate(runs)}
    values = [v for s in series for p in s.points for v in (p.min, p.max)]
    if target_ms is not None:
        values.append(target_ms)
    lo, hi, log = _range(values, zero=True)
    x = _Scale(-0.5, max(len(runs) - 0.5, 0.5), left, width - right)
    y = _Scale(lo, hi, height - bottom, top, log)
    body = _y_axis(y, left, width - right)
    if target_ms is not None:
        ty = y(target_ms)
        body.append(f"<line x1='{left}' x2='{width - right}' y1='{ty:.1f}' y2='{ty:.1f}' class='target'>"
                    f"<title>target {target_ms:g} ms</title></line>")
    for s in series:
        color = colors.get(s.mode, GREY)
        xs = [x(index[id(p.result)]) for p in s.points]
        path = " ".join(f"{'L' if k else 'M'}{px:.1f},{y(p.median):.1f}" for k, (px, p) in enumerate(zip(xs, s.points)))
        body.append(f"<path d='{path}' fill='none' stroke='{color}' stroke-width='1.4'/>")
        for px, p in zip(xs, s.points):
            body.append(f"<line x1='{px:.1f}' x2='{px:.1f}' y1='{y(p.min):.1f}' y2='{y(p.max):.1f}' "
                        f"stroke='{color}' stroke-width='1' opacity='.5'/>")
            tip = (f"{s.mode} {metric}: {fmt_value(metric, p.median)} (median; {fmt_value(metric, p.min)} to "
                   f"{fmt_value(metric, p.max)}) at {short_commit(p.commit)}, {p.date[:16]}")
            body.append(_point(px, y(p.median), color, tip, href=href(p.result)))
        for k, step in enumerate(s.steps):
            sx = xs[step.index] - (xs[1] - xs[0] if len(xs) > 1 else 10) / 2
            text = f"{step.kind} {step.ratio:.2f}x at {short_commit(step.previous_commit)}..{short_commit(step.commit)}"
            anchor = "end" if sx > width / 2 else "start"
            tx = sx - 4 if anchor == "end" else sx + 4
            body.append(f"<line x1='{sx:.1f}' x2='{sx:.1f}' y1='{top}' y2='{height - bottom}' stroke='{color}' "
                        f"class='step'><title>{_e(s.mode)}: {_e(text)}</title></line>")
            body.append(f"<text x='{tx:.1f}' y='{top + 10 + 12 * k:.1f}' fill='{color}' class='note' "
                        f"text-anchor='{anchor}'>{_e(s.mode)}: {_e(text)}</text>")
    for i, run in enumerate(runs):
        px, py = x(i), height - bottom + 10
        text = (
            f"<text x='{px:.1f}' y='{py:.1f}' class='tick commit' transform='rotate(-60 {px:.1f} {py:.1f})' "
            f"text-anchor='end'>{_e(short_commit(run.commit))}"
            f"<title>{_e(run.commit or 'unknown commit')}</title></text>"
        )
        link = commit_href(run.commit)
        body.append(f"<a href='{_e(link)}'>{text}</a>" if link else text)
    body.append(f"<text x='{left}' y='14' class='label'>{_e(label(metric))}: median per run (whisker: min to max)"
                f"{', log scale' if log else ''}</text>")
    legend = [f"<tspan fill='{colors.get(s.mode, GREY)}'>● {_e(s.mode)}</tspan> " for s in series]
    body.append(f"<text x='{width - right}' y='14' class='label' text-anchor='end'>{''.join(legend)}</text>")
    return _svg(width, height, body, f"history of {metric}")


def sparkline_svg(values: Sequence[float], step_index: int | None, tip: Callable[[int, float], str]) -> str:
    """A 140x30 line of one series, the new level after ``step_index`` in red, each point with its value."""
    width, height = 140, 30
    x = _Scale(0, max(len(values) - 1, 1), 4, width - 4)
    lo, hi = min(values), max(values)
    y = _Scale(lo - (hi - lo) * 0.1 - 1e-9, hi + (hi - lo) * 0.1 + 1e-9, height - 4, 4)
    path = " ".join(f"{'M' if i == 0 else 'L'}{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
    body = [f"<path d='{path}' fill='none' stroke='{GREY}' stroke-width='1.2'/>"]
    for i, v in enumerate(values):
        after = step_index is not None and i >= step_index
        body.append(_point(x(i), y(v), RED if after else "#555", tip(i, v), r=2))
    return _svg(width, height, body, "sparkline", cls="spark")


def strip_svg(result: Result, colors: Mapping[str, str], reference: Mapping[str, str]) -> str:
    """Sync vs async (every mode, then the idle control): every sample of max gap, submission and ack.

    Samples that saw GC are red crosses; the max-gap panel carries the target line; reference modes are
    grey. Log scale on a panel whose values span more than a factor of 20.
    """
    metrics = ("max_gap_ms", "submission_ms", "ack_ms")
    panel_w, height, top, bottom, left = 300, 260, 24, 46, 58
    body: list[str] = []
    target = float(result.data["recipe"]["target_ms"])
    for n, metric in enumerate(metrics):
        x0 = n * panel_w
        modes = [*result.modes, *(["control"] if metric == "max_gap_ms" else [])]
        values = [float(s[metric]) for m in modes for s in result.samples(m) if isinstance(s.get(metric), int | float)]
        if metric == "max_gap_ms":
            values.append(target)
        lo, hi, log = _range(values, zero=True)
        y = _Scale(lo, hi, height - bottom, top, log)
        x = _Scale(-0.5, len(modes) - 0.5, x0 + left, x0 + panel_w - 8)
        body += _y_axis(y, x0 + left, x0 + panel_w - 8)
        if metric == "max_gap_ms":
            body.append(f"<line x1='{x0 + left}' x2='{x0 + panel_w - 8}' y1='{y(target):.1f}' y2='{y(target):.1f}' "
                        f"class='target'><title>target {target:g} ms</title></line>")
        for k, mode in enumerate(modes):
            color = GREY if mode == "control" or mode in reference else colors.get(mode, GREY)
            samples = result.samples(mode)
            for j, s in enumerate(samples):
                if not isinstance(s.get(metric), int | float):
                    continue
                jitter = ((j * 7919) % 11 / 10 - 0.5) * 0.35
                gc = bool((s.get("gc") or {}).get("collections"))
                tip = f"{mode} #{s.get('index', j)} {metric}: {fmt_value(metric, float(s[metric]))}"
                body.append(_point(x(k + jitter), y(float(s[metric])), color, tip + (" (saw GC)" if gc else ""),
                                   cross=gc))
            name = "idle control" if mode == "control" else mode + (" (ref.)" if mode in reference else "")
            body.append(f"<text x='{x(k):.1f}' y='{height - bottom + 16}' class='tick' text-anchor='middle'>"
                        f"{_e(name)}</text>")
        body.append(f"<text x='{x0 + left}' y='14' class='label'>{_e(label(metric))}{' (log)' if log else ''}</text>")
    return _svg(panel_w * len(metrics), height, body, f"{result.recipe}: every sample, sync vs async")


def has_tick_data(result: Result) -> bool:
    """Whether the samples carry per-tick gaps (``gaps_ms``: ``[[start_ms, gap_ms], ...]`` per sample)."""
    return any(s.get("gaps_ms") for m in result.modes for s in result.samples(m))


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
            return ps, [merged.get_value_at_percentile(p) / 1e3 for p in ps], "HDR histograms"
    import numpy as np

    ps, values = [], []
    for key, p in (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p999", 99.9)):
        column = [s["lag_us"][key] for s in samples if key in (s.get("lag_us") or {})]
        if column:
            ps.append(p)
            values.append(float(np.median(column)) / 1e3)
    return ps, values, "median of recorded percentiles"


def lag_cdf_svg(result: Result, colors: Mapping[str, str], reference: Mapping[str, str]) -> str:
    """Heartbeat lag (CO-corrected) against percentile on a log(1 / (1 - p)) axis, per mode and control."""
    width, height, left, right, top, bottom = 880, 260, 64, 16, 24, 40
    curves, sources = [], set()
    for mode in [*result.modes, "control"]:
        ps, values, source = _cdf_points(result.samples(mode))
        if ps:
            curves.append((mode, ps, values))
            sources.add(source)
    all_values = [v for _, _, vs in curves for v in vs] or [0.0, 1.0]
    x = _Scale(1.0 / (1 - 0.0), 1.0 / (1 - 0.9999), left, width - right, log=True)
    lo, hi, log = _range([max(v, 0.0) for v in all_values], zero=True)
    y = _Scale(lo, hi, height - bottom, top, log)
    body = _y_axis(y, left, width - right)
    for p, text in ((0.0, "0%"), (50.0, "50%"), (90.0, "90%"), (99.0, "99%"), (99.9, "99.9%"), (99.99, "99.99%")):
        px = x(1.0 / (1.0 - p / 100.0))
        body.append(f"<line x1='{px:.1f}' x2='{px:.1f}' y1='{top}' y2='{height - bottom}' class='grid'/>")
        body.append(f"<text x='{px:.1f}' y='{height - bottom + 14}' class='tick' text-anchor='middle'>{text}</text>")
    for k, (mode, ps, values) in enumerate(curves):
        color = GREY if mode == "control" or mode in reference else colors.get(mode, GREY)
        pts = [(x(1.0 / (1.0 - p / 100.0)), y(max(v, lo))) for p, v in zip(ps, values)]
        path = " ".join(f"{'M' if i == 0 else 'L'}{px:.1f},{py:.1f}" for i, (px, py) in enumerate(pts))
        dash = " stroke-dasharray='4 3'" if mode == "control" else ""
        body.append(f"<path d='{path}' fill='none' stroke='{color}' stroke-width='1.5'{dash}/>")
        name = "idle control" if mode == "control" else mode
        for (px, py), p, v in zip(pts, ps, values):
            body.append(_point(px, py, color, f"{name}: p{p:g} lag {fmt_level(v)} ms", r=2.5))
        body.append(f"<text x='{width - right - 4}' y='{top + 12 + 13 * k}' fill='{color}' class='label' "
                    f"text-anchor='end'>{_e(name)}</text>")
    body.append(f"<text x='{left}' y='14' class='label'>heartbeat lag (ms) by percentile, all samples of this run "
                f"({_e(', '.join(sorted(sources)) or 'no lag data')})</text>")
    return _svg(width, height, body, f"{result.recipe}: lag CDF")


def timeline_svg(result: Result, colors: Mapping[str, str]) -> str:
    """One row per sample: the window (grey), submission (filled), largest gap (red outline), GC (black),
    acknowledgement (tick); with per-tick gaps (``gaps_ms``), every gap as a red bar instead."""
    rows = [(mode, s) for mode in result.modes for s in result.samples(mode)]
    width, left, right, top, row_h = 880, 110, 16, 22, 14
    height = top + row_h * len(rows) + 30
    end = max([float(s.get("window_ms") or s.get("ack_ms") or 0.0) for _, s in rows] + [1.0])
    x = _Scale(0.0, end, left, width - right)
    body = []
    for t in x.ticks():
        body.append(f"<line x1='{x(t):.1f}' x2='{x(t):.1f}' y1='{top}' y2='{height - 28}' class='grid'/>")
        body.append(f"<text x='{x(t):.1f}' y='{height - 16}' class='tick' text-anchor='middle'>{fmt_level(t)}</text>")
    for r, (mode, s) in enumerate(rows):
        y0 = top + r * row_h
        color = colors.get(mode, GREY)
        window = float(s.get("window_ms") or s.get("ack_ms") or 0.0)
        body.append(f"<rect x='{x(0):.1f}' y='{y0 + 1}' width='{x(window) - x(0):.1f}' height='{row_h - 2}' "
                    f"fill='#eee'/><text x='{left - 4}' y='{y0 + row_h - 3}' class='tick' text-anchor='end'>"
                    f"{_e(mode)} #{s.get('index', r)}</text>")
        if s.get("submission_ms") is not None:  # a live window (M11) submits nothing
            sub = float(s["submission_ms"])
            body.append(f"<rect x='{x(0):.1f}' y='{y0 + 4}' width='{max(x(sub) - x(0), 1):.1f}' "
                        f"height='{row_h - 8}' fill='{color}'><title>submission {fmt_level(sub)} ms</title></rect>")
        # per-tick data: every gap longer than 1.5 periods; otherwise the one largest gap the sample recorded
        ticks = s.get("gaps_ms") or []
        slow = float(result.data["recipe"]["heartbeat_ms"]) * 1.5
        gaps = [g for g in ticks if float(g[1]) > slow] if ticks else [[s.get("max_gap_at_ms", 0.0), s["max_gap_ms"]]]
        for start, gap in gaps:
            gx = x(max(float(start), 0.0))
            body.append(f"<rect x='{gx:.1f}' y='{y0 + 1}' width='{max(x(float(start) + float(gap)) - gx, 1):.1f}' "
                        f"height='{row_h - 2}' fill='none' stroke='{RED}'><title>heartbeat gap {fmt_level(float(gap))} "
                        f"ms at {fmt_level(float(start))} ms</title></rect>")
        for event in (s.get("gc") or {}).get("events", []):
            start, duration = float(event["start_ms"]), float(event["duration_ms"])
            gx = x(start)
            body.append(f"<rect x='{gx:.1f}' y='{y0 + 2}' width='{max(x(start + duration) - gx, 1):.1f}' "
                        f"height='{row_h - 4}' fill='#000' opacity='.5'><title>GC {fmt_level(duration)} ms"
                        "</title></rect>")
        if s.get("ack_ms") is None:
            continue
        ack = x(float(s["ack_ms"]))
        body.append(f"<line x1='{ack:.1f}' x2='{ack:.1f}' y1='{y0}' y2='{y0 + row_h}' stroke='#000' stroke-width='2'>"
                    f"<title>acknowledged at {fmt_level(float(s['ack_ms']))} ms</title></line>")
    body.append(f"<text x='{left}' y='14' class='label'>ms from just before submission: submission (filled), "
                "largest heartbeat gap (red outline), GC (black), acknowledgement (|)</text>")
    return _svg(width, height, body, f"{result.recipe}: per-sample timeline")
