"""A comparison as a value: every compared metric, the thresholds, what could not be compared, the verdict,
and the verdict's one line (:func:`compare_headline`).

The one line is part of the value, not only of its renderings: :meth:`Comparison.to_json` carries it as
``verdict``. So the value, its line and the figure formatting the line uses sit here, below both the gate that
builds a comparison (:mod:`perfsuite.report._compare`) and the table and Markdown that render one
(:mod:`perfsuite.report._compare_render`): the arrows point one way.

The **first line** always carries the verdict: ``N regression(s): ...``, ``inconclusive: ...`` or
``no regression`` (``; N improved: ...`` when gating metrics improved), plus ``[cross-machine: ...]``,
``[incomplete: ...]`` and the A/B pairing's own flags (e.g. a side that ran with its own operations), so a
reader of a CI log or a PR comment cannot miss them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from perfsuite.report._change import MetricChange
from perfsuite.report._format import fmt_bytes, fmt_ms
from perfsuite.report._gate_policy import EXIT_STATUS, outcome
from perfsuite.report._metrics import COST_METRICS

__all__ = ["Comparison", "compare_headline"]

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


def _pvalues(c: MetricChange) -> str:
    text = f"p = {_p(c.p_value or 1.0)}"
    return text if c.p_adjusted is None else f"{text}, Holm-adjusted {_p(c.p_adjusted)}"


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


@dataclass(frozen=True, slots=True)
class Comparison:
    """Every compared metric, the thresholds, what could not be compared and why, and the verdict."""

    base: str
    new: str
    alpha: float
    factor: float
    changes: tuple[MetricChange, ...]
    notes: tuple[str, ...]
    only_base: tuple[str, ...] = ()
    only_new: tuple[str, ...] = ()
    cross_machine: tuple[str, ...] = ()
    incomplete: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    flags: tuple[str, ...] = field(default=())
    looks: int = 1
    correction: str = "none"
    timing_note: str | None = None  # why timings do not gate here (separate or loaded runs), first line
    loaded: tuple[str, ...] = ()  # the runs measured on a loaded machine, each with its idle-control figures
    strict: bool = False  # inconclusive timings fail (exit 3), paired timings gate whatever the load
    load_policy: str | None = None  # a loaded machine's timings not gated: what gated instead, the first words

    def to_json(self) -> dict[str, Any]:
        """`compare` and `ab` ``--format json``: the verdict line, the gate's exit status and every compared
        metric (the kind of comparison, a timing's smallest detectable ratio, a cost's tolerance;
        inconclusive is no pass)."""
        return {
            "base": str(self.base),
            "new": str(self.new),
            "alpha": self.alpha,
            "factor": self.factor,
            "looks": self.looks,
            "correction": self.correction,
            "level": self.level,
            "exit_status": int(self.exit_status),
            "regressions": len(self.regressions),
            "improvements": len(self.improvements),
            "changes": [c.to_json() for c in self.changes],
            "notes": [str(n) for n in self.notes],
            "verdict": compare_headline(self),
            "inconclusive": len(self.inconclusive),
            "only_base": list(self.only_base),
            "only_new": list(self.only_new),
            "cross_machine": list(self.cross_machine),
            "incomplete": list(self.incomplete),
            "flags": list(self.flags),
            "timing_note": self.timing_note,
            "loaded": list(self.loaded),
            "strict": self.strict,
            "outcome": self.outcome,
            "load_policy": self.load_policy,
        }

    @property
    def timings_gate(self) -> bool:
        """Whether timings could fail this comparison (not information only)."""
        return self.timing_note is None and "costs-only gate: timings shown, not gating" not in self.flags

    @property
    def level(self) -> float:
        """The level each look tests at: ``alpha / looks``."""
        return self.alpha / self.looks

    @property
    def paired(self) -> bool:
        """Whether any timing was compared round by round (the signed-rank test)."""
        return any(c.test == "signed-rank" for c in self.changes)

    @property
    def regressions(self) -> tuple[MetricChange, ...]:
        """Regressions in gating metrics (significant timings, costs beyond tolerance): exit status 1."""
        return tuple(c for c in self.changes if c.status == "regressed" and c.gating)

    @property
    def improvements(self) -> tuple[MetricChange, ...]:
        """Improvements in gating metrics."""
        return tuple(c for c in self.changes if c.status == "improved" and c.gating)

    @property
    def inconclusive(self) -> tuple[MetricChange, ...]:
        """Gating timings beyond the factor, the worse way, whose test could not tell: exit status 3."""
        return tuple(c for c in self.changes if c.status == "inconclusive" and c.gating and c.worse)

    @property
    def outcome(self) -> str:
        """``passed``, ``neutral``, ``regressed`` or ``inconclusive`` (:mod:`perfsuite.report._gate_policy`)."""
        return outcome(regressions=bool(self.regressions), inconclusive=bool(self.inconclusive),
                       incomplete=bool(self.incomplete), strict=self.strict, load_policy=self.load_policy is not None)

    @property
    def exit_status(self) -> int:
        """1 regression, 3 inconclusive (``strict``, or an incomplete document compared on purpose), 0 otherwise
        (passed or neutral)."""
        return EXIT_STATUS[self.outcome]

    def explained(self, everything: bool = False) -> tuple[MetricChange, ...]:
        """The rows ``--explain`` gives a reason for: every cost and every gating metric (all with ``everything``)."""
        return tuple(c for c in self.changes if everything or c.gating or c.kind == "cost")

    def explain(self, everything: bool = False) -> tuple[str, ...]:
        """``recipe/mode metric: figures (the rule that decided): status``, one line per :meth:`explained` row
        (``perfsuite compare --explain``, ``perfsuite ab --explain``): why each passed or gated."""
        return tuple(f"{c.recipe}/{c.mode_label} {c.reason}" for c in self.explained(everything))

    def shown(self, everything: bool = False) -> tuple[MetricChange, ...]:
        """Headline metrics plus every metric that changed (all of them with ``everything``)."""
        return tuple(c for c in self.changes if everything or c.headline or c.status != "unchanged")


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
    elif c.timing_note:  # right after the verdict, what it could not judge
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
