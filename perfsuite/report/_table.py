"""The summary table of one results document (what ``perfsuite run`` and ``perfsuite report`` print).

Per mode: samples, median and range of the max heartbeat gap, median submission and acknowledgement,
the acknowledgement as a multiple of the run's fsync floor (when one is known, SPEC section 4), samples
that saw GC, and the M7 verdict; then the idle control (M1) as the noise floor. :func:`summary_rows`
gives the plain cells (the dashboard renders them as HTML), :func:`summary_table` the rich table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from perfsuite.report._load import Floor, Result

__all__ = [
    "NO_ACK_RATIO_RECIPES",
    "SummaryRow",
    "floor_caption",
    "shows_floor_ratio",
    "summary_rows",
    "summary_table",
    "table_title",
]

#: recipes whose "acknowledgement" is not a durability acknowledgement (a timer)
NO_ACK_RATIO_RECIPES = frozenset({"idle-control"})


@dataclass(frozen=True, slots=True)
class SummaryRow:
    """The cells of one table row (times in ms, two decimals; empty when not applicable)."""

    mode: str
    n: int
    max_gap: str
    gap_range: str
    submit: str
    ack: str
    ack_floor: str
    gc: int
    verdict: str
    met: bool | None
    control: bool


def _stat(summary: Mapping[str, Any], key: str, part: str = "median") -> str:
    stat = summary.get(key)
    if not stat:
        return ""
    if part == "range":
        return f"{stat['min']:.2f}-{stat['max']:.2f}"
    return f"{stat[part]:.2f}"


def _verdict(v: Mapping[str, Any]) -> str:
    if v.get("met") is None:
        return ""
    if v["met"]:
        return f"met <= {v['target_ms']:g} ms"
    return f"missed {v['missed']}/{v['samples']}, {v['missed_with_gc']} GC"


def _ratio(summary: Mapping[str, Any], floor: Floor | None) -> str:
    stat = summary.get("ack_ms")
    if floor is None or not stat or floor.ack_ms.median <= 0:
        return ""
    return f"{stat['median'] / floor.ack_ms.median:.1f}x"


def _doc(document: Mapping[str, Any] | Result) -> Mapping[str, Any]:
    return document.data if isinstance(document, Result) else document


def shows_floor_ratio(document: Mapping[str, Any] | Result, floor: Floor | None) -> bool:
    """Whether the ``ack/floor`` column applies: a floor is known, and it is not this run's own mode."""
    doc = _doc(document)
    if floor is None or doc["recipe"]["name"] in NO_ACK_RATIO_RECIPES:
        return False
    return not any(floor.section is body for body in doc["modes"].values())


def table_title(document: Mapping[str, Any] | Result) -> str:
    """``recipe: isolation, gc policy, heartbeat (medians; times in ms)``, then ``[FAILED]`` (or the
    status) when the run did not complete: a failed run's empty table must not read as a quiet one."""
    doc = _doc(document)
    r = doc["recipe"]
    title = f"{r['name']}: {r['isolation']}, gc {r['gc']}, heartbeat {r['heartbeat_ms']:g} ms (medians; times in ms)"
    status = doc.get("status", "complete")
    return title if status == "complete" else f"{title} [{str(status).upper()}]"


def summary_rows(document: Mapping[str, Any] | Result, floor: Floor | None = None) -> list[SummaryRow]:
    """One row per mode, then the idle control."""
    doc = _doc(document)
    ratio = shows_floor_ratio(doc, floor)
    rows = []
    entries = [(mode, body["samples"], body["summary"], body["verdict"], False) for mode, body in doc["modes"].items()]
    entries.append(("idle control", doc["control"]["samples"], doc["control"]["summary"], None, True))
    for mode, samples, summary, verdict, control in entries:
        rows.append(
            SummaryRow(
                mode=mode,
                n=len(samples),
                max_gap=_stat(summary, "max_gap_ms"),
                gap_range=_stat(summary, "max_gap_ms", "range"),
                submit="" if control else _stat(summary, "submission_ms"),
                ack="" if control else _stat(summary, "ack_ms"),
                ack_floor=_ratio(summary, floor) if ratio and not control else "",
                gc=sum(1 for s in samples if s["gc"]["collections"]),
                verdict="noise floor" if control else _verdict(verdict),
                met=None if control else verdict.get("met"),
                control=control,
            )
        )
    return rows


def floor_caption(floor: Floor | None) -> str | None:
    """``fsync floor 1.44 ms (median ack of FILE, MODE)``."""
    if floor is None:
        return None
    return f"fsync floor {floor.ack_ms.median:.2f} ms (median ack of {floor.source}, {floor.mode})"


def summary_table(document: Mapping[str, Any] | Result, floor: Floor | None = None) -> Any:
    """A rich ``Table``: medians, max-gap range, ack/floor, GC samples and the M7 verdict per mode.

    ``floor`` (see :func:`~perfsuite.report.find_floor`) adds the ``ack/floor`` column: the median
    acknowledgement over the floor's median acknowledgement.
    """
    from rich import box
    from rich.table import Table

    show_ratio = shows_floor_ratio(document, floor)
    table = Table(
        title=table_title(document),
        box=box.SIMPLE_HEAD,
        title_justify="left",
        caption=floor_caption(floor) if show_ratio else None,
        caption_justify="left",
    )
    columns = ["mode", "n", "max gap", "gap range", "submit", "ack", *(["ack/floor"] if show_ratio else []), "GC"]
    for column in [*columns, "verdict"]:
        table.add_column(column, justify="left" if column in ("mode", "verdict") else "right")
    for row in summary_rows(document, floor):
        verdict = row.verdict
        if row.control:
            mode, verdict = f"[dim]{row.mode}[/]", f"[dim]{verdict}[/]"
        else:
            mode = row.mode
            if row.met is True:
                verdict = verdict.replace("met", "[green]met[/]", 1)
            elif row.met is False:
                verdict = verdict.replace("missed", "[red]missed[/]", 1)
        cells = [mode, str(row.n), row.max_gap, row.gap_range, row.submit, row.ack]
        if show_ratio:
            cells.append(row.ack_floor)
        table.add_row(*cells, str(row.gc), verdict)
    return table
