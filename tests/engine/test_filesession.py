"""E3 file-backed profile: transcripts are E2 logs; the sidecar is replaced after they are durable."""

from __future__ import annotations

import errno

import pytest

from perfsuite.engine import FileSession, Message, OsFileSystem, OwnerConflict, SaveFailed
from perfsuite.engine.testing import Fault, FaultyFileSystem, RecordingFileSystem


def test_sidecar_replaced_after_transcript_is_durable(tmp_path):
    fs = RecordingFileSystem(OsFileSystem())
    session = FileSession.open(tmp_path / "s", create=True, fs=fs)
    session.add_message("root", Message("user", "hi", 1.0))
    mark = fs.mark()
    session.checkpoint()
    ops = fs.since(mark)
    transcript_fsync = max(i for i, op in enumerate(ops)
                           if op.kind == "fsync" and op.path.endswith("conversation.jsonl"))
    transcript_dir = max(i for i, op in enumerate(ops) if op.kind == "fsync_dir" and op.path.endswith("/root"))
    sidecar_replace = next(i for i, op in enumerate(ops) if op.kind == "replace" and op.dst.endswith("sidecar.json"))
    assert transcript_fsync < transcript_dir < sidecar_replace


def test_mail_commits_with_receipt_and_reloads(tmp_path):
    session = FileSession.open(tmp_path / "s", create=True)
    session.spawn_agent("a1", prompt="start")
    record = session.append_mail("a1", "note")
    assert session.deliver_mail("a1") == [record]
    session.checkpoint("a1")
    session.close()
    again = FileSession.open(tmp_path / "s")
    assert again.deliver_mail("a1") == [] and record.id in again.buffers["a1"].receipts
    assert again.buffers["a1"].messages()[0].content == "start"


def test_pid_lock_refuses_second_owner(tmp_path):
    session = FileSession.open(tmp_path / "s", create=True)
    with pytest.raises(OwnerConflict):
        FileSession.open(tmp_path / "s")
    session.close()


def test_barrier_failure_is_a_pending_publication_and_sidecar_is_untouched(tmp_path):
    faulty = FaultyFileSystem(OsFileSystem())
    session = FileSession.open(tmp_path / "s", create=True, fs=faulty)
    session.add_message("root", Message("user", "one", 1.0))
    session.checkpoint()
    sidecar = (tmp_path / "s" / "sidecar.json").read_bytes()
    faulty.add(Fault("fsync", path="conversation.jsonl", error=errno.EIO))
    session.add_message("root", Message("user", "two", 2.0))
    acks = []
    with pytest.raises(SaveFailed):
        session.publish(session.freeze("checkpoint", ["root"]), [acks.append])
    assert (tmp_path / "s" / "sidecar.json").read_bytes() == sidecar and acks == []
    session.retry_pending()  # recovery rewrites the transcript into a new file, then the sidecar
    assert acks == [None]
    session.close()
    assert [m.content for m in FileSession.open(tmp_path / "s").buffers["root"].messages()] == ["one", "two"]
