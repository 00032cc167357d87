"""Group commit under a failed shared fdatasync (E1 fsyncgate, E4): the ``session-group-fault`` workload does
what it names on the real engine and finds nothing there; the seeded bug ``group-failure-acked`` (a group's
members acknowledged durable without reading the shared sync's result) is reported under invariant G."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from concurrent.futures import Executor

import pytest

from perfsuite.crash import SEEDED_BUGS, WORKLOADS, CrashConfig, make_executor, record_workload, run_campaign
from perfsuite.crash.invariants._group import group_ack_problems
from perfsuite.crash.model._trace import Note
from perfsuite.crash.workloads._group_fault import FAILED_ROUNDS, MEMBERS, ROUNDS
from perfsuite.engine.testing import FsOp

NAME, BUG = "session-group-fault", "group-failure-acked"


@pytest.fixture(scope="module")
def pool() -> Iterator[Executor]:
    executor = make_executor(2)
    yield executor
    executor.shutdown()


def _acks(trace) -> list[tuple[int, int, bool]]:
    return [(n.detail["round"], n.detail["index"], n.detail["ok"]) for n in trace.oracle.notes if n.kind == "group-ack"]


def test_a_failed_shared_sync_fails_the_whole_group_and_acks_come_in_commit_order(tmp_path):
    trace = record_workload(WORKLOADS[NAME], str(tmp_path))
    assert [n.label for n in trace.oracle.notes if n.kind == "unexpected"] == []
    assert sum(op.kind == "fdatasync_failed" for op in trace.ops) == len(FAILED_ROUNDS)
    acks = _acks(trace)
    assert [(r, i) for r, i, _ok in acks] == [(r, i) for r in range(ROUNDS) for i in range(MEMBERS + 1)]
    _retried, abandoned = FAILED_ROUNDS
    assert all(ok for r, i, ok in acks if r != abandoned or i == 0)  # round 0's group: acked after its retry
    assert not any(ok for r, i, ok in acks if r == abandoned and i > 0)  # abandoned: each failed once
    assert list(group_ack_problems(trace.oracle.notes, trace.ops)) == []


def test_the_seeded_bug_acknowledges_failed_groups(tmp_path):
    trace = record_workload(WORKLOADS[NAME], str(tmp_path), BUG)
    problems = list(group_ack_problems(trace.oracle.notes, trace.ops))
    assert len(problems) == MEMBERS * len(FAILED_ROUNDS), problems
    assert all("a member of a failed group acknowledged as durable" in p for p in problems)
    assert SEEDED_BUGS[BUG].shows_in == (NAME,)


def test_invariant_g_wants_commit_order_and_one_ack_each():
    ops = [FsOp(0, "fdatasync", "/s/log/00000001.log")]
    notes = [Note(1, f"d{i}", "group-ack", {"round": 0, "index": i, "ok": True, "at": 1}) for i in (0, 2, 1, 1)]
    problems = list(group_ack_problems(notes, ops))
    assert len(problems) == 2 and "not in commit order" in problems[0] and "second acknowledgement" in problems[1]


def test_the_campaign_catches_the_seeded_bug_and_passes_the_real_engine(pool, tmp_path):
    config = CrashConfig(workloads=(NAME,), models=("atomic-rename",), max_states=40, keep_dir=str(tmp_path / "bug"))
    report = run_campaign(dataclasses.replace(config, seeded_bug=BUG), executor=pool)
    assert report.caught
    assert [v for v in report.violations if v.invariant == "G" and v.crash == "whole trace"]
    clean = run_campaign(dataclasses.replace(config, keep_dir=str(tmp_path / "clean")), executor=pool)
    assert clean.violations == (), "\n".join(f"[{v.invariant}] {v.message} ({v.crash})" for v in clean.violations[:5])
    assert clean.results[0].states == 40 and clean.results[0].acks >= 10
