"""Improvements are a verdict of their own, never "inconclusive": synthetic documents, never timing.

A gating timing faster than BASE by more than the factor is ``improved`` when the test that would call the
same slowdown a regression reaches the level; it never fails the gate, and the first line names it. Faster
by as much without that evidence is no change for the gate (``unchanged``, its reason says why), never
``inconclusive``: that word is kept for a slowdown the test could not confirm (exit 3).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perfsuite import cli
from perfsuite.report import Result, compare, compare_headline, compare_results

from .conftest import make_doc, write_doc

pytest.importorskip("scipy.stats")

HEADLINES = ("submission_ms", "ack_ms", "max_gap_ms")


def _faster(base: dict[str, Any], factor: float, seed: int) -> dict[str, Any]:
    """NEW: BASE's samples, every headline timing times ``factor`` (and a little jitter of its own)."""
    rng = np.random.default_rng(seed)
    new = copy.deepcopy(base)
    for body in new["modes"].values():
        for sample in body["samples"]:
            for key in HEADLINES:
                sample[key] = float(sample[key]) * factor * float(rng.lognormal(0.0, 0.01))
    return new


def _pairing(folder: Path, base: dict[str, Any], head: dict[str, Any], looks: int) -> Path:
    write_doc(folder / "base" / "mailbox-delivery.json", base)
    write_doc(folder / "head" / "mailbox-delivery.json", head)
    (folder / "ab.json").write_text(json.dumps({
        "format": "perfsuite-ab/1", "base": {"revision": "main", "commit": "b" * 40},
        "head": {"revision": "working tree", "commit": "h" * 40},
        "recipes": [{"recipe": "mailbox-delivery", "base": "base/mailbox-delivery.json",
                     "head": "head/mailbox-delivery.json"}],
        "options": {"alpha": 0.05, "factor": 1.1, "gate": "all", "paired": True, "looks": looks,
                    "correction": "holm"}}))
    return folder


def test_a_clearly_faster_new_side_is_improved_exit_0_and_said_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = make_doc(seed=1, n=16)
    new = _faster(base, 0.87, seed=2)
    comparison = compare(_pairing(tmp_path / "ab", base, new, looks=4))
    ack = next(c for c in comparison.changes if (c.mode, c.metric) == ("sync", "ack_ms"))
    assert ack.status == "improved" and ack.gating and ack.ratio == pytest.approx(0.87, rel=0.02)
    assert "faster" in ack.reason and "improved" in ack.reason and "never fails the gate" in ack.reason, ack.reason
    assert comparison.exit_status == 0 and not comparison.regressions and not comparison.inconclusive
    assert len(comparison.improvements) >= 4
    line = compare_headline(comparison)
    assert line.startswith(f"no regression; {len(comparison.improvements)} improved: mailbox-delivery/"), line
    assert cli.main(["compare", str(tmp_path / "ab"), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["improvements"] == len(comparison.improvements) and data["inconclusive"] == 0
    assert {c["status"] for c in data["changes"] if c["gating"] and c["kind"] == "timing"} <= {"improved", "unchanged"}


def test_two_separate_runs_gating_timings_call_a_faster_new_side_improved(tmp_path: Path) -> None:
    base = make_doc(seed=1)
    new = _faster(base, 0.87, seed=2)
    comparison = compare_results([Result(None, base)], [Result(None, new)], timings="gate")
    statuses = {(c.mode, c.metric): c.status for c in comparison.changes if c.gating and c.kind == "timing"}
    assert statuses[("sync", "ack_ms")] == "improved" and comparison.exit_status == 0
    assert compare_headline(comparison).startswith("no regression; ")


def test_faster_without_the_evidence_is_never_inconclusive() -> None:
    """6 paired rounds can never reach p < 0.05 after Holm: 0.87x there is no evidence either way, and no
    "cannot tell" for the gate either (it could only ever pass)."""
    base = make_doc(seed=1, n=6)
    new = _faster(base, 0.87, seed=2)
    comparison = compare_results([Result(None, base)], [Result(None, new)], paired=True, timings="paired",
                                 correction="holm")
    rows = [c for c in comparison.changes if c.gating and c.kind == "timing"]
    assert {c.status for c in rows} == {"unchanged"}, [(c.label, c.status) for c in rows]
    ack = next(c for c in rows if (c.mode, c.metric) == ("sync", "ack_ms"))
    assert ack.ratio < 0.9 and "faster" in ack.reason and "not confirmed" in ack.reason, ack.reason
    assert comparison.exit_status == 0 and compare_headline(comparison).startswith("no regression")
