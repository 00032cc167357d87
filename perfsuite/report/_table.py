"""The summary table of one results document (what ``perfsuite run`` and ``perfsuite report`` print).

Per mode: samples, median and range of the max heartbeat gap, the median longest loop callback (M9
loop stalls; ``n/m`` when not measured), median submission and acknowledgement, the acknowledgement as a
multiple of the run's two floors when known (the **fsync floor**, SPEC section 4, and the **publication
floor**, SPEC section 8: one generation's durable operations as raw os calls) and of the **SQLite reference**
(``ack/sqlite``, SPEC section 8: the same record bytes committed by sqlite3, see :func:`sqlite_reference_for`),
samples that saw GC, and
the M7 verdict (``reference: why`` for a by-design reference mode, never "missed") and, when the run
had an instruction pass, the median instructions per operation in total and on the loop
thread (``n/m`` when valgrind was missing); then the idle control (M1) as the noise floor.
:func:`summary_rows` gives the plain cells (the dashboard renders them as HTML), :func:`summary_table` the
rich table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from perfsuite.harness import LOADED_EXCESS_MS
from perfsuite.report._conditions import conditions_of
from perfsuite.report._live import is_live
from perfsuite.report._load import Floor, Result, find_publication_floor, mode_reference

__all__ = [
    "NOT_MEASURED",
    "NO_ACK_RATIO_RECIPES",
    "SummaryRow",
    "floor_caption",
    "floors_caption",
    "instruction_cells",
    "load_caption",
    "row_cells",
    "shows_floor_ratio",
    "shows_instructions",
    "sqlite_caption",
    "sqlite_reference_for",
    "sqlite_references",
    "summary_columns",
    "summary_rows",
    "summary_table",
    "table_title",
]

#: recipes whose "acknowledgement" is not a durability acknowledgement (a timer)
NO_ACK_RATIO_RECIPES = frozenset({"idle-control"})
#: a cell whose metric the document does not hold (an older document, or a loop the harness did not own)
NOT_MEASURED = "n/m"
#: the operation of the SQLite reference modes (``perfsuite.workloads.sqlite_reference``)
SQLITE_REFERENCE_SUFFIX = ":sqlite_commit"


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
    stall: str = ""
    ack_publication_floor: str = ""
    reference: str | None = None
    instructions: str = ""
    loop_instructions: str = ""
    ack_sqlite: str = ""
    #: the two ratio cells unrounded, and the SQLite reference mode read against (``report --format json``)
    ack_over_publication_floor: float | None = None
    ack_over_sqlite: float | None = None
    sqlite_reference: str | None = None


def _stat(summary: Mapping[str, Any], key: str, part: str = "median") -> str:
    stat = summary.get(key)
    if not stat:
        return ""
    if part == "range":
        return f"{stat['min']:.2f}-{stat['max']:.2f}"
    return f"{stat[part]:.2f}"


def _verdict(v: Mapping[str, Any], reference: str | None = None) -> str:
    if reference:
        return f"reference: {reference}"
    if v.get("met") is None:
        return ""
    if v["met"]:
        return f"met <= {v['target_ms']:g} ms"
    return f"missed {v['missed']}/{v['samples']}, {v['missed_with_gc']} GC"


def _ratio_value(summary: Mapping[str, Any], floor: Floor | None) -> float | None:
    stat = summary.get("ack_ms")
    if floor is None or not stat or floor.ack_ms.median <= 0:
        return None
    return float(stat["median"]) / floor.ack_ms.median


def _ratio(summary: Mapping[str, Any], floor: Floor | None) -> str:
    value = _ratio_value(summary, floor)
    return "" if value is None else f"{value:.1f}x"


def _doc(document: Mapping[str, Any] | Result) -> Mapping[str, Any]:
    return document.data if isinstance(document, Result) else document


def shows_floor_ratio(document: Mapping[str, Any] | Result, floor: Floor | None) -> bool:
    """Whether the ``ack/fsync floor`` column applies: a floor is known, and it is not this run's own mode."""
    doc = _doc(document)
    if floor is None or doc["recipe"]["name"] in NO_ACK_RATIO_RECIPES:
        return False
    return not any(floor.section is body for body in doc["modes"].values())


def _mode_param(doc: Mapping[str, Any], mode: str, name: str) -> Any:
    """A mode's parameter as the run recorded it (its section's ``params``, else the recorded recipe)."""
    body = (doc.get("modes") or {}).get(mode) or {}
    params = body.get("params") or {}
    if name in params:
        return params[name]
    return (((doc.get("recipe") or {}).get("modes") or {}).get(mode) or {}).get(name)


def sqlite_references(document: Mapping[str, Any] | Result) -> dict[str, Floor]:
    """The SQLite reference modes of ``document`` that have acknowledgements, by hand-off: ``"inline"`` (the
    synchronous reference) and ``"thread"`` (the threaded one); the first mode of each; empty without any."""
    result = document if isinstance(document, Result) else Result(None, document)
    out: dict[str, Floor] = {}
    for mode, body in result.data["modes"].items():
        if not str(body.get("operation", "")).endswith(SQLITE_REFERENCE_SUFFIX):
            continue
        handoff = str(_mode_param(result.data, mode, "handoff") or "inline")
        stat = result.stat(mode, "ack_ms")
        if stat is not None and stat.median > 0 and handoff not in out:
            out[handoff] = Floor(f"mode {mode}", mode, stat, result, body, kind=f"sqlite {handoff}")
    return out


def sqlite_reference_for(document: Mapping[str, Any] | Result, mode: str) -> Floor | None:
    """The SQLite reference ``mode``'s acknowledgement is read against (``ack/sqlite``), or ``None``.

    The pairing: a mode of the asynchronous path (its ``path`` parameter is ``"async"``) against the threaded
    reference (the same worker-thread hand-off and ack on the loop as the engine's job), every other mode
    against the synchronous one (inline on the loop thread, as the synchronous writer). Reference modes (the
    SQLite references themselves, the publication floor) get none: they are anchors, not what is gated; a
    missing reference of that side leaves the cell empty rather than reading the other side."""
    doc = _doc(document)
    if mode_reference(doc, mode) or str((doc["modes"].get(mode) or {}).get("operation", "")).endswith(
            SQLITE_REFERENCE_SUFFIX):
        return None
    side = "thread" if _mode_param(doc, mode, "path") == "async" else "inline"
    return sqlite_references(document).get(side)


def sqlite_caption(document: Mapping[str, Any] | Result) -> list[str]:
    """One line per SQLite reference: ``sqlite reference 1.23 ms (median ack of mode sqlite; column ack/sqlite
    of sync modes)`` (under 100 columns with the threaded reference's name: a CI log)."""
    lines = []
    for handoff, ref in sorted(sqlite_references(document).items()):
        side = "async" if handoff == "thread" else "sync"
        lines.append(f"sqlite reference {ref.ack_ms.median:.2f} ms (median ack of mode {ref.mode}; "
                     f"column ack/sqlite of {side} modes)")
    return lines


def table_title(document: Mapping[str, Any] | Result) -> str:
    """``recipe: isolation, gc policy, heartbeat (medians; times in ms)``, then ``[FAILED]`` (or the
    status) when the run did not complete: a failed run's empty table must not read as a quiet one; then one
    line per M10 condition (``simulated storage latency: PROFILE (source); not a device measurement``,
    heap, gc.freeze())."""
    doc = _doc(document)
    r = doc["recipe"]
    how = f"live windows of {doc['live']['window_s']:g} s" if is_live(doc) else r["isolation"]  # M11
    title = f"{r['name']}: {how}, gc {r['gc']}, heartbeat {r['heartbeat_ms']:g} ms (medians; times in ms)"
    status = doc.get("status", "complete")
    title = title if status == "complete" else f"{title} [{str(status).upper()}]"
    if Result(None, doc).loaded:  # a loaded run's timings read high: said where they are shown
        title += " [LOADED]"
    return "\n".join([title, *conditions_of(doc).lines])


def load_caption(document: Mapping[str, Any] | Result) -> str | None:
    """``LOADED machine: idle control median 8.86 ms > 6 ms (period 5 ms + 1 ms), worst 9.03 ms`` for a loaded
    run (one line that fits a 100-column log), ``None`` for a quiet one (the idle control row says so)."""
    result = document if isinstance(document, Result) else Result(None, document)
    load = result.load
    if not load.loaded or load.median_gap_ms is None or load.worst_gap_ms is None:
        return None
    return (f"LOADED machine: idle control median {load.median_gap_ms:.2f} ms > {load.threshold_ms:g} ms (period "
            f"{load.period_ms:g} ms + {LOADED_EXCESS_MS:g} ms), worst {load.worst_gap_ms:.2f} ms")


def _stall(samples: list[Mapping[str, Any]], summary: Mapping[str, Any]) -> str:
    if not samples:
        return ""
    return _stat(summary, "stalls.longest_ms") or NOT_MEASURED


def summary_rows(document: Mapping[str, Any] | Result, floor: Floor | None = None) -> list[SummaryRow]:
    """One row per mode, then the idle control. ``floor`` is the fsync floor (see
    :func:`~perfsuite.report.find_floor`); the publication floor is read from the document itself."""
    doc = _doc(document)
    ratio = shows_floor_ratio(doc, floor)
    publication = find_publication_floor(doc)
    rows = []
    entries = [(mode, body["samples"], body["summary"], body["verdict"], False) for mode, body in doc["modes"].items()]
    entries.append(("idle control", doc["control"]["samples"], doc["control"]["summary"], None, True))
    load = Result(None, doc).load
    for mode, samples, summary, verdict, control in entries:
        reference = None if control else mode_reference(doc, mode)
        own_floor = publication is not None and publication.mode == mode
        instr, loop = ("", "") if control else instruction_cells(doc["modes"][mode].get("instructions"))
        sqlite = None if control else sqlite_reference_for(doc, mode)
        pub_floor = None if control or own_floor else publication
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
                # a loaded run's idle control says so (the caption gives its figures)
                verdict=("LOADED" if load.loaded else "noise floor") if control else _verdict(verdict, reference),
                met=None if control or reference else verdict.get("met"),
                control=control,
                stall=_stall(samples, summary),
                ack_publication_floor=_ratio(summary, pub_floor),
                ack_sqlite=_ratio(summary, sqlite),
                ack_over_publication_floor=_ratio_value(summary, pub_floor),
                ack_over_sqlite=_ratio_value(summary, sqlite),
                sqlite_reference=None if sqlite is None else sqlite.mode,
                reference=reference,
                instructions=instr,
                loop_instructions=loop,
            )
        )
    return rows


def shows_instructions(document: Mapping[str, Any] | Result) -> bool:
    """Whether any mode has an instruction-pass section (measured or "not measured")."""
    return any(body.get("instructions") is not None for body in _doc(document)["modes"].values())


def instruction_cells(section: Mapping[str, Any] | None) -> tuple[str, str]:
    """(total, loop thread) medians of an instruction section, exact; ``n/m`` (not measured) without valgrind."""
    if section is None:
        return "", ""
    total, loop = section.get("total"), section.get("loop_thread")
    if not total or not loop:
        return NOT_MEASURED, NOT_MEASURED
    return f"{round(total['median']):,}", f"{round(loop['median']):,}"


def floor_caption(floor: Floor | None) -> str | None:
    """``fsync floor 1.44 ms (median ack of FILE, MODE)`` (or the publication floor's, named so; its column
    is ``ack/pub floor``)."""
    if floor is None:
        return None
    column = "ack/fsync floor" if floor.kind == "fsync" else "ack/pub floor"
    source = floor.source if floor.source == f"mode {floor.mode}" else f"{floor.source}, {floor.mode}"
    return f"{floor.name} {floor.ack_ms.median:.2f} ms (median ack of {source}; column {column})"


def floors_caption(document: Mapping[str, Any] | Result, floor: Floor | None) -> str | None:
    """The caption naming every floor the table's ratio columns use, one per line; ``None`` without any."""
    candidates = [floor_caption(floor) if shows_floor_ratio(document, floor) else None,
                  floor_caption(find_publication_floor(_doc(document))), *sqlite_caption(document)]
    lines = [line for line in candidates if line]
    if any(r.stall == NOT_MEASURED for r in summary_rows(document, floor)):
        lines.append(f"{NOT_MEASURED}: not measured (no loop-stall record, M9, for those samples)")
    return "\n".join(lines) if lines else None


def summary_columns(document: Mapping[str, Any] | Result, floor: Floor | None) -> list[str]:
    """The column headers of the summary table for this document (ratio columns only where a floor is known)."""
    columns = ["mode", "n", "max gap", "gap range", "stall"]
    if not is_live(_doc(document)):  # a live window (M11) submits and acknowledges nothing
        columns += ["submit", "ack"]
    if shows_floor_ratio(document, floor):
        columns.append("ack/fsync floor")
    if find_publication_floor(_doc(document)) is not None:
        columns.append("ack/pub floor")
    if sqlite_references(document):
        columns.append("ack/sqlite")
    if shows_instructions(document):
        columns += ["instructions", "loop instr"]
    return [*columns, "GC", "verdict"]


def row_cells(row: SummaryRow, columns: list[str]) -> list[str]:
    """The cells of ``row`` under ``columns`` (as :func:`summary_columns` gives them)."""
    by_column = {"mode": row.mode, "n": str(row.n), "max gap": row.max_gap, "gap range": row.gap_range,
                 "stall": row.stall, "submit": row.submit, "ack": row.ack, "ack/fsync floor": row.ack_floor,
                 "ack/pub floor": row.ack_publication_floor, "ack/sqlite": row.ack_sqlite, "GC": str(row.gc),
                 "verdict": row.verdict, "instructions": row.instructions, "loop instr": row.loop_instructions}
    return [by_column[c] for c in columns]


#: headers printed on two lines (the column keys stay one string, as in captions and the dashboard)
HEADERS = {"ack/fsync floor": "ack/fsync\nfloor", "ack/pub floor": "ack/pub\nfloor", "ack/sqlite": "ack/\nsqlite"}


def summary_table(document: Mapping[str, Any] | Result, floor: Floor | None = None) -> Any:
    """A rich ``Table``: medians, max-gap range, longest loop callback, ack against the floors, GC samples and
    the M7 verdict per mode. ``floor`` (see :func:`~perfsuite.report.find_floor`) adds the
    ``ack/fsync floor`` column; a publication-floor mode in the document adds ``ack/pub floor``, a SQLite
    reference mode ``ack/sqlite``."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    columns = summary_columns(document, floor)
    rows = summary_rows(document, floor)
    # a reference's reason goes under the table, not in its verdict cell: a sentence in a cell made the
    # table wider than a CI log's 100 columns
    reasons = [f"{row.mode} is a reference: {row.reference}" for row in rows if row.reference and not row.control]
    caption = "\n".join(line for line in (floors_caption(document, floor), *reasons, load_caption(document))
                        if line) or None
    table = Table(
        title=table_title(document),
        box=box.SIMPLE_HEAD,
        title_justify="left",
        caption=caption,
        caption_justify="left",
    )
    for column in columns:  # the two ratio headers on two lines: a 100-column CI log fits the table
        header = HEADERS.get(column, column)
        table.add_column(header, justify="left" if column in ("mode", "verdict") else "right")
    for row in rows:
        cells = [escape(c) for c in row_cells(row, columns)]
        if row.control:
            cells[0], cells[-1] = f"[dim]{cells[0]}[/]", f"[dim]{cells[-1]}[/]"
        elif row.reference:
            cells[-1] = "[cyan]reference[/]"
        elif row.met is True:
            cells[-1] = cells[-1].replace("met", "[green]met[/]", 1)
        elif row.met is False:
            cells[-1] = cells[-1].replace("missed", "[red]missed[/]", 1)
        table.add_row(*cells)
    return table
