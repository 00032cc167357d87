"""The sidecar's dirty journal across save rounds (format 2 deltas, E7): the ``session-sidecar-rounds``
workload sets a key again while the publication that captured it is in flight and acknowledges a registry
save after each round; the real engine keeps every acknowledged value, and the seeded bug
``dirty-key-cleared-early`` (a key marked clean at install although it changed since its capture) is caught
by the campaign under invariant 1."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from concurrent.futures import Executor
from pathlib import Path

import pytest

from perfsuite.crash import SEEDED_BUGS, WORKLOADS, CrashConfig, make_executor, record_workload, run_campaign
from perfsuite.crash.workloads._sidecar_rounds import FLIGHT, ROUNDS

NAME, BUG = "session-sidecar-rounds", "dirty-key-cleared-early"


@pytest.fixture(scope="module")
def pool() -> Iterator[Executor]:
    executor = make_executor(2)
    yield executor
    executor.shutdown()


def test_every_round_acknowledges_the_value_set_again_in_flight(tmp_path: Path) -> None:
    trace = record_workload(WORKLOADS[NAME], str(tmp_path))
    assert [n.label for n in trace.oracle.notes if n.kind == "unexpected"] == []
    saved = [a.detail["value"] for a in trace.oracle.acks
             if a.kind == "value" and a.detail["key"] == "activity:a1" and "registry save" in a.label]
    assert saved == [again for _captured, again in FLIGHT[:ROUNDS]]
    plans = [a.detail["value"] for a in trace.oracle.acks if a.kind == "value" and a.detail["key"] == "control:plan"]
    assert plans == [{"step": 0}, None, {"step": 2}]  # set, cleared, set again


def test_the_seeded_bug_loses_the_newer_value(tmp_path: Path) -> None:
    trace = record_workload(WORKLOADS[NAME], str(tmp_path), BUG)
    lost = [n.label for n in trace.oracle.notes if n.kind == "unexpected"]
    assert any("after a reopen activity:a1" in label for label in lost), lost
    assert SEEDED_BUGS[BUG].shows_in == (NAME,)


def test_the_campaign_catches_the_seeded_bug_and_passes_the_real_engine(pool: Executor, tmp_path: Path) -> None:
    config = CrashConfig(workloads=(NAME,), models=("atomic-rename",), max_states=60, keep_dir=str(tmp_path / "bug"))
    report = run_campaign(dataclasses.replace(config, seeded_bug=BUG), executor=pool)
    assert report.caught
    assert any(v.invariant == "1" and "activity:a1" in v.message for v in report.violations)
    clean = run_campaign(dataclasses.replace(config, keep_dir=str(tmp_path / "clean")), executor=pool)
    assert clean.violations == (), "\n".join(f"[{v.invariant}] {v.message} ({v.crash})" for v in clean.violations[:5])
    assert clean.results[0].states == 60 and clean.results[0].acks >= 20
