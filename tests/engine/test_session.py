"""E3/E4/E7: portable sessions and the synchronous publication pipeline, read off the recording and
fault-injecting I/O layers."""

from __future__ import annotations

import errno
import json
import os

import pytest

from perfsuite.engine import (
    Fault,
    FaultyFileSystem,
    Message,
    OsFileSystem,
    OwnerConflict,
    RecordingFileSystem,
    SaveAbandoned,
    SaveFailed,
    Session,
    SessionError,
    SessionSettings,
    StaleHead,
)
from perfsuite.engine import _pipeline as pipeline


def turn(i: int, size: int = 200) -> Message:
    return Message("user" if i % 2 == 0 else "assistant", f"turn {i} " + "t" * size, float(i))


def new_session(tmp_path, fs=None, *, chunk_size=1024, turns=20) -> Session:
    session = Session.open(tmp_path / "s", create=True, fs=fs or OsFileSystem(),
                           settings=SessionSettings(chunk_size=chunk_size))
    for i in range(turns):
        session.add_message("root", turn(i))
    session.checkpoint()
    return session


def objects(tmp_path) -> set[str]:
    return set(os.listdir(tmp_path / "s" / "objects"))


def head_of(tmp_path) -> dict:
    return json.loads((tmp_path / "s" / "HEAD").read_bytes())


def test_manifest_after_chunks_and_head_after_manifest_is_durable(tmp_path):
    fs = RecordingFileSystem(OsFileSystem())
    session = new_session(tmp_path, fs)
    session.add_message("root", turn(99))
    mark = fs.mark()
    session.checkpoint()
    ops = fs.since(mark)
    objdir = str(tmp_path / "s" / "objects")
    chunk_renames = [i for i, op in enumerate(ops) if op.kind == "replace" and op.dst.startswith(objdir + "/")
                     and "manifest-" not in op.dst]
    manifest_open = next(i for i, op in enumerate(ops) if op.kind == "open" and "manifest-" in op.path)
    manifest_fsync = next(i for i, op in enumerate(ops) if op.kind == "fsync" and "manifest-" in op.path)
    dir_sync = next(i for i, op in enumerate(ops) if op.kind == "fsync_dir" and op.path == objdir)
    head_replace = next(i for i, op in enumerate(ops) if op.kind == "replace" and op.dst.endswith("/HEAD"))
    root_sync = next(i for i, op in enumerate(ops) if op.kind == "fsync_dir" and op.path == str(tmp_path / "s"))
    # Every staged chunk was fsynced before it was renamed into the store.
    for i in chunk_renames:
        staged = ops[i].path
        assert any(op.kind == "fsync" and op.path == staged for op in ops[:i])
    assert chunk_renames and max(chunk_renames) < manifest_open < manifest_fsync < dir_sync < head_replace < root_sync


def test_empty_selection_writes_nothing_and_makes_no_generation(tmp_path):
    fs = RecordingFileSystem(OsFileSystem())
    session = new_session(tmp_path, fs)
    session.save_registry()
    before = (objects(tmp_path), head_of(tmp_path))
    mark = fs.mark()
    report = session.save_registry()
    assert report.outcome == "noop"
    assert (objects(tmp_path), head_of(tmp_path)) == before
    assert not any(op.kind in ("replace", "fsync_dir") and "objects" in (op.dst or op.path) for op in fs.since(mark))


def test_chunked_transcript_grown_by_one_turn_writes_only_tail_chunk_and_manifest(tmp_path):
    fs = RecordingFileSystem(OsFileSystem())
    session = new_session(tmp_path, fs, chunk_size=1024, turns=60)
    committed = session.manifest.artifacts["conversations/root.jsonl"]
    assert len(committed.chunks) > 5
    session.add_message("root", turn(1000, size=50))
    mark = fs.mark()
    report = session.checkpoint()
    new_names = [os.path.basename(op.dst) for op in fs.since(mark)
                 if op.kind == "replace" and "/objects/" in op.dst and not op.dst.endswith("HEAD")]
    entry = session.manifest.artifacts["conversations/root.jsonl"]
    assert entry.chunks[:-1] == committed.chunks[:-1]  # the prefix is reused, not republished
    tail_and_sidecar = {entry.chunks[-1].digest, session.manifest.artifacts["sidecar.json"].chunks[0].digest}
    assert set(new_names) == tail_and_sidecar
    assert report.staged_bytes < 1024 + 2000
    manifests = [op for op in fs.since(mark) if op.kind == "open" and "manifest-" in op.path]
    assert len(manifests) == 1


def test_whole_artifact_mode_republishes_the_whole_transcript(tmp_path):
    session = new_session(tmp_path, chunk_size=0, turns=30)
    size = session.buffers["root"].size
    session.add_message("root", turn(1000, size=50))
    report = session.checkpoint()
    entry = session.manifest.artifacts["conversations/root.jsonl"]
    assert len(entry.chunks) == 1 and report.staged_bytes > size
    # The hasher resumed from the committed end: only the new bytes (and the sidecar) were hashed.
    assert report.hashed_bytes < report.staged_bytes - size + 1


def _hash_boom(*args, **kwargs):
    raise RuntimeError("injected hash failure")


FAILURES = {
    "stage": lambda mp: [Fault("write", path="*conversations__root.jsonl.*", error=errno.ENOSPC, partial=10)],
    "hash": lambda mp: mp.setattr(pipeline, "hash_staged", _hash_boom) or [],
    "commit": lambda mp: [Fault("fsync", path="manifest-*", error=errno.EIO)],
    "adopt": lambda mp: [Fault("replace", path="*/HEAD", error=errno.EIO)],
}


@pytest.mark.parametrize("phase", sorted(FAILURES))
def test_failure_before_adoption_leaves_pending_head_intact_and_no_ack(tmp_path, monkeypatch, phase):
    faulty = FaultyFileSystem(OsFileSystem())
    session = new_session(tmp_path, faulty)
    head_before = head_of(tmp_path)
    acks: list[BaseException | None] = []
    session.add_message("root", turn(50))
    for fault in FAILURES[phase](monkeypatch):
        faulty.add(fault)
    batch = session.freeze("checkpoint", ["root"])
    with pytest.raises(SaveFailed) as info:
        session.publish(batch, [acks.append])
    assert info.value.phase == phase
    assert head_of(tmp_path) == head_before
    assert acks == []
    assert session.pending is not None and session.save_failed
    with pytest.raises(Exception, match="pending publication"):
        session.close()
    monkeypatch.undo()
    faulty.faults.clear()
    session.retry_pending()
    assert acks == [None]
    assert session.pending is None and head_of(tmp_path)["seq"] == head_before["seq"] + 1
    assert not session.buffers["root"].modified
    session.close()
    reopened = Session.open(tmp_path / "s")
    assert reopened.buffers["root"].messages()[-1] == turn(50)
    assert acks == [None]  # exactly once


def test_abandon_fails_ack_once_and_removes_staged_recovery(tmp_path):
    faulty = FaultyFileSystem(OsFileSystem())
    session = new_session(tmp_path, faulty)
    faulty.add(Fault("fsync", path="manifest-*", error=errno.EIO))
    acks: list[BaseException | None] = []
    with pytest.raises(SaveFailed):
        session.append_mail("root", "tentative", ack=acks.append)
    staged = os.listdir(tmp_path / "s" / "staging")
    assert staged
    assert session.mailbox("root") == []  # tentative: hidden from delivery
    session.abandon_pending()
    assert len(acks) == 1 and isinstance(acks[0], SaveAbandoned)
    assert os.listdir(tmp_path / "s" / "staging") == []
    # Rolled back: never deliverable, and no later sidecar resurrects it.
    assert session.deliver_mail("root") == []
    session.save_registry()
    session.close()
    assert Session.open(tmp_path / "s").mailbox("root") == []
    assert len(acks) == 1


def test_tentative_record_is_left_out_of_other_publications(tmp_path):
    faulty = FaultyFileSystem(OsFileSystem())
    session = new_session(tmp_path, faulty)
    faulty.add(Fault("fsync", path="manifest-*", error=errno.EIO))
    with pytest.raises(SaveFailed):
        session.append_mail("root", "pending mail")
    session.spawn_agent("helper")  # an unrelated acknowledged mutation commits meanwhile
    sidecar = session.store.read_artifact(session.manifest.artifacts["sidecar.json"])
    assert b"pending mail" not in sidecar and b"helper" in sidecar
    session.retry_pending()
    assert [m.body for m in session.mailbox("root")] == ["pending mail"]


def test_empty_selection_does_not_consume_retained_recovery(tmp_path):
    faulty = FaultyFileSystem(OsFileSystem())
    session = new_session(tmp_path, faulty)
    session.add_message("root", turn(77))
    faulty.add(Fault("replace", path="*/HEAD", error=errno.EIO))
    with pytest.raises(SaveFailed):
        session.checkpoint()
    assert session.save_registry().outcome in ("noop", "adopted")
    assert session.pending is not None


def test_stale_epoch_candidate_cannot_install(tmp_path):
    session = new_session(tmp_path)
    first_seq = session.head.seq
    session.add_message("root", turn(100))
    stale = session.freeze("checkpoint", ["root"])
    session.restore(first_seq)  # a new owner epoch
    with pytest.raises(SaveFailed) as info:
        session.publish(stale)
    assert isinstance(info.value.__cause__, StaleHead)
    with pytest.raises(StaleHead):
        session.retry_pending()
    session.abandon_pending()
    assert head_of(tmp_path)["epoch"] == session.epoch


def test_second_owner_is_refused_with_one_line(tmp_path):
    session = new_session(tmp_path)
    with pytest.raises(OwnerConflict) as info:
        Session.open(tmp_path / "s")
    assert "\n" not in str(info.value) and "LEASE" in str(info.value)
    session.close()
    Session.open(tmp_path / "s").close()


def test_new_owner_takes_a_new_epoch(tmp_path):
    session = new_session(tmp_path)
    epoch = session.epoch
    session.close()
    again = Session.open(tmp_path / "s")
    assert again.epoch == epoch + 1
    again.add_message("root", turn(1))
    again.checkpoint()
    assert head_of(tmp_path)["epoch"] == epoch + 1


def _corrupt_latest(tmp_path, what: str) -> str:
    head = head_of(tmp_path)
    if what == "HEAD":
        path = tmp_path / "s" / "HEAD"
        path.write_bytes(b'{"format": "perfsuite-sess')
    elif what == "manifest":
        path = tmp_path / "s" / head["manifest"]
        path.write_bytes(path.read_bytes().replace(b'"seq"', b'"SEQ"'))
    else:
        manifest = json.loads((tmp_path / "s" / head["manifest"]).read_bytes())
        digest = manifest["artifacts"]["conversations/root.jsonl"]["chunks"][-1][0]
        path = tmp_path / "s" / "objects" / digest
        path.write_bytes(b"garbage" + path.read_bytes()[7:])
    return str(path)


@pytest.mark.parametrize("what", ["HEAD", "manifest", "chunk"])
def test_corruption_recovers_a_lost_head_and_refuses_a_damaged_generation_until_repaired(tmp_path, what):
    """A corrupt HEAD is recovered to the newest generation proven adopted (nothing lost). A damaged newest
    generation is refused in one line naming it and the repair command (falling back would silently drop
    acknowledged turns, issue 14); ``Session.repair`` then adopts the newest intact one, explicitly."""
    session = new_session(tmp_path, turns=10)
    good_messages = session.buffers["root"].messages()
    session.add_message("root", turn(500))
    session.checkpoint()
    session.close()
    broken = _corrupt_latest(tmp_path, what)
    if what == "HEAD":
        reopened = Session.open(tmp_path / "s")
        assert reopened.problems and broken in reopened.problems[0] and "\n" not in reopened.problems[0]
        assert reopened.buffers["root"].messages() == [*good_messages, turn(500)]  # the newest generation is intact
    else:
        with pytest.raises(SessionError) as refused:
            Session.open(tmp_path / "s")
        assert broken in str(refused.value) and "perfsuite session repair" in str(refused.value)
        assert "\n" not in str(refused.value)
        report = Session.repair(tmp_path / "s")
        assert any(broken in line for line in report.lines) and report.adopted is not None
        reopened = Session.open(tmp_path / "s")
        assert reopened.buffers["root"].messages() == good_messages
    reopened.add_message("root", turn(501))
    reopened.checkpoint()  # HEAD was repaired: publication continues from the intact generation
    reopened.close()
    assert Session.open(tmp_path / "s").buffers["root"].messages()[-1] == turn(501)


def test_retirement_keeps_last_n_and_pinned_and_deletes_unreferenced_chunks(tmp_path):
    session = Session.open(tmp_path / "s", create=True, settings=SessionSettings(chunk_size=0, keep_generations=3))
    for i in range(8):
        session.add_message("root", turn(i))
        session.checkpoint()
    pinned = session.store.list_manifests()[-1]
    more = True
    while more:
        _removed, more = session.retire(pinned=[pinned])
    manifests = session.store.list_manifests()
    assert len(manifests) == 4 and pinned in manifests
    referenced = set().union(*(session.store.read_manifest(m).digests() for m in manifests))
    assert session.store.scan_objects() == referenced
    session.close()
    assert Session.open(tmp_path / "s").buffers["root"].messages() == [turn(i) for i in range(8)]


def test_modified_flag_survives_an_edit_after_freeze(tmp_path):
    session = new_session(tmp_path)
    session.add_message("root", turn(1))
    batch = session.freeze("checkpoint", ["root"])
    session.add_message("root", turn(2))  # an edit after freeze stays dirty for the next checkpoint
    session.publish(batch)
    assert session.buffers["root"].modified
    session.checkpoint()
    assert not session.buffers["root"].modified


def test_committed_projection_comes_from_committed_root(tmp_path):
    session = new_session(tmp_path, turns=4)
    committed_turns = session.sidecar.root["turn_count"]
    session.add_message("root", Message("user", "not yet committed", 1.0))
    session.save_registry()  # an ordinary metadata write projects committed fields only
    sidecar = json.loads(session.store.read_artifact(session.manifest.artifacts["sidecar.json"]))
    assert sidecar["root"]["turn_count"] == committed_turns
    assert sidecar["root"]["latest_user_preview"] != "not yet committed"
    session.checkpoint()
    sidecar = json.loads(session.store.read_artifact(session.manifest.artifacts["sidecar.json"]))
    assert sidecar["root"]["latest_user_preview"] == "not yet committed"


CHILD_CRASH_BEFORE_ADOPTION = """
import sys
from perfsuite.engine import Fault, FaultyFileSystem, Message, OsFileSystem, Session, SessionSettings
fs = FaultyFileSystem(OsFileSystem(), [Fault("replace", path="*/HEAD", crash="before")], on_crash="kill")
session = Session.open(sys.argv[1], fs=fs, settings=SessionSettings(chunk_size=1024))
session.add_message("root", Message("user", "unpublished before the crash", 7.0))
session.checkpoint()
"""


def test_crash_before_adoption_leaves_recoverable_pending_publication(tmp_path):
    import signal
    import subprocess
    import sys

    session = new_session(tmp_path)
    committed = session.buffers["root"].messages()
    session.close()
    proc = subprocess.run([sys.executable, "-c", CHILD_CRASH_BEFORE_ADOPTION, str(tmp_path / "s")],
                          capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    reopened = Session.open(tmp_path / "s", settings=SessionSettings(chunk_size=1024))
    assert reopened.buffers["root"].messages() == committed  # HEAD never moved
    assert reopened.pending is not None and reopened.pending.recovered and reopened.save_failed
    with pytest.raises(Exception, match="pending publication"):
        reopened.close()
    reopened.retry_pending()
    assert reopened.buffers["root"].messages()[-1].content == "unpublished before the crash"
    assert os.listdir(tmp_path / "s" / "staging") == []
    reopened.close()
    assert Session.open(tmp_path / "s").buffers["root"].messages()[-1].content == "unpublished before the crash"
