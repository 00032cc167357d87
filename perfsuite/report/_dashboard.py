"""The static dashboard (SPEC section 5, ``perfsuite dashboard``): an index plus one page per recipe.

Beside the max heartbeat gap, the summary tables show the longest loop callback (M9) and the
acknowledgement against the fsync floor and the publication floor; by-design reference modes show
"reference: why" instead of a verdict; the history plots include ``stalls.longest_ms``.

Plain HTML with relative links and PNG figures beside the pages, so it opens from the file system
(or a CI artifact) with no server. Per recipe: the latest run's summary table, history per metric
(target line, detected steps), sync vs async strips, per-sample timelines and the lag CDF. A tiny
inline script marks images that failed to load and records the counts on ``<body>`` (``data-images``,
``data-images-broken``), which the browser test reads.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perfsuite.errors import PerfsuiteError
from perfsuite.report._format import fmt_level, short_commit
from perfsuite.report._history import History, history_results, order_results
from perfsuite.report._load import Result, find_floor, read_results
from perfsuite.report._plots import has_tick_data, history_figure, lag_cdf_figure, strip_figure, timeline_figure
from perfsuite.report._table import floors_caption, row_cells, summary_columns, summary_rows, table_title

__all__ = ["Dashboard", "build_dashboard", "dashboard"]

_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1000px; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .6em 0; font-size: .9em; }
th, td { padding: .25em .7em; border-bottom: 1px solid #eee; text-align: right; }
th:first-child, td:first-child, td.text, th.text { text-align: left; }
.met { color: #1a7f37; } .missed { color: #cf222e; font-weight: 600; } .dim { color: #888; }
img { max-width: 100%; display: block; margin: .4em 0 1em; } img.missing { outline: 3px solid #cf222e; }
code { background: #f4f4f4; padding: 0 .2em; } .note { color: #555; font-size: .9em; }
nav a { margin-right: 1em; }
"""

_CHECK = """
<script>
(function () {
  function check() {
    var imgs = Array.prototype.slice.call(document.images);
    var bad = imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); });
    bad.forEach(function (i) { i.classList.add("missing"); });
    document.body.setAttribute("data-images", String(imgs.length));
    document.body.setAttribute("data-images-broken", String(bad.length));
  }
  window.addEventListener("load", check);
})();
</script>
"""


@dataclass(frozen=True, slots=True)
class Dashboard:
    """What was written: the index, the recipe pages and the figures."""

    directory: Path
    index: Path
    pages: tuple[Path, ...]
    images: tuple[Path, ...]


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "recipe"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n<body>\n{body}\n{_CHECK}</body></html>\n"
    )


def _summary_html(result: Result, candidates: Sequence[Result]) -> str:
    floor = find_floor(result, candidates)
    head = summary_columns(result, floor)
    out = [f"<table><caption class='note'>{_e(table_title(result))}</caption><tr>"]
    out += [f"<th class='{'text' if h in ('mode', 'verdict') else ''}'>{_e(h)}</th>" for h in head]
    out.append("</tr>")
    for row in summary_rows(result, floor):
        cls = "dim" if row.control or row.reference else ("met" if row.met else "missed" if row.met is False else "")
        cells = row_cells(row, head)
        out.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells[:-1]))
        out.append(f"<td class='text {cls}'>{_e(cells[-1])}</td></tr>")
    out.append("</table>")
    caption = floors_caption(result, floor)
    if caption:
        out += [f"<p class='note'>{_e(line)}</p>" for line in caption.splitlines()]
    return "".join(out)


def _verdict_word(run: Result, mode: str) -> tuple[str, str]:
    """The short verdict of a mode for the index and the runs table, and its CSS class."""
    reference = run.reference(mode)
    if reference:
        return f"reference: {reference}", "dim"
    v = run.data["modes"][mode]["verdict"]
    if v["met"] is None:
        return "-", ""
    return ("met", "met") if v["met"] else (f"missed {v['missed']}/{v['samples']}", "missed")


def _save(fig: object, path: Path, images: list[Path]) -> str:
    fig.savefig(path, format="png")  # type: ignore[attr-defined]
    images.append(path)
    return path.name


def _img(name: str, alt: str) -> str:
    return f"<img src='{_e(name)}' alt='{_e(alt)}'>"


def _recipe_page(
    recipe: str, runs: Sequence[Result], hist: History, everything: Sequence[Result], out: Path, images: list[Path]
) -> str:
    slug = _slug(recipe)
    latest = runs[-1]
    parts = [
        "<nav><a href='index.html'>&larr; all recipes</a></nav>",
        f"<h1><code>{_e(recipe)}</code></h1>",
        f"<p>{_e(latest.data['recipe'].get('description', ''))}</p>",
        f"<p class='note'>{len(runs)} run(s); latest {_e(latest.date)} at commit "
        f"<code>{_e(short_commit(latest.commit))}</code> ({_e(latest.name)}).</p>",
        "<h2>Latest run</h2>",
        _summary_html(latest, everything),
    ]
    target = float(latest.data["recipe"]["target_ms"])
    parts.append("<h2>History</h2>")
    metrics = list(dict.fromkeys(s.metric for s in hist.series if s.recipe == recipe))
    steps = [st for st in hist.steps if st.recipe == recipe]
    if steps:
        parts.append("<table><tr><th class='text'>mode</th><th class='text'>metric</th><th class='text'>commit</th>")
        parts.append("<th>before</th><th>after</th><th class='text'>kind</th></tr>")
        for st in steps:
            parts.append(
                f"<tr><td>{_e(st.mode)}</td><td class='text'><code>{_e(st.metric)}</code></td>"
                f"<td class='text'><code>{_e(short_commit(st.commit))}</code></td><td>{fmt_level(st.before)}</td>"
                f"<td>{fmt_level(st.after)}</td><td class='text'>{_e(st.kind)}</td></tr>"
            )
        parts.append("</table>")
    else:
        parts.append(f"<p class='note'>No step detected over {len(runs)} run(s).</p>")
    for metric in metrics:
        series = [s for s in hist.series if s.recipe == recipe and s.metric == metric]
        control = []
        if metric == "max_gap_ms":
            control = [(i, st.median) for i, r in enumerate(runs) if (st := r.stat("control", "max_gap_ms"))]
        fig = history_figure(
            metric, series, runs, target_ms=target if metric == "max_gap_ms" else None, control=control
        )
        name = _save(fig, out / f"{slug}-history-{_slug(metric)}.png", images)
        parts.append(_img(name, f"{recipe} history of {metric}"))
    parts.append("<h2>Modes side by side (latest run)</h2>")
    parts.append(_img(_save(strip_figure(latest), out / f"{slug}-strip.png", images), f"{recipe} strip plot"))
    parts.append("<h2>Per-sample heartbeat timeline (latest run)</h2>")
    if not has_tick_data(latest):
        parts.append(
            "<p class='note'>The results carry each window's largest gap, not every tick, so this shows where "
            "the largest gap fell in each sample; per-tick gaps (<code>gaps_ms</code>) would give full timelines."
            "</p>"
        )
    parts.append(_img(_save(timeline_figure(latest), out / f"{slug}-timeline.png", images), f"{recipe} timeline"))
    parts.append("<h2>Heartbeat lag distribution (latest run)</h2>")
    parts.append(_img(_save(lag_cdf_figure(latest), out / f"{slug}-lag-cdf.png", images), f"{recipe} lag CDF"))
    parts.append("<h2>Runs</h2><table><tr><th class='text'>date</th><th class='text'>commit</th>")
    parts.append("<th class='text'>file</th><th class='text'>verdicts</th></tr>")
    for run in reversed(runs):
        verdicts = "; ".join(f"{m}: {_verdict_word(run, m)[0]}" for m in run.modes)
        parts.append(
            f"<tr><td class='text'>{_e(run.date)}</td><td class='text'><code>{_e(short_commit(run.commit))}</code>"
            f"</td><td class='text'>{_e(run.name)}</td><td class='text'>{_e(verdicts)}</td></tr>"
        )
    parts.append("</table>")
    return _page(f"perfsuite: {recipe}", "\n".join(parts))


def build_dashboard(results: Sequence[Result], out: Path | str) -> Dashboard:
    """Write the site for loaded ``results`` into ``out`` (created; existing files are overwritten)."""
    if not results:
        raise PerfsuiteError("no results to draw")
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PerfsuiteError(f"{out}: cannot create the dashboard directory: {exc.strerror}") from None
    runs = order_results(results)
    hist = history_results(runs)
    by_recipe: dict[str, list[Result]] = {}
    for run in runs:
        by_recipe.setdefault(run.recipe, []).append(run)
    images: list[Path] = []
    pages: list[Path] = []
    rows = []
    for recipe, recipe_runs in sorted(by_recipe.items()):
        page = out / f"{_slug(recipe)}.html"
        page.write_text(_recipe_page(recipe, recipe_runs, hist, runs, out, images), encoding="utf-8")
        pages.append(page)
        latest = recipe_runs[-1]
        verdicts = []
        for mode in latest.modes:
            word, cls = _verdict_word(latest, mode)
            verdicts.append(f"{_e(mode)}: <span class='{cls}'>{_e(word)}</span>")
        n_steps = sum(1 for st in hist.steps if st.recipe == recipe)
        thumb = f"{_slug(recipe)}-history-max_gap_ms.png"
        rows.append(
            f"<tr><td class='text'><a href='{_e(page.name)}'><code>{_e(recipe)}</code></a></td>"
            f"<td>{len(recipe_runs)}</td><td class='text'>{_e(latest.date)}</td>"
            f"<td class='text'><code>{_e(short_commit(latest.commit))}</code></td>"
            f"<td class='text'>{'; '.join(verdicts)}</td><td>{n_steps}</td></tr>"
            f"<tr><td colspan='6'><a href='{_e(page.name)}'>{_img(thumb, recipe + ' max gap history')}</a></td></tr>"
        )
    body = [
        "<h1>perfsuite dashboard</h1>",
        f"<p class='note'>{len(runs)} results of {len(by_recipe)} recipe(s). Verdicts are the latest run's, against "
        "each recipe's max heartbeat gap target; steps are change points detected over the runs (ruptures PELT).</p>",
        "<table><tr><th class='text'>recipe</th><th>runs</th><th class='text'>latest</th>"
        "<th class='text'>commit</th><th class='text'>verdicts</th><th>steps</th></tr>",
        *rows,
        "</table>",
    ]
    index = out / "index.html"
    index.write_text(_page("perfsuite dashboard", "\n".join(body)), encoding="utf-8")
    return Dashboard(out, index, tuple(pages), tuple(images))


def dashboard(directory: Path | str, out: Path | str) -> Dashboard:
    """Read every results file under ``directory`` and write the site into ``out``."""
    return build_dashboard(read_results(directory), out)
