"""The engine checkpointers' own promises, beyond LangGraph's conformance suite: one fdatasync per put and
per put_writes (E3), records O(change) in the channels that changed, everything acknowledged read back
after a reopen, a failed sync never acknowledged, and the async saver's disk work off the loop thread."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.base")

from langgraph.checkpoint.base import empty_checkpoint

from perfsuite.engine import ROOT, Message, OsFileSystem, SaveFailed, Session, SessionError, SessionSettings
from perfsuite.engine.testing import Fault, FaultyFileSystem, RecordingFileSystem
from perfsuite.integrations.langgraph import AsyncEngineSaver, EngineSaver

SETTINGS = SessionSettings(log_capacity=1 << 20)


def _config(thread: str, ns: str = "", parent: str | None = None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if parent is not None:
        configurable["checkpoint_id"] = parent
    return {"configurable": configurable}


def _checkpoint(n: int, values: dict[str, Any], versions: dict[str, int]) -> Any:
    cp = empty_checkpoint()
    cp["id"] = f"1ef{n:020d}"  # ascending ids, as uuid6 gives
    cp["channel_values"] = values
    cp["channel_versions"] = versions
    return cp


def _syncs(fs: RecordingFileSystem, mark: int) -> list[str]:
    return [op.kind for op in fs.since(mark) if op.kind in ("fsync", "fdatasync", "fsync_dir")]


def test_each_put_and_put_writes_is_one_fdatasync_and_records_only_the_changed_channels(tmp_path: Path) -> None:
    fs = RecordingFileSystem(OsFileSystem())
    big = "x" * 200_000
    with EngineSaver(tmp_path / "s", fs=fs, settings=SETTINGS) as saver:
        mark = fs.mark()
        stored = saver.put(_config("t"), _checkpoint(0, {"big": big, "n": 0}, {"big": 1, "n": 1}),
                           {"source": "input", "step": -1}, {"big": 1, "n": 1})
        assert _syncs(fs, mark) == ["fdatasync"]
        first = fs.bytes_written
        sizes = []
        for n in range(1, 30):  # only "n" changes: its blob is all a record carries
            before, mark = fs.bytes_written, fs.mark()
            stored = saver.put(_config("t", parent=stored["configurable"]["checkpoint_id"]),
                               _checkpoint(n, {"big": big, "n": n}, {"big": 1, "n": n + 1}),
                               {"source": "loop", "step": n}, {"n": n + 1})
            assert _syncs(fs, mark) == ["fdatasync"]
            sizes.append(fs.bytes_written - before)
        mark = fs.mark()
        saver.put_writes(stored, [("n", 99), ("log", "hello")], "task-1")
        assert _syncs(fs, mark) == ["fdatasync"]
        mark = fs.mark()
        saver.put_writes(stored, [("n", 99), ("log", "hello")], "task-1")  # already durable: nothing to publish
        assert _syncs(fs, mark) == []
        assert first > 200_000 and max(sizes) < 16_384 and max(sizes) < 1.5 * min(sizes), sizes
        tup = saver.get_tuple(_config("t"))
        assert tup is not None and tup.checkpoint["channel_values"] == {"big": big, "n": 29}


def _fill(saver: EngineSaver) -> None:
    parent = None
    for n in range(4):
        stored = saver.put(_config("a", parent=parent), _checkpoint(n, {"msgs": list(range(n))}, {"msgs": n + 1}),
                           {"source": "loop", "step": n, "run_id": f"run-{n % 2}"}, {"msgs": n + 1})
        parent = stored["configurable"]["checkpoint_id"]
        saver.put_writes(stored, [("msgs", n)], f"task-{n}")
    saver.put(_config("a", "child:1"), _checkpoint(10, {"c": "child"}, {"c": 1}), {"step": 0}, {"c": 1})
    saver.put(_config("b"), _checkpoint(20, {"msgs": ["b"]}, {"msgs": 1}), {"step": 0, "run_id": "run-b"},
              {"msgs": 1})


def _snapshot(saver: Any) -> list[tuple[Any, ...]]:
    return [(t.config["configurable"]["thread_id"], t.config["configurable"]["checkpoint_ns"], t.checkpoint["id"],
             t.checkpoint["channel_values"], dict(t.metadata), t.pending_writes,
             t.parent_config and t.parent_config["configurable"]["checkpoint_id"]) for t in saver.list(None)]


def test_a_reopen_reads_back_everything_acknowledged_after_every_kind_of_change(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with EngineSaver(path, settings=SETTINGS) as saver:
        _fill(saver)
        saver.copy_thread("a", "c")
        saver.prune(["a"], strategy="keep_latest")
        saver.delete_for_runs(["run-b"])
        saver.delete_thread("nobody")
        live = _snapshot(saver)
    with EngineSaver(path, settings=SETTINGS, create=False) as reopened:
        assert _snapshot(reopened) == live
        assert [t.checkpoint["id"] for t in reopened.list(_config("a"))] == ["1ef00000000000000000003"]
        assert reopened.get_tuple(_config("a")).checkpoint["channel_values"] == {"msgs": [0, 1, 2]}  # type: ignore[union-attr]
        assert len(list(reopened.list(_config("c")))) == 4
        assert list(reopened.list(_config("b"))) == []
        reopened.delete_thread("c")
    with EngineSaver(path, settings=SETTINGS, create=False) as again:
        assert {t.config["configurable"]["thread_id"] for t in again.list(None)} == {"a"}


def test_a_put_whose_fdatasync_fails_is_never_acknowledged(tmp_path: Path) -> None:
    probe = RecordingFileSystem(OsFileSystem())
    EngineSaver(tmp_path / "probe", fs=probe, settings=SETTINGS).close()
    at_open = sum(1 for op in probe.ops if op.kind == "fdatasync")
    fs = FaultyFileSystem(OsFileSystem(), [Fault("fdatasync", nth=at_open + 2)])  # the second put's sync
    path = tmp_path / "s"
    saver = EngineSaver(path, fs=fs, settings=SETTINGS)
    saver.put(_config("t"), _checkpoint(1, {"v": 1}, {"v": 1}), {"step": 1}, {"v": 1})
    with pytest.raises(SaveFailed):
        saver.put(_config("t"), _checkpoint(2, {"v": 2}, {"v": 2}), {"step": 2}, {"v": 2})
    assert [t.checkpoint["id"] for t in saver.list(_config("t"))] == ["1ef00000000000000000001"]
    saver.session.abandon_pending()
    saver.close()
    with EngineSaver(path, settings=SETTINGS, create=False) as reopened:
        assert [t.checkpoint["id"] for t in reopened.list(_config("t"))] == ["1ef00000000000000000001"]


def test_the_async_saver_publishes_through_the_job_off_the_loop_thread(tmp_path: Path) -> None:
    fs = RecordingFileSystem(OsFileSystem())
    path = tmp_path / "s"

    async def run() -> list[str]:
        saver = await AsyncEngineSaver.open(path, fs=fs, settings=SETTINGS)
        mark = fs.mark()
        stored = await saver.aput(_config("t"), _checkpoint(1, {"v": 1}, {"v": 1}), {"step": 1}, {"v": 1})
        await asyncio.gather(*(saver.aput_writes(stored, [("v", i)], f"task-{i}") for i in range(5)))
        assert len((await saver.aget_tuple(stored)).pending_writes) == 5  # type: ignore[union-attr, arg-type]
        await saver.aprune(["t"], strategy="keep_latest")
        await saver.aclose()
        return [op.thread for op in fs.since(mark) if op.kind == "fdatasync"]

    threads = asyncio.run(run())
    assert 2 <= len(threads) <= 7  # one put, five writes (some may share a group commit), one prune
    assert threading.current_thread().name not in threads  # the loop's thread never ran a sync
    with EngineSaver(path, settings=SETTINGS, create=False) as reopened:
        tup = reopened.get_tuple(_config("t"))
        assert tup is not None and sorted(w[2] for w in tup.pending_writes or []) == [0, 1, 2, 3, 4]


def test_the_async_saver_refuses_synchronous_writes_on_its_own_loop(tmp_path: Path) -> None:
    async def run() -> None:
        saver = await AsyncEngineSaver.open(tmp_path / "s", settings=SETTINGS)
        with pytest.raises(RuntimeError, match="async methods"):
            saver.put(_config("t"), _checkpoint(1, {}, {}), {}, {})
        assert saver.get_tuple(_config("t")) is None  # reads are served from memory
        stored = await asyncio.to_thread(saver.put, _config("t"), _checkpoint(1, {"v": 1}, {"v": 1}), {}, {"v": 1})
        assert (await saver.aget_tuple(stored)) is not None
        await saver.aclose()

    asyncio.run(run())


@pytest.mark.parametrize("record", [{"k": "cp", "t": "x"}, {"k": "w", "t": "x", "ns": "", "id": "1", "task": "a",
                                                           "w": [[0, "ch", "msgpack", "not base64!"]]},
                                    {"k": "cp", "t": "x", "ns": "", "id": "1", "c": ["msgpack", "AA=="],
                                     "m": ["msgpack", "wcHB"], "b": []},
                                    {"k": "cp", "t": "x", "ns": "", "id": "1", "c": ["msgpack", "AA=="],
                                     "m": ["pickle", "gAN9cQAu"], "b": []}, {"k": "nope"}])
def test_a_malformed_record_refuses_open_in_one_line_and_releases_the_session(tmp_path: Path,
                                                                              record: dict[str, Any]) -> None:
    """Records are data: a pickled value is refused (never unpickled), and every bad one is one line."""
    path = tmp_path / "s"
    with Session.open(path, create=True, settings=SETTINGS) as session:
        session.add_message(ROOT, Message("langgraph", "", 0.0, {"lg": record}))
        session.checkpoint(ROOT)
    with pytest.raises(SessionError) as info:
        EngineSaver(path, settings=SETTINGS)
    assert "not a LangGraph checkpointer session" in str(info.value) and "\n" not in str(info.value)
    Session.open(path, settings=SETTINGS).close()  # the refused open left no lease behind
