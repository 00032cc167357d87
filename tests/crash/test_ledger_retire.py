"""The mail ledger across retirement (E7 at-least-once, E3): the ``session-ledger-retire`` workload delivers
acknowledged mail, then compacts and retires the logs that held it before the receipts commit; the real
engine keeps every acknowledged mail after every crash state, and the seeded bug
``ledger-forgotten-on-retire`` (retirement drops the consumed mail from the ledger) is caught by the campaign
under invariant 4."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from concurrent.futures import Executor
from pathlib import Path

import pytest

from perfsuite.crash import SEEDED_BUGS, WORKLOADS, CrashConfig, make_executor, record_workload, run_campaign
from perfsuite.crash.workloads._ledger_retire import ROUNDS

NAME, BUG = "session-ledger-retire", "ledger-forgotten-on-retire"


@pytest.fixture(scope="module")
def pool() -> Iterator[Executor]:
    executor = make_executor(2)
    yield executor
    executor.shutdown()


def test_retirement_deletes_logs_while_delivered_mail_waits_for_its_receipt(tmp_path: Path) -> None:
    trace = record_workload(WORKLOADS[NAME], str(tmp_path))
    assert [n.label for n in trace.oracle.notes if n.kind == "unexpected"] == []  # each round deleted a log
    removed = [op.path for op in trace.ops if op.kind == "remove" and op.path.endswith(".log")]
    assert len(removed) >= ROUNDS
    mails = [a for a in trace.oracle.acks if a.kind == "mail"]
    assert len(mails) == 4 * ROUNDS
    # the first delivery of every round comes before that round's first log deletion
    first_removal = next(op.seq for op in trace.ops if op.kind == "remove" and op.path.endswith(".log"))
    delivered = [n.at for n in trace.oracle.notes if n.kind == "delivered"]
    assert delivered and delivered[0] < first_removal


def test_the_campaign_catches_the_seeded_bug_and_passes_the_real_engine(pool: Executor, tmp_path: Path) -> None:
    assert SEEDED_BUGS[BUG].shows_in == (NAME,)
    config = CrashConfig(workloads=(NAME,), models=("atomic-rename",), max_states=80, keep_dir=str(tmp_path / "bug"))
    report = run_campaign(dataclasses.replace(config, seeded_bug=BUG), executor=pool)
    assert report.caught
    assert any(v.invariant == "4" and "is lost" in v.message for v in report.violations), \
        [v.message for v in report.violations[:3]]
    clean = run_campaign(dataclasses.replace(config, keep_dir=str(tmp_path / "clean")), executor=pool)
    assert clean.violations == (), "\n".join(f"[{v.invariant}] {v.message} ({v.crash})" for v in clean.violations[:5])
    assert clean.results[0].states == 80 and clean.results[0].acks >= 20
