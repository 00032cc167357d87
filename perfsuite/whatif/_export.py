"""Sweep outputs: CSV and JSON files, the trade-off plot and the rich table (built, never printed)."""

from __future__ import annotations

import collections
import csv
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from perfsuite._extras import require
from perfsuite.errors import PerfsuiteError
from perfsuite.whatif._simulate import Setting
from perfsuite.whatif._sweep import SettingResult, WhatIf


def _target(path: str | os.PathLike[str]) -> Path:
    target = Path(path)
    if target.is_dir():
        raise PerfsuiteError(f"{target}: is a directory; give a file name")
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def write_csv(report: WhatIf, path: str | os.PathLike[str]) -> Path:
    """One row per setting, the columns of :meth:`SettingResult.row`."""
    target = _target(path)
    rows = [r.row(report.kinds) for r in report.results]
    with target.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({k: "" if v is None else v for k, v in row.items()} for row in rows)
    return target


def write_json(report: WhatIf, path: str | os.PathLike[str]) -> Path:
    """The whole sweep: trace summary, costs (with whose they are), settings' results."""
    target = _target(path)
    target.write_text(json.dumps(report.to_json(), indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return target


def setting_labels(settings: Sequence[Setting]) -> list[str]:
    """Short labels naming only the dimensions the grid varies (debounce alone: ``"2s"``)."""
    varies = [len({getattr(s, a) for s in settings}) > 1
              for a in ("debounce_s", "checkpoint_interval_s", "notify_max_s")]
    if not any(varies):
        varies[0] = True
    labels = []
    for s in settings:
        parts = []
        if varies[0]:
            parts.append(f"d{s.debounce_s:g}s")
        if varies[1]:
            parts.append(f"c{s.checkpoint_interval_s:g}s")
        if varies[2]:
            parts.append(f"n{s.notify_max_s:g}s")
        labels.append(" ".join(parts))
    return labels


def write_plot(report: WhatIf, path: str | os.PathLike[str]) -> Path:
    """Publications per minute against the crash-loss window, one point per setting; the Pareto-optimal
    settings are marked and joined (the trade-off curve)."""
    require("report", "matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    target = _target(path)
    results = report.results
    labels = setting_labels([r.setting for r in results])
    xs = [r.per_minute_mean for r in results]
    ys = [r.loss_window_s for r in results]
    fig, ax = plt.subplots(figsize=(8.0, 5.5), dpi=110)
    try:
        other = [i for i, r in enumerate(results) if not r.pareto]
        best = sorted((i for i, r in enumerate(results) if r.pareto), key=lambda i: xs[i])
        if other:
            ax.scatter([xs[i] for i in other], [ys[i] for i in other], color="0.6", label="dominated", zorder=2)
        ax.plot([xs[i] for i in best], [ys[i] for i in best], "-o", color="tab:red", label="Pareto-optimal",
                zorder=3)
        for i, label in enumerate(labels):
            ax.annotate(label, (xs[i], ys[i]), textcoords="offset points", xytext=(5, 5), fontsize=8)
        positive = [v for v in xs if v > 0], [v for v in ys if v > 0]
        if positive[0] and max(positive[0]) / min(positive[0]) > 20:
            ax.set_xscale("log")
        if positive[1] and max(positive[1]) / min(positive[1]) > 20:
            ax.set_yscale("log")
        ax.set_xlabel("publications per minute (mean over the trace)")
        ax.set_ylabel("crash-loss window (s): longest a change stays unpublished")
        t = report.trace
        if report.target:
            ax.set_title(f"what-if: {t.source} through {report.target}, {t.duration_s / 60:.1f} min, "
                         f"{t.events} events", fontsize=9)
        else:
            ax.set_title(f"what-if: {t.source}, {t.duration_s / 60:.1f} min, {t.observational} observational "
                         f"changes, {t.messages} messages", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)
        if report.target:
            note = _target_bytes_note(report)
        else:
            note = report.costs.describe() if report.costs is not None else "no measured costs"
        fig.text(0.01, 0.005, note, fontsize=6, color="0.4", wrap=True)
        fig.tight_layout(rect=(0, 0.04, 1, 1))
        fig.savefig(target)
    finally:
        plt.close(fig)
    return target


def _mb(value: int | None) -> str:
    return "-" if value is None else f"{value / 1e6:.2f}"


def _s(value: float | None, unit: float = 1.0, digits: int = 2) -> str:
    return "-" if value is None else f"{value * unit:.{digits}f}"


def _by_kind(kind: str) -> Callable[[SettingResult], str]:
    """The table column of one publication kind: how many of it each setting made."""
    return lambda r: str(r.by_kind.get(kind, 0))


def build_table(report: WhatIf) -> Any:
    """A rich table: one row per setting, Pareto-optimal ones marked (the caller prints it). Columns
    that would be empty for this trace (a kind it never publishes, bytes without costs) are left out."""
    from rich import box
    from rich.table import Table

    t = report.trace
    results = report.results
    through = f" through {report.target}" if report.target else ""
    title = (f"what-if {t.source}{through}: {t.duration_s / 60:.1f} min, {t.sessions} session(s); "
             f"{len(results)} settings simulated in {report.simulate_s:.3f} s")
    columns: list[tuple[str, Callable[[SettingResult], str]]] = [
        ("debounce s", lambda r: f"{r.setting.debounce_s:g}"),
        ("ckpt s", lambda r: f"{r.setting.checkpoint_interval_s:g}"),
        ("notify max s", lambda r: f"{r.setting.notify_max_s:g}"),
        ("pubs", lambda r: str(r.publications)),
    ]
    for kind in report.kinds:
        if any(r.by_kind.get(kind) for r in results):
            columns.append((kind, _by_kind(kind)))
    columns += [("gens", lambda r: str(r.generations)), ("pubs/min", lambda r: f"{r.per_minute_mean:.1f}"),
                ("peak/min", lambda r: str(r.per_minute_peak))]
    if report.costs is not None or any(r.bytes_written is not None for r in results):
        columns += [("written MB", lambda r: _mb(r.bytes_written)), ("alloc MB", lambda r: _mb(r.bytes_allocated))]
    columns.append(("loss max s", lambda r: _s(r.loss_window_s)))
    if report.target:
        columns.append(("loss mean s", lambda r: _s(r.observational_loss_mean_s)))
    elif t.observational:
        columns.append(("obs loss mean s", lambda r: _s(r.observational_loss_mean_s)))
    if any(r.notifications for r in results):
        columns.append(("notify max ms", lambda r: _s(r.notify_delay_max_s, 1e3, 0)))
    columns.append(("Pareto", lambda r: "[bold red]*[/]" if r.pareto else ""))
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    for name, _get in columns:
        table.add_column(name, justify="center" if name == "Pareto" else "right", no_wrap=True)
    for r in results:
        table.add_row(*(get(r) for _name, get in columns))
    return table


def describe_notes(report: WhatIf) -> list[str]:
    """The plain lines printed under the table."""
    if report.target:
        return _target_notes(report)
    t = report.trace
    lines = [f"trace: {t.observational} observational changes (publishing every one: "
             f"{t.every_transition_per_minute:.1f}/min, peak {t.every_transition_peak}/min), {t.messages} streamed "
             f"messages, {t.mail} mail, {t.requests} requests"]
    if t.recorded_publications:
        lines.append(f"the recorded run itself published {t.recorded_publications} times (at its own settings)")
    if report.costs is not None:
        lines.append(report.costs.describe())
    else:
        lines.append("bytes not estimated (--no-costs)")
    durations = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in sorted(report.durations_s.items()))
    lines.append(f"modelled publication durations: {durations}; minute windows are fixed minutes from the trace "
                 "start; 'gens' are adopted generations, the other publications were empty selections (no-ops)")
    if t.user_events:
        lines.append(f"{t.user_events} event(s) of your own x- kinds were not replayed: the engine's sessions do "
                     "not know them (replay them through your own scheduler with --target module:Class)")
    stuck = [r for r in report.results if r.unpublished]
    if stuck:
        lines.append(f"warning: {stuck[0].unpublished} change(s) never published under "
                     f"{len(stuck)} setting(s) (e.g. messages streamed with no request in flight); "
                     "they are left out of the loss window")
    return lines


def _target_bytes_note(report: WhatIf) -> str:
    """Where a replay target's bytes come from (never the engine's measured costs)."""
    if report.costs is not None:
        return (f"bytes: what your code reported per publication, else the costs file {report.costs.source} "
                f"({report.costs.tracker}, {report.costs.fixture}, measured {report.costs.measured_at})")
    if any(r.bytes_written is not None for r in report.results):
        return "bytes: what your code reported per publication"
    return "bytes not measured: your code reported none (done(bytes_written=...)) and no --costs FILE was given"


def _target_notes(report: WhatIf) -> list[str]:
    """The lines under a replay target's table: what was replayed, where bytes come from."""
    t = report.trace
    kinds = collections.Counter(t.kinds)
    lines = [f"replayed in virtual time through {report.target} (your code on a VirtualTimeLoop), one target per "
             f"trace session: {t.events} events ({', '.join(f'{k} {n}' for k, n in kinds.most_common())})"]
    if t.recorded_publications:
        lines.append(f"the recorded run itself published {t.recorded_publications} times (at its own settings)")
    lines.append(_target_bytes_note(report))
    lines.append("minute windows are fixed minutes from the trace start; 'gens' are publications done without "
                 "noop=True; the loss window runs from a change's delivery to the end of the first publication "
                 "begun after it")
    stuck = [r for r in report.results if r.unpublished]
    if stuck:
        lines.append(f"warning: {stuck[0].unpublished} change(s) never published under {len(stuck)} setting(s); "
                     "they are left out of the loss window")
    return lines
