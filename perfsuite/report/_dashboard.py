"""The static dashboard (SPEC section 5, ``perfsuite dashboard``): the regression story first.

The index tells, per machine (series never mix machines, see :func:`~perfsuite.report.machine_fingerprint`):
the latest run of each recipe against the previous one on that machine, with the gate's own comparison
(:func:`~perfsuite.report.compare_results`: regressed / improved / unchanged and the ratios); the latest
M7 verdicts, reference modes greyed with their reason; and the change points history found, each with
its commit range. Then one page per recipe and machine (:mod:`perfsuite.report._pages`).

The site is plain files: ``index.html``, ``<machine key>/<recipe>.html`` and the results documents the
charts link to under ``<machine key>/runs/``. Charts are inline SVG, so it opens from ``file://`` with no
network and builds in about a second for a few hundred documents (no matplotlib, no PNG files).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from perfsuite.errors import PerfsuiteError
from perfsuite.report._compare import Comparison, compare_results
from perfsuite.report._history import History, LevelStep, Series, history_results, order_results
from perfsuite.report._load import Result
from perfsuite.report._machine import Machine, machine_of
from perfsuite.report._pages import recipe_page, step_rows
from perfsuite.report._site import check_commit_url, commit_link, e, load_badge, page, references, slug, verdict_html
from perfsuite.report._store import read_source

__all__ = ["Dashboard", "MachineStory", "build_dashboard", "dashboard"]

#: unchanged metrics still named on the index, with their ratio (the rest only when they changed)
INDEX_METRICS = ("ack_ms", "max_gap_ms")


@dataclass(frozen=True, slots=True)
class Dashboard:
    """What was written: the index, the recipe pages, the linked results documents."""

    directory: Path
    index: Path
    pages: tuple[Path, ...]
    documents: tuple[Path, ...]


@dataclass(frozen=True, slots=True)
class MachineStory:
    """One machine's runs per recipe, the latest-vs-previous comparisons and the history steps."""

    machine: Machine
    runs: tuple[Result, ...]
    by_recipe: dict[str, list[Result]]
    comparisons: dict[str, Comparison]
    series: tuple[Series, ...]

    @property
    def steps(self) -> list[LevelStep]:
        """Every change point on this machine."""
        return [st for s in self.series for st in s.steps]

    def count(self, status: str) -> int:
        """Gating metrics of the latest runs with this status against the previous ones ("inconclusive": those
        the gate could not tell, the worse way, which make `compare` exit 3)."""
        if status == "inconclusive":
            return sum(len(c.inconclusive) for c in self.comparisons.values())
        return sum(1 for c in self.comparisons.values() for m in c.changes if m.gating and m.status == status)

    @property
    def verdict(self) -> str:
        """``bad`` (a regression), ``unsure`` (inconclusive: never a pass) or ``good``: the story's
        colour, from the gate's own exit status of each latest-vs-previous comparison."""
        statuses = {c.exit_status for c in self.comparisons.values()}
        return "bad" if 1 in statuses else "unsure" if 3 in statuses else "good"


def _stories(runs: Sequence[Result], hist: History) -> list[MachineStory]:
    machines: dict[str, Machine] = {}
    grouped: dict[str, list[Result]] = {}
    for run in runs:
        machine = machine_of(run)
        machines.setdefault(machine.key, machine)
        grouped.setdefault(machine.key, []).append(run)
    stories = []
    for key in sorted(grouped, key=lambda k: (-len(grouped[k]), k)):
        by_recipe: dict[str, list[Result]] = {}
        for run in grouped[key]:
            by_recipe.setdefault(run.recipe, []).append(run)
        comparisons = {}
        for recipe, rs in sorted(by_recipe.items()):
            # the gate compares finished runs only: an interrupted run is shown, never judged
            done = [r for r in rs if r.data.get("status") == "complete"]
            if len(done) >= 2:
                # two separate runs: costs gate, timings are shown as information
                comparisons[recipe] = compare_results([done[-2]], [done[-1]], base_name=_run_name(done[-2]),
                                                      new_name=_run_name(done[-1]), timings="info")
        series = tuple(s for s in hist.series if s.machine == key)
        stories.append(MachineStory(machines[key], tuple(grouped[key]), dict(sorted(by_recipe.items())),
                                    comparisons, series))
    return stories


def _run_name(result: Result) -> str:
    """``<commit> (<date>)`` of a run, for comparison names."""
    return f"{(result.commit or 'unknown')[:7]} ({result.date[:16]})"


def _chips(comparison: Comparison, reference: dict[str, str]) -> str:
    chips = []
    for c in comparison.changes:
        info = not c.gating and c.kind == "timing" and c.metric in INDEX_METRICS and comparison.timing_note
        if c.mode == "control" or c.reference or not (c.gating or info):
            continue
        if c.status == "unchanged" and (c.metric not in INDEX_METRICS or c.mode in reference or c.reference):
            continue
        text = f"{c.mode} {c.metric} {c.ratio:.2f}x" + (" (info)" if info else "")
        test = f"p = {c.p_value:.3g}" if c.p_value is not None else f"cost, tolerance {c.tolerance:.4g}"
        tip = f"{c.status}: {c.base.median:.4g} -> {c.new.median:.4g}, {test}"
        status = "dim" if info else c.status  # information is never coloured as a verdict
        chips.append((c.status != "unchanged" and not info,
                      f"<span class='chip {e(status)}' title='{e(tip)}'>{e(text)}</span>"))
    chips.sort(key=lambda chip: not chip[0])
    return "".join(html for _, html in chips) or "<span class='dim'>no gating metric</span>"


def _story_line(story: MachineStory) -> str:
    regressed, improved = story.count("regressed"), story.count("improved")
    unchanged, inconclusive = story.count("unchanged"), story.count("inconclusive")
    latest = max(story.runs, key=lambda r: (r.date, r.created_epoch or 0.0))
    runs = max(len(rs) for rs in story.by_recipe.values())
    if not story.comparisons:
        text = (f"Fewer than two finished runs per recipe on this machine (latest {e(latest.date[:16])}): "
                "nothing to compare yet.")
        return f"<p class='story'>{text} {len(story.steps)} change point(s).</p>"
    cls = story.verdict
    text = (
        f"Latest run ({e(latest.date[:16])}, commit {e((latest.commit or 'unknown')[:7])}) against the previous one: "
        f"<span class='{'regressed' if regressed else ''}'>{regressed} regressed</span>, "
        f"<span class='{'improved' if improved else ''}'>{improved} improved</span>, "
        f"{unchanged} unchanged{f', {inconclusive} inconclusive' if inconclusive else ''} (gating metrics: "
        "costs; the timings of two separate runs are information). "
        f"History: {len(story.steps)} change point(s) over up to {runs} runs."
    )
    loaded = sum(1 for r in story.runs if r.loaded)
    if loaded:  # said where the runs are shown
        text += (f" <span class='loaded'>{loaded} of {len(story.runs)} results document(s) measured on a LOADED "
                 "machine</span> (idle control median more than 1 ms over the heartbeat period).")
    return f"<p class='story {cls}'>{text}</p>"


def _machine_section(story: MachineStory, pages: dict[str, str], commit_url: str | None) -> str:
    m = story.machine
    parts = [f"<section class='machine' id='m-{e(m.key)}'>", f"<h2>{e(m.host)}</h2>",
             f"<p class='note'>{e(m.label)} &middot; <code>{e(m.key)}</code> &middot; {len(story.runs)} results "
             f"document(s) of {len(story.by_recipe)} recipe(s)</p>", _story_line(story),
             "<h3>Latest run against the previous one, and the latest verdicts</h3>",
             "<table class='latest'><tr><th class='text'>recipe</th><th>runs</th><th class='text'>latest</th>"
             "<th class='text'>previous</th><th class='text'>latest vs previous (ratio of medians)</th>"
             "<th class='text'>verdicts (M7)</th></tr>"]
    for recipe, runs in story.by_recipe.items():
        latest = runs[-1]
        reference = references(latest)
        comparison = story.comparisons.get(recipe)
        done = [r for r in runs if r.data.get("status") == "complete"]
        previous = (commit_link(done[-2].commit, commit_url) + load_badge(done[-2]) if comparison
                    else "<span class='dim'>none</span>")
        chips = _chips(comparison, reference) if comparison else "<span class='dim'>fewer than two finished runs</span>"
        if latest.data.get("status") != "complete" and comparison:
            pair = f"{commit_link(done[-2].commit, commit_url)}..{commit_link(done[-1].commit, commit_url)}"
            chips = f"<span class='dim'>latest run {e(latest.data.get('status'))}; finished runs {pair}:</span> {chips}"
        verdicts = "<br>".join(f"{e(mode)}: {verdict_html(latest, mode)}" for mode in latest.modes)
        parts.append(
            f"<tr><td class='text'><a href='{e(pages[recipe])}'><code>{e(recipe)}</code></a></td><td>{len(runs)}</td>"
            f"<td class='text'>{commit_link(latest.commit, commit_url)}{load_badge(latest)} "
            f"<span class='dim'>{e(latest.date[:10])}</span>"
            f"</td><td class='text'>{previous}</td><td class='text'>{chips}</td><td class='text'>{verdicts}</td></tr>"
        )
    parts.append("</table>")
    parts.append("<h3>Change points</h3>")
    steps = story.steps
    if steps:
        parts.append(step_rows(steps, commit_url, recipe_column=True, series=story.series))
    else:
        parts.append("<p class='note'>No change point found on this machine.</p>")
    parts.append("</section>")
    return "\n".join(parts)



def _linker(names: dict[int, str]) -> Callable[[Result], str | None]:
    """A recipe page's link to a run's document, or None for a run whose document was not written."""

    def href(result: Result) -> str | None:
        return f"runs/{names[id(result)]}" if id(result) in names else None

    return href

def build_dashboard(
    results: Sequence[Result], out: Path | str, *, commit_url: str | None = None, source: str | None = None
) -> Dashboard:
    """Write the site for loaded ``results`` into ``out`` (created; existing files are overwritten).

    ``commit_url`` (``https://github.com/OWNER/REPO/commit/{commit}``) links commits; ``source`` names
    where the results came from, for the index.
    """
    if commit_url is not None:
        check_commit_url(commit_url)
    if not results:
        raise PerfsuiteError("no results to draw")
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PerfsuiteError(f"{out}: cannot create the dashboard directory: {exc.strerror}") from None
    runs = order_results(results)
    hist = history_results(runs)
    stories = _stories(runs, hist)
    pages: list[Path] = []
    documents: list[Path] = []
    sections = []
    for story in stories:
        folder = out / story.machine.key
        (folder / "runs").mkdir(parents=True, exist_ok=True)
        names: dict[int, str] = {}
        for run in story.runs:
            name = run.name if run.name.endswith(".json") else f"{slug(run.name)}.json"
            while name in names.values():
                name = name[:-5] + "-1.json"
            names[id(run)] = name
            path = folder / "runs" / name
            path.write_text(json.dumps(run.data, separators=(",", ":")), encoding="utf-8")
            documents.append(path)

        href = _linker(names)
        links = {}
        for recipe, recipe_runs in story.by_recipe.items():
            path = folder / f"{slug(recipe)}.html"
            series = [s for s in story.series if s.recipe == recipe]
            path.write_text(
                recipe_page(recipe, story.machine, recipe_runs, series, story.comparisons.get(recipe), story.runs,
                            href=href, commit_url=commit_url),
                encoding="utf-8",
            )
            pages.append(path)
            links[recipe] = f"{story.machine.key}/{path.name}"
        sections.append(_machine_section(story, links, commit_url))
    synthetic = sum(1 for r in runs if r.data.get("synthetic"))
    body = [
        "<h1>perfsuite dashboard</h1>",
        f"<p class='note summary'>{len(runs)} results document(s) from {e(source or 'the given results')}, on "
        f"{len(stories)} machine(s). Comparisons are the CI gate's; change points come from "
        f"<code>perfsuite history</code> (ruptures PELT, or run against run below 6 runs).</p>",
    ]
    if synthetic:
        body.append(f"<p class='synthetic'>{synthetic} of these documents are SYNTHETIC test data (marked so in "
                    "each document), not measurements.</p>")
    if len(stories) > 1:
        body.append("<nav>" + "".join(f"<a href='#m-{e(s.machine.key)}'>{e(s.machine.host)}</a>" for s in stories)
                    + "</nav>")
    body += sections
    index = out / "index.html"
    index.write_text(page("perfsuite dashboard", "\n".join(body)), encoding="utf-8")
    return Dashboard(out, index, tuple(pages), tuple(documents))


def dashboard(
    source: Path | str, out: Path | str, *, machine: str | None = None, commit_url: str | None = None
) -> Dashboard:
    """Read results from ``source`` (a directory, a file or a results store) and write the site into ``out``."""
    if commit_url is not None:
        check_commit_url(commit_url)  # before reading anything
    return build_dashboard(read_source(source, machine=machine), out, commit_url=commit_url, source=str(source))
