"""`perfsuite compare`: the CI gate on generated (seeded) results, never on timing.

Exit 1 names a planted 30% regression; two runs of one distribution exit 0; direction-aware; works when
sample counts differ; directories are matched by recipe; unusable input is one line and exit 2.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from perfsuite import cli
from perfsuite.report import Result, compare, compare_markdown, compare_results
from perfsuite.report._metrics import metric_direction

from .conftest import SYNC_ASYNC, perfsuite_cli


def _modes(**scale: float) -> dict[str, dict[str, Any]]:
    """The default sync/async shapes with ``mode__metric=factor`` scaled (e.g. ``async__ack_ms=1.3``)."""
    modes = {m: dict(shape) for m, shape in SYNC_ASYNC.items()}
    for key, factor in scale.items():
        mode, metric = key.split("__")
        modes[mode][metric] = modes[mode][metric] * factor
    return modes


def _one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("perfsuite: error: ") and "Traceback" not in err
    return lines[0]


def test_planted_30_percent_regression_exits_1_and_is_named(
    tmp_path: Path, docs: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    base = docs.write(tmp_path / "base.json", docs.make(seed=1))
    new = docs.write(tmp_path / "new.json", docs.make(seed=2, modes=_modes(async__ack_ms=1.3)))
    comparison = compare(base, new, timings="gate")  # two quiet separate runs, timings gated on request
    assert [(c.recipe, c.mode, c.metric) for c in comparison.regressions] == [("mailbox-delivery", "async", "ack_ms")]
    (change,) = comparison.regressions
    assert 1.2 < change.ratio < 1.4 and change.p_value < 0.05
    assert comparison.exit_status == 1
    assert cli.main(["compare", str(base), str(new), "--timings", "gate"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("perfsuite compare: 1 regression: mailbox-delivery/async ack_ms 1.")
    assert any("async" in line and "ack_ms" in line and "regressed" in line for line in out.splitlines())
    assert cli.main(["compare", str(base), str(new), "--markdown", "--timings", "gate"]) == 1
    md = capsys.readouterr().out
    assert md.startswith("### perfsuite compare: 1 regression: mailbox-delivery/async ack_ms 1.")
    assert "- **regressed** `mailbox-delivery` `async` `ack_ms`: " in md
    assert "| `mailbox-delivery` | `async` | `ack_ms` |" in md and "**regressed** |" in md


@pytest.mark.parametrize("seeds", [(1, 2), (3, 4), (5, 6), (7, 8)])
def test_two_runs_of_one_distribution_exit_0(tmp_path: Path, docs: Any, seeds: tuple[int, int]) -> None:
    base = Result(None, docs.make(seed=seeds[0], allocation=True))
    new = Result(None, docs.make(seed=seeds[1], allocation=True))
    comparison = compare_results([base], [new])
    assert comparison.exit_status == 0
    assert [c.label for c in comparison.changes if c.gating and c.status != "unchanged"] == []
    assert {"allocation.total_bytes", "phases_ms.commit", "metrics.bytes_written"} <= {
        c.metric for c in comparison.changes
    }


def test_different_sample_counts(docs: Any) -> None:
    base = Result(None, docs.make(seed=1, n=6))
    worse = Result(None, docs.make(seed=2, n=10, modes=_modes(sync__max_gap_ms=1.3)))
    same = Result(None, docs.make(seed=3, n=10))
    regressions = compare_results([base], [worse]).regressions
    assert [(c.mode, c.metric, c.base.n, c.new.n) for c in regressions] == [("sync", "max_gap_ms", 6, 10)]
    assert compare_results([base], [same]).exit_status == 0


def test_too_few_samples_cannot_change_and_say_so(docs: Any) -> None:
    comparison = compare_results(
        [Result(None, docs.make(seed=1, n=3))], [Result(None, docs.make(seed=2, n=3, modes=_modes(async__ack_ms=1.3)))],
        strict=True,
    )
    assert comparison.exit_status == 3  # strict: "cannot tell" is never a pass (default: neutral, exit 0)
    assert any("too few samples for p < 0.05 with 3 vs 3" in note for note in comparison.notes)
    (ack,) = [c for c in comparison.changes if (c.mode, c.metric) == ("async", "ack_ms")]
    assert ack.underpowered and ack.ratio > 1.2 and ack.status == "inconclusive" and ack.gating


def test_direction_aware(docs: Any) -> None:
    assert metric_direction("ack_ms") == "lower"
    assert metric_direction("lag_us.p99") == "lower"
    assert metric_direction("allocation.total_bytes") == "lower"
    assert metric_direction("metrics.bytes_written") == "lower"
    assert metric_direction("metrics.publications_per_s") == "higher"
    assert metric_direction("metrics.collected") is None
    faster = _modes(async__ack_ms=0.7)
    for shape in (*faster.values(),):
        shape["publications_per_s"] = 100.0
    base = docs.make(seed=1, modes=faster)
    for mode in base["modes"].values():
        for s in mode["samples"]:
            s["metrics"]["publications_per_s"] = 100.0 + s["index"]
    new = docs.make(seed=2, modes=_modes())  # ack 1/0.7 slower
    for mode in new["modes"].values():
        for s in mode["samples"]:
            s["metrics"]["publications_per_s"] = 60.0 + s["index"]  # throughput down 40%: a regression
    forward = compare_results([Result(None, base)], [Result(None, new)])
    assert {(c.mode, c.metric) for c in forward.regressions} == {
        ("sync", "metrics.publications_per_s"),
        ("async", "metrics.publications_per_s"),
        ("async", "ack_ms"),
    }
    backward = compare_results([Result(None, new)], [Result(None, base)])
    assert backward.exit_status == 0
    assert {(c.mode, c.metric) for c in backward.improvements} == {
        ("sync", "metrics.publications_per_s"),
        ("async", "metrics.publications_per_s"),
        ("async", "ack_ms"),
    }


def test_only_headline_metrics_gate(docs: Any) -> None:
    worse = compare_results(
        [Result(None, docs.make(seed=1))], [Result(None, docs.make(seed=2, modes=_modes(sync__max_gap_ms=1.3)))]
    )
    assert [c.label for c in worse.regressions] == ["mailbox-delivery/sync max_gap_ms"]
    info = {c.metric for c in worse.changes if c.status == "regressed" and not c.gating}
    assert "lag_us.p99" in info  # the lag moves with the gap: shown, not gated
    assert "`lag_us.p99` | " in compare_markdown(worse) and "regressed (info)" in compare_markdown(worse)


def test_the_idle_control_never_gates(docs: Any) -> None:
    base = Result(None, docs.make(seed=1, control_gap_ms=5.5))
    noisy = Result(None, docs.make(seed=2, control_gap_ms=9.0))
    comparison = compare_results([base], [noisy])
    (control,) = [c for c in comparison.changes if (c.mode, c.metric) == ("control", "max_gap_ms")]
    assert control.status == "regressed" and not control.gating
    assert comparison.exit_status == 0
    assert "regressed (info)" in compare_markdown(comparison)


def test_directories_are_matched_by_recipe(tmp_path: Path, docs: Any, capsys: pytest.CaptureFixture[str]) -> None:
    for side, modes in (("baseline", _modes()), ("local", _modes(sync__submission_ms=1.3))):
        docs.write(tmp_path / side / "mailbox-delivery-1.json", docs.make(seed=len(side), modes=modes))
        docs.write(tmp_path / side / "fsync-floor-1.json", docs.floor(seed=len(side) + 10))
        (tmp_path / side / "fsync-floor-1.pyperf.json").write_text("{}")  # exports are skipped
    comparison = compare(tmp_path / "baseline", tmp_path / "local", timings="gate")
    assert {c.recipe for c in comparison.changes} == {"mailbox-delivery", "fsync-floor"}
    assert [c.label for c in comparison.regressions] == ["mailbox-delivery/sync submission_ms"]
    # one file against a directory: that file's recipe only
    single = compare(tmp_path / "baseline" / "fsync-floor-1.json", tmp_path / "local")
    assert {c.recipe for c in single.changes} == {"fsync-floor"} and single.exit_status == 0
    assert cli.main(["compare", str(tmp_path / "baseline"), str(tmp_path / "local"), "--markdown",
                     "--timings", "gate"]) == 1
    assert "`mailbox-delivery` `sync` `submission_ms`" in capsys.readouterr().out


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, docs: Any, capsys: pytest.CaptureFixture[str]) -> None:
    good = docs.write(tmp_path / "good.json", docs.make())
    v2 = docs.make()
    v2["schema"] = 2
    wrong_version = docs.write(tmp_path / "v2" / "mailbox-delivery.json", v2)
    broken = docs.make()
    del broken["modes"]["sync"]["verdict"]
    invalid = docs.write(tmp_path / "invalid.json", broken)
    floor = docs.write(tmp_path / "floor" / "fsync-floor.json", docs.floor())
    both = tmp_path / "both"
    docs.write(both / "a.json", docs.make())
    docs.write(both / "b.json", docs.floor())
    only_one = tmp_path / "only-one"
    docs.write(only_one / "a.json", docs.make(seed=9))
    (tmp_path / "empty").mkdir()
    cases = [
        ([str(tmp_path / "missing.json"), str(good)], "missing.json: no such results file or directory"),
        ([str(good), str(wrong_version)], "not a perfsuite results file (schema 1)"),
        ([str(good), str(tmp_path / "v2")], "not a perfsuite results file (schema 1)"),
        ([str(good), str(invalid)], "results do not match the schema at modes/sync"),
        ([str(good), str(floor)], "have no recipe in common"),
        ([str(both), str(only_one), "--require-all"], "--require-all: recipe sets differ: fsync-floor only in"),
        ([str(good), str(tmp_path / "empty")], "no perfsuite results files in this directory"),
        ([str(good), str(good), "--factor", "0.9"], "--factor must be greater than 1"),
    ]
    for args, fragment in cases:
        code = cli.main(["compare", *args])
        line = _one_line_error(code, capsys.readouterr().err)
        assert fragment in line, (args, line)


def test_bad_input_from_the_real_command_line(tmp_path: Path, docs: Any) -> None:
    good = docs.write(tmp_path / "good.json", docs.make())
    proc: subprocess.CompletedProcess[str] = perfsuite_cli("compare", str(good), str(tmp_path / "nope"))
    line = _one_line_error(proc.returncode, proc.stderr)
    assert line == f"perfsuite: error: {tmp_path / 'nope'}: no such results file or directory"
    assert json.loads(good.read_text())["schema"] == 1


def _new_modes(docs: Any, **scale: float) -> dict[str, dict[str, Any]]:
    modes = {m: dict(shape) for m, shape in docs.new_modes.items()}
    for key, factor in scale.items():
        mode, metric = key.split("__")
        modes[mode][metric] = modes[mode][metric] * factor
    return modes


def test_a_longer_loop_stall_is_a_headline_regression(tmp_path: Path, docs: Any) -> None:
    """M9: the longest loop callback is gated like the max gap (the heartbeat's gap unchanged)."""
    base = docs.write(tmp_path / "base.json", docs.make(seed=1, modes=_new_modes(docs)))
    new = docs.write(tmp_path / "new.json", docs.make(seed=2, modes=_new_modes(docs, async__stall_ms=3.0)))
    comparison = compare(base, new, timings="gate")
    assert [(c.mode, c.metric) for c in comparison.regressions] == [("async", "stalls.longest_ms")]
    shown = {(c.mode, c.metric) for c in comparison.shown()}
    assert ("sync", "stalls.longest_ms") in shown  # a headline metric: shown even when unchanged


def test_a_reference_mode_is_compared_but_never_gates(tmp_path: Path, docs: Any) -> None:
    """Reference modes: the rejected design getting slower is not a regression of the product."""
    base = docs.write(tmp_path / "base.json", docs.make(seed=1, modes=_new_modes(docs)))
    slower = _new_modes(docs, **{"publication-floor__ack_ms": 1.5, "publication-floor__submission_ms": 1.5})
    new = docs.write(tmp_path / "new.json", docs.make(seed=2, modes=slower))
    comparison = compare(base, new)
    assert comparison.exit_status == 0
    ack = next(c for c in comparison.changes if c.mode == "publication-floor" and c.metric == "ack_ms")
    assert ack.status == "regressed" and not ack.gating
    assert ack.mode_label == "publication-floor (reference: the publication floor: raw os calls of one generation)"
    assert "publication-floor (reference: the publication floor" in compare_markdown(comparison)


def test_metrics_an_older_document_lacks_are_not_measured(tmp_path: Path, docs: Any) -> None:
    """An old baseline (no loop stalls, no fsync counts) against a new run: notes, never a comparison with 0."""
    base = docs.write(tmp_path / "base.json", docs.make(seed=1))
    modes = {m: shape for m, shape in _new_modes(docs).items() if m != "publication-floor"}
    new = docs.write(tmp_path / "new.json", docs.make(seed=2, modes=modes))
    comparison = compare(base, new)
    assert "mailbox-delivery/async: stalls.longest_ms not measured in " + str(base) in comparison.notes
    assert "mailbox-delivery/async: metrics.fsyncs not measured in " + str(base) in comparison.notes
    assert not any(c.metric.startswith("stalls.") or c.metric == "metrics.offload_bytes" for c in comparison.changes)
    assert "mailbox-delivery/async: metrics.offload_bytes not measured" not in " ".join(comparison.notes)
    assert comparison.exit_status == 0
