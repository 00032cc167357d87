"""Torn-tail repair followed by a second crash (E2/E3): the ``session-torn-tail`` workload starts from a real
crash state (a record torn mid-write, the dead owner's LEASE), opens it the repairing way and goes on; every
crash state of that run is a second crash, and the real engine must open each. The seeded bug
``torn-tail-rezero-unsynced`` (the re-zeroing written without its fdatasync) is caught by the campaign."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from concurrent.futures import Executor
from pathlib import Path

import pytest

from perfsuite.crash import SEEDED_BUGS, WORKLOADS, CrashConfig, make_executor, record_workload, run_campaign
from perfsuite.crash.model._model import snapshot
from perfsuite.crash.model._trace import OpTrace, owner_alive_after_crash
from perfsuite.crash.workloads._driver import settings
from perfsuite.crash.workloads._torn_tail import torn_tree
from perfsuite.engine import Session

NAME, BUG = "session-torn-tail", "torn-tail-rezero-unsynced"


@pytest.fixture(scope="module")
def pool() -> Iterator[Executor]:
    executor = make_executor(2)
    yield executor
    executor.shutdown()


def _log_writes(trace: OpTrace) -> list[tuple[int, int]]:
    return [(op.offset, len(op.data)) for op in trace.ops if op.kind == "pwrite" and op.path.endswith(".log")]


def test_the_setup_is_a_crash_with_a_torn_record_and_a_dead_owners_lease(tmp_path: Path) -> None:
    torn_tree(str(tmp_path))
    files = dict(snapshot(str(tmp_path)).files)
    assert "sess/LEASE" in files and "sess/HEAD" in files  # a crash, not a close: the lease is still held
    trace = record_workload(WORKLOADS[NAME], str(tmp_path / "run"))
    assert [n.label for n in trace.oracle.notes if n.kind == "unexpected"] == []
    writes = _log_writes(trace)
    # the open zeroes the torn record from its end back: its body past the header, then the header in
    # ranges back to front ending with the magic byte by byte, each durable; then the first turn's record
    # lands at the torn record's offset, shorter than what the crash left there
    (body_at, body_len), rest = writes[0], writes[1:]
    header, end = [], body_at
    while rest and rest[0][0] + rest[0][1] == end:
        end = rest[0][0]
        header.append(rest.pop(0))
    offset, (turn_at, turn_len) = end, rest[0]
    assert len(header) >= 8 and [n for _at, n in header[-4:]] == [1, 1, 1, 1]  # the magic, a byte at a time
    assert turn_at == offset and body_at - offset < turn_len < body_len
    kinds = [op.kind for op in trace.ops if op.kind in ("pwrite", "fdatasync")][:2 * (1 + len(header))]
    assert kinds == ["pwrite", "fdatasync"] * (1 + len(header))
    assert len(trace.oracle.acks) >= 6


def test_a_crash_right_after_the_repair_leaves_a_clean_tail(tmp_path: Path) -> None:
    """Repaired, then crashed before any record: the next open finds nothing torn and opens."""
    torn_tree(str(tmp_path))
    path = os.path.join(str(tmp_path), "sess")
    session = Session.open(path, settings=settings(), owner_alive=owner_alive_after_crash)
    assert any("torn unacknowledged publication discarded" in p for p in session.problems)
    session.store.close()  # a crash again: the lease stays, nothing else is written
    session = Session.open(path, settings=settings(), owner_alive=owner_alive_after_crash)
    assert not any("torn" in p for p in session.problems), session.problems
    session.close()


def test_the_campaign_catches_the_seeded_bug_and_passes_the_real_engine(pool: Executor, tmp_path: Path) -> None:
    assert SEEDED_BUGS[BUG].shows_in == (NAME,)
    config = CrashConfig(workloads=(NAME,), models=("atomic-rename",), keep_dir=str(tmp_path / "bug"))
    report = run_campaign(dataclasses.replace(config, seeded_bug=BUG), executor=pool)
    assert report.caught
    assert any(v.invariant == "0" and "no valid record" in v.message for v in report.violations), \
        [v.message for v in report.violations[:3]]
    clean = run_campaign(dataclasses.replace(config, keep_dir=str(tmp_path / "clean")), executor=pool)
    assert clean.violations == (), "\n".join(f"[{v.invariant}] {v.message} ({v.crash})" for v in clean.violations[:5])
    assert clean.results[0].states >= 50 and clean.results[0].acks >= 6
