"""A comparison as text (a rich table under a one-line verdict) and as Markdown (job summary, PR comment).

The **first line** always carries the verdict, :func:`compare_headline` (it lives with the value, in
:mod:`perfsuite.report._compare_types`, because the JSON form carries it too); with ``explain``, the Markdown
lists each row's reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.table import Table

from perfsuite.report._change import MetricChange
from perfsuite.report._compare_types import Comparison, _detail, _p, _ratio, _value, compare_headline
from perfsuite.report._format import md_code, md_text

__all__ = ["compare_headline", "compare_markdown", "compare_table"]


def _test(c: MetricChange) -> str:
    """The p-value of a timing (and the Holm-adjusted one the verdict used), or the tolerance of a cost."""
    if c.kind == "cost":
        return f"tol {_value(c.metric, c.tolerance or 0.0)}"
    text = _p(c.p_value if c.p_value is not None else 1.0)
    return text if c.p_adjusted is None else f"{text} (Holm {_p(c.p_adjusted)})"


def _detectable(c: MetricChange) -> str:
    if c.kind == "cost" or not c.gating:
        return ""
    if c.detectable is None:
        return "never" if c.underpowered else "-"
    return f">={c.detectable:.2f}x"


def _rule(comparison: Comparison) -> str:
    c = comparison
    test = ("Wilcoxon signed-rank on paired rounds (Mann-Whitney U where the rounds do not pair)" if c.paired
            else "Mann-Whitney U")
    level = f"{c.level:g}" if c.looks == 1 else f"{c.level:g} (alpha {c.alpha:g} over {c.looks} looks)"
    family = ("; p-values of the gating timing headlines Holm-adjusted together; detectable at the level each is "
              "sure to get" if c.correction == "holm" else "")
    return (
        f"timings: changed = {test} p < {level} and a ratio (Hodges-Lehmann) beyond {c.factor:g}x either way "
        f"(direction-aware: slower = regressed, faster = improved, which never fails the gate; beyond it the worse "
        f"way but not significant = inconclusive){family}; costs (allocation, bytes written, fsync/rename/create "
        "counts, instructions): changed = medians apart by at least the tolerance (samples that vary: confirmed by "
        f"a rank test on the counts at p < {c.level:g}, or beyond the widest range plus the tolerance)"
    )


_STYLE = {
    "regressed": "bold red",
    "improved": "green",
    "changed": "yellow",
    "inconclusive": "yellow",
    "unchanged": "dim",
}
_HEADER = ["recipe", "mode", "metric", "base median", "new median", "ratio", "p / tol", "detectable", "status"]
_RIGHT = ("base median", "new median", "ratio", "p / tol", "detectable")


def _status(c: MetricChange) -> str:
    return c.status + ("" if c.gating or c.status == "unchanged" else " (info)")


def _rows(changes: Iterable[MetricChange]) -> list[list[str]]:
    return [
        [
            c.recipe,
            c.mode_label,
            c.metric,
            _value(c.metric, c.base.median),
            _value(c.metric, c.new.median),
            _ratio(c.ratio),
            _test(c),
            _detectable(c),
            _status(c),
        ]
        for c in changes
    ]


def _lists(comparison: Comparison) -> list[str]:
    return [*comparison.notes, *(f"skipped: {s}" for s in comparison.skipped)]


def compare_table(comparison: Comparison, everything: bool = False) -> Table:
    """A rich ``Table`` of the headline and changed metrics (every metric with ``everything``); print
    :func:`compare_headline` above it."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    table = Table(
        caption=_rule(comparison) + "".join(f"\n{note}" for note in _lists(comparison)),
        box=box.SIMPLE_HEAD,
        caption_justify="left",
    )
    for column in _HEADER:
        table.add_column(column, justify="right" if column in _RIGHT else "left")
    shown = comparison.shown(everything)
    for change, row in zip(shown, _rows(shown)):
        style = _STYLE[change.status]
        table.add_row(*(escape(cell) for cell in row[:-1]), f"[{style}]{row[-1]}[/]")  # names: markup escaped
    return table


def _md_explained(comparison: Comparison, everything: bool) -> list[str]:
    lines = []
    for c in comparison.explained(everything):
        why = c.reason.removeprefix(f"{c.metric}: ")
        lines.append(f"- {md_code(f'{c.recipe}/{c.mode_label} {c.metric}')}: {md_text(why)}")
    return lines


def _md_table(changes: Sequence[MetricChange]) -> list[str]:
    lines = ["| " + " | ".join(_HEADER) + " |", "|---|---|---|---:|---:|---:|---:|---:|---|"]
    for change, row in zip(changes, _rows(changes)):
        if change.gating and change.status in ("regressed", "inconclusive") and change.worse:
            row[-1] = f"**{row[-1]}**"
        row[:3] = [md_code(cell, table=True) for cell in row[:3]]  # names from documents: never out of the span
        lines.append("| " + " | ".join(row) + " |")
    return lines


def compare_markdown(comparison: Comparison, everything: bool = False, *, details: bool = True,
                     explain: bool = False, command: str = "compare") -> str:
    """Markdown for a job summary (``details``: every metric in a collapsed table) or a PR comment (without);
    ``explain`` adds each reason (:meth:`Comparison.explain`) under the table; ``command`` is the one the
    heading names (``ab`` for its pairing: the comment says which command gated)."""
    c = comparison
    lines = [f"### perfsuite {command}: {md_text(compare_headline(c))}", ""]  # plain text holding names
    for word, group in (("**regressed**", c.regressions), ("**inconclusive**", c.inconclusive),
                        ("improved", c.improvements)):
        for change in group:
            lines.append(f"- {word} {md_code(change.recipe)} {md_code(change.mode)} {md_code(change.metric)}: "
                         f"{_value(change.metric, change.base.median)} -> {_value(change.metric, change.new.median)}, "
                         f"{_detail(change)}")
    if c.regressions or c.inconclusive or c.improvements:
        lines.append("")
    lines += [f"{md_code(c.base)} -> {md_code(c.new)}; {_rule(c)}.", ""]
    lines += _md_table(c.shown(everything))
    if _lists(c):
        lines += ["", *(f"- {md_text(note)}" for note in _lists(c))]
    if explain:
        lines += ["", "Why each cost and gating metric passed or gated:", "", *_md_explained(c, everything)]
    if details and not everything and len(c.changes) > len(c.shown()):
        lines += ["", f"<details><summary>All {len(c.changes)} metrics</summary>", ""]
        lines += _md_table(c.changes)
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"
