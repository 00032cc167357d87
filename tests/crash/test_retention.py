"""Retained generations across reopens (E3: retirement keeps the last N): the ``session-retention`` workload
does what it names on the real engine and finds nothing there; the seeded bug ``retained-refs-forgotten``
(retirement after a reopen knows only HEAD's log's BASE references) fails a restore in every round, and the
campaign reports it under invariant R; the oracle's rewrites (``replace_messages``, a restore) are allowed by
invariant 1 only from where they began."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from concurrent.futures import Executor

import pytest

from perfsuite.crash import SEEDED_BUGS, WORKLOADS, CrashConfig, make_executor, record_workload, run_campaign
from perfsuite.crash.invariants._sessions import acknowledged_problems
from perfsuite.crash.model._trace import Ack, Note
from perfsuite.crash.workloads._retention import KEEP, REWRITE, SCHEDULE

BUG = "retained-refs-forgotten"


@pytest.fixture(scope="module")
def pool() -> Iterator[Executor]:
    executor = make_executor(2)
    yield executor
    executor.shutdown()


def test_the_workload_reopens_retires_and_restores_every_retained_generation(tmp_path):
    trace = record_workload(WORKLOADS["session-retention"], str(tmp_path))
    notes = trace.oracle.notes
    assert [n.label for n in notes if n.kind in ("unexpected", "unrestorable")] == []
    restores = [a.label for a in trace.oracle.acks if "restore of generation" in a.label]
    assert len(restores) == KEEP * len(SCHEDULE)  # every retained generation, after every reopen
    assert sum(n.kind == "rewriting" for n in notes) == len(restores) + sum(s.count(REWRITE) for s in SCHEDULE)
    logs = {os.path.basename(op.path) for op in trace.ops if op.kind == "remove" and op.path.endswith(".log")}
    assert {"00000001.log", "00000002.log"} <= logs and len(logs) >= 10  # retirement deleted whole logs
    # every round's close releases the lease its open took (the last one's: shutdown)
    assert sum(op.kind == "remove" and op.path.endswith("/LEASE") for op in trace.ops) == len(SCHEDULE) + 1


def test_the_seeded_bug_fails_a_restore_after_every_reopen(tmp_path):
    trace = record_workload(WORKLOADS["session-retention"], str(tmp_path), BUG)
    failed = [n.label for n in trace.oracle.notes if n.kind == "unrestorable"]
    assert {label.split(" ", 1)[0] for label in failed} == {f"r{r}" for r in range(len(SCHEDULE))}
    assert all("failed: SessionError: sess/log/" in label and "missing" in label for label in failed), failed
    assert [n.label for n in trace.oracle.notes if n.kind == "unexpected"] == []  # the rest still works
    assert SEEDED_BUGS[BUG].shows_in == ("session-retention",)


def test_the_campaign_catches_the_seeded_bug_and_passes_the_real_engine(pool, tmp_path):
    config = CrashConfig(workloads=("session-retention",), models=("atomic-rename",), max_states=40,
                         keep_dir=str(tmp_path / "bug"))
    report = run_campaign(dataclasses.replace(config, seeded_bug=BUG), executor=pool)
    assert report.caught
    retained = [v for v in report.violations if v.invariant == "R"]
    assert retained and all(v.crash == "whole trace" for v in retained)
    assert any("r0 after the reopen: restore of generation" in v.message for v in retained)
    assert retained[0].kept and os.path.isfile(os.path.join(retained[0].kept, "violation.txt"))
    clean = run_campaign(dataclasses.replace(config, keep_dir=str(tmp_path / "clean")), executor=pool)
    assert clean.violations == (), "\n".join(f"[{v.invariant}] {v.message} ({v.crash})" for v in clean.violations[:5])
    assert clean.results[0].states == report.results[0].states == 40 and clean.results[0].acks >= 30


def test_invariant_1_allows_a_rewrite_only_from_where_it_began():
    """A recovered transcript holding a rewrite (``replace_messages``, a restore) instead of the acknowledged
    bytes is fine once the rewrite began after that acknowledgement, never when it was noted before it."""
    old, new = b'{"role":"user","content":"old"}\n', b'{"role":"user","content":"new"}\n'
    ack = Ack(10, "turn", "sess", "transcript", {"conversation": "root", "data": old})
    snap = {"conversations": {"root": new + b'{"role":"user","content":"later"}\n'}}
    view = {"open": snap, "retried": None}
    rewrite = Note(12, "rewriting root", "rewriting", {"conversation": "root", "data": new})
    assert list(acknowledged_problems(view, [ack], [rewrite])) == []
    earlier = Note(8, "rewriting root", "rewriting", {"conversation": "root", "data": new})
    elsewhere = Note(12, "rewriting a1", "rewriting", {"conversation": "a1", "data": new})
    for notes in ([], [earlier], [elsewhere]):
        assert any("acknowledged 32B of 'root'" in m for m in acknowledged_problems(view, [ack], notes)), notes
