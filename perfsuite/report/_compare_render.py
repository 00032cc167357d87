"""A comparison as text (a rich table under a one-line verdict) and as Markdown (job summary, PR comment).

The **first line** always carries the verdict (issue 15): ``N regression(s): ...``, ``inconclusive: ...``
or ``no regression`` (``; N improved: ...`` when gating metrics improved), plus ``[cross-machine: ...]``,
``[incomplete: ...]`` and the A/B pairing's own flags (e.g. a side that ran with its own operations), so a
reader of a CI log or a PR comment cannot miss them; with ``explain``, the Markdown lists each row's reason.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.table import Table

from perfsuite.report._compare import Comparison, MetricChange
from perfsuite.report._format import fmt_bytes, fmt_ms, md_code, md_text
from perfsuite.report._metrics import COST_METRICS

__all__ = ["compare_headline", "compare_markdown", "compare_table"]

_LISTED = 4  # items named in the first line before "and N more"


def _value(metric: str, value: float) -> str:
    cost = COST_METRICS.get(metric)
    if "bytes" in metric or (cost is not None and cost.kind == "bytes"):
        return fmt_bytes(value)
    if metric.endswith("_ms") or metric.startswith("phases_ms."):
        return fmt_ms(value)
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _ratio(ratio: float) -> str:
    return "inf" if math.isinf(ratio) else f"{ratio:.2f}x"


def _p(p: float) -> str:
    return f"{p:.2g}" if p < 0.001 else f"{p:.3f}"


def _test(c: MetricChange) -> str:
    """The p-value of a timing (and the Holm-adjusted one the verdict used), or the tolerance of a cost."""
    if c.kind == "cost":
        return f"tol {_value(c.metric, c.tolerance or 0.0)}"
    text = _p(c.p_value if c.p_value is not None else 1.0)
    return text if c.p_adjusted is None else f"{text} (Holm {_p(c.p_adjusted)})"


def _pvalues(c: MetricChange) -> str:
    text = f"p = {_p(c.p_value or 1.0)}"
    return text if c.p_adjusted is None else f"{text}, Holm-adjusted {_p(c.p_adjusted)}"


def _detectable(c: MetricChange) -> str:
    if c.kind == "cost" or not c.gating:
        return ""
    if c.detectable is None:
        return "never" if c.underpowered else "-"
    return f">={c.detectable:.2f}x"


def _detail(c: MetricChange) -> str:
    """``+1,048,576 (1.82x)`` for a cost, ``1.30x (p = 0.002)`` for a timing."""
    if c.kind == "cost":
        delta = c.new.median - c.base.median
        return f"{'+' if delta >= 0 else '-'}{_value(c.metric, abs(delta))} ({_ratio(c.ratio)})"
    if c.status == "inconclusive":
        seen = "never at these sample counts" if c.detectable is None else f"detectable >= {c.detectable:.2f}x"
        return f"{_ratio(c.ratio)} ({_pvalues(c)}, {seen})"
    return f"{_ratio(c.ratio)} ({_pvalues(c)})"


def _item(c: MetricChange) -> str:
    return f"{c.label} {_detail(c)}"


def _items(changes: Sequence[MetricChange]) -> str:
    shown = ", ".join(_item(c) for c in changes[:_LISTED])
    return shown + (f", and {len(changes) - _LISTED} more" if len(changes) > _LISTED else "")


def compare_headline(comparison: Comparison) -> str:
    """The verdict in one line, without a prefix (the text and Markdown outputs start with it)."""
    c = comparison
    improved = len(c.improvements)
    if c.regressions:
        n = len(c.regressions)
        line = f"{n} regression{'s' if n != 1 else ''}: {_items(c.regressions)}"
        if c.inconclusive:
            line += f"; also {len(c.inconclusive)} inconclusive"
        if improved:
            line += f"; also {improved} improved"
    elif c.inconclusive:
        n = len(c.inconclusive)
        adjusted = "Holm-adjusted " if c.correction == "holm" else ""
        word = "inconclusive" if c.strict else "inconclusive on timings alone, neutral (not failing; --strict fails it)"
        line = (f"{word}: {n} headline{'s' if n != 1 else ''} beyond {c.factor:g}x that the test could not "
                f"confirm at {adjusted}p < {c.level:g}: {_items(c.inconclusive)}")
        if improved:
            line += f"; also {improved} improved"
    elif c.incomplete:
        line = "inconclusive: no regression in what was measured, but the data is incomplete"
    else:  # an improvement is a verdict of its own: named, and it never fails the gate
        line = "no regression" + (f"; {improved} improved: {_items(c.improvements)}" if improved else "")
    if c.load_policy:  # a loaded machine: which metrics gated and why, first (the figures are in it)
        line = f"{c.load_policy}: {line}"
    elif c.timing_note:  # issue 28: right after the verdict, what it could not judge
        line += f" [{c.timing_note}]"
    if c.loaded and not c.load_policy:
        line += f" [loaded machine: {'; '.join(c.loaded)}]"
    if c.incomplete:
        line += f" [incomplete: {'; '.join(c.incomplete)}]"
    if c.cross_machine:
        line += f" [cross-machine comparison: {'; '.join(c.cross_machine)}]"
    for flag in c.flags:
        line += f" [{flag}]"
    return line


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
                     explain: bool = False) -> str:
    """Markdown for a job summary (``details``: every metric in a collapsed table) or a PR comment (without);
    ``explain`` adds each reason (:meth:`Comparison.explain`) under the table."""
    c = comparison
    lines = [f"### perfsuite compare: {md_text(compare_headline(c))}", ""]  # plain text holding names
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
