"""`perfsuite history`: change points over a generated series of 20 results, named by commit."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perfsuite import cli
from perfsuite.report import detect_steps, history

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
