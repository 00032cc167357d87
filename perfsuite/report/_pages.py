"""One recipe's page on one machine: the sync vs async comparison first, then history, steps and runs.

Order: the latest run's summary, every sample of every mode side by side and the lag CDF;
the comparison with the previous run (the gate's own verdicts); history charts of the headline metrics
from :data:`MIN_HISTORY_RUNS` runs on (each point a link to its results file, its commit on the axis);
the change points with their commit ranges; the per-sample timeline; every run with its links.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from perfsuite.report._compare import Comparison, MetricChange
from perfsuite.report._format import short_commit
from perfsuite.report._history import LevelStep, Series
from perfsuite.report._load import Result, find_floor
from perfsuite.report._machine import Machine
from perfsuite.report._plots import (
    COLORS,
    fmt_value,
    has_tick_data,
    history_svg,
    lag_cdf_svg,
    sparkline_svg,
    strip_svg,
    timeline_svg,
)
from perfsuite.report._site import commit_href, commit_link, e, load_badge, page, references, verdict_html
from perfsuite.report._table import floors_caption, row_cells, summary_columns, summary_rows, table_title

__all__ = ["HISTORY_CHART_METRICS", "MIN_HISTORY_RUNS", "comparison_rows", "recipe_page", "step_rows"]

#: history is drawn from this many runs of the recipe on the machine (one or two points tell nothing)
MIN_HISTORY_RUNS = 3
#: the headline metrics that get a history chart (when the recipe reports them)
HISTORY_CHART_METRICS = (
    "max_gap_ms",
    "stalls.longest_ms",  # M9: the longest loop callback, beside the max gap
    "submission_ms",
    "ack_ms",
    "drain_ms",
    "metrics.bytes_written",
    "allocation.total_bytes",
    "instructions.total",  # the instruction pass, all threads and the loop thread's share
    "instructions.loop_thread",
)


def mode_colors(modes: Sequence[str]) -> dict[str, str]:
    """A stable colour per mode, in the recipe's order."""
    return {m: COLORS[i % len(COLORS)] for i, m in enumerate(modes)}


def _summary_html(result: Result, candidates: Sequence[Result]) -> str:
    """The run's summary table as ``report`` prints it: the longest loop callback (M9) beside the max gap and
    the acknowledgement against the fsync floor and the publication floor, each named in the caption."""
    floor = find_floor(result, candidates)
    head = summary_columns(result, floor)
    out = [f"<table><caption class='note'>{e(table_title(result))}</caption><tr>"]
    out += [f"<th class='{'text' if h in ('mode', 'verdict') else ''}'>{e(h)}</th>" for h in head]
    out.append("</tr>")
    for row in summary_rows(result, floor):
        cells = row_cells(row, head)[:-1]
        verdict = (("<span class='loaded'>LOADED machine</span>" if result.loaded else
                    "<span class='dim'>noise floor</span>") if row.control else verdict_html(result, row.mode))
        cls = " class='dim'" if row.control else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{e(c)}</td>" for c in cells) + f"<td class='text'>{verdict}</td></tr>")
    out.append("</table>")
    caption = floors_caption(result, floor)
    if caption:
        out += [f"<p class='note'>{e(line)}</p>" for line in caption.splitlines()]
    return "".join(out)


def _test(c: MetricChange) -> str:
    """A timing's p-value, or a cost's tolerance (costs are compared against it, not tested)."""
    return f"{c.p_value:.3g}" if c.p_value is not None else f"tol {fmt_value(c.metric, c.tolerance or 0.0)}"


def comparison_rows(comparison: Comparison, reference: Mapping[str, str]) -> str:
    """The headline and changed metrics of a latest-vs-previous comparison as an HTML table."""
    out = ["<table><tr><th class='text'>mode</th><th class='text'>metric</th><th>previous</th><th>latest</th>"
           "<th>ratio</th><th>p</th><th class='text'>status</th></tr>"]
    for c in comparison.shown():
        status = c.status + ("" if c.gating or c.status == "unchanged" else " (info)")
        if c.mode in reference:
            status += " (reference mode)"
        out.append(
            f"<tr><td>{e(c.mode)}</td><td class='text'><code>{e(c.metric)}</code></td>"
            f"<td>{e(fmt_value(c.metric, c.base.median))}</td><td>{e(fmt_value(c.metric, c.new.median))}</td>"
            f"<td>{c.ratio:.2f}x</td><td>{_test(c)}</td><td class='text {e(c.status)}'>{e(status)}</td></tr>"
        )
    out.append("</table>")
    return "".join(out)


def _spark(series: Series, step: LevelStep) -> str:
    """The series of a step as a sparkline, the new level in red, each point's value on hover."""
    def tip(i: int, v: float) -> str:
        return f"{series.mode} {series.metric} {fmt_value(series.metric, v)} at {short_commit(series.points[i].commit)}"

    return sparkline_svg([p.median for p in series.points], step.index, tip)


def step_rows(
    steps: Sequence[LevelStep], commit_url: str | None, *, recipe_column: bool, series: Sequence[Series] = ()
) -> str:
    """Change points as a table: where (recipe, mode, metric), the commit range, levels, kind and, with
    ``series``, a sparkline of the series around it."""
    owner = {id(st): s for s in series for st in s.steps}
    head = ["recipe"] if recipe_column else []
    head += ["mode", "metric", "commit range", "run", "date", "before", "after", "change", "kind", "found by"]
    head += ["series"] if owner else []
    out = ["<table class='steps'><tr>" + "".join(
        f"<th class='{'' if h in ('run', 'before', 'after', 'change') else 'text'}'>{e(h)}</th>" for h in head)
        + "</tr>"]
    for st in steps:
        kind = "regressed" if st.kind == "regression" else "improved" if st.kind == "improvement" else ""
        cells = [f"<td class='text'><code>{e(st.recipe)}</code></td>"] if recipe_column else []
        cells += [
            f"<td class='text'>{e(st.mode)}</td><td class='text'><code>{e(st.metric)}</code></td>",
            f"<td class='text'>{commit_link(st.previous_commit, commit_url)}.."
            f"{commit_link(st.commit, commit_url)}</td>",
            f"<td>{st.index + 1}</td><td class='text'>{e(st.date[:10])}</td>",
            f"<td>{e(fmt_value(st.metric, st.before))}</td><td>{e(fmt_value(st.metric, st.after))}</td>",
            f"<td>{st.ratio:.2f}x</td><td class='text {kind}'>{e(st.kind)}</td>",
            f"<td class='text dim'>{e(st.method)}</td>",
        ]
        if owner:
            cells.append(f"<td class='text'>{_spark(owner[id(st)], st) if id(st) in owner else ''}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _against_previous(comparison: Comparison | None) -> str:
    if comparison is None:
        return "<p class='story'>Fewer than two finished runs of this recipe on this machine: nothing to compare.</p>"
    counts = {k: sum(1 for c in comparison.changes if c.gating and c.status == k)
              for k in ("regressed", "improved", "unchanged")}
    counts["inconclusive"] = len(comparison.inconclusive)  # the worse way: `compare` exits 3
    extra = f", {counts['inconclusive']} inconclusive" if counts["inconclusive"] else ""
    named = [f"{c.mode} {c.metric} {c.ratio:.2f}x" for c in comparison.changes
             if c.gating and c.status in ("regressed", "improved")]
    text = (f"Latest run against the previous one: <span class='{'regressed' if counts['regressed'] else ''}'>"
            f"{counts['regressed']} regressed</span>, <span class='{'improved' if counts['improved'] else ''}'>"
            f"{counts['improved']} improved</span>, {counts['unchanged']} unchanged gating metrics"
            f"{extra}"
            f"{': ' + e(', '.join(named)) if named else ''} (table below the history).")
    cls = {1: "bad", 3: "unsure"}.get(comparison.exit_status, "good")  # the gate's verdict: unsure is no pass
    return f"<p class='story {cls}'>{text}</p>"


def recipe_page(
    recipe: str,
    machine: Machine,
    runs: Sequence[Result],
    series: Sequence[Series],
    comparison: Comparison | None,
    candidates: Sequence[Result],
    *,
    href: Callable[[Result], str | None],
    commit_url: str | None,
) -> str:
    """The HTML of ``recipe``'s page for one machine's ``runs`` (time order) and their history ``series``."""
    latest = runs[-1]
    colors = mode_colors(latest.modes)
    reference = references(latest)
    steps = [st for s in series for st in s.steps]
    parts = [
        "<nav><a href='../index.html'>&larr; all machines and recipes</a></nav>",
        f"<h1><code>{e(recipe)}</code> on {e(machine.host)}</h1>",
        f"<p class='note'>Machine {e(machine.label)} (<code>{e(machine.key)}</code>).</p>",
        f"<p>{e(latest.data['recipe'].get('description', ''))}</p>",
    ]
    if latest.data.get("synthetic"):
        parts.append(f"<p class='synthetic'>{e(latest.data['synthetic'].get('note', 'Synthetic data.'))}</p>")
    link = href(latest)
    file_html = f"<a href='{e(link)}'>{e(latest.name)}</a>" if link else e(latest.name)
    parts += [
        f"<p class='note'>{len(runs)} run(s) on this machine; latest {e(latest.date)} at commit "
        f"{commit_link(latest.commit, commit_url)} ({file_html}){load_badge(latest)}.</p>",
        _against_previous(comparison),
        "<h2>Latest run: modes side by side</h2>",
        _summary_html(latest, candidates),
    ]
    for mode, reason in reference.items():
        parts.append(f"<p class='note reference'>{e(mode)} is a reference by design, not a target: {e(reason)}</p>")
    parts.append(strip_svg(latest, colors, reference))
    parts.append("<p class='note'>Every sample; a red cross saw a garbage collection; dashed red: the target.</p>")
    parts.append(lag_cdf_svg(latest, colors, reference))
    parts.append("<h2>History</h2>")
    if len(runs) < MIN_HISTORY_RUNS:
        parts.append(f"<p class='note'>History charts start at {MIN_HISTORY_RUNS} runs; this machine has "
                     f"{len(runs)} run(s) of this recipe.</p>")
    else:
        for metric in HISTORY_CHART_METRICS:
            drawn = [s for s in series if s.metric == metric and len(s.points) >= MIN_HISTORY_RUNS]
            if drawn:
                parts.append(history_svg(metric, drawn, runs, href=href, commit_href=commit_href(commit_url),
                                         colors=colors, target_ms=float(latest.data["recipe"]["target_ms"])
                                         if metric == "max_gap_ms" else None))
        parts.append("<p class='note'>Hover a point for its value; click it for its results file; the commits on "
                     "the axis link to the commits when the site was built with <code>--commit-url</code>.</p>")
    parts.append("<h3>Change points</h3>")
    parts.append(step_rows(steps, commit_url, recipe_column=False, series=series) if steps else
                 f"<p class='note'>No change point over {len(runs)} run(s) (any metric).</p>")
    parts.append("<h2>Latest against previous</h2>")
    if comparison is None:
        parts.append("<p class='note'>Fewer than two finished runs of this recipe on this machine: nothing to "
                     "compare.</p>")
    else:
        done = [r for r in runs if r.data.get("status") == "complete"]
        previous, latest_done = done[-2], done[-1]
        parts.append(f"<p class='note'>Commit {commit_link(previous.commit, commit_url)} ({e(previous.date[:16])}) "
                     f"-&gt; {commit_link(latest_done.commit, commit_url)} ({e(latest_done.date[:16])}), the last two "
                     f"finished runs, by the gate's comparison: costs against their tolerance; "
                     + (f"{e(comparison.timing_note)}." if comparison.timing_note else
                        f"timings: Mann-Whitney U p &lt; {comparison.alpha:g} and a ratio beyond "
                        f"{comparison.factor:g}x.") + "</p>")
        parts.append(comparison_rows(comparison, reference))
    parts.append("<h2>Per-sample timeline (latest run)</h2>")
    if not has_tick_data(latest):
        parts.append("<p class='note'>The results carry each window's largest gap, not every tick, so this shows "
                     "where the largest gap fell in each sample; per-tick gaps (<code>gaps_ms</code>) would give full "
                     "timelines.</p>")
    parts.append(timeline_svg(latest, colors))
    parts.append("<h2>Runs</h2><table><tr><th class='text'>date</th><th class='text'>commit</th>"
                 "<th class='text'>results file</th><th class='text'>verdicts</th></tr>")
    for i, run in reversed(list(enumerate(runs))):
        link = href(run)
        name = f"<a href='{e(link)}'>{e(run.name)}</a>" if link else e(run.name)
        verdicts = "; ".join(f"{e(m)}: {verdict_html(run, m)}" for m in run.modes)
        parts.append(f"<tr id='run-{i}'><td class='text'>{e(run.date[:16])}</td><td class='text'>"
                     f"{commit_link(run.commit, commit_url)}{load_badge(run)}</td><td class='text'>{name}</td>"
                     f"<td class='text'>{verdicts}</td></tr>")
    parts.append("</table>")
    return page(f"perfsuite: {recipe} on {machine.host}", "\n".join(parts))

