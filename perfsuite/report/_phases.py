"""Phase breakdown: where each sample's main-thread time went, as a table and a stacked bar plot.

Per sample, the publication phases of SPEC E4 (freeze, stage, hash, select, commit, adopt, finish) and
the GC time inside the sample's window (M2). Which numbers stand for "main-thread time":

* ``main_thread_ms`` (loop-thread time per phase of an asynchronous job) when the sample carries it:
  as ``sample["main_thread_ms"]``, ``sample["metrics"]["main_thread_ms"]`` (a mapping) or flattened
  ``sample["metrics"]["main_thread_ms.<phase>"]``;
* otherwise ``phases_ms``. For a sample acknowledged inside the submitting call (the synchronous
  writer: acknowledgement <= submission) every phase ran inline, so ``phases_ms`` *is* main-thread
  time, and the part of the submission not covered by any phase is shown as ``other``. For an
  asynchronous sample without ``main_thread_ms``, ``phases_ms`` is wall time per phase, off-loop work
  included: the row says so (``source``) and the plot labels that panel "wall time per phase".

GC time is drawn as its own slim bar beside each sample's stack, never added to it: a collection runs
inside whatever phase it interrupted, so its time is already part of that phase. Each sample's max
heartbeat gap is marked for comparison (the stall the phases explain).

Works on results documents (:func:`phase_breakdown`) and on any sample-shaped records
(:func:`breakdown_from_samples`, used by ``perfsuite profile --phase``).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite._extras import require

__all__ = [
    "PhaseBreakdown",
    "PhaseRow",
    "breakdown_from_samples",
    "phase_breakdown",
    "phase_figure",
    "phase_rows",
    "phase_table",
    "sample_phases",
    "write_phase_plot",
]

OTHER = "other"
GC = "GC"

SOURCE_MAIN = "main_thread_ms"
SOURCE_INLINE = "phases_ms (inline: main thread)"
SOURCE_WALL = "phases_ms (wall: off-loop work included)"

_SHORT = {SOURCE_MAIN: "main thread", SOURCE_INLINE: "inline", SOURCE_WALL: "wall*"}

_COLORS = {
    "freeze": "#9467bd",
    "stage": "#1f77b4",
    "hash": "#17becf",
    "select": "#bcbd22",
    "commit": "#ff7f0e",
    "adopt": "#d62728",
    "finish": "#2ca02c",
    OTHER: "#c7c7c7",
}
_EXTRA_COLORS = ("#8c564b", "#e377c2", "#7f7f7f", "#aec7e8", "#ffbb78")


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _numbers(mapping: object) -> dict[str, float]:
    if not isinstance(mapping, Mapping):
        return {}
    return {str(k): v for k, v in ((k, _number(v)) for k, v in mapping.items()) if v is not None}


def _main_thread(sample: Mapping[str, Any]) -> dict[str, float]:
    found = _numbers(sample.get("main_thread_ms"))
    if found:
        return found
    metrics = sample.get("metrics") or {}
    found = _numbers(metrics.get("main_thread_ms"))
    if found:
        return found
    prefix = "main_thread_ms."
    return {
        k[len(prefix) :]: v
        for k, v in ((k, _number(v)) for k, v in metrics.items() if str(k).startswith(prefix))
        if v is not None
    }


def _inline(sample: Mapping[str, Any]) -> bool:
    sub, ack = _number(sample.get("submission_ms")), _number(sample.get("ack_ms"))
    return sub is not None and ack is not None and ack <= sub + 1e-6


def sample_phases(sample: Mapping[str, Any]) -> tuple[dict[str, float], str]:
    """(main-thread ms per phase, source) for one sample; see the module docstring for the rule."""
    main = _main_thread(sample)
    if main:
        return main, SOURCE_MAIN
    phases = _numbers(sample.get("phases_ms"))
    return phases, SOURCE_INLINE if _inline(sample) else SOURCE_WALL


def _ordered(names: Iterable[str]) -> list[str]:
    """The engine's publication phases (E4) in pipeline order, then any other phase by name, ``other`` last."""
    # PHASES is declared once, by the engine; imported here, when a breakdown is ordered, so that
    # `import perfsuite.report` (the CI gate, the pytest plugin's comparison) does not pay the engine's import
    from perfsuite.engine import PHASES

    names = set(names)
    known = [p for p in PHASES if p in names]
    return known + sorted(n for n in names if n not in PHASES and n != OTHER) + ([OTHER] if OTHER in names else [])


@dataclass(frozen=True, slots=True)
class PhaseRow:
    """One sample: its phases (ms, pipeline order; ``other`` for inline samples), GC and reference times."""

    mode: str
    index: int
    source: str
    phases: Mapping[str, float]
    gc_ms: float
    gc_collections: int
    max_gap_ms: float | None
    submission_ms: float | None
    ack_ms: float | None

    @property
    def total_ms(self) -> float:
        """The stack's height: the sum of the phases (``other`` included)."""
        return float(sum(self.phases.values()))

    @property
    def saw_gc(self) -> bool:
        """Whether a collection ran inside the sample's window."""
        return self.gc_collections > 0


def _row(mode: str, sample: Mapping[str, Any], position: int) -> PhaseRow:
    phases, source = sample_phases(sample)
    ordered = {name: phases[name] for name in _ordered(phases)}
    submission = _number(sample.get("submission_ms"))
    if source == SOURCE_INLINE and submission is not None:
        rest = submission - sum(ordered.values())
        if rest > 0:
            ordered[OTHER] = rest
    gc = sample.get("gc") or {}
    index = sample.get("index")
    return PhaseRow(
        mode=mode,
        index=int(index) if isinstance(index, int) else position,
        source=source,
        phases=ordered,
        gc_ms=_number(gc.get("gc_ms")) or 0.0,
        gc_collections=int(_number(gc.get("collections")) or 0),
        max_gap_ms=_number(sample.get("max_gap_ms")),
        submission_ms=submission,
        ack_ms=_number(sample.get("ack_ms")),
    )


def phase_rows(mode: str, samples: Sequence[Mapping[str, Any]]) -> list[PhaseRow]:
    """One :class:`PhaseRow` per sample of ``mode``."""
    return [_row(mode, s, i) for i, s in enumerate(samples)]


@dataclass(frozen=True, slots=True)
class PhaseBreakdown:
    """Every sample's phase row for one recipe run (or one profile), modes in the recipe's order."""

    recipe: str
    rows: tuple[PhaseRow, ...]
    title: str = ""

    @property
    def modes(self) -> list[str]:
        """Mode names in first-seen order."""
        return list(dict.fromkeys(r.mode for r in self.rows))

    def by_mode(self, mode: str) -> list[PhaseRow]:
        """The rows of ``mode``."""
        return [r for r in self.rows if r.mode == mode]

    def phase_names(self, mode: str | None = None) -> list[str]:
        """The phases present (pipeline order, then any others, then ``other``)."""
        rows = self.rows if mode is None else self.by_mode(mode)
        return _ordered(name for r in rows for name in r.phases)

    def sources(self, mode: str) -> list[str]:
        """Where the mode's numbers came from (one entry per distinct source)."""
        return list(dict.fromkeys(r.source for r in self.by_mode(mode)))

    def medians(self, mode: str) -> dict[str, float]:
        """Median ms per phase over the mode's samples (a phase a sample lacks counts as 0), plus GC."""
        rows = self.by_mode(mode)
        out = {name: statistics.median([r.phases.get(name, 0.0) for r in rows]) for name in self.phase_names(mode)}
        out[GC] = statistics.median([r.gc_ms for r in rows]) if rows else 0.0
        return out

    def shares(self, mode: str) -> dict[str, float]:
        """Each phase's share of the mode's summed stacks (0..1), GC excluded (it overlaps the phases)."""
        rows = self.by_mode(mode)
        total = sum(r.total_ms for r in rows)
        if total <= 0:
            return {}
        return {name: sum(r.phases.get(name, 0.0) for r in rows) / total for name in self.phase_names(mode)}

    def to_dict(self) -> dict[str, Any]:
        """JSON form (notebooks, tests)."""
        return {
            "recipe": self.recipe,
            "rows": [
                {
                    "mode": r.mode,
                    "index": r.index,
                    "source": r.source,
                    "phases_ms": dict(r.phases),
                    "gc_ms": r.gc_ms,
                    "gc_collections": r.gc_collections,
                    "max_gap_ms": r.max_gap_ms,
                    "submission_ms": r.submission_ms,
                    "ack_ms": r.ack_ms,
                }
                for r in self.rows
            ],
        }


def breakdown_from_samples(
    recipe: str, samples: Mapping[str, Sequence[Mapping[str, Any]]], *, title: str = ""
) -> PhaseBreakdown:
    """A breakdown from ``{mode: [sample-like records]}`` (results samples or profile iterations)."""
    rows: list[PhaseRow] = []
    for mode, items in samples.items():
        rows.extend(phase_rows(mode, items))
    return PhaseBreakdown(recipe, tuple(rows), title)


def phase_breakdown(result: Any, modes: Sequence[str] | None = None) -> PhaseBreakdown:
    """The breakdown of a results file: a path, a :class:`~perfsuite.report.Result` or a document. By default
    the modes with per-phase times (a publication floor's raw calls have none), else every mode."""
    from perfsuite.report._load import Result, read_result

    if isinstance(result, str | Path):
        result = read_result(result)
    doc = result.data if isinstance(result, Result) else result
    phased = [m for m, body in doc["modes"].items() if any(s.get("phases_ms") for s in body["samples"])]
    chosen = list(modes) if modes else (phased or list(doc["modes"]))
    unknown = [m for m in chosen if m not in doc["modes"]]
    if unknown:
        from perfsuite.errors import PerfsuiteError

        raise PerfsuiteError(f"no mode {unknown[0]!r} in this results file (modes: {', '.join(doc['modes'])})")
    name = str(doc["recipe"]["name"])
    when = str((doc.get("environment") or {}).get("date") or doc.get("created_at") or "")[:19]
    return breakdown_from_samples(name, {m: doc["modes"][m]["samples"] for m in chosen}, title=f"{name} {when}".strip())


def _color(name: str, extra: list[str]) -> str:
    if name in _COLORS:
        return _COLORS[name]
    if name not in extra:
        extra.append(name)
    return _EXTRA_COLORS[extra.index(name) % len(_EXTRA_COLORS)]


def phase_figure(breakdown: PhaseBreakdown) -> Any:
    """One panel per mode: a stacked bar of phases per sample, GC beside it, the max gap marked."""
    require("report", "matplotlib")
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    modes = breakdown.modes or ["(no samples)"]
    most = max((len(breakdown.by_mode(m)) for m in modes), default=1)
    width = min(max(4.2, 1.2 + 0.32 * most), 12.0)
    fig = Figure(figsize=(width * len(modes), 4.8), dpi=100, layout="constrained")
    axes = fig.subplots(1, len(modes), squeeze=False)[0]
    extra: list[str] = []
    legend: dict[str, Any] = {}
    for ax, mode in zip(axes, modes):
        rows = breakdown.by_mode(mode)
        if not rows:
            ax.text(0.5, 0.5, "no samples", ha="center", va="center", transform=ax.transAxes)
            continue
        xs = list(range(len(rows)))
        bottoms = [0.0] * len(rows)
        for name in breakdown.phase_names(mode):
            heights = [r.phases.get(name, 0.0) for r in rows]
            color = _color(name, extra)
            ax.bar([x - 0.12 for x in xs], heights, width=0.6, bottom=bottoms, color=color, edgecolor="white", lw=0.3)
            bottoms = [b + h for b, h in zip(bottoms, heights)]
            legend.setdefault(name, Patch(facecolor=color, label=name))
        gc = [r.gc_ms for r in rows]
        if any(gc):
            ax.bar([x + 0.3 for x in xs], gc, width=0.2, color="0.15", hatch="///", edgecolor="white", lw=0.3)
            legend.setdefault(GC, Patch(facecolor="0.15", hatch="///", label="GC in window (overlaps phases)"))
        gaps = [r.max_gap_ms for r in rows]
        if any(g is not None for g in gaps):
            ax.plot(
                [x for x, g in zip(xs, gaps) if g is not None],
                [g for g in gaps if g is not None],
                "_",
                color="k",
                ms=18,
                mew=1.6,
            )
            legend.setdefault("gap", ax.plot([], [], "_", color="k", ms=12, mew=1.6, label="max heartbeat gap")[0])
        ax.set_xticks(xs)
        ax.set_xticklabels([f"#{r.index}" for r in rows], fontsize=7, rotation=90 if len(rows) > 10 else 0)
        for label, r in zip(ax.get_xticklabels(), rows):
            if r.saw_gc:
                label.set_color("#d62728")
        sources = breakdown.sources(mode)
        what = "main-thread ms" if all(s in (SOURCE_MAIN, SOURCE_INLINE) for s in sources) else "wall ms per phase"
        ax.set_ylabel(what)
        ax.set_title(f"{mode}: {', '.join(sources)}", fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("sample (red label: a collection ran in its window)", fontsize=7)
    fig.legend(handles=list(legend.values()), loc="outside lower center", ncol=min(len(legend), 6), fontsize=7)
    fig.suptitle(f"{breakdown.title or breakdown.recipe}: where each sample's time went", fontsize=9)
    return fig


def write_phase_plot(breakdown: PhaseBreakdown, path: str | Path) -> Path:
    """Save :func:`phase_figure` as a PNG (parents created)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    phase_figure(breakdown).savefig(target)
    return target


def phase_table(breakdown: PhaseBreakdown) -> Any:
    """A rich table: per mode, the median ms of each phase, GC, the stack and the max gap; shares in %."""
    from rich.table import Table

    names = breakdown.phase_names()
    table = Table(
        title=f"{breakdown.title or breakdown.recipe}: phase breakdown (medians in ms; share of the summed stacks)",
        title_justify="left",
        caption="inline: phases ran on the calling thread; main thread: main_thread_ms; *wall: wall time per "
        "phase, off-loop work included (the results carry no main_thread_ms). GC overlaps the phases.",
        caption_justify="left",
    )
    table.add_column("mode")
    table.add_column("n", justify="right")
    for name in names:
        table.add_column(name, justify="right")
    for column in ("stack", GC, "max gap", "source"):
        table.add_column(column, justify="left" if column == "source" else "right")
    for mode in breakdown.modes:
        rows = breakdown.by_mode(mode)
        med = breakdown.medians(mode)
        shares = breakdown.shares(mode)
        cells = [mode, str(len(rows))]
        for name in names:
            if name in med:
                cells.append(f"{med[name]:.2f} ({100 * shares.get(name, 0.0):.0f}%)")
            else:
                cells.append("")
        gaps = [r.max_gap_ms for r in rows if r.max_gap_ms is not None]
        gc_rows = sum(r.saw_gc for r in rows)
        cells += [
            f"{statistics.median([r.total_ms for r in rows]):.2f}",
            f"{med[GC]:.2f}" + (f" ({gc_rows} saw GC)" if gc_rows else ""),
            f"{statistics.median(gaps):.2f}" if gaps else "",
            "; ".join(_SHORT.get(x, x) for x in breakdown.sources(mode)),
        ]
        table.add_row(*cells)
    return table
