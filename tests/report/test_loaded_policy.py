"""The loaded-runner policy (SPEC section 5, the gate): when the idle control says the machine was loaded, timings
cannot tell the load from a regression, so they are reported and not gated; the gate decides on the counts (I/O,
allocations, instructions), and the first line says which gated and why. ``strict`` keeps the earlier rule
(paired timings gate whatever the load, an inconclusive timing exits 3). Synthetic documents, never timing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from perfsuite import cli
from perfsuite.report import compare, compare_headline

from .conftest import SYNC_ASYNC, make_doc, write_doc

pytest.importorskip("scipy.stats")


def _ab_dir(tmp_path: Path, *, slower: float = 1.5, head_fsyncs: int = 1, gap: float = 8.9,
            strict: bool | None = None) -> Path:
    """16 interleaved rounds as `perfsuite ab` writes them: HEAD's timings ``slower`` in every round, its
    fsyncs per publication ``head_fsyncs`` (BASE: 1), both sides' idle control at ``gap`` ms (5 ms period)."""
    rng = np.random.default_rng(3)
    spell = rng.lognormal(0.0, 0.2, size=16)
    out = tmp_path / "ab"
    for side, factor, fsyncs, seed in (("base", 1.0, 1, 1), ("head", slower, head_fsyncs, 2)):
        shape = {**SYNC_ASYNC["async"], "metrics": {"fsyncs": fsyncs}}
        doc = make_doc(modes={"async": shape}, n=16, seed=seed, control_gap_ms=gap)
        for i, sample in enumerate(doc["modes"]["async"]["samples"]):
            for key in ("submission_ms", "ack_ms", "max_gap_ms"):
                sample[key] = float(SYNC_ASYNC["async"][key]) * float(spell[i]) * factor
        write_doc(out / side / "mailbox-delivery.json", doc)
    options = {"alpha": 0.05, "factor": 1.10, "gate": "all", "paired": True, "looks": 1, "correction": "holm"}
    if strict is not None:
        options["strict"] = strict
    (out / "ab.json").write_text(json.dumps({
        "format": "perfsuite-ab/1", "seed": 3, "base": {"revision": "base", "commit": "0" * 40},
        "head": {"revision": "head", "commit": "1" * 40},
        "recipes": [{"recipe": "mailbox-delivery", "base": "base/mailbox-delivery.json",
                     "head": "head/mailbox-delivery.json"}],
        "options": options,
    }))
    return out


def test_loaded_timings_15x_slower_counts_equal_exit_0_and_the_first_line_says_not_gated(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _ab_dir(tmp_path)
    comparison = compare(out)
    assert comparison.exit_status == 0 and not comparison.regressions and comparison.outcome == "neutral"
    ack = next(c for c in comparison.changes if c.metric == "ack_ms")
    assert ack.ratio > 1.4 and not ack.gating  # reported as it is, never gating
    head = compare_headline(comparison)
    assert head.startswith("machine loaded (idle control "), head
    assert "): timings reported, not gated; gated on: bytes_written, fsyncs: no regression" in head
    assert cli.main(["compare", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("perfsuite compare: machine loaded (idle control ") and "not gated" in first
    assert json.loads(json.dumps(comparison.to_json()))["outcome"] == "neutral"


def test_loaded_with_fsyncs_doubled_is_a_regression(tmp_path: Path) -> None:
    comparison = compare(_ab_dir(tmp_path, head_fsyncs=2))
    assert comparison.exit_status == 1 and comparison.outcome == "regressed"
    assert [c.metric for c in comparison.regressions] == ["metrics.fsyncs"]
    assert compare_headline(comparison).startswith("machine loaded (idle control ")


def test_strict_keeps_the_paired_timing_gate_on_a_loaded_machine(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _ab_dir(tmp_path)
    strict = compare(out, strict=True)
    assert strict.exit_status == 1 and "ack_ms" in {c.metric for c in strict.regressions}
    assert not compare_headline(strict).startswith("machine loaded")
    assert cli.main(["compare", str(out), "--strict"]) == 1
    capsys.readouterr()
    # the pairing's own option (`perfsuite ab --strict` records it): the same verdict again later
    assert compare(_ab_dir(tmp_path / "recorded", strict=True)).exit_status == 1


def test_quiet_machine_still_gates_timings(tmp_path: Path) -> None:
    comparison = compare(_ab_dir(tmp_path, gap=5.3))
    assert comparison.exit_status == 1 and "ack_ms" in {c.metric for c in comparison.regressions}


def test_inconclusive_on_timings_alone_is_neutral_unless_strict(tmp_path: Path) -> None:
    """3 rounds cannot confirm 1.5x (the signed-rank test cannot reach p < 0.05): inconclusive, which fails only
    with strict; neutral otherwise, said in the first line."""
    out = _ab_dir(tmp_path, gap=5.3)
    for side in ("base", "head"):
        path = out / side / "mailbox-delivery.json"
        doc = json.loads(path.read_text())
        doc["modes"]["async"]["samples"] = doc["modes"]["async"]["samples"][:3]
        path.write_text(json.dumps(doc))
    loose, strict = compare(out), compare(out, strict=True)
    assert loose.inconclusive and loose.exit_status == 0 and loose.outcome == "neutral"
    assert "not failing" in compare_headline(loose)
    assert strict.exit_status == 3 and strict.outcome == "inconclusive"
