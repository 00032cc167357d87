"""An acknowledgement means durable on every path (E4, E1 fsyncgate).

Each test reproduces one defect found by an independent pass and fails on the engine before the fix:
1. ``request_checkpoint(ack=...)`` while a publication is pending acknowledged success at once;
2. one transient EIO on HEAD's directory fsync wedged the session (every retry StaleHead, and each
   retry deleted the manifest HEAD named);
3. a file-backed abandon left the abandoned turn on disk;
4. a full disk while a file-backed session recovers a torn tail advised ``session repair``.

Format 2 (the session log) moved the portable commit point from HEAD's replace to the log's fdatasync; HEAD is
replaced only at roll-over. The portable cases inject their faults there (the log's fdatasync on the
steady path, HEAD's directory fsync during a roll-over); the behaviour asserted is the same.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys

import pytest

from perfsuite.engine import (
    FileSession,
    Message,
    OsFileSystem,
    SaveAbandoned,
    SaveFailed,
    Session,
    SessionError,
    SessionSettings,
)
from perfsuite.engine.testing import Fault, FaultyFileSystem


def turn(i: int) -> Message:
    return Message("user", f"turn {i}", float(i))


def dead(_pid: int) -> bool:
    """The crashed owner's process is gone (a SIGKILL, modelled)."""
    return False


def contents(session: Session) -> list[str]:
    return [m.content for m in session.buffers["root"].messages()]


# -- 1. no acknowledgement while a pending publication holds back automatic checkpoints -------------------
CHILD_THREE_TURNS = """
import json, os, signal, sys
from perfsuite.engine import FileSession, Message, OsFileSystem, Session
from perfsuite.engine.testing import Fault, FaultyFileSystem
profile = {"portable": Session, "file": FileSession}[sys.argv[2]]
# turn 1's commit point: the log's third fdatasync (the creation's BASE, turn 0), the transcript's second fsync
fault = (Fault("fdatasync", nth=3, path="*.log") if profile is Session
         else Fault("fsync", nth=2, path="conversation.jsonl"))
fs = FaultyFileSystem(OsFileSystem(), [fault])
session = profile.open(sys.argv[1], create=True, fs=fs)
acks = {}
for i in range(3):
    session.add_message("root", Message("user", f"turn {i}", float(i)))
    session.request_checkpoint(ack=lambda error, i=i: acks.setdefault(i, None if error is None
                                                                        else type(error).__name__))
print(json.dumps({"acks": acks, "pending": session.pending is not None}), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("profile", ["portable", "file"])
def test_a_checkpoint_requested_while_a_publication_is_pending_is_never_acknowledged_as_durable(tmp_path, profile):
    path = str(tmp_path / "s")
    child = subprocess.run([sys.executable, "-c", CHILD_THREE_TURNS, path, profile], capture_output=True, text=True,
                           timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr
    seen = json.loads(child.stdout)
    acks = {int(i): error for i, error in seen["acks"].items()}
    assert acks[0] is None  # turn 0 was published and adopted
    assert seen["pending"]  # turn 1's publication failed before adoption
    assert 1 not in acks  # its acknowledgement waits for retry or abandon
    assert acks[2] == "SaveFailed"  # turn 2 was not published: said, never acknowledged as durable
    # After the SIGKILL: reopen and retry what was recovered; every turn acknowledged with None is there
    reopened = (Session if profile == "portable" else FileSession).open(path)
    if reopened.pending is not None:
        reopened.retry_pending()
    durable = contents(reopened)
    assert all(f"turn {i}" in durable for i, error in acks.items() if error is None)
    reopened.close()


# -- 2. a transient EIO at the commit point does not wedge the session ------------------------------------
def test_a_transient_eio_on_the_logs_fdatasync_is_recovered_by_retry(tmp_path):
    path = str(tmp_path / "s")
    fs = FaultyFileSystem(OsFileSystem())
    session = Session.open(path, create=True, fs=fs)
    session.add_message("root", turn(0))
    session.checkpoint()
    fs.add(Fault("fdatasync", path="*.log"))  # the next commit point
    session.add_message("root", turn(1))
    acks: list[BaseException | None] = []
    with pytest.raises(SaveFailed):
        session.publish(session.freeze("checkpoint", ["root"]), [acks.append])
    assert acks == [] and session.pending is not None
    session.retry_pending()  # the log is poisoned (never synced again): the retry rolls over into a new log
    assert acks == [None] and session.pending is None
    session.add_message("root", turn(2))
    session.checkpoint()  # the session goes on publishing
    session.close()
    reopened = Session.open(path)
    assert contents(reopened) == ["turn 0", "turn 1", "turn 2"]
    reopened.close()


def test_nothing_acknowledged_after_a_failed_fdatasync_rests_on_a_poisoned_log(tmp_path):
    """Found by session-adopt-eio (invariant 7): the log's fdatasync fails, the retry's roll-over lands
    HEAD but fails its directory fsync (that log is poisoned too), the second retry rolls over again and
    acknowledges. Its BASE copied the bytes out of both poisoned logs, yet the session installed the
    publication's chunks as selected against the old state, so the acknowledged generation still rested
    on the first log in memory (and every later BASE referenced it). Installed as open replays it now."""
    path = str(tmp_path / "s")
    fs = FaultyFileSystem(OsFileSystem())
    session = Session.open(path, create=True, fs=fs)
    session.add_message("root", turn(0))
    session.checkpoint()
    failed = session.store.log_path(session.head.log)
    fs.add(Fault("fdatasync", path="*.log"))
    session.add_message("root", turn(1))
    with pytest.raises(SaveFailed):
        session.checkpoint()
    fs.add(Fault("fsync_dir", path=os.path.abspath(path)))  # the retry's HEAD replace lands, its dir fsync fails
    with pytest.raises(SaveFailed):
        session.retry_pending()
    landed = session.store.log_path(session.store.current.number)
    session.retry_pending()
    resting = session.durable_files()
    assert failed not in resting and landed not in resting, resting
    assert session.store.state.logs() == {session.head.log}  # every live byte in the log HEAD names
    session.add_message("root", turn(2))
    session.checkpoint()
    session.close()
    reopened = Session.open(path)
    assert contents(reopened) == ["turn 0", "turn 1", "turn 2"]
    reopened.close()


def _rolling(tmp_path) -> tuple[str, FaultyFileSystem, Session]:
    """A session whose next checkpoint does not fit its small log: it rolls over (HEAD is replaced)."""
    path = str(tmp_path / "s")
    fs = FaultyFileSystem(OsFileSystem())
    session = Session.open(path, create=True, fs=fs, settings=SessionSettings(log_capacity=4096))
    session.add_message("root", turn(0))
    session.checkpoint()
    session.add_message("root", Message("user", "turn 1 " + "x" * 9000, 1.0))  # more than the log's room
    return path, fs, session


def test_a_transient_eio_on_heads_directory_fsync_is_recovered_by_retry(tmp_path):
    path, fs, session = _rolling(tmp_path)
    fs.add(Fault("fsync_dir", path=os.path.abspath(path)))  # HEAD's directory fsync of the roll-over
    acks: list[BaseException | None] = []
    with pytest.raises(SaveFailed):
        session.publish(session.freeze("checkpoint", ["root"]), [acks.append])
    assert acks == [] and session.pending is not None
    session.retry_pending()  # HEAD is written again into a new file and its directory synced (fsyncgate)
    assert acks == [None] and session.pending is None
    session.add_message("root", turn(2))
    session.checkpoint()
    session.close()
    reopened = Session.open(path)
    assert contents(reopened) == ["turn 0", "turn 1 " + "x" * 9000, "turn 2"]
    reopened.close()


def test_a_crash_after_heads_directory_fsync_failed_keeps_a_session_that_opens(tmp_path):
    path, fs, session = _rolling(tmp_path)
    fs.add(Fault("fsync_dir", path=os.path.abspath(path)))
    with pytest.raises(SaveFailed):
        session.checkpoint()
    for _attempt in range(2):  # retries that fail again must not destroy what HEAD names
        fs.add(Fault("fsync", path="*HEAD.tmp-*"))
        with pytest.raises(SaveFailed):
            session.retry_pending()
    session.store.close()  # a crash now (its process dies, releasing the log's flock): the session still opens
    reopened = Session.open(path, owner_alive=dead)
    assert contents(reopened)[:1] == ["turn 0"]
    reopened.close()


# -- 3. abandon rolls the file-backed transcript back ------------------------------------------------------
def test_an_abandoned_file_backed_turn_is_not_there_after_reopen(tmp_path):
    path = str(tmp_path / "s")
    fs = FaultyFileSystem(OsFileSystem())
    session = FileSession.open(path, create=True, fs=fs)
    session.add_message("root", turn(0))
    session.checkpoint()
    fs.add(Fault("fsync", path="conversation.jsonl"))
    session.add_message("root", turn(1))
    acks: list[BaseException | None] = []
    with pytest.raises(SaveFailed):
        session.publish(session.freeze("checkpoint", ["root"]), [acks.append])
    session.abandon_pending()
    assert len(acks) == 1 and isinstance(acks[0], SaveAbandoned)
    session.close()
    reopened = FileSession.open(path)
    assert contents(reopened) == ["turn 0"]  # the caller was told it failed, and it did
    reopened.close()


def test_after_an_abandon_a_later_save_publishes_the_kept_text_again(tmp_path):
    path = str(tmp_path / "s")
    fs = FaultyFileSystem(OsFileSystem())
    session = FileSession.open(path, create=True, fs=fs)
    session.add_message("root", turn(0))
    session.checkpoint()
    fs.add(Fault("fsync", path="conversation.jsonl"))
    session.add_message("root", turn(1))
    with pytest.raises(SaveFailed):
        session.checkpoint()
    session.abandon_pending()
    session.add_message("root", turn(2))
    session.checkpoint()  # a new publication, with its own acknowledgement: the buffer is what is saved
    session.close()
    reopened = FileSession.open(path)
    assert contents(reopened) == ["turn 0", "turn 1", "turn 2"]
    reopened.close()


# -- 4. a full disk is not damage --------------------------------------------------------------------------
@pytest.mark.parametrize("failing", [None, "*.torn-*"], ids=["every-write", "the-recovery-file"])
def test_a_full_disk_while_recovering_a_torn_tail_says_free_space_not_repair(tmp_path, failing):
    path = str(tmp_path / "s")
    session = FileSession.open(path, create=True)
    session.add_message("root", turn(0))
    session.checkpoint()
    session.close()
    with open(os.path.join(path, "conversations", "root", "conversation.jsonl"), "ab") as torn:
        torn.write(b'{"role":"user","content":"half')  # a turn cut by the full disk
    full = FaultyFileSystem(OsFileSystem(), [Fault("write", path=failing, error=errno.ENOSPC, repeat=True)])
    with pytest.raises(SessionError) as refused:
        FileSession.open(path, fs=full)
    message = str(refused.value)
    assert "\n" not in message and "No space left on device" in message
    assert "repair" not in message and "free" in message
    reopened = FileSession.open(path)  # space freed: it opens, the torn bytes kept in recovery
    assert contents(reopened) == ["turn 0"] and reopened.problems
    reopened.close()


# -- abandon after the commit point was touched ------------------------------------------------------------
@pytest.mark.parametrize("profile", [Session, FileSession])
def test_abandon_after_an_adoption_whose_directory_fsync_failed_leaves_the_committed_state(tmp_path, profile):
    """The commit point was touched when its sync failed: the log's record may persist (portable, whose
    fdatasync failed), the sidecar may already have been replaced (file-backed, whose directory fsync
    failed). Abandon makes the committed state what the files say: the portable session rolls over into a
    new log without the record, the file-backed one writes the committed sidecar back."""
    path = str(tmp_path / "s")
    fs = FaultyFileSystem(OsFileSystem())
    session = profile.open(path, create=True, fs=fs)
    session.add_message("root", turn(0))
    session.checkpoint()
    fs.add(Fault("fdatasync", path="*.log") if profile is Session else Fault("fsync_dir", path=os.path.abspath(path)))
    session.add_message("root", turn(1))
    acks: list[BaseException | None] = []
    with pytest.raises(SaveFailed) as failed:
        session.publish(session.freeze("checkpoint", ["root"]), [acks.append])
    assert failed.value.phase == "adopt"
    session.abandon_pending()
    assert len(acks) == 1 and isinstance(acks[0], SaveAbandoned)
    session.close()
    reopened = profile.open(path)
    assert contents(reopened) == ["turn 0"]
    reopened.close()


# -- acknowledgements of coalesced requests ----------------------------------------------------------------
def test_a_checkpoint_request_coalesced_into_a_queued_one_is_acknowledged_by_it():
    import asyncio

    async def scenario(path: str) -> tuple[list[BaseException | None], list[str]]:
        session = Session.open(path, create=True)
        acks: list[BaseException | None] = []
        session.add_message("root", turn(0))
        session.request_checkpoint(ack=acks.append)  # accepted: the job runs across loop turns
        session.add_message("root", turn(1))
        session.request_checkpoint(ack=acks.append)  # an edit after that freeze: queued behind it
        session.add_message("root", turn(2))
        assert session.request_checkpoint(ack=acks.append) is False  # coalesced into the queued one
        for _ in range(400):
            if len(acks) == 3:
                break
            await asyncio.sleep(0.005)
        session.shutdown()
        reopened = Session.open(path)
        durable = contents(reopened)
        reopened.close()
        return acks, durable

    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        acks, durable = asyncio.run(scenario(os.path.join(directory, "s")))
    assert acks == [None, None, None]
    assert durable == ["turn 0", "turn 1", "turn 2"]
