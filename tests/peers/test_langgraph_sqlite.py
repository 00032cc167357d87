"""The LangGraph adapter really stores checkpoints through LangGraph's savers (SPEC 8, the peer on the same bytes): the
database it leaves reloads with ``SqliteSaver.get_tuple``, holding our root transcript after our streamed turn."""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from perfsuite.engine import Message, Session
from perfsuite.errors import PerfsuiteError
from perfsuite.workloads import engine
from perfsuite.workloads.peers import langgraph_sqlite as lg

pytestmark = pytest.mark.skipif(
    lg.checkpoint.unavailable() is not None,  # type: ignore[attr-defined]
    reason=f"peer not installed: {lg.checkpoint.unavailable()}",  # type: ignore[attr-defined]
)

THREAD = {"configurable": {"thread_id": lg.THREAD_ID, "checkpoint_ns": ""}}


def _reload(db: Path) -> tuple[Any, list[Any]]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string(str(db)) as saver:
        return saver.get_tuple(THREAD), list(saver.list(THREAD))


@pytest.mark.parametrize("saver", ["sync", "async"])
def test_the_checkpoint_reloads_with_langgraph_own_loader(tmp_path: Path, run_operation: Any, saver: str) -> None:
    op, metrics = run_operation(lg.checkpoint, {"saver": saver}, scratch=tmp_path, sample=2)
    latest, history = _reload(tmp_path / "checkpoints.sqlite")
    expected = lg.generated_transcript() + lg.streamed_turn(2)
    assert latest.checkpoint["channel_values"]["transcript"] == expected == op.expected
    assert latest.metadata["step"] == 2
    assert latest.parent_config is not None  # stored on top of the previous checkpoint of the thread
    assert len(history) == 2
    assert metrics["conversation_bytes"] == lg.ROOT_TRANSCRIPT_BYTES
    assert metrics["bytes_written"] >= len(expected)  # the whole blob went to the WAL
    assert metrics["sqlite_synchronous"] == "FULL"
    assert metrics["journal_mode"] == "WAL"
    assert metrics["saver"] == ("AsyncSqliteSaver" if saver == "async" else "SqliteSaver")
    assert metrics["peer_version"]


def test_generated_transcript_has_the_root_size_and_is_deterministic() -> None:
    data = lg.generated_transcript()
    assert len(data) == lg.ROOT_TRANSCRIPT_BYTES == 1_069_346
    assert data == lg.generated_transcript()
    assert all(Message.from_json(json.loads(line)) for line in data.splitlines()[:5])


def _tiny_session(path: Path) -> bytes:
    session = Session.open(path, create=True)
    try:
        for i in range(20):
            session.add_message("root", Message("user" if i % 2 else "assistant", f"turn {i} " * 40, float(i)))
        session.checkpoint("root")
        return session.conversation("root").data()
    finally:
        session.close()


def test_a_session_fixture_supplies_the_root_transcript(tmp_path: Path, run_operation: Any) -> None:
    root = _tiny_session(tmp_path / "session")
    _, metrics = run_operation(lg.checkpoint, {"saver": "sync"}, scratch=tmp_path / "scratch",
                                workdir=tmp_path / "session")
    latest, _ = _reload(tmp_path / "scratch" / "checkpoints.sqlite")
    assert latest.checkpoint["channel_values"]["transcript"] == root + lg.streamed_turn(0)
    assert metrics["transcript_source"] == "fixture root transcript"
    assert metrics["conversation_bytes"] == len(root)


def test_the_streamed_turns_are_the_ones_our_checkpoint_adds(tmp_path: Path) -> None:
    root = _tiny_session(tmp_path / "original")

    async def ours(count: int) -> bytes:
        from perfsuite.harness import OperationContext

        workdir = tmp_path / f"copy-{count}"
        shutil.copytree(tmp_path / "original", workdir, symlinks=True)
        ctx = OperationContext(workdir=workdir, params={"path": "sync", "checkpoints": count}, mode="sync",
                               sample=4, scratch=tmp_path)
        op = engine.checkpoint(ctx)
        try:
            done: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
            op.submit(lambda error: done.done() or done.set_result(error))
            assert await done is None
            return op.session.conversation("root").data()  # type: ignore[attr-defined]
        finally:
            op.close()

    assert asyncio.run(ours(1)) == root + lg.streamed_turn(4)
    assert asyncio.run(ours(3)) == root + b"".join(lg.streamed_turns(4, 3))


def test_several_checkpoints_chain_in_one_thread(tmp_path: Path, run_operation: Any) -> None:
    _, metrics = run_operation(lg.checkpoint, {"saver": "async", "checkpoints": 3}, scratch=tmp_path, sample=1)
    latest, history = _reload(tmp_path / "checkpoints.sqlite")
    assert latest.checkpoint["channel_values"]["transcript"] == lg.generated_transcript() + b"".join(
        lg.streamed_turns(1, 3))
    assert [t.metadata["step"] for t in history] == [4, 3, 2, 1]  # newest first, each on its parent
    assert all(t.parent_config["configurable"]["checkpoint_id"] == p.config["configurable"]["checkpoint_id"]
               for t, p in itertools.pairwise(history))
    assert metrics["publications"] == 3
    assert metrics["bytes_written_per_checkpoint"] == metrics["bytes_written"] / 3


def test_bad_params_are_one_line(tmp_path: Path, run_operation: Any) -> None:
    with pytest.raises(PerfsuiteError, match="saver: expected one of \"sync\", \"async\", got \"threads\""):
        run_operation(lg.checkpoint, {"saver": "threads"}, scratch=tmp_path)
    with pytest.raises(PerfsuiteError, match="synchronous: expected one of"):
        run_operation(lg.checkpoint, {"synchronous": "SOMETIMES"}, scratch=tmp_path)
