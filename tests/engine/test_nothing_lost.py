"""The engine's durability holes the corruption probes found, kept as regression tests (E2, E3).

1. A torn LEASE (a crash inside lease acquisition) never blocks open: no live owner, a new epoch above
   every epoch HEAD and the manifests record.
2. A lost HEAD never silently yields an empty or older state while a newer intact adopted generation
   exists, and retirement never deletes a generation newer than the session's head.
3. The file-backed PID lock fences writers: deleting ``session.pid`` does not let a second writer in.
4. One bad line in the middle of a transcript is quarantined; every intact message after it stays.
5. Corrupted files give the engine's one-line errors, never a raw exception.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from perfsuite.engine import (
    FORMAT,
    FileSession,
    Message,
    OsFileSystem,
    OwnerConflict,
    SaveFailed,
    Session,
    SessionError,
    SessionSettings,
    TranscriptError,
    TranscriptLog,
)


def turn(i: int, size: int = 100) -> Message:
    return Message("user" if i % 2 == 0 else "assistant", f"turn {i} " + "t" * size, float(i))


def portable(tmp_path, generations: int = 1, per: int = 3) -> tuple[str, list[Message]]:
    """A closed portable session with ``generations`` checkpoints of ``per`` turns each."""
    path = str(tmp_path / "s")
    session = Session.open(path, create=True, settings=SessionSettings(chunk_size=256))
    for g in range(generations):
        for i in range(per):
            session.add_message("root", turn(g * per + i))
        session.checkpoint()
    messages = session.buffers["root"].messages()
    session.close()
    return path, messages


def _last_epoch(path: str) -> int:
    """The epoch of the log's last record (format 2: every record carries its writer's epoch), read only."""
    from perfsuite.engine._logstore import LogStore

    store = LogStore(path, OsFileSystem())
    store.load(store.read_head())
    return store.state.epoch


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert text and "\n" not in text, text
    return text


# -- 1. a torn LEASE -------------------------------------------------------------------------------------
CHILD_TORN_LEASE = """
import sys
from perfsuite.engine import OsFileSystem, Session
from perfsuite.engine.testing import Fault, FaultyFileSystem
fs = FaultyFileSystem(OsFileSystem(), [Fault("write", path="LEASE", crash="before")], on_crash="kill")
print("OPENING", flush=True)
Session.open(sys.argv[1], fs=fs)
print("NOT REACHED", flush=True)
"""


def test_a_lease_torn_by_a_real_crash_does_not_block_open(tmp_path):
    path, messages = portable(tmp_path, generations=2)
    epochs = [json.loads((tmp_path / "s" / "HEAD").read_bytes())["epoch"]]
    proc = subprocess.run([sys.executable, "-c", CHILD_TORN_LEASE, path], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL and "OPENING" in proc.stdout, proc.stderr
    assert (tmp_path / "s" / "LEASE").read_bytes() == b""  # created exclusively, killed before its write
    session = Session.open(path)  # before the fix: OwnerConflict "owned by pid 0", forever
    assert session.buffers["root"].messages() == messages
    assert session.epoch > max(epochs)
    assert any("LEASE" in p for p in session.problems)
    session.add_message("root", turn(99))
    session.checkpoint()
    session.close()
    assert Session.open(path).buffers["root"].messages()[-1] == turn(99)


@pytest.mark.parametrize("lease", [b"", b"{", b"garbage", b"[1, 2]",
                                   b'{"epoch": 9, "token": "t", "pid": 0, "host": "h"}',
                                   b'{"epoch": 9, "token": "t", "pid": -1, "host": "%s"}'])
def test_a_garbage_lease_names_no_live_owner(tmp_path, lease):
    path, messages = portable(tmp_path, generations=2)
    highest = _last_epoch(path)
    (tmp_path / "s" / "LEASE").write_bytes(lease.replace(b"%s", os.uname().nodename.encode()))
    session = Session.open(path)
    assert session.buffers["root"].messages() == messages
    assert session.epoch > highest
    session.close()


def test_a_dangling_symlink_lease_is_broken_like_a_torn_one(tmp_path):
    path, messages = portable(tmp_path)
    os.symlink(tmp_path / "nowhere", tmp_path / "s" / "LEASE")
    session = Session.open(path)
    assert session.buffers["root"].messages() == messages
    session.close()
    assert not os.path.lexists(tmp_path / "s" / "LEASE")


# -- 2. a lost HEAD --------------------------------------------------------------------------------------
def test_deleted_head_with_one_generation_recovers_it_not_an_empty_session(tmp_path):
    path, messages = portable(tmp_path, generations=1)
    os.remove(tmp_path / "s" / "HEAD")
    session = Session.open(path)  # before the fix: an empty session, no problem reported
    assert session.buffers["root"].messages() == messages
    assert any("HEAD" in p for p in session.problems)
    session.close()
    assert json.loads((tmp_path / "s" / "HEAD").read_bytes())["format"] == FORMAT  # repaired
    assert Session.open(path).buffers["root"].messages() == messages


def test_deleted_head_with_three_generations_recovers_the_newest_and_retire_keeps_it(tmp_path):
    path, messages = portable(tmp_path, generations=3)
    os.remove(tmp_path / "s" / "HEAD")
    session = Session.open(path)  # before the fix: generation 2, and retire() then deleted generation 3
    assert session.head is not None and session.head.seq == 3
    assert session.buffers["root"].messages() == messages
    while session.retire()[1]:
        pass
    session.close()
    assert Session.open(path).buffers["root"].messages() == messages


def _rolled_over(tmp_path) -> tuple[str, list[Message]]:
    """A closed portable session whose small logs rolled over (several logs, records appended to each)."""
    path = str(tmp_path / "s")
    session = Session.open(path, create=True, settings=SessionSettings(chunk_size=256, log_capacity=4096))
    for i in range(12):
        session.add_message("root", turn(i, size=1500))
        session.checkpoint()
    messages = session.buffers["root"].messages()
    session.close()
    return path, messages


def test_a_head_naming_an_older_log_never_costs_a_newer_adopted_one(tmp_path):
    """Hole 2 (above) in format 2: HEAD rolled back to an older log while a newer log holds appended (so
    adopted) generations: open refuses in one line, and nothing deletes the newer log."""
    from perfsuite.engine._logadoption import survey
    from perfsuite.engine._logstore import LogStore

    path, messages = _rolled_over(tmp_path)
    store = LogStore(path, OsFileSystem())
    logs = [c for c in survey(store) if c.valid]
    assert len(logs) >= 3 and logs[-1].appended
    (tmp_path / "s" / "HEAD").write_bytes(logs[-2].head().encode())  # a valid HEAD naming the previous log
    with pytest.raises(SessionError) as refused:
        Session.open(path, settings=SessionSettings(chunk_size=256, keep_generations=1, log_capacity=4096))
    assert "perfsuite session repair" in one_line(refused.value)
    assert os.path.exists(store.log_path(logs[-1].number))  # the newer adopted log is still there
    (tmp_path / "s" / "HEAD").write_bytes(logs[-1].head().encode())
    assert Session.open(path).buffers["root"].messages() == messages


@pytest.mark.parametrize("what", ["last record", "mid-log"])
def test_a_damaged_head_generation_refuses_open_and_repair_adopts_the_newest_intact(tmp_path, what):
    path, messages = portable(tmp_path, generations=2)
    head = json.loads((tmp_path / "s" / "HEAD").read_bytes())
    broken = tmp_path / "s" / head["log"]
    data = bytearray(broken.read_bytes())
    end = len(bytes(data).rstrip(b"\0"))
    data[end - 40 if what == "last record" else 512 + 700] ^= 0xFF  # generation 2's record, or an earlier one
    broken.write_bytes(bytes(data))
    with pytest.raises(SessionError) as refused:
        Session.open(path)  # before the fix (format 1): generation 1 without a word beyond session.problems
    text = one_line(refused.value)
    assert str(broken) in text and "perfsuite session repair" in text
    report = Session.repair(path)
    kept = 1 if what == "last record" else 0
    assert report.adopted is not None and report.adopted.seq == kept and report.lines
    session = Session.open(path)
    assert session.buffers["root"].messages() == messages[: 3 * kept]
    session.add_message("root", turn(77))
    session.checkpoint()
    session.close()


# -- 3. the file-backed PID lock fences writers ---------------------------------------------------------
def test_deleting_session_pid_does_not_let_a_second_writer_in(tmp_path):
    a = FileSession.open(tmp_path / "s", create=True)
    a.append_mail("root", "m-a-1")
    os.remove(tmp_path / "s" / "session.pid")
    with pytest.raises(OwnerConflict) as refused:  # before the fix: B opened and its mail was lost later
        FileSession.open(tmp_path / "s")
    one_line(refused.value)
    a.append_mail("root", "m-a-2")  # A still owns the session (the lock is held on the directory)
    a.close()
    again = FileSession.open(tmp_path / "s")
    assert [m.body for m in again.mailbox("root")] == ["m-a-1", "m-a-2"]
    again.close()


def test_a_writer_that_lost_its_pid_lock_is_fenced_before_it_acknowledges(tmp_path):
    a = FileSession.open(tmp_path / "s", create=True)
    a.append_mail("root", "m-a-1")
    (tmp_path / "s" / "session.pid").write_text("1 someone-else\n")  # a writer that ignored the lock
    acked: list[object] = []
    with pytest.raises(SaveFailed):
        a.append_mail("root", "m-a-2", ack=acked.append)
    assert acked == []  # never acknowledged
    sidecar = json.loads((tmp_path / "s" / "sidecar.json").read_bytes())
    assert [m["body"] for m in sidecar["mailboxes"]["root"]] == ["m-a-1"]


# -- 4. a corrupt middle line is quarantined, not a tail --------------------------------------------------
def _flip_line(path, index: int) -> bytes:
    lines = path.read_bytes().splitlines(keepends=True)
    bad = lines[index][:5] + b"\xff" + lines[index][6:]
    lines[index] = bad
    path.write_bytes(b"".join(lines))
    return bad


def test_a_corrupt_middle_line_is_quarantined_and_later_messages_stay(tmp_path):
    log = TranscriptLog.open(tmp_path / "conv")
    for i in range(5):
        log.append(turn(i))
    log.write(sync=True)
    log.close()
    bad = _flip_line(tmp_path / "conv" / "conversation.jsonl", 1)
    log = TranscriptLog.open(tmp_path / "conv")  # before the fix: only turn 0 was left
    assert log.messages() == [turn(0), turn(2), turn(3), turn(4)]
    assert len(log.quarantined) == 1 and log.torn == []
    kept = log.quarantined[0].recovery_file
    with open(kept, "rb") as handle:
        assert handle.read() == bad and os.path.dirname(kept).endswith("recovery")
    assert any(e["kind"] == "corrupt-line-quarantined" for e in log.events())
    log.append(turn(5))
    log.write(sync=True)
    log.close()
    again = TranscriptLog.open(tmp_path / "conv")
    assert again.messages() == [turn(0), turn(2), turn(3), turn(4), turn(5)]
    assert again.quarantined == []  # quarantined once, kept once
    again.close()


def test_a_hole_of_zeros_is_still_a_torn_tail(tmp_path):
    """A crash leaves unwritten appends as zeros (and any later append after them): that is a tail."""
    log = TranscriptLog.open(tmp_path / "conv")
    log.append(turn(0))
    log.write(sync=True)
    log.close()
    path = tmp_path / "conv" / "conversation.jsonl"
    path.write_bytes(path.read_bytes() + b"\0" * 30 + turn(2).encode())
    log = TranscriptLog.open(tmp_path / "conv")
    assert log.messages() == [turn(0)] and len(log.torn) == 1 and log.quarantined == []
    log.close()


def test_a_file_backed_transcript_keeps_messages_after_a_corrupt_middle_line(tmp_path):
    session = FileSession.open(tmp_path / "s", create=True)
    for i in range(5):
        session.add_message("root", turn(i))
    session.checkpoint()
    session.close()
    _flip_line(tmp_path / "s" / "conversations" / "root" / "conversation.jsonl", 2)
    session = FileSession.open(tmp_path / "s")
    assert session.buffers["root"].messages() == [turn(0), turn(1), turn(3), turn(4)]
    assert any("quarantined" in p for p in session.problems)
    session.add_message("root", turn(5))
    session.checkpoint()
    session.close()
    again = FileSession.open(tmp_path / "s")
    assert again.buffers["root"].messages() == [turn(0), turn(1), turn(3), turn(4), turn(5)]
    again.close()


def test_a_truncated_file_backed_transcript_refuses_open(tmp_path):
    session = FileSession.open(tmp_path / "s", create=True)
    for i in range(5):
        session.add_message("root", turn(i))
    session.checkpoint()
    session.close()
    path = tmp_path / "s" / "conversations" / "root" / "conversation.jsonl"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises((SessionError, TranscriptError)) as refused:  # before: opened with 2 messages
        FileSession.open(tmp_path / "s")
    assert "conversation.jsonl" in one_line(refused.value)


# -- 5. one-line errors, never a raw exception ----------------------------------------------------------
def _head_list(root) -> None:
    (root / "HEAD").write_text("[1, 2]")


def _head_dir(root) -> None:
    os.remove(root / "HEAD")
    os.mkdir(root / "HEAD")


def _log_dir_file(root) -> None:
    import shutil

    shutil.rmtree(root / "log")
    (root / "log").write_text("not a directory")


def _logs_file(root) -> None:
    os.rmdir(root / "logs")
    (root / "logs").write_text("not a directory")


def _lease_dir(root) -> None:
    os.mkdir(root / "LEASE")


@pytest.mark.parametrize("corrupt", [_head_list, _head_dir, _log_dir_file, _logs_file, _lease_dir])
def test_corrupt_portable_files_give_one_line_session_errors(tmp_path, corrupt):
    path, messages = portable(tmp_path, generations=2)
    corrupt(tmp_path / "s")
    try:
        session = Session.open(path)
    except SessionError as exc:  # before the fix: AttributeError, IsADirectoryError, NotADirectoryError, ...
        one_line(exc)
        return
    assert session.buffers["root"].messages() == messages  # or it opened with everything
    session.close()


def _file_session(tmp_path) -> list[Message]:
    session = FileSession.open(tmp_path / "s", create=True)
    for i in range(3):
        session.add_message("root", turn(i))
    session.checkpoint()
    session.append_mail("root", "acknowledged mail")
    messages = session.buffers["root"].messages()
    session.close()
    return messages


def _transcript_dangling(root) -> None:
    path = root / "conversations" / "root" / "conversation.jsonl"
    os.remove(path)
    os.symlink(root / "nowhere" / "conversation.jsonl", path)


def _transcript_dir(root) -> None:
    path = root / "conversations" / "root" / "conversation.jsonl"
    os.remove(path)
    os.mkdir(path)


def _conversation_file(root) -> None:
    import shutil

    shutil.rmtree(root / "conversations" / "root")
    (root / "conversations" / "root").write_text("not a directory")


def _sidecar_empty(root) -> None:
    (root / "sidecar.json").write_bytes(b"")


def _sidecar_list(root) -> None:
    (root / "sidecar.json").write_text("[1, 2]")


def _pid_dir(root) -> None:
    os.mkdir(root / "session.pid")


@pytest.mark.parametrize("corrupt", [_transcript_dangling, _transcript_dir, _conversation_file, _sidecar_empty,
                                     _sidecar_list, _pid_dir])
def test_corrupt_file_backed_files_give_one_line_errors(tmp_path, corrupt):
    messages = _file_session(tmp_path)
    corrupt(tmp_path / "s")
    try:
        session = FileSession.open(tmp_path / "s")
    except (SessionError, TranscriptError) as exc:
        one_line(exc)
        return
    assert session.buffers["root"].messages() == messages
    assert [m.body for m in session.mailbox("root")] == ["acknowledged mail"]  # (an empty sidecar lost it)
    session.close()


@pytest.mark.parametrize("corrupt", [_transcript_dangling, _transcript_dir])
def test_corrupt_transcript_files_give_one_line_transcript_errors(tmp_path, corrupt):
    log = TranscriptLog.open(tmp_path / "conversations" / "root", fs=OsFileSystem())
    log.append(turn(0))
    log.write(sync=True)
    log.close()
    corrupt(tmp_path)
    with pytest.raises(TranscriptError) as refused:
        TranscriptLog.open(tmp_path / "conversations" / "root")
    one_line(refused.value)


def test_repair_of_a_truncated_file_backed_transcript_says_what_is_lost(tmp_path):
    session = FileSession.open(tmp_path / "s", create=True)
    for i in range(4):
        session.add_message("root", turn(i))
    session.checkpoint()
    session.append_mail("root", "kept mail")
    session.close()
    path = tmp_path / "s" / "conversations" / "root" / "conversation.jsonl"
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(SessionError, match="perfsuite session repair"):
        FileSession.open(tmp_path / "s")
    report = FileSession.repair(tmp_path / "s")
    assert report.profile == "file" and any("are lost" in line for line in report.lines)
    again = FileSession.open(tmp_path / "s")
    kept = again.buffers["root"].messages()
    assert kept and kept == [turn(i) for i in range(len(kept))]  # the intact prefix, nothing invented
    assert [m.body for m in again.mailbox("root")] == ["kept mail"]  # the rest of the sidecar kept
    again.close()


def test_pid_zero_and_negative_pids_name_no_process():
    from perfsuite.engine import pid_alive

    assert pid_alive(os.getpid())
    assert not pid_alive(0) and not pid_alive(-1) and not pid_alive(10**30)


def test_a_lease_rewritten_in_place_by_another_owner_fences_the_next_publication(tmp_path):
    """E3 fencing: the lease is read before every write and acknowledgement, and the reader remembers the last
    bytes it parsed. A successor that rewrites LEASE in place with a same-sized record (another host, no
    flock between them) must still fence this owner: nothing more acknowledged, nothing written."""
    path, _ = portable(tmp_path)
    session = Session.open(path)
    session.add_message("root", turn(50))
    session.checkpoint()  # the lease was read (and remembered) before this write and this acknowledgement
    lease = tmp_path / "s" / "LEASE"
    record = json.loads(lease.read_bytes())
    token = record["token"]
    record["token"] = token[::-1] if token[::-1] != token else "x" * len(token)
    with open(lease, "r+b") as handle:  # the same inode, the same size: only the bytes differ
        handle.write(json.dumps(record).encode())
    session.add_message("root", turn(51))
    with pytest.raises((SaveFailed, OwnerConflict)):
        session.checkpoint()
    logs = tmp_path / "s" / "log"
    assert not any(b"turn 51 " in (logs / name).read_bytes() for name in os.listdir(logs))
