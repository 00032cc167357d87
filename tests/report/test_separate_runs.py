"""U: what a comparison of two SEPARATE runs may gate, proven on synthetic documents (never on
timing): costs gate exactly; timings are information, said in the first line, whatever they show; a paired
A/B (rounds interleaved in one run) sees a 2 ms block that a slow spell of the machine hides from two runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perfsuite import cli
from perfsuite.report import Result, compare, compare_headline, compare_results
from perfsuite.report._compare import SEPARATE_NOTE

from .conftest import SYNC_ASYNC, make_doc, write_doc

pytest.importorskip("scipy.stats")


def _modes(ack: float = 1.0, fsyncs: int = 5, alloc: int = 4_000_000) -> dict[str, dict[str, Any]]:
    modes = {m: {**shape, "metrics": {"fsyncs": fsyncs}, "alloc_bytes": alloc} for m, shape in SYNC_ASYNC.items()}
    for shape in modes.values():
        for key in ("submission_ms", "ack_ms", "max_gap_ms"):
            shape[key] = shape[key] * ack
    return modes


def _pair(tmp_path: Path, *, new_ack: float, new_fsyncs: int = 5, new_alloc: int = 4_000_000,
          gap: float = 8.9) -> tuple[Path, Path]:
    """A quiet BASE and a NEW measured while a CPU hog ran (every idle window at ``gap`` ms)."""
    base = write_doc(tmp_path / "base" / "mailbox-delivery.json",
                     make_doc(modes=_modes(), seed=1, allocation=True, control_gap_ms=5.3))
    new = write_doc(tmp_path / "new" / "mailbox-delivery.json",
                    make_doc(modes=_modes(new_ack, new_fsyncs, new_alloc), seed=2, allocation=True,
                             control_gap_ms=gap, epoch=1_795_100_000.0))
    return base, new


def test_unchanged_code_under_a_cpu_hog_is_no_regression_said_in_the_first_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's run: unchanged code on a loaded machine, sync ack 4.25x: the plugin's compare-fail exited 1."""
    base, new = _pair(tmp_path, new_ack=4.25)
    comparison = compare(base, new)
    assert comparison.exit_status == 0 and comparison.timing_note == SEPARATE_NOTE
    ack = next(c for c in comparison.changes if (c.mode, c.metric) == ("sync", "ack_ms"))
    assert ack.ratio > 4 and not ack.gating and ack.status == "regressed"  # shown as it is, as information
    assert compare_headline(comparison).startswith(f"no regression [{SEPARATE_NOTE}] [loaded machine: NEW ")
    assert cli.main(["compare", str(base), str(new)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("perfsuite compare: no regression [separate runs: timings are information")
    # the old rule (timings gated as if two runs were one) fails it: the false alarm it raised
    quiet_base, quiet_new = _pair(tmp_path / "q", new_ack=4.25, gap=5.3)
    assert compare(quiet_base, quiet_new, timings="gate").exit_status == 1
    # asked to gate timings, a loaded run still cannot: information again, and why, first
    gated = compare(base, new, timings="gate")
    assert gated.exit_status == 0 and gated.load_policy is not None
    assert compare_headline(gated).startswith("machine loaded (idle control NEW mailbox-delivery.json median ")
    strict = compare(base, new, timings="gate", strict=True)  # the rule before the loaded-runner policy
    assert strict.exit_status == 0 and strict.timing_note is not None and strict.timing_note.startswith("a loaded run")


def test_run_twice_then_compare_is_never_inconclusive_on_timings(tmp_path: Path) -> None:
    """The issue's `run` twice then `compare` exited 3: 2.12x with too few samples to tell."""
    base = write_doc(tmp_path / "b.json", make_doc(modes=_modes(), seed=1, n=2))
    new = write_doc(tmp_path / "n.json", make_doc(modes=_modes(2.12), seed=2, n=2, control_gap_ms=8.9))
    comparison = compare(base, new)
    assert comparison.exit_status == 0 and not comparison.inconclusive


@pytest.mark.parametrize(("what", "kwargs", "metric"), [
    ("an extra fsync", {"new_fsyncs": 10}, "metrics.fsyncs"),  # 5 -> 10 per publication: 2x
    ("+1 MB allocated", {"new_alloc": 4_000_000 + (1 << 20)}, "allocation.total_bytes"),
])
def test_a_planted_cost_fails_two_separate_runs_under_the_same_hog(
        tmp_path: Path, what: str, kwargs: dict[str, int], metric: str) -> None:
    base, new = _pair(tmp_path, new_ack=4.25, **kwargs)
    comparison = compare(base, new)
    assert comparison.exit_status == 1, what
    assert metric in {c.metric for c in comparison.regressions}
    assert all(c.kind == "cost" for c in comparison.regressions)  # the 4.25x timings are information
    assert compare_headline(comparison).split(":")[0].endswith("regressions")  # sync and async both pay it


def _paired_docs(tmp_path: Path, block_ms: float) -> Path:
    """16 interleaved rounds of a loaded machine: round i of both sides slowed by the same factor (0.5-3x),
    HEAD's max gap ``block_ms`` longer in every round (a loop block); written as `perfsuite ab` writes them."""
    rng = np.random.default_rng(5)
    slow = rng.lognormal(0.0, 0.6, size=16)
    out = tmp_path / "ab"
    pairs = []
    for side, extra, seed in (("base", 0.0, 1), ("head", block_ms, 2)):
        doc = make_doc(modes={"async": dict(SYNC_ASYNC["async"])}, n=16, seed=seed, control_gap_ms=8.9)
        for i, sample in enumerate(doc["modes"]["async"]["samples"]):
            sample["max_gap_ms"] = 7.0 * float(slow[i]) + extra
        pairs.append(write_doc(out / side / "mailbox-delivery.json", doc))
    (out / "ab.json").write_text(json.dumps({
        "format": "perfsuite-ab/1", "seed": 5, "base": {"revision": "base", "commit": "0" * 40},
        "head": {"revision": "head", "commit": "1" * 40},
        "recipes": [{"recipe": "mailbox-delivery", "base": "base/mailbox-delivery.json",
                     "head": "head/mailbox-delivery.json"}],
        "options": {"alpha": 0.05, "factor": 1.10, "gate": "all", "paired": True, "looks": 1, "correction": "holm"},
    }))
    return out


def test_a_2ms_loop_block_fails_the_paired_path_and_separate_runs_cannot_see_it(tmp_path: Path) -> None:
    out = _paired_docs(tmp_path, 2.0)
    assert compare(out).exit_status == 0  # loaded: timings reported, not gated, unless strict (the counts gate)
    paired = compare(out, strict=True)
    assert paired.exit_status == 1 and paired.timing_note is None  # loaded, but paired and strict: timings gate
    (gap,) = [c for c in paired.regressions if c.metric == "max_gap_ms"]
    assert gap.test == "signed-rank" and gap.mode == "async"
    assert "[loaded machine: BASE " in compare_headline(paired)  # and it says the machine was loaded
    separate = compare(out / "base", out / "head")
    assert separate.exit_status == 0 and separate.timing_note == SEPARATE_NOTE
    # even gated on request, two unpaired sets of these samples could not tell (beyond 1.1x or not)
    unpaired = compare_results([Result(None, json.loads((out / "base" / "mailbox-delivery.json").read_text()))],
                               [Result(None, json.loads((out / "head" / "mailbox-delivery.json").read_text()))])
    (u,) = [c for c in unpaired.changes if (c.mode, c.metric) == ("async", "max_gap_ms")]
    assert u.test == "mann-whitney" and u.status != "regressed"
    assert compare(_paired_docs(tmp_path / "aa", 0.0), strict=True).exit_status == 0  # the rounds without the block
