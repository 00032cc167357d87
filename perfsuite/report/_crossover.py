"""The crossover sweep (``perfsuite sweep``): where each mode stops meeting the target, per setting.

A sweep is a set of results documents sharing ``sweep.id``, one per setting (storage profile x heap x
freeze, ``perfsuite.workloads.conditions.plan_sweep``). :func:`read_sweeps` groups them; per setting
and mode a :class:`ModeCell` holds the max heartbeat gap (median and worst), the longest loop stall
(M9; ``None`` when the documents do not measure it: "not measured", never 0), the acknowledgement
median and the M7 verdict with the GC count of the missing samples. :func:`sweep_table` prints them,
:func:`write_sweep_plot` draws them against the target line, :func:`sweep_evidence` writes the
paragraph that names the first setting (in grid order) where each mode misses and whether GC was in
those samples. Every figure comes from the documents.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError
from perfsuite.report._conditions import conditions_of, stall_ms
from perfsuite.report._format import fmt_ms, fmt_number, plural
from perfsuite.report._load import Result, mode_reference
from perfsuite.report._machine import machine_of

__all__ = [
    "ModeCell",
    "Sweep",
    "SweepRow",
    "read_sweeps",
    "sweep_evidence",
    "sweep_figure",
    "sweep_table",
    "write_sweep_plot",
]


@dataclass(frozen=True, slots=True)
class ModeCell:
    """One mode at one setting."""

    n: int
    gap_median: float | None
    gap_max: float | None
    stall_max: float | None  # None: not measured
    ack_median: float | None
    met: bool | None
    missed: int
    missed_with_gc: int
    gc_samples: int
    full_gc_ms: tuple[float, ...]  # the heap probe of each sample (empty without a heap)
    reference: str | None = None  # a by-design reference mode (e.g. a floor): no verdict

    @classmethod
    def of(cls, result: Result, mode: str) -> ModeCell:
        samples = result.samples(mode)
        gaps = [float(s["max_gap_ms"]) for s in samples]
        acks = [float(s["ack_ms"]) for s in samples]
        stalls = [v for v in (stall_ms(s) for s in samples) if v is not None]
        verdict = result.data["modes"][mode]["verdict"]
        probes = tuple(float(s["heap"]["full_gc_ms"]) for s in samples
                       if isinstance(s.get("heap"), Mapping) and isinstance(s["heap"].get("full_gc_ms"), int | float))
        return cls(
            n=len(samples),
            gap_median=statistics.median(gaps) if gaps else None,
            gap_max=max(gaps) if gaps else None,
            stall_max=max(stalls) if stalls and len(stalls) == len(samples) else None,
            ack_median=statistics.median(acks) if acks else None,
            met=verdict.get("met"),
            missed=int(verdict.get("missed", 0)),
            missed_with_gc=int(verdict.get("missed_with_gc", 0)),
            gc_samples=sum(1 for s in samples if s["gc"]["collections"]),
            full_gc_ms=probes,
            reference=mode_reference(result.data, mode),
        )


@dataclass(frozen=True, slots=True)
class SweepRow:
    """One setting of a sweep and its document."""

    index: int
    storage: str | None
    storage_source: str | None
    heap: int
    freeze: bool
    result: Result
    cells: Mapping[str, ModeCell]
    machine: str = ""  # the machine that measured every sample of this setting (a cluster sweep)

    @property
    def label(self) -> str:
        """``nvme, heap 1000000, freeze off``."""
        return f"{self.storage or 'no simulated storage'}, heap {self.heap}, freeze {'on' if self.freeze else 'off'}"


@dataclass(frozen=True, slots=True)
class Sweep:
    """The documents of one sweep, in grid order."""

    id: str
    recipe: str
    rows: tuple[SweepRow, ...]
    modes: tuple[str, ...]
    target_ms: float
    planned: int

    @property
    def complete(self) -> bool:
        """Every planned setting has a complete document."""
        return len(self.rows) == self.planned and all(r.result.data.get("status") == "complete" for r in self.rows)

    @property
    def machines(self) -> tuple[str, ...]:
        """The machines that measured the settings, in grid order of first use (one unless the sweep ran on
        a cluster of several hosts; each setting's samples all come from one of them)."""
        return tuple(dict.fromkeys(r.machine for r in self.rows))

    def first_miss(self, mode: str) -> SweepRow | None:
        """The first setting, in grid order, whose verdict for ``mode`` is "missed"."""
        return next((r for r in self.rows if mode in r.cells and r.cells[mode].met is False), None)


def _row(result: Result) -> SweepRow:
    sweep = result.data["sweep"]
    setting = sweep.get("setting") or {}
    c = conditions_of(result)
    return SweepRow(
        index=int(setting.get("index", 0)),
        storage=c.storage,
        storage_source=c.storage_source,
        heap=c.heap,
        freeze=c.freeze,
        result=result,
        cells={m: ModeCell.of(result, m) for m in result.modes},
        machine=machine_of(result).label,
    )


def read_sweeps(results: Iterable[Result]) -> list[Sweep]:
    """Group the documents that carry a ``sweep`` annotation by sweep id (others are ignored)."""
    groups: dict[str, list[Result]] = {}
    for result in results:
        sweep = result.data.get("sweep")
        if isinstance(sweep, Mapping) and sweep.get("id"):
            groups.setdefault(str(sweep["id"]), []).append(result)
    out = []
    for sid, members in sorted(groups.items()):
        rows = sorted((_row(r) for r in members), key=lambda r: r.index)
        if len({r.index for r in rows}) != len(rows):
            raise PerfsuiteError(f"sweep {sid}: two documents claim the same setting")
        recipes = {r.result.recipe for r in rows}
        if len(recipes) != 1:
            raise PerfsuiteError(f"sweep {sid}: documents of several recipes ({', '.join(sorted(recipes))})")
        modes: list[str] = []
        for r in rows:
            modes += [m for m in r.result.modes if m not in modes]
        targets = {float(r.result.data["recipe"]["target_ms"]) for r in rows}
        planned = max(int(r.result.data["sweep"].get("of", len(rows))) for r in rows)
        out.append(Sweep(sid, recipes.pop(), tuple(rows), tuple(modes), max(targets), planned))
    return out


# -- table -----------------------------------------------------------------------------------------


def _cell_gap(cell: ModeCell | None) -> str:
    if cell is None or cell.gap_median is None or cell.gap_max is None:
        return ""
    return f"{cell.gap_median:.1f} / {cell.gap_max:.1f}"


def _cell_verdict(cell: ModeCell | None) -> str:
    if cell is not None and cell.reference:
        return "reference"
    if cell is None or cell.met is None:
        return ""
    if cell.met:
        return "met"
    return f"missed {cell.missed}/{cell.n}, {cell.missed_with_gc} GC"


def sweep_table(sweep: Sweep) -> Any:
    """A rich table: one row per setting; per mode the max gap (median / worst), the longest loop stall,
    the median acknowledgement and the verdict against the target (times in ms)."""
    from rich import box
    from rich.table import Table

    profiles = {r.storage: r.storage_source for r in sweep.rows if r.storage}
    caption = [f"simulated storage latency: {name} ({source or 'source not recorded'})"
               for name, source in profiles.items()]
    caption.append("stall: longest loop callback (M9); 'not measured' where the documents lack it")
    several = len(sweep.machines) > 1
    if several:
        caption.append(f"measured on {len(sweep.machines)} machines (column m): every setting's samples on one of "
                       "them; settings are compared by verdict against the target, never sample against sample")
        caption.extend(f"m{i + 1}: {label}" for i, label in enumerate(sweep.machines))
    if not sweep.complete:
        caption.append(f"incomplete: {len(sweep.rows)} of {sweep.planned} settings have documents")
    table = Table(
        title=f"sweep {sweep.id}: {sweep.recipe} against the {sweep.target_ms:g} ms target (times in ms)",
        box=box.SIMPLE_HEAD, title_justify="left", caption="\n".join(caption), caption_justify="left")
    table.add_column("#", justify="right")
    for column in ("storage", "heap", "freeze"):
        table.add_column(column, justify="left" if column == "storage" else "right")
    if several:
        table.add_column("m", justify="left")
    for mode in sweep.modes:  # two-line headers (mode, then what) keep three modes within a terminal
        table.add_column(f"{mode}\ngap med/max", justify="right", overflow="fold")
        table.add_column(f"{mode}\nstall", justify="right", overflow="fold")
        table.add_column(f"{mode}\nack", justify="right", overflow="fold")
        table.add_column(f"{mode}\nverdict", justify="left", overflow="fold")
    for row in sweep.rows:
        cells = [str(row.index), row.storage or "-", f"{row.heap:,}", "on" if row.freeze else "off"]
        if several:
            cells.append(f"m{sweep.machines.index(row.machine) + 1}")
        for mode in sweep.modes:
            cell = row.cells.get(mode)
            stall = "" if cell is None else (f"{cell.stall_max:.1f}" if cell.stall_max is not None else "not measured")
            ack = "" if cell is None or cell.ack_median is None else f"{cell.ack_median:.1f}"
            verdict = _cell_verdict(cell)
            if cell is not None and cell.met is False:
                verdict = f"[red]{verdict}[/]"
            elif cell is not None and cell.met:
                verdict = f"[green]{verdict}[/]"
            cells += [_cell_gap(cell), stall, ack, verdict]
        table.add_row(*cells)
    return table


# -- plot ------------------------------------------------------------------------------------------


def sweep_figure(sweep: Sweep) -> Any:
    """Max gap (worst sample, median dotted), loop stall where measured and median acknowledgement per
    setting and mode, against the target line (log y axis: settings span orders of magnitude)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(max(7.0, 0.7 * len(sweep.rows) + 3), 6.5), dpi=100, layout="constrained")
    ax_gap, ax_ack = fig.subplots(2, 1, sharex=True)
    xs = list(range(len(sweep.rows)))
    colors = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd")
    for i, mode in enumerate(sweep.modes):
        color = colors[i % len(colors)]
        cells = [r.cells.get(mode) for r in sweep.rows]

        def series(attr: str, cells: list[ModeCell | None] = cells) -> list[float]:
            return [getattr(c, attr) if c is not None and getattr(c, attr) is not None else float("nan")
                    for c in cells]

        ax_gap.plot(xs, series("gap_max"), "o-", color=color, label=f"{mode}: max gap (worst sample)")
        ax_gap.plot(xs, series("gap_median"), ":", color=color, label=f"{mode}: max gap (median)")
        stalls = series("stall_max")
        if any(v == v for v in stalls):  # NaN != NaN: plot only what was measured
            ax_gap.plot(xs, stalls, "s--", color=color, alpha=0.7, label=f"{mode}: longest loop stall")
        ax_ack.plot(xs, series("ack_median"), "o-", color=color, label=f"{mode}: acknowledgement (median)")
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    for ax in (ax_gap, ax_ack):
        ax.axhline(sweep.target_ms, color="#d62728", linestyle="--", linewidth=1,
                   label=f"{sweep.target_ms:g} ms target")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    ax_gap.set_ylabel("ms (loop)")
    ax_ack.set_ylabel("ms (acknowledgement)")
    ax_ack.set_xticks(xs)
    ax_ack.set_xticklabels([f"{r.storage or '-'}\nheap {r.heap:,}\nfreeze {'on' if r.freeze else 'off'}"
                            for r in sweep.rows], fontsize=7, rotation=0)
    ax_gap.set_title(f"{sweep.recipe}: sweep {sweep.id}\n(simulated storage latency, not device measurements)",
                     fontsize=8)
    return fig


def write_sweep_plot(sweep: Sweep, path: str | Path) -> Path:
    """Save :func:`sweep_figure` as a PNG (parents created)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    sweep_figure(sweep).savefig(target)
    return target


# -- evidence --------------------------------------------------------------------------------------


def _where(row: SweepRow) -> str:
    storage = f"`{row.storage}`" if row.storage else "no simulated storage"
    return f"setting `{row.index}` ({storage}, heap `{row.heap}`, freeze {'on' if row.freeze else 'off'})"


def _miss(sweep: Sweep, mode: str) -> str:
    if any(mode in r.cells and r.cells[mode].reference for r in sweep.rows):
        return f"`{mode}` is a by-design reference (no verdict)"
    row = sweep.first_miss(mode)
    if row is None:
        measured = [(r, r.cells[mode]) for r in sweep.rows if mode in r.cells and r.cells[mode].gap_max is not None]
        if not measured:
            return f"`{mode}` has no samples"
        worst_row, worst = max(measured, key=lambda rc: rc[1].gap_max or 0.0)
        return (f"`{mode}` met it at every setting (worst maximum gap {fmt_ms(worst.gap_max or 0.0)} ms, at "
                f"{_where(worst_row)})")
    cell = row.cells[mode]
    samples = row.result.samples(mode)
    missing = [s for s in samples if float(s["max_gap_ms"]) > sweep.target_ms]
    in_gap = sum(1 for s in missing if s["gc"].get("in_max_gap"))
    if cell.missed_with_gc:
        gc = (f"{cell.missed_with_gc} of them with a collection in the window ({in_gap} inside the largest gap)")
    else:
        gc = "none of them with a collection in the window"
    return (f"`{mode}` first missed it at {_where(row)}: {cell.missed} of {cell.n} samples over it, worst "
            f"{fmt_ms(cell.gap_max or 0.0)} ms, {gc}")


def _storage_crossover(sweep: Sweep) -> str:
    """Along storage alone (no extra heap, no freeze): the first profile where each mode misses."""
    base = [r for r in sweep.rows if r.heap == 0 and not r.freeze and r.storage]
    if len({r.storage for r in base}) < 2:
        return ""
    parts = []
    for mode in sweep.modes:
        if any(mode in r.cells and r.cells[mode].reference for r in base):
            continue
        row = next((r for r in base if mode in r.cells and r.cells[mode].met is False), None)
        parts.append(f"`{mode}` first missed at `{row.storage}`" if row else f"`{mode}` missed at none")
    order = ", ".join(f"`{r.storage}`" for r in base)
    return f"Along storage alone (heap `0`, freeze off; profiles in the order {order}), " + "; ".join(parts) + "."


def _probes(sweep: Sweep) -> str:
    parts = []
    several = len(sweep.machines) > 1
    for heap in sorted({r.heap for r in sweep.rows if r.heap}):
        for freeze in (False, True):
            for machine in sweep.machines:  # a range never spans two machines
                values = [v for r in sweep.rows if r.heap == heap and r.freeze == freeze and r.machine == machine
                          for c in r.cells.values() for v in c.full_gc_ms]
                if values:
                    on = f" on `{machine}`" if several else ""
                    parts.append(f"{fmt_ms(min(values))}-{fmt_ms(max(values))} ms with heap `{heap}` and freeze "
                                 f"{'on' if freeze else 'off'}{on}")
    if not parts:
        return ""
    return "A full collection timed after each window, with the heap still held, took " + "; ".join(parts) + "."


def sweep_evidence(sweep: Sweep) -> str:
    """The sweep's paragraph (Markdown): conditions, the first missing setting per mode, GC, limits."""
    first = sweep.rows[0].result
    profiles: dict[str, str | None] = {}
    for r in sweep.rows:
        if r.storage:
            profiles.setdefault(r.storage, r.storage_source)
    storage = "; ".join(f"`{name}` (`{source or 'source not recorded'}`)" for name, source in profiles.items())
    counts = sorted({c.n for r in sweep.rows for c in r.cells.values()})
    per_mode = f"{plural(counts[0], 'sample')} per mode" if len(counts) == 1 else "samples per mode varying"
    sentences = []
    if storage:
        sentences.append(f"Simulated storage latency: {storage}; drawn per operation on top of this machine's "
                         "device, so these are not device measurements.")
    sentences.append(
        f"Sweep `{sweep.id}` ran `{sweep.recipe}` at {plural(len(sweep.rows), 'setting')} in grid order (storage, "
        f"then heap, then freeze), {per_mode}, garbage collection left to run naturally.")
    if len(sweep.machines) > 1:
        sentences.append(f"The settings were measured on {len(sweep.machines)} machines of a cluster ("
                         + "; ".join(f"`{m}`" for m in sweep.machines) + "), every setting's samples and idle "
                         "control on one of them, so each verdict is one machine's; settings on different "
                         "machines are compared by verdict only.")
    sentences.append(f"Against the {fmt_number(sweep.target_ms)} ms target on the maximum heartbeat gap, "
                     + "; ".join(_miss(sweep, m) for m in sweep.modes) + ".")
    along = _storage_crossover(sweep)
    if along:
        sentences.append(along)
    probes = _probes(sweep)
    if probes:
        sentences.append(probes)
    stalls_measured = any(c.stall_max is not None for r in sweep.rows for c in r.cells.values())
    where = "one machine" if len(sweep.machines) <= 1 else "one machine per setting"
    limits = [f"in-process measurements of an asyncio heartbeat with small samples on {where}",
              "storage latency is simulated from published figures, not measured on those devices"]
    if not stalls_measured:
        limits.append("loop stalls (M9) were not measured in these documents")
    if not sweep.complete:
        limits.append(f"only {len(sweep.rows)} of {sweep.planned} planned settings have complete documents")
    day = str(first.date)[:10]
    return f"- **{day} sweep `{sweep.recipe}`**: " + " ".join(sentences) + " Limits: " + "; ".join(limits) + ".\n"
