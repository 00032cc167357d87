"""Costs gated on their typical value, each with a one-line reason: synthetic documents, never timing.

A count whose samples are all equal is gated exactly on its median. One whose samples vary was gated only
beyond its range plus the tolerance, so a single stray sample hid a doubled fsync (BASE read 1 fsync six
times, NEW 2, 3, 2, 2, 2, 2: "unchanged"). A varying count now gates on its median as well, when a rank test
on the counts confirms the shift; every cost says which rule decided it, in the table's JSON and with
``--explain``.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from perfsuite import cli
from perfsuite.report import MetricChange, Result, compare, compare_results

from .conftest import SYNC_ASYNC, make_doc, write_doc

pytest.importorskip("scipy.stats")


def _doc(counts: list[int], *, seed: int, metric: str = "fsyncs") -> dict[str, Any]:
    """A document whose ``sync`` mode counts ``metric`` per sample as given (the async mode: 5 each)."""
    modes = {m: {**shape, "metrics": {metric: 5}} for m, shape in SYNC_ASYNC.items()}
    doc = make_doc(modes=modes, n=len(counts), seed=seed)
    for sample, count in zip(doc["modes"]["sync"]["samples"], counts):
        sample["metrics"][metric] = count
    return doc


def _cost(comparison: Any, metric: str = "metrics.fsyncs") -> MetricChange:
    (change,) = [c for c in comparison.changes if (c.mode, c.metric) == ("sync", metric)]
    return change


@pytest.mark.parametrize(("base", "new", "status"), [
    # the defect: one stray 3 made NEW "not deterministic", and the doubled fsync passed
    ([1, 1, 1, 1, 1, 1], [2, 3, 2, 2, 2, 2], "regressed"),
    ([2, 3, 2, 2, 2, 2], [1, 1, 1, 1, 1, 1], "improved"),
    ([1, 1, 1, 1, 1, 1], [2, 2, 2, 1, 2, 2], "regressed"),  # the stray on the near side hides nothing either
    ([1, 1, 1, 1, 1, 2], [2, 2, 2, 2, 3, 2], "regressed"),  # both sides vary: the rank test decides
    # the same typical value: no stray sample can make a change of it
    ([2, 2, 3, 2, 2, 2], [2, 2, 3, 2, 2, 2], "unchanged"),
    ([2, 2, 2, 2, 2, 2], [2, 2, 2, 2, 2, 3], "unchanged"),
    ([2, 2, 2, 2, 2, 3], [2, 2, 2, 2, 2, 2], "unchanged"),
    ([1, 1, 1, 1, 1, 1], [2, 2, 2, 2, 2, 2], "regressed"),  # steady on both sides: exactly, as before
])
def test_a_count_gates_on_its_typical_value_so_one_stray_sample_cannot_hide_a_shift(
    base: list[int], new: list[int], status: str
) -> None:
    comparison = compare_results([Result(None, _doc(base, seed=1))], [Result(None, _doc(new, seed=2))])
    change = _cost(comparison)
    assert change.status == status, change.reason
    assert change.gating and change.kind == "cost"
    assert comparison.exit_status == (1 if status == "regressed" else 0)


def test_the_ab_comparison_gates_the_same_count_at_the_level_of_each_look(tmp_path: Path) -> None:
    """`perfsuite ab` (and `pytest --perfsuite-ab`) compare their pairing with `compare`: one rule for costs."""
    folder = tmp_path / "ab"
    write_doc(folder / "base" / "mailbox-delivery.json", _doc([1, 1, 1, 1, 1, 1], seed=1))
    write_doc(folder / "head" / "mailbox-delivery.json", _doc([2, 3, 2, 2, 2, 2], seed=2))
    (folder / "ab.json").write_text(json.dumps({
        "format": "perfsuite-ab/1", "base": {"revision": "main", "commit": "b" * 40},
        "head": {"revision": "working tree", "commit": "h" * 40},
        "recipes": [{"recipe": "mailbox-delivery", "base": "base/mailbox-delivery.json",
                     "head": "head/mailbox-delivery.json"}],
        "options": {"alpha": 0.05, "factor": 1.1, "gate": "costs", "paired": True, "looks": 4,
                    "correction": "holm"}}))
    comparison = compare(folder)
    assert comparison.level == pytest.approx(0.0125)
    change = _cost(comparison)
    assert change.status == "regressed" and comparison.exit_status == 1, change.reason
    assert "metrics.fsyncs +1" in comparison.to_json()["verdict"]


@pytest.mark.parametrize(("base", "new", "words"), [
    ([1, 1, 1, 1, 1, 1], [2, 2, 2, 2, 2, 2],
     ["metrics.fsyncs: median 1 -> 2 per operation (+1", "exactly on their median", "): regressed"]),
    ([5, 5, 5, 5, 5, 5], [5, 5, 5, 5, 5, 5], ["metrics.fsyncs: median 5 -> 5 per operation (no change", "unchanged"]),
    ([1, 1, 1, 1, 1, 1], [2, 3, 2, 2, 2, 2],
     ["median 1 -> 2 per operation (+1", "vary", "rank test on the counts", "p = 0.0022 < 0.05", "regressed"]),
    ([2, 2, 3, 2, 2, 2], [2, 2, 3, 2, 2, 2], ["median 2 -> 2 per operation (no change", "vary", "unchanged"]),
])
def test_every_cost_says_in_one_line_why_it_passed_or_gated(base: list[int], new: list[int],
                                                             words: list[str]) -> None:
    comparison = compare_results([Result(None, _doc(base, seed=1))], [Result(None, _doc(new, seed=2))])
    reason = _cost(comparison).reason
    assert "\n" not in reason
    for word in words:
        assert word in reason, reason
    assert all(c.reason for c in comparison.changes)  # every row, timings too


def test_a_spread_the_range_explains_is_no_change_and_says_what_could_not_confirm_it() -> None:
    """Bimodal allocations (a writer thread wakes the loop, or not: 16 more), 3 samples a side: the medians fall
    on opposite modes, 17 apart; 3 against 3 cannot reach p < 0.05 and 17 is inside the range plus the
    tolerance, so the reason names both."""
    def allocated(counts: list[int], seed: int) -> dict[str, Any]:
        doc = make_doc(seed=seed, allocation=True)
        for sample, count in zip(doc["modes"]["sync"]["allocation"]["samples"], counts):
            sample["allocations"] = count
        return doc

    comparison = compare_results([Result(None, allocated([597, 597, 597], 1))],
                                 [Result(None, allocated([598, 614, 614], 2))])
    change = _cost(comparison, "allocation.allocations")
    assert change.status == "unchanged"
    assert "median 597 -> 614 per operation (+17" in change.reason and "p = 0.1 >= 0.05" in change.reason
    assert "range 16" in change.reason and change.reason.endswith("): unchanged"), change.reason


def test_the_json_output_carries_each_reason_and_explain_prints_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = write_doc(tmp_path / "base" / "mailbox-delivery.json", _doc([1, 1, 1, 1, 1, 1], seed=1, metric="fdatasyncs"))
    new = write_doc(tmp_path / "new" / "mailbox-delivery.json", _doc([2, 2, 2, 2, 2, 2], seed=2, metric="fdatasyncs"))
    assert cli.main(["compare", str(base), str(new), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    schema = json.loads(resources.files("perfsuite.cli").joinpath("output.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(data)
    row = next(c for c in data["changes"] if (c["mode"], c["metric"]) == ("sync", "metrics.fdatasyncs"))
    assert row["reason"].startswith("metrics.fdatasyncs: median 1 -> 2 per operation (+1"), row["reason"]
    assert all(isinstance(c["reason"], str) and c["reason"] for c in data["changes"])

    assert cli.main(["compare", str(base), str(new), "--explain"]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("perfsuite compare: 1 regression: mailbox-delivery/sync metrics.fdatasyncs +1")
    assert ("  mailbox-delivery/sync metrics.fdatasyncs: median 1 -> 2 per operation (+1, steady samples gate "
            "exactly on their median, tolerance 1): regressed") in lines, out
    async_line = next(ln for ln in lines if ln.startswith("  mailbox-delivery/async metrics.fdatasyncs: "))
    assert "median 5 -> 5 per operation (no change" in async_line and async_line.endswith("unchanged")
    # without --explain, no reason lines; -q --explain keeps the verdict and the reasons
    assert cli.main(["compare", str(base), str(new)]) == 1
    assert "per operation (" not in capsys.readouterr().out
    assert cli.main(["-q", "compare", str(base), str(new), "--explain"]) == 1
    quiet = capsys.readouterr().out.splitlines()
    assert quiet[0].startswith("perfsuite compare: 1 regression") and any("exactly on their median" in ln
                                                                          for ln in quiet)
    assert cli.main(["compare", str(base), str(new), "--explain", "--format", "markdown"]) == 1
    markdown = capsys.readouterr().out
    assert "- `mailbox-delivery/sync metrics.fdatasyncs`: median 1 -> 2 per operation" in markdown, markdown


def test_one_sample_a_side_says_its_spread_is_not_known() -> None:
    """One sample a side cannot show whether a count varies (a writer thread's wake-up moves an allocation
    count by 16 now and then): the reason says so instead of calling the samples steady."""
    one = compare_results([Result(None, _doc([1], seed=1))], [Result(None, _doc([2], seed=2))])
    change = _cost(one)
    assert change.status == "regressed"
    assert "one sample in BASE, so whether the count varies is not known" in change.reason
    assert "steady" not in change.reason
    three = compare_results([Result(None, _doc([1, 1, 1], seed=1))], [Result(None, _doc([2, 2, 2], seed=2))])
    assert "steady samples gate exactly on their median" in _cost(three).reason
