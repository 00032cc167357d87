"""A list channel that grew by appending is stored as its new items only (a tail after the version it
extends), read back whole in this process and after a reopen; anything else is stored whole. A tail is
data: one that names no base, or a cycle of them, refuses the session in one line."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.base")

from langgraph.checkpoint.base import empty_checkpoint

from perfsuite.engine import ROOT, Message, OsFileSystem, Session, SessionError, SessionSettings
from perfsuite.engine.testing import RecordingFileSystem
from perfsuite.integrations.langgraph import EngineSaver

SETTINGS = SessionSettings(log_capacity=1 << 22)
ITEM = 2_000  # characters per list item: a history of 200 is 400 KB, one new item 2 KB


def _config(thread: str, parent: str | None = None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if parent is not None:
        configurable["checkpoint_id"] = parent
    return {"configurable": configurable}


def _checkpoint(n: int, values: dict[str, Any], versions: dict[str, int]) -> Any:
    cp = empty_checkpoint()
    cp["id"] = f"1ef{n:020d}"
    cp["channel_values"] = values
    cp["channel_versions"] = versions
    return cp


def _item(i: int) -> str:
    return f"{i:06d}" + "m" * ITEM


def _grow(saver: EngineSaver, fs: RecordingFileSystem | None, turns: int) -> tuple[list[int], str]:
    """A 200-item history, then ``turns`` puts each appending one item to the list the saver handed back
    (as a graph's reducer does); the bytes each put wrote and the last checkpoint id."""
    history = [_item(i) for i in range(200)]
    stored = saver.put(_config("t"), _checkpoint(0, {"msgs": history}, {"msgs": 1}), {"step": 0}, {"msgs": 1})
    sizes = []
    for n in range(1, turns + 1):
        current = saver.get_tuple(_config("t"))
        assert current is not None
        grown = [*current.checkpoint["channel_values"]["msgs"], _item(199 + n)]
        before = fs.bytes_written if fs else 0
        stored = saver.put(_config("t", stored["configurable"]["checkpoint_id"]),
                           _checkpoint(n, {"msgs": grown}, {"msgs": n + 1}), {"step": n}, {"msgs": n + 1})
        sizes.append((fs.bytes_written if fs else 0) - before)
    return sizes, stored["configurable"]["checkpoint_id"]


def test_a_list_grown_by_appending_is_stored_as_its_new_items_and_read_back_whole(tmp_path: Path) -> None:
    fs = RecordingFileSystem(OsFileSystem(), keep_data=False)
    path = tmp_path / "s"
    with EngineSaver(path, fs=fs, settings=SETTINGS) as saver:
        sizes, _last = _grow(saver, fs, 6)
        assert max(sizes) < 8 * ITEM, sizes  # one item (base64, framing), not the 400 KB history
        live = [(t.checkpoint["id"], t.checkpoint["channel_values"]) for t in saver.list(_config("t"))]
    assert live[0][1]["msgs"] == [_item(i) for i in range(206)]
    assert [len(values["msgs"]) for _cid, values in live] == [206, 205, 204, 203, 202, 201, 200]
    fs = RecordingFileSystem(OsFileSystem(), keep_data=False)
    with EngineSaver(path, fs=fs, settings=SETTINGS, create=False) as reopened:
        assert [(t.checkpoint["id"], t.checkpoint["channel_values"]) for t in reopened.list(_config("t"))] == live
        older = reopened.get_tuple(_config("t", "1ef00000000000000000003"))
        assert older is not None and older.checkpoint["channel_values"]["msgs"] == [_item(i) for i in range(203)]
        current = reopened.get_tuple(_config("t"))  # after a reopen the list is decoded once, then extended
        assert current is not None
        before = fs.bytes_written
        reopened.put(_config("t", current.checkpoint["id"]),
                     _checkpoint(50, {"msgs": [*current.checkpoint["channel_values"]["msgs"], _item(999)]},
                                 {"msgs": 50}), {"step": 50}, {"msgs": 50})
        assert 0 < fs.bytes_written - before < 8 * ITEM


def test_a_list_changed_anywhere_but_its_end_is_stored_whole(tmp_path: Path) -> None:
    fs = RecordingFileSystem(OsFileSystem(), keep_data=False)
    path = tmp_path / "s"
    with EngineSaver(path, fs=fs, settings=SETTINGS) as saver:
        _grow(saver, fs, 1)
        current = saver.get_tuple(_config("t"))
        assert current is not None
        edited = list(current.checkpoint["channel_values"]["msgs"])
        edited[0] = "replaced"  # a reducer that replaced an item by id
        before = fs.bytes_written
        saver.put(_config("t", current.checkpoint["id"]), _checkpoint(9, {"msgs": edited}, {"msgs": 9}), {},
                  {"msgs": 9})
        assert fs.bytes_written - before > 200 * ITEM  # the whole list again
        shorter = edited[:10]
        before = fs.bytes_written
        saver.put(_config("t", "1ef00000000000000000009"), _checkpoint(10, {"msgs": shorter}, {"msgs": 10}), {},
                  {"msgs": 10})
        assert fs.bytes_written - before > 10 * ITEM
    with EngineSaver(path, settings=SETTINGS, create=False) as reopened:
        tup = reopened.get_tuple(_config("t"))
        assert tup is not None and tup.checkpoint["channel_values"]["msgs"] == shorter
        nine = reopened.get_tuple(_config("t", "1ef00000000000000000009"))
        assert nine is not None and nine.checkpoint["channel_values"]["msgs"] == edited


def test_reads_hand_out_copies_so_a_caller_changing_one_changes_nothing_stored(tmp_path: Path) -> None:
    with EngineSaver(tmp_path / "s", settings=SETTINGS) as saver:
        _grow(saver, None, 2)
        first = saver.get_tuple(_config("t"))
        assert first is not None
        first.checkpoint["channel_values"]["msgs"].append("not stored")
        first.checkpoint["channel_values"]["msgs"][0] = "not stored either"
        again = saver.get_tuple(_config("t"))
        assert again is not None and again.checkpoint["channel_values"]["msgs"] == [_item(i) for i in range(202)]


def test_copy_and_prune_rebuild_a_tail_whose_base_they_drop_as_the_whole_list(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with EngineSaver(path, settings=SETTINGS) as saver:
        _grow(saver, None, 3)
        saver.copy_thread("t", "copy")
        saver.prune(["t"], strategy="keep_latest")
        latest = [_item(i) for i in range(203)]
        kept = list(saver.list(_config("t")))
        assert [t.checkpoint["channel_values"]["msgs"] for t in kept] == [latest]
    with EngineSaver(path, settings=SETTINGS, create=False) as reopened:
        assert [t.checkpoint["channel_values"]["msgs"] for t in reopened.list(_config("t"))] == [latest]
        assert [len(t.checkpoint["channel_values"]["msgs"]) for t in reopened.list(_config("copy"))] == \
            [203, 202, 201, 200]


def _blob(channel: str, version: Any, value: list[str], base: Any = None) -> list[Any]:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    kind, data = JsonPlusSerializer().dumps_typed(value)
    entry = [channel, version, kind, base64.b64encode(data).decode("ascii")]
    return entry if base is None else [*entry, base]


def _record(cid: str, blobs: list[list[Any]]) -> dict[str, Any]:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    serde = JsonPlusSerializer()

    def enc(value: Any) -> list[str]:
        kind, data = serde.dumps_typed(value)
        return [kind, base64.b64encode(data).decode("ascii")]

    body = {k: v for k, v in _checkpoint(int(cid[-3:]), {}, {"msgs": blobs[-1][1]}).items() if k != "channel_values"}
    body["id"] = cid
    return {"k": "cp", "t": "x", "ns": "", "id": cid, "p": None, "c": enc(body), "m": enc({}), "b": blobs}


def _session_with(path: Path, *records: dict[str, Any]) -> None:
    json.dumps(records)  # records are plain JSON, as a file from elsewhere would hold
    with Session.open(path, create=True, settings=SETTINGS) as session:
        for record in records:
            session.add_message(ROOT, Message("langgraph", "", 0.0, {"lg": record}))
        session.checkpoint(ROOT)


@pytest.mark.parametrize("records", [
    [_record("1ef00000000000000000001", [["msgs", 2, "msgpack", "kQE=", 1]])],  # a tail after nothing
    [_record("1ef00000000000000000001", [["msgs", 1, "msgpack", "kQE=", 1]])],  # a tail after itself
    [_record("1ef00000000000000000001", [["msgs", 1, "msgpack", "kQE="]]),
     _record("1ef00000000000000000002", [["msgs", 2, "msgpack", "kQE=", 1]]),
     _record("1ef00000000000000000003", [["msgs", 1, "msgpack", "kQE=", 2]])],  # 1 -> 2 -> 1
    [_record("1ef00000000000000000001", [["msgs", 1, "msgpack", "kQE=", 2, 3]])],  # six fields
], ids=["no-base", "own-base", "cycle", "six-fields"])
def test_a_malformed_tail_refuses_open_in_one_line(tmp_path: Path, records: list[dict[str, Any]]) -> None:
    path = tmp_path / "s"
    _session_with(path, *records)
    with pytest.raises(SessionError) as info:
        EngineSaver(path, settings=SETTINGS)
    assert "not a LangGraph checkpointer session" in str(info.value) and "\n" not in str(info.value)


def test_a_tail_over_a_value_that_is_not_a_list_is_one_line_when_read(tmp_path: Path) -> None:
    path = tmp_path / "s"
    _session_with(path, _record("1ef00000000000000000001", [["msgs", 1, *_blob("m", 1, ["a"])[2:]]]),
                  _record("1ef00000000000000000002", [_blob("msgs", 2, ["b"], base=1)]))
    with EngineSaver(path, settings=SETTINGS) as saver:
        tup = saver.get_tuple(_config("x"))
        assert tup is not None and tup.checkpoint["channel_values"]["msgs"] == ["a", "b"]
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    kind, data = JsonPlusSerializer().dumps_typed({"not": "a list"})
    scalar = ["msgs", 1, kind, base64.b64encode(data).decode("ascii")]
    other = tmp_path / "other"
    _session_with(other, _record("1ef00000000000000000001", [scalar]),
                  _record("1ef00000000000000000002", [_blob("msgs", 2, ["b"], base=1)]))
    with EngineSaver(other, settings=SETTINGS) as saver:
        with pytest.raises(SessionError) as info:
            saver.get_tuple(_config("x"))
        assert "not a list" in str(info.value) and "\n" not in str(info.value)
