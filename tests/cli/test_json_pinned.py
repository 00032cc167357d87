"""The ``--format json`` documents, byte for byte (the values give their own JSON): what `report`, `compare`, `ab`,
`history` and `bars` print is pinned against the dicts the CLI used to build by hand beside the dataclasses (the
reference below, kept verbatim), on the committed baseline and on a hand-made history step."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from perfsuite.cli._formats import report_json
from perfsuite.report import (
    Bar,
    Comparison,
    History,
    LevelStep,
    Series,
    Stat,
    bars,
    compare,
    compare_headline,
    find_floor,
    history,
    order_results,
    read_results,
)

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "results" / "baseline"


def _text(body: Mapping[str, Any]) -> str:
    return json.dumps(body, indent=1)


# -- the reference: the hand-built dicts, as the CLI had them --------------------------------------------------


def _stat_of(stat: Stat) -> dict[str, Any]:
    return {"n": stat.n, "median": stat.median, "min": stat.min, "max": stat.max, "ci_low": stat.ci_low,
            "ci_high": stat.ci_high}


def _compare(comparison: Comparison) -> dict[str, Any]:
    changes = []
    for c in comparison.changes:
        changes.append({
            "recipe": c.recipe, "mode": c.mode, "metric": c.metric, "base": _stat_of(c.base), "new": _stat_of(c.new),
            "ratio": c.ratio, "p_value": c.p_value, "status": c.status, "gating": bool(c.gating),
            "headline": c.headline, "underpowered": c.underpowered, "kind": c.kind, "detectable": c.detectable,
            "tolerance": c.tolerance, "reference": c.reference, "test": c.test, "p_adjusted": c.p_adjusted,
            "reason": c.reason,
        })
    return {
        "base": str(comparison.base), "new": str(comparison.new), "alpha": comparison.alpha,
        "factor": comparison.factor, "looks": comparison.looks, "correction": comparison.correction,
        "level": comparison.level, "exit_status": int(comparison.exit_status),
        "regressions": len(comparison.regressions), "improvements": len(comparison.improvements),
        "changes": changes, "notes": [str(n) for n in comparison.notes], "verdict": compare_headline(comparison),
        "inconclusive": len(comparison.inconclusive), "only_base": list(comparison.only_base),
        "only_new": list(comparison.only_new), "cross_machine": list(comparison.cross_machine),
        "incomplete": list(comparison.incomplete), "flags": list(comparison.flags),
        "timing_note": comparison.timing_note, "loaded": list(comparison.loaded),
        "strict": comparison.strict, "outcome": comparison.outcome, "load_policy": comparison.load_policy,
    }


def _history(hist: History) -> dict[str, Any]:
    return {
        "runs": hist.runs, "series": len(hist.series), "penalty_per_log_n": hist.penalty_per_log_n,
        "min_change": hist.min_change, "machines": [{"key": m.key, "label": m.label} for m in hist.machines],
        "steps": [{
            "machine": st.machine, "recipe": st.recipe, "mode": st.mode, "metric": st.metric,
            "commit": st.commit, "previous_commit": st.previous_commit, "date": st.date, "before": st.before,
            "after": st.after, "ratio": st.ratio, "kind": st.kind, "method": st.method,
        } for st in hist.steps],
    }


def _bars(judged: Iterable[Bar]) -> dict[str, Any]:
    return {"bars": [{"bar": b.bar, "recipe": b.recipe, "measured": b.measured, "target": b.target, "met": b.met}
                     for b in judged]}


# -- the pins ----------------------------------------------------------------------------------------------------


def test_compare_json_is_the_hand_built_document() -> None:
    comparison = compare(BASELINE, BASELINE)
    assert comparison.changes  # something to pin
    assert _text(comparison.to_json()) == _text(_compare(comparison))


def test_history_json_is_the_hand_built_document() -> None:
    step = LevelStep("r", "m", "max_gap_ms", 3, "abc", "def", "2026-11-29", 2.0, 5.0, "lower", "vm-0123456789", "pelt")
    made = History((Series("r", "m", "max_gap_ms", (), (step,), "vm-0123456789"),), 5, 5.0, 0.1)
    real = history(BASELINE)
    for hist in (made, real):
        assert _text(hist.to_json()) == _text(_history(hist))


def test_bars_json_is_the_hand_built_document() -> None:
    judged = bars(read_results(BASELINE))
    assert judged
    assert _text({"bars": [b.to_json() for b in judged]}) == _text(_bars(judged))


def test_report_json_floors_are_the_hand_built_ones() -> None:
    results = order_results(read_results(BASELINE))
    floors = [find_floor(r, results) for r in results]
    assert any(floors)
    body = report_json(results, floors)
    for entry, floor in zip(body["results"], floors):
        expected = None if floor is None else {"source": str(floor.source), "mode": floor.mode,
                                               "ack_ms": _stat_of(floor.ack_ms)}
        assert _text(entry["floor"]) == _text(expected)
        if floor is not None:
            assert _text(floor.to_json()) == _text(expected)
