"""`perfsuite ab`'s sequential looks (the CI gate, SPEC 8): while a gating headline is inconclusive, the
recipes concerned get more interleaved rounds, up to ``--looks``; a regression or a clear verdict stops.

The end-to-end test plants a 100 ms sleep per barrier on HEAD: the acknowledgement is then several times
BASE's whatever the machine (beyond the factor the worse way), while 2, 4 or 6 paired rounds can never
reach the level each look tests at (p >= 2 / 64 at 6 rounds, against 0.05 / 3 looks / the Holm family):
the looks are taken and the verdict stays inconclusive, deterministically. No timing is asserted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from perfsuite.ab import look_again
from perfsuite.report import Comparison, MetricChange, Stat

from .conftest import FSYNC_FILE, FSYNC_OLD, commit, edit

LOOKS = ["-r", "ci-tiny", "--samples", "2", "--warmup", "0", "--allocation-samples", "1", "--looks", "3"]


def test_an_inconclusive_headline_is_measured_again_until_the_looks_run_out(
    scratch_repo: Path, run_perfsuite: Any, tmp_path: Path
) -> None:
    edit(scratch_repo, FSYNC_FILE, FSYNC_OLD, "                    __import__('time').sleep(0.1)\n" + FSYNC_OLD)
    commit(scratch_repo, "plant a 100 ms sleep per barrier")
    out = tmp_path / "ab"
    # --strict: the looks are taken whatever the idle control says (a loaded machine's timings gate no verdict
    # otherwise), and inconclusive after the last look exits 3
    proc = run_perfsuite(scratch_repo, "ab", "HEAD~1", *LOOKS, "--output-dir", str(out), "--seed", "5", "--strict")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith("perfsuite ab: inconclusive") and "ci-tiny/barrier ack_ms" in first, first
    assert "3 looks of 2 rounds" in proc.stdout and "ci-tiny 6" in proc.stdout
    pairing = json.loads((out / "ab.json").read_text())
    assert pairing["looks"] == 3 and pairing["options"]["looks"] == 3 and pairing["options"]["paired"] is True
    assert pairing["options"]["strict"] is True  # `perfsuite compare DIR` later gives the same verdict
    (entry,) = pairing["recipes"]
    assert entry["rounds"] == 6
    assert [n for n in pairing["notes"] if n.startswith("look ")] == [
        "look 2 of 3: ci-tiny inconclusive at look 1; 2 more rounds each",
        "look 3 of 3: ci-tiny inconclusive at look 2; 2 more rounds each",
    ]
    for side in ("base", "head"):
        doc = json.loads((out / entry[side]).read_text())
        assert doc["status"] == "complete"
        assert [s["index"] for s in doc["modes"]["barrier"]["samples"]] == [0, 1, 2, 3, 4, 5]
        assert len(doc["modes"]["barrier"]["allocation"]["samples"]) == 1  # a cost: measured once
    again = run_perfsuite(scratch_repo, "compare", str(out))  # the pairing's looks, pairing and correction
    assert again.returncode == 3
    assert again.stdout.splitlines()[0].replace("perfsuite compare:", "perfsuite ab:") == first


def _change(recipe: str, status: str, ratio: float) -> MetricChange:
    stat = Stat(16, 1.0, 5.0, 9.0)
    return MetricChange(recipe=recipe, mode="sync", metric="ack_ms", direction="lower", base=stat, new=stat,
                        ratio=ratio, p_value=0.2, status=status, gating=True, underpowered=False)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ([], ()),
        ([_change("a", "unchanged", 1.0)], ()),
        ([_change("b", "inconclusive", 1.2), _change("a", "inconclusive", 1.3), _change("c", "unchanged", 1.0)],
         ("a", "b")),
        ([_change("a", "inconclusive", 0.8)], ()),  # inconclusive the better way never fails the gate
        ([_change("a", "inconclusive", 1.2), _change("b", "regressed", 1.5)], ()),  # a regression decides
    ],
)
def test_look_again_measures_only_recipes_whose_verdict_is_still_open(
    changes: list[MetricChange], expected: tuple[str, ...]
) -> None:
    comparison = Comparison(base="b", new="n", alpha=0.05, factor=1.1, changes=tuple(changes), notes=())
    assert look_again(comparison) == expected



def _report_docs() -> Any:
    """The report tests' synthetic documents (tests/report/conftest.py: seeded, schema-valid), loaded by path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("report_docs", Path(__file__).parents[1] / "report" / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pair(recipe: str, factor: float, rounds: int, seed: int) -> tuple[Any, Any]:
    """BASE and HEAD of one recipe, round by round: HEAD's headline timings are BASE's times ``factor``."""
    import copy

    import numpy as np

    from perfsuite.report import Result

    base = _report_docs().make_doc(recipe, n=rounds, seed=seed)
    head = copy.deepcopy(base)
    rng = np.random.default_rng(seed + 100)
    for body in head["modes"].values():
        for sample in body["samples"]:
            for key in ("submission_ms", "ack_ms", "max_gap_ms"):
                sample[key] = float(sample[key]) * factor * float(rng.lognormal(0.0, 0.01))
    return Result(None, base), Result(None, head)


def test_an_improvement_takes_no_extra_look_and_a_slowdown_the_test_could_not_confirm_does() -> None:
    """The decision between two looks, on synthetic rounds compared as `ab` compares them (paired, Holm, the
    first of 4 looks): 0.87x with 16 rounds is improved, 0.87x with 6 (which can never reach the level) is no
    evidence either way, and neither is worth another round; 1.2x with 6 rounds that the test could not
    confirm is the one recipe measured again."""
    from perfsuite.report import compare_results

    sides = [_pair("clear", 0.87, 16, 1), _pair("short", 0.87, 6, 2), _pair("slow", 1.2, 6, 3)]
    options: dict[str, Any] = {"paired": True, "timings": "paired", "looks": 4, "correction": "holm", "strict": True}
    looked = compare_results([b for b, _ in sides], [h for _, h in sides], **options)
    status: dict[str, set[str]] = {}
    for c in looked.changes:
        if c.gating and c.kind == "timing":
            status.setdefault(c.recipe, set()).add(c.status)
    assert "improved" in status["clear"] and status["clear"] <= {"improved", "unchanged"}, status
    assert status["short"] == {"unchanged"}, status  # faster, unconfirmed: never "inconclusive"
    assert "inconclusive" in status["slow"], status
    assert looked.exit_status == 3 and look_again(looked) == ("slow",)
    improved_only = compare_results([b for b, _ in sides[:2]], [h for _, h in sides[:2]], **options)
    assert improved_only.exit_status == 0 and improved_only.improvements and look_again(improved_only) == ()
    assert not any(c.status == "inconclusive" for c in improved_only.changes)
