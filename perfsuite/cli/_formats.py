"""``--format text|json|markdown`` of `report`, `compare`, `history`, `bars` and `whatif`.

JSON goes to stdout as one document with stable keys (the library's values give their own: ``to_json()``
of ``Comparison``, ``History``, ``Bar``, ``WhatIf``...), described by the JSON Schema
``perfsuite/cli/output.schema.json`` (:data:`SCHEMA_VERSION`; every document says which ``command``
made it). Figures are the numbers of the results, unrounded; a value that is not a finite number
(a ratio from a zero median) is ``null``. Markdown is the text output's tables as GitHub tables.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.table import Table

    from perfsuite.report import Floor, Result

__all__ = [
    "FORMATS",
    "SCHEMA_VERSION",
    "add_format_option",
    "emit_json",
    "markdown_table",
    "output_schema",
    "report_json",
]

FORMATS = ("text", "json", "markdown")
#: version of the JSON outputs (``schema`` key); bumped when a key changes meaning or disappears
SCHEMA_VERSION = 1


def add_format_option(parser: argparse.ArgumentParser) -> None:
    """``--format text|json|markdown`` and its alias ``--markdown``: one or the other, never both: giving
    both is a one-line usage error (exit 2), not a silent choice of one."""
    parser.add_argument("--format", choices=FORMATS, default="text", action=_OneFormat,
                        help="text (default), json (schema: perfsuite/cli/output.schema.json) or markdown")
    parser.add_argument("--markdown", dest="format", action=_OneFormat, nargs=0, const="markdown",
                        help="alias of --format markdown")


class _OneFormat(argparse.Action):
    """``--format`` or ``--markdown``, whichever comes second is a usage error (argparse's mutually exclusive
    group would let ``--format text --markdown`` through: ``text`` is the default)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        given = getattr(namespace, "_format_option", None)
        if given is not None and given != option_string:
            parser.error(f"argument {option_string}: not allowed with argument {given}")
        namespace._format_option = option_string
        vars(namespace)[self.dest] = self.const if self.nargs == 0 else values  # the parsed namespace's own field


@cache
def output_schema() -> dict[str, Any]:
    """The JSON Schema of every ``--format json`` document."""
    from importlib import resources

    return json.loads(resources.files("perfsuite.cli").joinpath("output.schema.json").read_text("utf-8"))


def _finite(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def emit_json(command: str, body: Mapping[str, Any]) -> None:
    """Print ``{"command", "schema", **body}`` as JSON (non-finite numbers as ``null``)."""
    document = {"command": command, "schema": SCHEMA_VERSION, **body}
    sys.stdout.write(json.dumps(_finite(document), indent=1, allow_nan=False) + "\n")


def _cell(cell: RenderableType, *, markup: bool = True) -> str:
    """A cell's text as Markdown: its markup rendered away (``markup``: cells are markup, titles and captions
    plain text), then every character Markdown could read as syntax escaped (names come from documents)."""
    from rich.text import Text

    from perfsuite.report import md_text

    if isinstance(cell, str):
        text = Text.from_markup(cell).plain if markup else cell
    else:
        text = getattr(cell, "plain", str(cell))
    return md_text(text.replace("\n", " "))


def markdown_table(table: Table) -> str:
    """A rich ``Table`` as a GitHub Markdown table (title as a bold line, caption after it)."""
    columns = list(table.columns)
    head = [_cell(c.header) for c in columns]
    align = ["---:" if c.justify == "right" else "---" for c in columns]
    rows = list(zip(*[list(c.cells) for c in columns])) if columns else []
    lines = []
    if table.title:
        lines += [f"**{_cell(table.title, markup=False)}**", ""]
    lines += ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(_cell(x) for x in row) + " |" for row in rows]
    if table.caption:
        caption = getattr(table.caption, "plain", table.caption)
        lines += ["", *(_cell(line, markup=False) for line in str(caption).splitlines())]
    return "\n".join(lines) + "\n"


# -- JSON documents -------------------------------------------------------------------------------------------


def _stat(summary: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not summary:
        return None
    return {k: summary.get(k) for k in ("n", "median", "min", "max", "ci_low", "ci_high")}


def report_json(results: Sequence[Result], floors: Sequence[Floor | None]) -> dict[str, Any]:
    """`report`: per results document, per mode (then the idle control) the table's figures, unrounded."""
    out = []
    from perfsuite.report import summary_rows

    for result, floor in zip(results, floors):
        doc = result.data
        rows = summary_rows(result, floor)
        ratio = any(row.ack_floor for row in rows)  # the table shows ack/floor
        modes = []
        entries = [(m, b, False) for m, b in doc["modes"].items()] + [("idle control", doc["control"], True)]
        for (mode, body, control), row in zip(entries, rows):
            summary = body.get("summary") or {}
            ack = (summary.get("ack_ms") or {}).get("median")
            verdict = None if control else body.get("verdict")
            modes.append({
                "mode": mode,
                "control": control,
                "n": len(body.get("samples") or []),
                "max_gap_ms": _stat(summary.get("max_gap_ms")),
                "submission_ms": None if control else _stat(summary.get("submission_ms")),
                "ack_ms": None if control else _stat(summary.get("ack_ms")),
                "ack_over_floor": (ack / floor.ack_ms.median if ratio and floor is not None and not control
                                   and ack is not None and floor.ack_ms.median > 0 else None),
                "ack_over_publication_floor": row.ack_over_publication_floor,  # the table's ack/pub floor
                "ack_over_sqlite": row.ack_over_sqlite,  # ack/sqlite, against the mode sqlite_reference names
                "sqlite_reference": row.sqlite_reference,
                "gc_samples": sum(1 for s in body.get("samples") or [] if (s.get("gc") or {}).get("collections")),
                "verdict": None if verdict is None else {k: verdict.get(k) for k in
                                                         ("met", "target_ms", "samples", "missed", "missed_with_gc",
                                                          "worst_ms")},
            })
        out.append({
            "path": None if result.path is None else str(result.path),
            "recipe": result.recipe,
            "status": doc.get("status"),
            "created_at": doc.get("created_at"),
            "commit": result.commit,
            "floor": None if floor is None else floor.to_json(),
            "modes": modes,
            "branch": result.branch,  # the measured repository's branch, and the machine's load
            "load": result.load.to_dict(),
        })
    return {"results": out}
