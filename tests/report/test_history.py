"""`perfsuite history`: change points over a generated series of 20 results, named by commit."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perfsuite import cli
from perfsuite.report import history
from perfsuite.report._history import detect_steps

from .conftest import SYNC_ASYNC

STEP_AT = 12


def _commit(i: int) -> str:
    return f"{i:02d}{'5eed' * 9}ab"


def _series(root: Path, docs: Any, *, step: float = 1.0, n: int = 20) -> list[str]:
    """``n`` mailbox-delivery runs (one a day, file names shuffled), async ack x ``step`` from run STEP_AT."""
    names = [f"run-{k:03d}.json" for k in range(n)]
    random.Random(4).shuffle(names)  # the order comes from the documents, not the file names
    commits = []
    for i in range(n):
        modes = {m: dict(shape) for m, shape in SYNC_ASYNC.items()}
        if i >= STEP_AT:
            modes["async"]["ack_ms"] *= step
        commits.append(_commit(i))
        doc = docs.make(
            modes=modes,
            seed=100 + i,
            commit=commits[-1],
            date=f"2026-10-{i + 1:02d}T09:00:00+00:00",
            epoch=1_790_000_000.0 + i * 86_400,
        )
        docs.write(root / names[i], doc)
    return commits


def test_finds_a_planted_step_and_names_its_commit(
    tmp_path: Path, docs: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    commits = _series(tmp_path, docs, step=1.3)
    hist = history(tmp_path)
    assert hist.runs == 20
    (step,) = hist.steps
    assert (step.recipe, step.mode, step.metric, step.index) == ("mailbox-delivery", "async", "ack_ms", STEP_AT)
    assert step.commit == commits[STEP_AT] and step.previous_commit == commits[STEP_AT - 1]
    assert step.date.startswith("2026-10-13")
    assert 1.25 < step.ratio < 1.35 and step.kind == "regression"
    assert 105 < step.before < 115 and 137 < step.after < 150
    assert cli.main(["history", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if "ack_ms" in ln]
    assert commits[STEP_AT][:7] in line and commits[STEP_AT - 1][:7] in line and "regression" in line
    assert "1 step(s) over 20 run(s)" in out


def test_no_step_in_a_flat_series(tmp_path: Path, docs: Any) -> None:
    _series(tmp_path, docs, step=1.0)
    hist = history(tmp_path)
    assert hist.steps == ()
    assert {s.metric for s in hist.series} >= {"max_gap_ms", "submission_ms", "ack_ms", "lag_us.p99"}
    assert all(len(s.points) == 20 for s in hist.series)


def test_improvements_are_steps_too(tmp_path: Path, docs: Any) -> None:
    _series(tmp_path, docs, step=0.7)
    (step,) = history(tmp_path, metrics=["ack_ms"]).steps
    assert step.index == STEP_AT and step.kind == "improvement"


def test_detect_steps_on_plain_series() -> None:
    rng = np.random.default_rng(0)
    flat = 100 * rng.lognormal(0, 0.03, 30)
    assert detect_steps(flat) == []
    two = flat.copy()
    two[10:] *= 1.5
    two[22:] /= 1.5
    assert detect_steps(two) == [10, 22]
    assert detect_steps([5.0] * 10) == []  # a constant series has nothing to detect
    assert detect_steps([1.0, 2.0, 3.0]) == []  # too short for two segments


def _run(root: Path, docs: Any, i: int, *, ack: float = 1.0, host: str = "ci-runner", cpu: str | None = None) -> str:
    """One mailbox-delivery run ``i`` (a day apart) with async ack x ``ack``, on ``host``; returns its commit."""
    modes = {m: dict(shape) for m, shape in SYNC_ASYNC.items()}
    modes["async"]["ack_ms"] *= ack
    doc = docs.make(modes=modes, seed=300 + i, commit=_commit(i), hostname=host,
                    date=f"2026-10-{i + 1:02d}T09:{len(host):02d}:00+00:00", epoch=1_790_000_000.0 + i * 86_400)
    if cpu is not None:
        doc["environment"]["cpu"]["model"] = cpu
    docs.write(root / host / f"run-{i:02d}.json", doc)
    return _commit(i)


def test_a_3x_jump_in_a_two_run_history_is_a_step(tmp_path: Path, docs: Any) -> None:
    """History's steps: "a planted 3x jump in a two-run history showed steps 0" (PELT needs segments of two runs)."""
    _run(tmp_path, docs, 0)
    commit = _run(tmp_path, docs, 1, ack=3.0)
    hist = history(tmp_path)
    (step,) = [s for s in hist.steps if (s.mode, s.metric) == ("async", "ack_ms")]
    assert (step.index, step.commit, step.previous_commit) == (1, commit, _commit(0))
    assert 2.7 < step.ratio < 3.3 and step.kind == "regression"
    assert {(s.mode, s.metric) for s in hist.steps} <= {("async", "ack_ms"), ("async", "lag_us.p99")}


def test_a_jump_at_the_newest_of_four_runs_is_a_step(tmp_path: Path, docs: Any) -> None:
    for i in range(3):
        _run(tmp_path, docs, i)
    commit = _run(tmp_path, docs, 3, ack=3.0)
    (step,) = [s for s in history(tmp_path, metrics=["ack_ms"]).steps]
    assert (step.mode, step.index, step.commit) == ("async", 3, commit)


def test_a_short_history_ignores_a_spike_that_does_not_last(tmp_path: Path, docs: Any) -> None:
    _run(tmp_path, docs, 0)
    _run(tmp_path, docs, 1, ack=3.0)
    _run(tmp_path, docs, 2)
    assert history(tmp_path, metrics=["ack_ms"]).steps == ()


def test_series_never_mix_machines(tmp_path: Path, docs: Any) -> None:
    """History per machine: it once ignored the machine. Two machines, one 1.6x slower, runs interleaved: no step."""
    for i in range(12):
        _run(tmp_path, docs, i, host="fast-box")
        _run(tmp_path, docs, i, ack=1.6, host="slow-box", cpu="Slower CPU")
    hist = history(tmp_path, metrics=["ack_ms"])
    assert hist.steps == ()
    series = [s for s in hist.series if (s.mode, s.metric) == ("async", "ack_ms")]
    assert len(series) == 2 and all(len(s.points) == 12 for s in series)
    assert len({s.machine for s in series}) == 2
    hosts = {m.key: m.host for m in hist.machines}
    levels = {hosts[s.machine]: float(np.median([p.median for p in s.points])) for s in series}
    assert 1.5 < levels["slow-box"] / levels["fast-box"] < 1.7


def test_a_step_on_one_machine_only_names_that_machine(tmp_path: Path, docs: Any, capsys: Any) -> None:
    for i in range(10):
        _run(tmp_path, docs, i, ack=1.3 if i >= 5 else 1.0, host="fast-box")
        _run(tmp_path, docs, i, host="slow-box", cpu="Slower CPU")
    (step,) = history(tmp_path, metrics=["ack_ms"]).steps
    assert step.index == 5 and step.method == "pelt"
    assert step.machine.startswith("fast-box-")
    only = history(tmp_path, metrics=["ack_ms"], machine="slow-box")
    assert only.steps == () and [m.host for m in only.machines] == ["slow-box"]
    assert cli.main(["history", str(tmp_path), "--metric", "ack_ms"]) == 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if "ack_ms" in ln and "fast-box" in ln]
    assert f"{_commit(4)[:7]}..{_commit(5)[:7]}" in line
    assert "2 machine(s)" in out
    assert cli.main(["history", str(tmp_path), "--machine", "no-such-box"]) == 2
    assert "matches no machine" in capsys.readouterr().err


def test_one_odd_run_at_either_end_is_not_a_step() -> None:
    """PELT's two-run end segments read a single slow last run (or a spike) as a step one run away."""
    rng = np.random.default_rng(7)
    for n in (8, 20, 30):
        flat = 100 * rng.lognormal(0, 0.03, n)
        tail = flat.copy()
        tail[-1] *= 1.6  # the newest run jumped: the gate's news, not yet a level
        assert detect_steps(tail) == []
        spike = flat.copy()
        spike[1] *= 3.0  # one bad run early on
        assert detect_steps(spike) == []
        late = flat.copy()
        late[n - 3 :] *= 1.6  # a level of three runs is a step, at its first run
        assert detect_steps(late) == [n - 3]
