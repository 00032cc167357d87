"""Format 2: the sidecar's changes are deltas, O(what changed). A mailbox's: a delivery appends its
record (``madd``), a committed receipt or a discard removes ids (``mdel``); the whole mailbox is never
rewritten per delivery, however many records are pending (found by scripts/acceptance/durability_points.py's stream:
60 pending completions made each delivery write all of them, 130 KB a publication). The prompt index's:
a freeze takes a view of the buffer's append-only offsets, never a copy (a 100 MB session copied 50,000
offsets per checkpoint), and the record carries the new offsets only."""

from __future__ import annotations

import copy

from hypothesis import given
from hypothesis import strategies as st

from perfsuite.engine import Message, OsFileSystem, Session, SessionSettings
from perfsuite.engine._logformat import LogHeader, salt32, scan
from perfsuite.engine._logstate import apply_ops
from perfsuite.engine._sidecar_delta import mailbox_ops
from perfsuite.engine.testing import RecordingFileSystem

IDS = [f"m{i}" for i in range(10)]


def _box(ids: list[str]) -> list[dict]:
    return [{"id": i, "to": "root", "body": f"body of {i}"} for i in ids]


@given(st.lists(st.sampled_from(IDS), unique=True, max_size=8), st.lists(st.sampled_from(IDS), unique=True,
                                                                         min_size=1, max_size=8))
def test_the_delta_rebuilds_the_new_mailbox_from_the_old_one(old_ids, new_ids):
    old, new = _box(old_ids), _box(new_ids)
    ops = mailbox_ops("root", old, new)
    doc = {"mailboxes": {"root": copy.deepcopy(old)} if old else {}}
    apply_ops(doc, ops)
    assert doc["mailboxes"].get("root") == new
    sent = [r for op in ops if op[0] == "madd" for r in op[3]]
    kept = len(new) - len(sent)
    assert kept >= 0 and new[:kept] == [r for r in old if r in new[:kept]]  # only what is not kept is sent


def test_appending_sends_the_new_record_only_and_removal_sends_ids():
    assert mailbox_ops("root", _box(["m1", "m2"]), _box(["m1", "m2", "m3"])) == [["madd", "mailboxes", "root",
                                                                                   _box(["m3"])]]
    assert mailbox_ops("root", _box(["m1", "m2", "m3"]), _box(["m2"])) == [["mdel", "mailboxes", "root",
                                                                            ["m1", "m3"]]]
    assert mailbox_ops("root", [{"body": "no id"}], _box(["m1"])) is None  # (then the whole mailbox is put)


def _delivery_bytes(tmp_path, pending: int) -> int:
    recorder = RecordingFileSystem(OsFileSystem(), keep_data=False)
    session = Session.open(tmp_path / f"s{pending}", create=True, fs=recorder,
                           settings=SessionSettings(asynchronous=False))
    body = "execution result: " + "r" * 4000
    for _ in range(pending):
        session.append_mail("root", body, sender="background", kind="completion")
    mark = recorder.mark()
    session.append_mail("root", body, sender="background", kind="completion")
    written = sum(op.length for op in recorder.since(mark) if op.kind in ("write", "pwrite"))
    reopened_mail = len(session.sidecar.visible_mail("root"))
    session.close()
    again = Session.open(tmp_path / f"s{pending}")
    assert len(again.sidecar.visible_mail("root")) == reopened_mail == pending + 1  # the deltas replay
    again.close()
    return written


def test_a_delivery_writes_the_same_bytes_however_many_records_are_pending(tmp_path):
    one, many = _delivery_bytes(tmp_path, 1), _delivery_bytes(tmp_path, 60)
    assert many <= one * 1.05, (one, many)  # format 2 before the delta: 60 pending records, 60x the bytes


def test_the_prompt_index_a_freeze_took_does_not_move_and_the_record_carries_the_new_offsets(tmp_path):
    session = Session.open(tmp_path / "s", create=True, settings=SessionSettings(asynchronous=False))
    for i in range(3):
        session.add_message("root", Message("user", f"question {i}", float(i)))
    session.checkpoint()
    session.add_message("root", Message("user", "question 3", 3.0))
    batch = session.freeze("checkpoint", ["root"])
    frozen = batch.projection["prompt_index"]
    session.add_message("root", Message("user", "question 4, after the freeze", 4.0))  # the same list grows
    offsets = session.buffers["root"].user_offsets
    assert len(frozen) == 4 and list(frozen) == offsets[:4] and frozen[-1] == offsets[3] and frozen[1:3] == offsets[1:3]
    assert frozen == offsets[:4] and frozen != offsets
    session.publish(batch)
    with open(session.store.current.path, "rb") as handle:
        data = handle.read()
    header = LogHeader.decode(data)
    [record] = [r for r in scan(data, salt32(header.salt)).records if r.meta.get("publication") == batch.id]
    assert [op for op in record.meta["sidecar"] if op[1] == "prompt_index"] == [
        ["index", "prompt_index", None, [offsets[3]]]]  # the new offset only, not the whole index
    committed = session.committed_sidecar()["root"]["prompt_index"]
    assert committed == offsets[:4]
    session.checkpoint()
    assert session.committed_sidecar()["root"]["prompt_index"] == offsets
    session.close()
    again = Session.open(tmp_path / "s")
    assert again.committed_sidecar()["root"]["prompt_index"] == offsets
    again.close()
