"""E3/E4/E7: portable sessions and the synchronous publication pipeline, read off the recording and
fault-injecting I/O layers."""

from __future__ import annotations

import errno
import json
import os

import pytest

from perfsuite.engine import (
    Message,
    OsFileSystem,
    OwnerConflict,
    SaveAbandoned,
    SaveFailed,
    Session,
    SessionError,
    SessionSettings,
    StaleHead,
)
from perfsuite.engine import _pipeline as pipeline
from perfsuite.engine.testing import Fault, FaultyFileSystem, RecordingFileSystem


def turn(i: int, size: int = 200) -> Message:
    return Message("user" if i % 2 == 0 else "assistant", f"turn {i} " + "t" * size, float(i))


def new_session(tmp_path, fs=None, *, chunk_size=1024, turns=20) -> Session:
    session = Session.open(tmp_path / "s", create=True, fs=fs or OsFileSystem(),
                           settings=SessionSettings(chunk_size=chunk_size))
    for i in range(turns):
        session.add_message("root", turn(i))
    session.checkpoint()
    return session


def head_of(tmp_path) -> dict:
    return json.loads((tmp_path / "s" / "HEAD").read_bytes())


def log_of(tmp_path) -> str:
    return str(tmp_path / "s" / head_of(tmp_path)["log"])


def test_a_checkpoint_is_one_pwrite_and_one_fdatasync_of_the_log(tmp_path):
    """Format 2: the steady path of a publication is one pwrite of its record at the log's tail
    and ONE fdatasync (the commit point): no rename, no directory fsync, no new name."""
    fs = RecordingFileSystem(OsFileSystem())
    session = new_session(tmp_path, fs)
    session.add_message("root", turn(99))
    size = os.path.getsize(log_of(tmp_path))
    mark = fs.mark()
    session.checkpoint()
    ops = fs.since(mark)
    assert [(op.kind, op.path) for op in ops] == [("pwrite", log_of(tmp_path)), ("fdatasync", log_of(tmp_path))]
    assert ops[0].offset == session.store.current.tail - ops[0].length  # appended at the tail, in place
    # preallocated (its BASE plus a whole capacity of room), and the size never moves
    assert os.path.getsize(log_of(tmp_path)) == size == head_of(tmp_path)["capacity"] >= session.settings.log_capacity


def test_empty_selection_writes_nothing_and_makes_no_generation(tmp_path):
    fs = RecordingFileSystem(OsFileSystem())
    session = new_session(tmp_path, fs)
    session.save_registry()
    before = (head_of(tmp_path), (tmp_path / "s" / head_of(tmp_path)["log"]).read_bytes(), session.head)
    mark = fs.mark()
    report = session.save_registry()
    assert report.outcome == "noop"
    assert (head_of(tmp_path), (tmp_path / "s" / head_of(tmp_path)["log"]).read_bytes(), session.head) == before
    assert fs.since(mark) == []


def test_chunked_transcript_grown_by_one_turn_writes_only_its_bytes_and_tail_chunk_digest(tmp_path):
    fs = RecordingFileSystem(OsFileSystem())
    session = new_session(tmp_path, fs, chunk_size=1024, turns=60)
    committed = session.manifest.artifacts["conversations/root.jsonl"]
    assert len(committed.chunks) > 5
    session.add_message("root", turn(1000, size=50))
    added = len(turn(1000, size=50).encode())
    mark = fs.mark()
    report = session.checkpoint()
    entry = session.manifest.artifacts["conversations/root.jsonl"]
    assert entry.chunks[:-1] == committed.chunks[:-1]  # the prefix is reused, not republished
    assert report.staged_bytes == added  # only the new bytes go in the record, inline
    writes = [op for op in fs.since(mark) if op.kind in ("write", "pwrite")]
    assert len(writes) == 1 and writes[0].length < added + 1500  # framing, chunk digest, sidecar delta


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


def _stage_boom(*args, **kwargs):
    raise MemoryError("injected stage failure")


FAILURES = {  # format 2: stage and hash are in memory, commit is a pwrite, adopt an fdatasync
    "stage": lambda mp: mp.setattr(pipeline, "stage_batch", _stage_boom) or [],
    "hash": lambda mp: mp.setattr(pipeline, "hash_staged", _hash_boom) or [],
    "commit": lambda mp: [Fault("pwrite", path="*.log", error=errno.ENOSPC, partial=10)],
    "adopt": lambda mp: [Fault("fdatasync", path="*.log", error=errno.EIO)],
}


@pytest.mark.parametrize("phase", sorted(FAILURES))
def test_failure_before_adoption_leaves_pending_head_intact_and_no_ack(tmp_path, monkeypatch, phase):
    faulty = FaultyFileSystem(OsFileSystem())
    session = new_session(tmp_path, faulty)
    head_before, generation = head_of(tmp_path), session.head.seq
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
    session.retry_pending()  # after a failed write or sync the log is poisoned: the retry rolls over
    assert acks == [None]
    assert session.pending is None and session.head.seq == generation + 1
    assert (head_of(tmp_path)["number"] > head_before["number"]) == (phase in ("commit", "adopt"))
    assert not session.buffers["root"].modified
    session.close()
    reopened = Session.open(tmp_path / "s")
    assert reopened.buffers["root"].messages()[-1] == turn(50)
    assert acks == [None]  # exactly once


def test_abandon_fails_ack_once_and_rolls_over_past_the_abandoned_record(tmp_path):
    faulty = FaultyFileSystem(OsFileSystem())
    session = new_session(tmp_path, faulty)
    faulty.add(Fault("fdatasync", path="*.log", error=errno.EIO))
    acks: list[BaseException | None] = []
    with pytest.raises(SaveFailed):
        session.append_mail("root", "tentative", ack=acks.append)
    log = head_of(tmp_path)["log"]
    assert b"tentative" in (tmp_path / "s" / log).read_bytes()  # written, its sync failed: it may persist
    assert session.mailbox("root") == []  # tentative: hidden from delivery
    session.abandon_pending()
    assert len(acks) == 1 and isinstance(acks[0], SaveAbandoned)
    assert head_of(tmp_path)["log"] != log  # HEAD names a new log whose BASE is the committed state
    # Rolled back: never deliverable, and no later sidecar resurrects it.
    assert session.deliver_mail("root") == []
    session.save_registry()
    session.close()
    assert Session.open(tmp_path / "s").mailbox("root") == []
    assert len(acks) == 1


def test_tentative_record_is_left_out_of_other_publications(tmp_path):
    faulty = FaultyFileSystem(OsFileSystem())
    session = new_session(tmp_path, faulty)
    faulty.add(Fault("fdatasync", path="*.log", error=errno.EIO))
    with pytest.raises(SaveFailed):
        session.append_mail("root", "pending mail")
    session.spawn_agent("helper")  # an unrelated acknowledged mutation commits meanwhile (in a new log)
    sidecar = json.dumps(session.committed_sidecar()).encode()
    assert b"pending mail" not in sidecar and b"helper" in sidecar
    session.retry_pending()
    assert [m.body for m in session.mailbox("root")] == ["pending mail"]


def test_empty_selection_does_not_consume_retained_recovery(tmp_path):
    faulty = FaultyFileSystem(OsFileSystem())
    session = new_session(tmp_path, faulty)
    session.add_message("root", turn(77))
    faulty.add(Fault("fdatasync", path="*.log", error=errno.EIO))
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
        Session.open(tmp_path / "s")  # refused by the flock on the open log, naming the lease's owner
    assert "\n" not in str(info.value) and "LEASE" in str(info.value) and str(os.getpid()) in str(info.value)
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
    assert again.head.epoch == epoch + 1  # its records carry the new epoch (HEAD moves only at roll-over)
    again.close()
    assert Session.open(tmp_path / "s").head.epoch == epoch + 1


def _corrupt_latest(tmp_path, what: str) -> str:
    """Damage HEAD, or flip a byte inside the log's last record (format 2)."""
    if what == "HEAD":
        path = tmp_path / "s" / "HEAD"
        path.write_bytes(b'{"format": "perfsuite-sess')
        return str(path)
    path = tmp_path / "s" / head_of(tmp_path)["log"]
    data = bytearray(path.read_bytes())
    end = len(bytes(data).rstrip(b"\0"))
    data[end - 60] ^= 0xFF  # inside the last record's payload or trailer: damage, not a torn write
    path.write_bytes(bytes(data))
    return str(path)


@pytest.mark.parametrize("what", ["HEAD", "last record"])
def test_corruption_recovers_a_lost_head_and_refuses_a_damaged_generation_until_repaired(tmp_path, what):
    """A corrupt HEAD is recovered to the log proven adopted (nothing lost). A flipped byte in the last
    record is refused in one line naming the log and the repair command (falling back would silently drop
    an acknowledged turn, E3); ``Session.repair`` then adopts the valid prefix, explicitly."""
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
        assert any("lost" in line for line in report.lines)  # it says what the adopted prefix loses
        reopened = Session.open(tmp_path / "s")
        assert reopened.buffers["root"].messages() == good_messages
    reopened.add_message("root", turn(501))
    reopened.checkpoint()  # publication continues from the adopted generation
    reopened.close()
    assert Session.open(tmp_path / "s").buffers["root"].messages()[-1] == turn(501)


def test_mid_log_damage_is_refused_and_never_taken_for_a_torn_tail(tmp_path):
    session = new_session(tmp_path, turns=4)
    for i in range(3):
        session.add_message("root", turn(600 + i))
        session.checkpoint()
    records = session.store.current.tail
    session.close()
    path = tmp_path / "s" / head_of(tmp_path)["log"]
    data = bytearray(path.read_bytes())
    data[records - 2000] ^= 0xFF  # inside an earlier record: valid records follow it
    path.write_bytes(bytes(data))
    with pytest.raises(SessionError, match=r"mid-log damage|does not follow|fails its checks"):
        Session.open(tmp_path / "s")


def test_retirement_deletes_whole_logs_nothing_retained_references(tmp_path):
    """Format 2: roll-overs start new logs; once nothing retained (the last ``keep_generations``, a pinned
    generation, the committed state's bytes) references an older log, an idle slice deletes it whole."""
    session = Session.open(tmp_path / "s", create=True, settings=SessionSettings(chunk_size=0, keep_generations=3,
                                                                                 log_capacity=4096))
    for i in range(30):
        session.add_message("root", turn(i))
        session.checkpoint()
    logs = session.store.log_numbers()
    assert len(logs) > 3  # whole-artifact checkpoints filled several small logs
    pinned = 3  # an early generation, kept with every log its state needs
    more = True
    while more:
        _removed, more = session.retire(pinned=[pinned])
    left = session.store.log_numbers()
    assert len([n for n in left if n <= logs[-1]]) < len(logs) // 2  # whole logs deleted
    assert min(left) == 1  # the pinned generation's log, and the older one its BASE references, are kept
    assert session.store.state_at(pinned).generation == pinned  # the pinned generation can still be restored
    assert all(session.store.state.logs() <= set(left) for _ in [0])
    session.close()
    assert Session.open(tmp_path / "s").buffers["root"].messages() == [turn(i) for i in range(30)]


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
    sidecar = session.committed_sidecar()
    assert sidecar["root"]["turn_count"] == committed_turns
    assert sidecar["root"]["latest_user_preview"] != "not yet committed"
    session.checkpoint()
    sidecar = session.committed_sidecar()
    assert sidecar["root"]["latest_user_preview"] == "not yet committed"


CHILD_CRASH_BEFORE_THE_COMMIT_POINT = """
import sys
from perfsuite.engine import Message, OsFileSystem, Session, SessionSettings
from perfsuite.engine.testing import Fault, FaultyFileSystem
fs = FaultyFileSystem(OsFileSystem(), [Fault("fdatasync", path="*.log", crash="before")], on_crash="kill")
session = Session.open(sys.argv[1], fs=fs, settings=SessionSettings(chunk_size=1024))
session.add_message("root", Message("user", "unpublished before the crash", 7.0))
session.checkpoint()
"""


def test_a_process_killed_before_the_commit_point_leaves_a_session_that_opens(tmp_path):
    """Format 2 stages nothing on disk (a failed publication stays pending in memory): a process killed
    between the pwrite and the fdatasync leaves the complete record in the page cache, which a reopen
    adopts (an unacknowledged generation may survive; an acknowledged one always does). Format 1 recovered
    the staged bytes as a pending publication instead (format 2 changes that, by design)."""
    import signal
    import subprocess
    import sys

    session = new_session(tmp_path)
    committed = session.buffers["root"].messages()
    session.close()
    proc = subprocess.run([sys.executable, "-c", CHILD_CRASH_BEFORE_THE_COMMIT_POINT, str(tmp_path / "s")],
                          capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    reopened = Session.open(tmp_path / "s", settings=SessionSettings(chunk_size=1024))
    assert reopened.pending is None and [p for p in reopened.problems if "LEASE" not in p] == []
    assert reopened.buffers["root"].messages()[: len(committed)] == committed
    assert reopened.buffers["root"].messages()[-1].content == "unpublished before the crash"
    reopened.add_message("root", Message("user", "after the crash", 8.0))
    reopened.checkpoint()
    reopened.close()
    assert Session.open(tmp_path / "s").buffers["root"].messages()[-1].content == "after the crash"



def test_retirement_after_a_reopen_keeps_the_logs_retained_generations_rest_on(tmp_path):
    """keep_generations survives a reopen: the open store learns every retained log's BASE references, not
    only HEAD's log's, so retirement never deletes a log an older retained generation's bytes rest on. The
    turns (hex of seeded bytes, so nothing compresses them away) roll the 4 KiB logs over twice with
    rewrites between: the newest log's BASE no longer references log 1; an older retained one's does."""
    import random

    rnd = random.Random(44)
    settings = SessionSettings(log_capacity=4096, keep_generations=4)
    path = tmp_path / "s"
    session = Session.open(path, create=True, settings=settings)
    for i, size in enumerate([800, "rewrite", 200, 200, 100, 200, "rewrite", 200, 1200, 1200]):
        if size == "rewrite":
            session.buffers["root"].replace_messages([Message("user", rnd.randbytes(200).hex(), i)])
        else:
            session.add_message("root", Message("user", rnd.randbytes(int(size)).hex(), i))
        session.checkpoint()
    newest = session.head.seq
    assert session.store.log_numbers() == [1, 2, 3]
    session.close()

    session = Session.open(path, settings=settings)
    while session.retire()[1]:
        pass
    for generation in range(newest - settings.keep_generations + 1, newest + 1):
        assert session.restore(generation) is not None, generation  # every retained generation restorable
    session.close()


def test_a_retained_generation_resting_on_an_older_log_restores_after_a_reopen(tmp_path):
    """restore() of a retained generation whose log's BASE names a log HEAD's log does not: the store learns
    that log's salt while replaying the old state, and the new BASE the restore writes names it."""
    import random
    import shutil

    rnd = random.Random(5)
    settings = SessionSettings(log_capacity=4096, keep_generations=4)
    path = tmp_path / "s"
    session = Session.open(path, create=True, settings=settings)
    held = {}
    for i, size in enumerate([200, 1200, "rewrite", 100, 100, "rewrite", 800, 1200]):
        if size == "rewrite":
            session.buffers["root"].replace_messages([Message("user", rnd.randbytes(200).hex(), i)])
        else:
            session.add_message("root", Message("user", rnd.randbytes(int(size)).hex(), i))
        session.checkpoint()
        held[session.head.seq] = session.buffers["root"].messages()
    newest = session.head.seq
    assert len(session.store.log_numbers()) >= 3
    session.close()
    for generation in range(newest - settings.keep_generations + 1, newest + 1):
        copy = tmp_path / f"g{generation}"
        shutil.copytree(path, copy)
        session = Session.open(copy, settings=settings)
        session.restore(generation)
        session.close()
        session = Session.open(copy, settings=settings)  # the restore is durable, its new BASE complete
        assert session.buffers["root"].messages() == held[generation], generation
        session.close()
