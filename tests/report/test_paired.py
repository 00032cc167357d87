"""The CI gate (SPEC 8): a revision against itself must pass the gate, and a real change must still fail it.

Measured on this machine, the first gate failed an identical revision in
about 4 of 10 runs: each of some 8 gating headlines per recipe was tested at p < 0.05 on its own, the two
revisions' samples were compared as two unrelated sets although each round ran them back to back, and a
headline beyond the factor but not significant stayed "inconclusive" however little had been measured.
Each test pins one part of the fix on generated (seeded) results, never on timing:

* rounds are paired: a pairing written by ``perfsuite ab`` compares round ``i`` of BASE with round ``i`` of
  HEAD (the signed-rank test on log ratios), so a shift smaller than the machine's drift between rounds is
  seen; two unrelated sets cannot see it;
* Holm's step-down over a comparison's gating timing headlines: a p-value that is small only because
  eight headlines were tried is not a regression;
* each of a sequential A/B's looks tests at ``alpha / looks``; the verdict is read back from the pairing.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perfsuite.report import compare, compare_results
from perfsuite.report._change import holm, timing_change
from perfsuite.report._load import Result
from perfsuite.report._power import paired_detectable_ratio, paired_ratio, signed_rank_p

TIMINGS = ("submission_ms", "ack_ms", "max_gap_ms", "stalls.longest_ms")


def _drifting(docs: Any, n: int, seed: int) -> dict[str, Any]:
    """A BASE document whose rounds drift a lot (lognormal sigma 0.3: a noisy shared runner)."""
    return docs.make(n=n, seed=seed, noise=0.3)


def _shifted(base: dict[str, Any], factor: float, *, mode: str = "async", metric: str = "ack_ms",
             seed: int = 0, jitter: float = 0.01) -> dict[str, Any]:
    """HEAD: BASE's rounds, ``metric`` of ``mode`` times ``factor`` (and a little jitter of its own)."""
    rng = np.random.default_rng(seed)
    head = copy.deepcopy(base)
    for body_mode, body in head["modes"].items():
        for sample in body["samples"]:
            for key in TIMINGS[:3]:
                scale = factor if (body_mode, key) == (mode, metric) else 1.0
                sample[key] = float(sample[key]) * scale * float(rng.lognormal(0.0, jitter))
    return head


def _pairing(tmp_path: Path, docs: Any, base: dict[str, Any], head: dict[str, Any],
             options: dict[str, Any] | None) -> Path:
    folder = tmp_path / "ab"
    docs.write(folder / "base" / "mailbox-delivery-1.json", base)
    docs.write(folder / "head" / "mailbox-delivery-1.json", head)
    data: dict[str, Any] = {"format": "perfsuite-ab/1", "base": {"revision": "main", "commit": "b" * 40},
                            "head": {"revision": "working tree", "commit": "h" * 40},
                            "recipes": [{"recipe": "mailbox-delivery", "base": "base/mailbox-delivery-1.json",
                                         "head": "head/mailbox-delivery-1.json"}]}
    if options is not None:
        data["options"] = options
    (folder / "ab.json").write_text(json.dumps(data))
    return folder


def _change(comparison: Any, mode: str, metric: str) -> Any:
    return next(c for c in comparison.changes if c.mode == mode and c.metric == metric)


PAIRED = {"alpha": 0.05, "factor": 1.1, "gate": "all", "paired": True, "looks": 1, "correction": "holm"}


def test_paired_rounds_see_a_shift_smaller_than_the_drift_between_rounds(tmp_path: Path, docs: Any) -> None:
    base = _drifting(docs, 16, seed=3)
    head = _shifted(base, 1.15, seed=4)  # +15% on the async ack, round by round; drift between rounds ~30%
    unpaired = compare_results([Result(None, base)], [Result(None, head)])
    assert _change(unpaired, "async", "ack_ms").status != "regressed"  # two unrelated sets cannot tell
    paired = compare(_pairing(tmp_path, docs, base, head, PAIRED))
    ack = _change(paired, "async", "ack_ms")
    assert ack.test == "signed-rank" and ack.status == "regressed" and paired.exit_status == 1
    assert ack.ratio == pytest.approx(1.15, rel=0.02) and ack.p_adjusted is not None
    assert [c.label for c in paired.regressions] == ["mailbox-delivery/async ack_ms"]  # nothing else named
    assert "signed-rank on paired rounds" in _rule_text(paired)


def _rule_text(comparison: Any) -> str:
    from perfsuite.report import compare_markdown

    return compare_markdown(comparison)


def test_a_pairing_written_before_rounds_were_paired_keeps_its_verdict(tmp_path: Path, docs: Any) -> None:
    base = _drifting(docs, 16, seed=3)
    head = _shifted(base, 1.15, seed=4)
    old = compare(_pairing(tmp_path, docs, base, head, {"alpha": 0.05, "factor": 1.1, "gate": "all"}))
    assert {c.test for c in old.changes if c.kind == "timing"} == {"mann-whitney"}
    assert old.correction == "none" and old.looks == 1


def test_rounds_that_do_not_match_are_compared_unpaired_and_said_so(tmp_path: Path, docs: Any) -> None:
    base = _drifting(docs, 8, seed=5)
    head = _shifted(base, 1.0, seed=6)
    head["modes"]["async"]["samples"].pop()  # a round missing on one side: no pairs to trust
    comparison = compare(_pairing(tmp_path, docs, base, head, PAIRED))
    assert _change(comparison, "async", "ack_ms").test == "mann-whitney"
    assert _change(comparison, "sync", "ack_ms").test == "signed-rank"
    assert any("async: the two sides do not hold the same rounds" in n for n in comparison.notes)


def test_holm_keeps_a_headline_that_is_significant_only_alone_from_failing_the_gate() -> None:
    rng = np.random.default_rng(7)
    base = rng.lognormal(np.log(6.0), 0.2, 8)
    # 7 of 8 rounds slower by 10-25%, the smallest-ranked one faster: signed-rank p = 4 / 256 alone
    d = np.array([-0.01, 0.12, 0.14, 0.16, 0.18, 0.2, 0.22, 0.24])
    shifted = timing_change("r", "async", "ack_ms", base, base * np.exp(d), 0.05, 1.1, paired=True)
    assert shifted.status == "regressed" and shifted.p_value == pytest.approx(4 / 256)
    quiet = [timing_change("r", mode, metric, base, base * np.exp(rng.normal(0, 0.01, 8)), 0.05, 1.1, paired=True)
             for mode in ("sync", "async") for metric in TIMINGS if (mode, metric) != ("async", "ack_ms")]
    adjusted = holm([shifted, *quiet], 0.05)
    assert adjusted[0].p_adjusted == pytest.approx(8 * 4 / 256) and adjusted[0].status == "inconclusive"
    assert all(c.p_adjusted is not None and c.status == "unchanged" for c in adjusted[1:])
    alone = holm([shifted], 0.05)  # a family of one: the same p, the same verdict
    assert alone[0].status == "regressed"


def test_holm_adjusts_only_the_gating_timing_headlines() -> None:
    base = np.linspace(5.0, 6.5, 8)
    info = timing_change("r", "async", "lag_us.p99", base, base * 1.3, 0.05, 1.1, paired=True)
    cost_like = timing_change("r", "async", "metrics.bytes_stored", base, base, 0.05, 1.1, paired=True)
    out = holm([info, cost_like], 0.05)
    assert out[0].p_adjusted is None and out[1].p_adjusted is None


def test_each_look_tests_at_alpha_over_the_looks(tmp_path: Path, docs: Any) -> None:
    base = _drifting(docs, 16, seed=3)
    head = _shifted(base, 1.15, seed=4)
    p = _change(compare(_pairing(tmp_path, docs, base, head, PAIRED)), "async", "ack_ms").p_adjusted
    assert p is not None and 0.05 / 1000 < p < 0.05  # significant at 0.05, not at 0.05 / 1000
    many = compare(_pairing(tmp_path / "many", docs, base, head, {**PAIRED, "looks": 1000}), strict=True)
    ack = _change(many, "async", "ack_ms")
    assert ack.status == "inconclusive" and many.exit_status == 3 and many.level == pytest.approx(0.05 / 1000)
    assert "over 1000 looks" in _rule_text(many)


def test_the_paired_ratio_and_test_agree_on_log_ratios() -> None:
    base = [4.0, 5.0, 8.0, 6.0]
    assert paired_ratio(base, [x * 1.25 for x in base]) == pytest.approx(1.25)
    assert paired_ratio(base, [0.0, 1.0, 1.0, 1.0]) is None  # a value that is not positive: no log ratio
    assert paired_ratio(base, base[:3]) is None  # not one value per round each
    assert signed_rank_p([0.0, 0.0, 0.0]) == (1.0, 0.0)
    p, lean = signed_rank_p([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    assert p == pytest.approx(2 / 64) and lean > 0


@pytest.mark.parametrize("higher_is_better", [False, True])
def test_the_paired_detectable_ratio_is_exactly_where_the_test_starts_to_succeed(higher_is_better: bool) -> None:
    rng = np.random.default_rng(11)
    base = rng.lognormal(np.log(6.0), 0.3, 16)
    new = base * rng.lognormal(0.0, 0.1, 16)
    r = paired_detectable_ratio(base, new, 0.01, higher_is_better=higher_is_better)
    assert r is not None and r > 1.0
    d = np.log(new / base)
    centred = d - np.log(paired_ratio(base, new) or 1.0)
    sign = -1.0 if higher_is_better else 1.0
    p_at, lean_at = signed_rank_p(centred + sign * np.log(r))
    p_below, _ = signed_rank_p(centred + sign * np.log(r) * 0.98)
    assert p_at < 0.01 and sign * lean_at > 0 and p_below >= 0.01
    assert paired_detectable_ratio(base[:6], new[:6], 0.01) is None  # 6 rounds: p >= 2 / 64 whatever the shift


def test_the_json_output_says_which_test_and_which_adjusted_p_decided(
    tmp_path: Path, docs: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from importlib import resources

    import jsonschema

    from perfsuite import cli

    base = _drifting(docs, 16, seed=3)
    folder = _pairing(tmp_path, docs, base, _shifted(base, 1.15, seed=4), {**PAIRED, "looks": 2})
    assert cli.main(["compare", str(folder), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    schema = json.loads(resources.files("perfsuite.cli").joinpath("output.schema.json").read_text())
    jsonschema.validate(data, schema)
    assert (data["looks"], data["correction"], data["level"]) == (2, "holm", 0.025)
    ack = next(c for c in data["changes"] if (c["mode"], c["metric"]) == ("async", "ack_ms"))
    assert ack["test"] == "signed-rank" and ack["p_adjusted"] >= ack["p_value"] and ack["status"] == "regressed"
