"""M12: keys typed into Textual's TextArea while the engine publishes, read as key-to-frame latency.

Behaviour, not timing: every key reaches a frame and is counted; a planted synchronous step held the keys due
while it ran (a lower bound: the step starts 1 ms before its key is due, the frame cannot be written while the
loop is held, and a key already framed when the step started is counted as missed, not as delayed); a synchronous
checkpoint that starts as a key is due is named as the callback that held it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from perfsuite.harness import ModeSpec, Recipe, run_recipe, validate_results
from perfsuite.watch import key_latency, key_latency_json
from perfsuite.workloads.typing import typing as typing_factory

TYPING = "perfsuite.workloads.typing:typing"


def _run(tmp_path: Path, modes: tuple[ModeSpec, ...], fixture: Path | None = None, samples: int = 1) -> dict[str, Any]:
    recipe = Recipe(name="typing-test", modes=modes, fixture="small" if fixture else None, samples=samples, warmup=0,
                    isolation="inline", gc="natural", control_windows=1, settle_ms=0.0)
    result = run_recipe(recipe, output_dir=tmp_path / "out", fixture=fixture, work_root=tmp_path / "w")
    validate_results(result.document)
    return dict(result.document)


def test_every_key_reaches_a_frame_and_the_report_reads_them(tmp_path: Path) -> None:
    doc = _run(tmp_path, (ModeSpec("idle", TYPING, {"publish": "none", "keys": 6, "key_interval_ms": 40}),),
               samples=2)
    samples = doc["modes"]["idle"]["samples"]
    for sample in samples:
        metrics = sample["metrics"]
        assert metrics["keys"] == 6 and metrics["publication_ack_ms"] is None
        assert 0 < metrics["key_p50_ms"] <= metrics["key_p99_ms"] <= metrics["key_max_ms"]
        assert sample["labels"]["publish"] == "none" and sample["labels"]["key_hdr"].startswith("HIST")
        assert sample["ack_ms"] >= 5 * 40  # the last key is due 6 intervals after submission
    report = key_latency([tmp_path / "out"])
    [row] = report.rows
    assert (row.recipe, row.mode, row.keys, row.samples, row.floor) == ("typing-test", "idle", 12, 2, True)
    assert row.max_ms >= row.p99_ms >= row.p50_ms > 0
    assert any(line.startswith("floor: typing-test idle") for line in report.lines())
    assert key_latency_json(report)["rows"][0]["keys"] == 12


def test_a_planted_step_holds_its_keys_and_is_named(tmp_path: Path) -> None:
    params = {"publish": "plant", "keys": 6, "key_interval_ms": 60, "plant_ms": 30, "plant_every": 2,
              "publish_at_key": 1, "slow_key_ms": 0}
    doc = _run(tmp_path, (ModeSpec("plant", TYPING, params),))
    [sample] = doc["modes"]["plant"]["samples"]
    slow = {k["key"]: k for k in json.loads(sample["labels"]["slow_keys_detail"])}
    assert sorted(slow) == list(range(6))  # slow_key_ms = 0: every key attributed
    held = json.loads(sample["labels"]["planted_keys"])
    assert held and set(held) <= {1, 3, 5} and len(held) + sample["metrics"]["plants_missed"] == 3
    for i in held:
        assert slow[i]["ms"] >= 30 - 1  # held at least from its due instant to the end of the step
        # the planted step is among the callbacks that held the key (on a loaded machine another callback
        # can be preempted for longer, so it need not be the first)
        assert "perfsuite.workloads.typing._Typing._planted_step" in [c["name"] for c in slow[i]["callbacks"]]
    assert sample["stalls"]["longest_ms"] >= 30
    report = key_latency([tmp_path / "out"])
    assert report.rows[0].max_ms >= 29 and not report.rows[0].floor
    blame = report.rows[0].blame
    assert sum(b.keys for b in blame) == 6  # each slow key blamed on exactly one thing
    # a key is blamed on its longest callback when that callback held at least half of it; on a loaded machine
    # the wait for a CPU after the step can make it less than half, and the key is then nobody's (not a defect)
    planted = "perfsuite.workloads.typing._Typing._planted_step"
    owned = [k for k in slow.values() if k["callbacks"] and k["callbacks"][0]["name"] == planted
             and float(k.get("gc_ms") or 0) < 0.5 * k["ms"] and k["callbacks"][0]["ms"] >= 0.5 * k["ms"]]
    assert (planted in [b.name for b in blame]) == bool(owned)
    if owned:
        assert next(b for b in blame if b.name == planted).keys == len(owned)


def test_a_synchronous_checkpoint_holds_the_key_due_as_it_starts(tmp_path: Path, small_session: Path) -> None:
    # On a simulated hard disk: format 2's checkpoint (one pwrite, one fdatasync) takes about a
    # millisecond on a local SSD, less than Textual's own timer callbacks, so on a fast disk it is not
    # reliably among the longest callbacks of the key's span; the disk's fdatasync makes it what holds it.
    params = {"publish": "checkpoint", "path": "sync", "conversation": "root", "keys": 5, "key_interval_ms": 60,
              "publish_at_key": 2, "publish_phase": 0.0, "slow_key_ms": 0, "publications": 1, "storage": "hdd"}
    doc = _run(tmp_path, (ModeSpec("sync", TYPING, params),), fixture=small_session)
    [sample] = doc["modes"]["sync"]["samples"]
    metrics = sample["metrics"]
    assert metrics["publications"] == 1 and metrics["publication_ack_ms"] is not None and metrics["keys"] == 5
    assert metrics["bytes_written"] > 0
    slow = {k["key"]: k for k in json.loads(sample["labels"]["slow_keys_detail"])}
    assert "perfsuite.engine._session.Session.checkpoint" in [c["name"] for c in slow[2]["callbacks"]]


def test_an_idle_mode_on_a_session_publishes_nothing(tmp_path: Path, small_session: Path) -> None:
    doc = _run(tmp_path, (ModeSpec("idle", TYPING, {"publish": "none", "keys": 3, "key_interval_ms": 40}),),
               fixture=small_session)
    [sample] = doc["modes"]["idle"]["samples"]
    assert sample["metrics"]["publications"] == 0 and sample["metrics"]["bytes_written"] == 0


def test_bad_parameters_and_a_missing_textual_are_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from perfsuite.errors import PerfsuiteError
    from perfsuite.harness import OperationContext

    ctx = OperationContext(workdir=None, params={"publish": "sometimes"}, mode="m", sample=0, scratch=tmp_path)
    with pytest.raises(PerfsuiteError, match="publish: expected one of none, checkpoint"):
        import asyncio

        asyncio.run(typing_factory(ctx))
    assert typing_factory.unavailable() is None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "textual", None)
    reason = typing_factory.unavailable()  # type: ignore[attr-defined]
    assert reason is not None and "ui extra" in reason


def test_each_publication_of_a_sample_publishes_a_new_turn(tmp_path: Path, small_session: Path) -> None:
    """Several checkpoints while typing (one per stretch of keys), each of one more streamed turn: each adopts a
    generation, asynchronously here, and the sample acknowledges after the last."""
    params = {"publish": "checkpoint", "path": "async", "conversation": "agent", "keys": 6, "key_interval_ms": 40,
              "publications": 3, "publish_at_key": 0}
    doc = _run(tmp_path, (ModeSpec("async", TYPING, params),), fixture=small_session)
    [sample] = doc["modes"]["async"]["samples"]
    metrics = sample["metrics"]
    # three requests; one the loop reaches while the previous checkpoint is still queued joins it
    # (request_checkpoint coalesces; a loaded machine fires two timers late, together), so one to three
    # publications are made, and each adopts its own generation
    assert 1 <= metrics["publications"] == metrics["generations"] <= 3
    assert metrics["publication_ack_max_ms"] >= metrics["publication_ack_ms"] > 0
