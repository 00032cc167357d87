"""The LangGraph saver under crash states and kills: the ``langgraph-saver`` workload and the kill
campaign's ``langgraph`` profile find nothing on the saver as it is; the seeded bug
``saver-writes-before-fdatasync`` (``put_writes`` acknowledged before its publication is durable, through the
saver's private fault hook) is caught by both; invariant S itself tells a half-written or resurrected
checkpoint from an acknowledged one."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor
from pathlib import Path

import pytest

pytest.importorskip("langgraph.checkpoint.base", reason="the LangGraph saver needs the langgraph extra")

from perfsuite.cli import main
from perfsuite.crash import (
    MODELS,
    SEEDED_BUGS,
    WORKLOADS,
    Ack,
    CrashConfig,
    KillConfig,
    Note,
    make_executor,
    record_workload,
    run_campaign,
    run_kill_campaign,
)
from perfsuite.crash.invariants._langgraph import saver_problems
from perfsuite.crash.workloads._driver import settings
from perfsuite.engine import OsFileSystem
from perfsuite.integrations.langgraph import EngineSaver

NAME, BUG = "langgraph-saver", "saver-writes-before-fdatasync"


@pytest.fixture(scope="module")
def pool() -> Iterator[Executor]:
    executor = make_executor(2)
    yield executor
    executor.shutdown()


def test_the_workload_stores_tails_and_reads_every_put_back(tmp_path: Path) -> None:
    trace = record_workload(WORKLOADS[NAME], str(tmp_path))
    assert [n.label for n in trace.oracle.notes if n.kind == "unexpected"] == []
    kinds = [a.kind for a in trace.oracle.acks]
    assert kinds.count("lg-checkpoint") == 12 and kinds.count("lg-writes") == 12 and kinds.count("lg-removed") == 2
    view = WORKLOADS[NAME].recover(str(tmp_path), OsFileSystem())
    assert list(saver_problems(view, trace.oracle.acks, trace.oracle.notes)) == []
    assert not any(key.startswith("t2|") for key in view["checkpoints"])  # deleted
    assert sorted(k for k in view["checkpoints"] if k.startswith("t3|")) == ["t3||000010", "t3||000012"]  # pruned
    saver = EngineSaver(tmp_path / "sess", create=False, settings=settings())
    try:  # the messages list was stored as tails after the version it extends (what the workload exercises)
        tails = [key for key, blob in saver.index.blobs.items() if blob.tail and key[2] == "messages"]
    finally:
        saver.close()
    assert ("t1", "", "messages", 5) in tails and ("t3", "", "messages", 4) in tails


@pytest.mark.parametrize("model", MODELS)
def test_the_saver_survives_every_explored_crash_state(pool: Executor, model: str, tmp_path: Path) -> None:
    """Every unique crash state the enumeration finds (about 160 per model), recovery crashed too."""
    report = run_campaign(CrashConfig(workloads=(NAME,), models=(model,), max_states=500, keep_dir=str(tmp_path)),
                          executor=pool)
    [result] = report.results
    assert report.violations == (), [f"[{v.invariant}] {v.message}" for v in report.violations[:3]]
    assert 150 < result.states < 500 and result.recovery_states > 1000 and result.acks == 26


@pytest.mark.parametrize("model", MODELS)
def test_writes_acknowledged_before_their_fdatasync_are_caught(pool: Executor, model: str, tmp_path: Path) -> None:
    assert SEEDED_BUGS[BUG].shows_in == (NAME,)
    report = run_campaign(CrashConfig(workloads=(NAME,), models=(model,), max_states=100, seeded_bug=BUG,
                                      keep_dir=str(tmp_path), stop_after=1), executor=pool)
    assert report.caught
    assert any(v.invariant == "S" and "acknowledged writes" in v.message and "missing" in v.message
               for v in report.violations)


def _ack(at: int, kind: str, **detail: object) -> Ack:
    return Ack(at, f"{kind} {detail.get('id')}", "sess", kind, detail)


def test_invariant_s_tells_half_written_and_resurrected_checkpoints_apart() -> None:
    put = {"op": "put-1", "thread": "t", "ns": "", "id": "1", "parent": None, "values": {"messages": [1, 2]},
           "metadata": {"step": 1}}
    stored = {"values": {"messages": [1, 2]}, "metadata": {"step": 1}, "parent": None}
    note = Note(1, "put 1", "lg-put", put)
    empty: dict[str, dict[str, object]] = {"checkpoints": {}, "writes": {}, "latest": {}}
    whole = {"checkpoints": {"t||1": stored}, "writes": {}, "latest": {"t|": "1"}}
    assert list(saver_problems(empty, [], [note])) == []  # unacknowledged: absent is fine
    assert list(saver_problems(whole, [], [note])) == []  # ... and so is wholly there
    half = {**whole, "checkpoints": {"t||1": {**stored, "values": {"messages": [1]}}}}
    assert any("half there" in p for p in saver_problems(half, [], [note]))
    assert any("missing" in p for p in saver_problems(empty, [_ack(2, "lg-checkpoint", **put)], [note]))
    removed = [_ack(2, "lg-checkpoint", **put), _ack(4, "lg-removed", op="rm-3", thread="t", kept=[])]
    notes = [note, Note(3, "delete t", "lg-remove", {"op": "rm-3", "thread": "t", "kept": []})]
    assert any("is back" in p for p in saver_problems(whole, removed, notes))
    assert list(saver_problems(empty, removed[:1], notes)) == []  # a delete under way may have landed
    at_once = [note, Note(2, "delete t", "lg-remove", {"op": "rm-3", "thread": "t", "kept": []})]
    assert list(saver_problems(empty, removed[:1], at_once)) == []  # (started where the put's ack was given)
    later = {**put, "op": "put-5", "id": "5"}  # ... and the thread goes on (the next process): not taken by it
    after = {"checkpoints": {"t||5": stored}, "writes": {}, "latest": {"t|": "5"}}
    assert list(saver_problems(after, [removed[0], _ack(6, "lg-checkpoint", **later)], notes)) == []
    assert any("nothing put it" in p for p in saver_problems(whole, [], []))
    assert any("get_tuple" in p for p in saver_problems({**whole, "latest": {"t|": None}}, [], [note]))


def test_the_kill_profile_loses_no_acknowledged_put(tmp_path: Path) -> None:
    report = run_kill_campaign(KillConfig(kills=6, seed=4, profiles=("langgraph",), directory=str(tmp_path)))
    assert report.violations == (), [f"kill {v.kill} [{v.invariant}] {v.message}" for v in report.violations]
    assert report.per_profile == {"langgraph": 6} and report.acks >= 6 and report.checked > report.acks
    assert report.lost == 0


def test_the_kill_profile_catches_writes_acknowledged_early(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    # the third kill: the child dies by itself right after a put_writes acknowledgement (no timing)
    args = ["crashcheck", "--kill", "3", "--seed", "2", "--profile", "langgraph", "--keep", str(tmp_path)]
    assert main([*args, "--seeded-bug", BUG]) == 0
    out = capsys.readouterr().out
    assert f"seeded bug {BUG}: caught" in out and "[L]" in out
