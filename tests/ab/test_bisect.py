"""`perfsuite bisect GOOD BAD` (U): on a user's repository of eight commits with an extra fsync
planted at the fifth, the search names the fifth, with its steps, their verdicts and time; the search itself
(inconclusive steps stop it, an unchanged BAD has nothing to bisect) with the A/B replaced by a stub."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from perfsuite.ab import AbResult, Revision, bisect
from perfsuite.errors import PerfsuiteError
from perfsuite.report import Comparison, MetricChange, Stat

from .userrepo import git, history, perfsuite

TINY = ["--samples", "2", "--warmup", "0", "--gate", "costs"]


def test_bisect_names_the_fifth_of_eight_commits(tmp_path: Path) -> None:
    repo = tmp_path / "myruntime"
    commits = history(repo, commits=8, plant_at=5)
    out = tmp_path / "bisect"
    proc = perfsuite(repo, "bisect", commits[0], "HEAD", *TINY, "--output-dir", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith(f"perfsuite bisect: first regressed commit {commits[4][:12]} "), first
    assert '"plant: commit fsyncs twice" (4 of 7 after GOOD)' in first
    assert "[tracked: commit/commit metrics.fsyncs]" in first
    document = json.loads((out / "bisect.json").read_text())
    assert document["status"] == "found" and document["first_bad"] == commits[4] and document["exit_status"] == 0
    assert document["last_good"] == commits[3] and document["candidates"] == 1
    steps = document["steps"]
    # BAD first, then the binary search over the seven commits after GOOD: 4th, 6th (regressed), 5th
    assert [s["commit"] for s in steps] == [commits[7], commits[3], commits[5], commits[4]]
    assert [s["verdict"] for s in steps] == ["regressed", "unchanged", "regressed", "regressed"]
    assert [s["ab_exit_status"] for s in steps] == [1, 0, 1, 1]
    assert all(s["seconds"] > 0 and Path(s["directory"], "ab.json").is_file() for s in steps)
    assert steps[0]["evidence"] == ["commit/commit metrics.fsyncs 1 -> 2 (2.00x, tolerance 1): regressed"]
    # every step printed as it ends (stderr) and in the table with its time (stdout)
    assert proc.stderr.count("perfsuite: step ") == 4 and "at most 3 more steps" in proc.stderr
    assert "bisect: 4 steps over 7 commits" in proc.stdout
    assert git(repo, "worktree", "list").count("\n") == 0


def test_bisect_without_a_regression_at_bad_has_nothing_to_bisect(tmp_path: Path) -> None:
    repo = tmp_path / "myruntime"
    commits = history(repo, commits=3, plant_at=0)
    proc = perfsuite(repo, "bisect", commits[0], "HEAD", *TINY, "--output-dir", str(tmp_path / "out"),
                     "--format", "json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    document = json.loads(proc.stdout)
    assert document["status"] == "no-regression" and len(document["steps"]) == 1
    bad = perfsuite(repo, "bisect", "HEAD", commits[0], *TINY)  # GOOD after BAD
    assert bad.returncode == 2 and "is not an ancestor of BAD" in bad.stderr and bad.stderr.count("\n") == 1


# -- the search itself, the A/B stubbed -----------------------------------------------------------------


def _change(status: str, metric: str = "max_gap_ms") -> MetricChange:
    stat = Stat(n=16, min=1.0, median=1.0, max=1.0)
    ratio = {"regressed": 1.5, "inconclusive": 1.4, "unchanged": 1.0}[status]
    return MetricChange("r", "m", metric, "lower", stat, stat, ratio, 0.001 if status == "regressed" else 0.2,
                        status, True, False, test="signed-rank", p_adjusted=0.004)


def _stub(verdicts: dict[str, str], calls: list[str]) -> Any:
    def measure(good: str, commit: str, recipes: Any, *, output_dir: Path, cwd: Path, **_: Any) -> AbResult:
        calls.append(commit)
        comparison = Comparison("BASE", "HEAD", 0.05, 1.1, (_change(verdicts[commit]),), ())
        rev = Revision("x", commit, False, cwd, True)
        return AbResult(output_dir, output_dir / "ab.json", rev, rev, comparison, 0.01, 0)

    return measure


def _repo(tmp_path: Path, n: int) -> tuple[Path, list[str]]:
    repo = tmp_path / "myruntime"
    return repo, history(repo, commits=n, plant_at=0)


def test_an_inconclusive_step_stops_the_search_with_the_range_so_far(tmp_path: Path) -> None:
    repo, commits = _repo(tmp_path, 8)
    verdicts = dict.fromkeys(commits, "regressed")
    verdicts.update({commits[3]: "unchanged", commits[5]: "inconclusive"})
    calls: list[str] = []
    result = bisect(commits[0], commits[-1], [], output_dir=tmp_path / "out", cwd=repo,
                    measure=_stub(verdicts, calls))
    assert result.status == "inconclusive" and result.exit_status == 3 and result.first_bad is None
    assert calls == [commits[7], commits[3], commits[5]]  # nothing measured after the inconclusive step
    assert (result.last_good, result.earliest_bad, result.candidates) == (commits[3], commits[7], 4)
    assert result.metrics == ("r/m max_gap_ms",)
    assert result.steps[-1].evidence == ("r/m max_gap_ms 1.40x, p 0.004: inconclusive",)
    assert json.loads((tmp_path / "out" / "bisect.json").read_text())["status"] == "inconclusive"
    # BAD itself only inconclusive: one step, nothing guessed
    calls.clear()
    result = bisect(commits[0], commits[-1], [], output_dir=tmp_path / "bad", cwd=repo,
                    measure=_stub({commits[-1]: "inconclusive"}, calls))
    assert (result.status, calls, result.metrics) == ("inconclusive", [commits[-1]], ())


def test_the_search_finds_every_position_and_follows_only_the_tracked_metric(tmp_path: Path) -> None:
    repo, commits = _repo(tmp_path, 6)
    for first_bad in range(1, 6):
        verdicts = {c: ("regressed" if i >= first_bad else "unchanged") for i, c in enumerate(commits)}
        calls: list[str] = []
        result = bisect(commits[0], commits[-1], [], output_dir=tmp_path / f"out{first_bad}", cwd=repo,
                        measure=_stub(verdicts, calls))
        assert result.status == "found" and result.first_bad == commits[first_bad], first_bad
        assert len(calls) == len(set(calls)) <= 1 + 3  # BAD, then at most ceil(log2(5)) midpoints
    # a metric BAD did not regress in is "no regression" for that metric
    result = bisect(commits[0], commits[-1], [], output_dir=tmp_path / "other", cwd=repo, metrics=["metrics.*"],
                    measure=_stub(dict.fromkeys(commits, "regressed"), []))
    assert result.status == "no-regression" and result.exit_status == 1
    assert result.steps[0].evidence == ("also regressed (not tracked): r/m max_gap_ms 1.50x, p 0.004: regressed",)
    with pytest.raises(PerfsuiteError, match="same commit"):
        bisect("HEAD", commits[-1], [], output_dir=tmp_path / "same", cwd=repo, measure=_stub({}, []))


# -- the loaded-runner policy at each step, and --strict ------------------------------------------------

LOADED = ("machine loaded (idle control BASE x.json: median 8.9 ms > 6 ms): timings reported, not gated; gated on: "
          "fsyncs")


def _loaded_stub(verdicts: dict[str, str], loaded: set[str], seen: list[dict[str, Any]]) -> Any:
    """The A/B stubbed as `perfsuite ab` decides on a loaded machine (the commits of ``loaded``): the timing is
    reported and not gated (its status as the test found it); ``fsyncs`` is a count and gates either way. Each
    call's options are kept in ``seen``."""
    def measure(good: str, commit: str, recipes: Any, *, output_dir: Path, cwd: Path, **options: Any) -> AbResult:
        seen.append({"commit": commit, **options})
        status = verdicts[commit]
        held = commit in loaded and not options.get("strict")
        timing = _change(status)
        if held:  # the loaded-runner policy: a timing that cannot tell the load from a regression gates nothing
            timing = MetricChange("r", "m", "max_gap_ms", "lower", timing.base, timing.new, timing.ratio,
                                  timing.p_value, "unchanged" if status == "inconclusive" else status, False, False,
                                  test="signed-rank", p_adjusted=timing.p_adjusted)
        stat = Stat(n=3, min=1.0, median=1.0, max=1.0)
        fsyncs = MetricChange("r", "m", "metrics.fsyncs", "lower", stat, stat, 1.0, None, "unchanged", True, False,
                              kind="cost", tolerance=1.0)
        comparison = Comparison("BASE", "HEAD", 0.05, 1.1, (timing, fsyncs), (), strict=bool(options.get("strict")),
                                load_policy=LOADED if held else None)
        rev = Revision("x", commit, False, cwd, True)
        return AbResult(output_dir, output_dir / "ab.json", rev, rev, comparison, 0.01, 0)

    return measure


def test_a_loaded_step_whose_tracked_timing_did_not_gate_stops_the_search(tmp_path: Path) -> None:
    """Its A/B is neutral (exit 0), but the search cannot tell regressed from unchanged there: not a guess
    that sends it the wrong way (before the policy reached bisect, such a step read as unchanged)."""
    repo, commits = _repo(tmp_path, 8)
    verdicts = dict.fromkeys(commits, "regressed")
    seen: list[dict[str, Any]] = []
    result = bisect(commits[0], commits[-1], [], output_dir=tmp_path / "out", cwd=repo,
                    measure=_loaded_stub(verdicts, {commits[3]}, seen))
    assert [s["commit"] for s in seen] == [commits[7], commits[3]]  # nothing measured after the loaded step
    assert all(s["strict"] is False for s in seen)
    assert result.status == "inconclusive" and result.exit_status == 3
    assert (result.last_good, result.earliest_bad, result.candidates) == (commits[0], commits[7], 7)
    step = result.steps[-1]
    assert (step.verdict, step.exit_status) == ("inconclusive", 0)  # the A/B itself was neutral
    assert step.evidence == ("r/m max_gap_ms 1.50x: not gated (machine loaded; --strict gates it)",)
    document = json.loads((tmp_path / "out" / "bisect.json").read_text())
    assert document["status"] == "inconclusive" and document["strict"] is False
    # a tracked count decides whatever the load: the search goes on through loaded steps
    fsyncs = bisect(commits[0], commits[-1], [], output_dir=tmp_path / "counts", cwd=repo, metrics=["metrics.fsyncs"],
                    measure=_loaded_stub(dict.fromkeys(commits, "unchanged"), set(commits), []))
    assert fsyncs.status == "no-regression" and fsyncs.steps[0].verdict == "unchanged"


def test_a_loaded_bad_without_a_count_regression_is_inconclusive_not_no_regression(tmp_path: Path) -> None:
    repo, commits = _repo(tmp_path, 4)
    result = bisect(commits[0], commits[-1], [], output_dir=tmp_path / "out", cwd=repo,
                    measure=_loaded_stub(dict.fromkeys(commits, "regressed"), set(commits), []))
    assert (result.status, result.exit_status, len(result.steps), result.metrics) == ("inconclusive", 3, 1, ())
    assert result.steps[0].evidence == ("r/m max_gap_ms 1.50x: not gated (machine loaded; --strict gates it)",)


def test_strict_gives_every_step_the_paired_timing_gate_and_is_recorded(tmp_path: Path) -> None:
    """`bisect --strict`: every step's A/B as `perfsuite ab --strict`, so loaded steps are decided by their paired
    test and the search finds the commit; an inconclusive step still stops it (a search is not a gate)."""
    repo, commits = _repo(tmp_path, 8)
    verdicts = {c: ("regressed" if i >= 5 else "unchanged") for i, c in enumerate(commits)}
    seen: list[dict[str, Any]] = []
    result = bisect(commits[0], commits[-1], [], output_dir=tmp_path / "out", cwd=repo, strict=True,
                    measure=_loaded_stub(verdicts, set(commits), seen))
    assert result.status == "found" and result.first_bad == commits[5] and result.strict
    assert seen and all(s["strict"] is True for s in seen)
    assert json.loads((tmp_path / "out" / "bisect.json").read_text())["strict"] is True
    verdicts[commits[3]] = "inconclusive"
    stopped = bisect(commits[0], commits[-1], [], output_dir=tmp_path / "stop", cwd=repo, strict=True,
                     measure=_loaded_stub(verdicts, set(commits), []))
    assert stopped.status == "inconclusive" and stopped.exit_status == 3
    assert stopped.steps[-1].evidence == ("r/m max_gap_ms 1.40x, p 0.004: inconclusive",)


def test_the_command_passes_strict_to_every_step(tmp_path: Path) -> None:
    """`perfsuite bisect --strict` end to end: each step's pairing records it, as `perfsuite ab --strict` does."""
    repo = tmp_path / "myruntime"
    commits = history(repo, commits=3, plant_at=3)
    out = tmp_path / "bisect"
    proc = perfsuite(repo, "bisect", commits[0], "HEAD", *TINY, "--strict", "--output-dir", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    document = json.loads((out / "bisect.json").read_text())
    assert document["strict"] is True and document["first_bad"] == commits[2]
    pairings = [json.loads(Path(s["directory"], "ab.json").read_text()) for s in document["steps"]]
    assert len(pairings) == 2 and all(p["options"]["strict"] is True for p in pairings)
    assert "--strict" in perfsuite(repo, "bisect", "--help").stdout
