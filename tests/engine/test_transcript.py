"""E2: the transcript log's durability contract, read off the recording and fault-injecting layers."""

from __future__ import annotations

import errno
import os
import warnings
from pathlib import Path

import pytest

from perfsuite.engine import DirectoryFsyncUnsupported, FsyncFailed, Message, OsFileSystem, TranscriptLog, commit_turn
from perfsuite.engine.testing import Fault, FaultyFileSystem, RecordingFileSystem


def msg(i: int, size: int = 20) -> Message:
    return Message("user" if i % 2 == 0 else "assistant", f"m{i}:" + "x" * size, float(i))


def test_barrier_syncs_files_before_dirs_and_created_dirs_up_to_existing_parent(tmp_path):
    fs = RecordingFileSystem(OsFileSystem())
    logdir = tmp_path / "a" / "b" / "conv"
    log = TranscriptLog.open(logdir, fs=fs)
    log.append(msg(0))
    log.record_model_selection(model="m")
    log.record_event("started")
    mark = fs.mark()
    log.write(sync=True)
    ops = fs.since(mark)
    file_syncs = [op.path for op in ops if op.kind == "fsync"]
    dir_syncs = [op.path for op in ops if op.kind == "fsync_dir"]
    assert set(file_syncs) == {str(logdir / "conversation.jsonl"), str(logdir / "model-selection.jsonl"),
                               str(logdir / "events.jsonl")}
    # Every file fsync precedes every directory fsync.
    last_file = max(i for i, op in enumerate(ops) if op.kind == "fsync")
    first_dir = min(i for i, op in enumerate(ops) if op.kind == "fsync_dir")
    assert last_file < first_dir
    # Created dirs a, a/b, a/b/conv: synced up to and including tmp_path (existed), never beyond.
    assert dir_syncs == [str(logdir), str(tmp_path / "a" / "b"), str(tmp_path / "a"), str(tmp_path)]
    # A second barrier after one more append owes no namespace work.
    log.append(msg(1))
    mark = fs.mark()
    log.write(sync=True)
    assert [op.kind for op in fs.since(mark)] == ["fsync"]


def test_barrier_after_nothing_written_does_nothing(tmp_path):
    fs = RecordingFileSystem(OsFileSystem())
    log = TranscriptLog.open(tmp_path / "c", fs=fs)
    log.append(msg(0))
    log.write()
    mark = fs.mark()
    log.write()
    assert fs.since(mark) == []


@pytest.mark.parametrize("operation", ["fork", "undo", "edit", "compact"])
def test_rewrites_are_temp_write_fsync_replace_dirsync(tmp_path, operation):
    fs = RecordingFileSystem(OsFileSystem())
    log = TranscriptLog.open(tmp_path / "c", fs=fs)
    for i in range(4):
        log.append(msg(i))
    log.record_event("x")
    log.write()
    if operation == "fork":
        log.fork("b", upto=2)
        target = tmp_path / "c" / "branches" / "b.jsonl"
    elif operation == "undo":
        log.undo(1)
        target = tmp_path / "c" / "conversation.jsonl"
    elif operation == "edit":
        log.edit(1, msg(9))
        target = tmp_path / "c" / "conversation.jsonl"
    else:
        log.compact_events()
        target = tmp_path / "c" / "events.jsonl"
    ops = [op for op in fs.ops if op.kind != "close"]
    replace_at = next(i for i, op in enumerate(ops) if op.kind == "replace" and op.dst == str(target))
    temp = ops[replace_at].path
    temp_ops = [(op.kind, op.path) for op in ops[:replace_at] if op.path == temp]
    assert temp_ops == [("open", temp), ("write", temp), ("fsync", temp)]
    assert ops[replace_at + 1].kind == "fsync_dir" and ops[replace_at + 1].path == str(target.parent)


def test_rewrite_results(tmp_path):
    log = TranscriptLog.open(tmp_path / "c")
    for i in range(5):
        log.append(msg(i))
    log.fork("alt", upto=3)
    log.append(msg(7), branch="alt")
    assert log.undo(2) == [msg(3), msg(4)]
    log.edit(0, msg(8))
    log.append(msg(10))
    log.write()
    log.close()
    again = TranscriptLog.open(tmp_path / "c")
    assert again.messages() == [msg(8), msg(1), msg(2), msg(10)]
    assert again.messages("alt") == [msg(0), msg(1), msg(2), msg(7)]
    assert [e["kind"] for e in again.events()] == ["fork", "undo", "edit"]


def test_custom_log_directory_is_used_for_every_file(tmp_path):
    custom = tmp_path / "elsewhere" / "my-log"
    fs = RecordingFileSystem(OsFileSystem())
    log = TranscriptLog.open(custom, fs=fs)
    log.append(msg(0))
    log.append_view("compact", msg(1))
    log.record_model_selection(model="m")
    log.fork("b")
    log.edit(0, msg(2))
    log.compact_events()
    log.write()
    written = {op.path for op in fs.ops if op.kind in ("open", "replace")} | {
        op.dst for op in fs.ops if op.kind == "replace"}
    assert written and all(p.startswith(str(custom) + os.sep) for p in written)
    assert sorted(os.listdir(custom)) == ["branches", "conversation.jsonl", "events.jsonl",
                                          "model-selection.jsonl", "views"]


def test_einval_on_directory_fsync_warns_once_and_barrier_succeeds(tmp_path):
    fs = FaultyFileSystem(OsFileSystem(), [Fault("fsync_dir", error=errno.EINVAL, repeat=True)])
    log = TranscriptLog.open(tmp_path / "c", fs=fs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert commit_turn(log, [msg(0)]).completed
        log.fork("b")
        assert commit_turn(log, [msg(1)]).completed
    dirs = [str(w.message) for w in caught if w.category is DirectoryFsyncUnsupported]
    assert len(dirs) == len(set(dirs)) >= 2  # once per directory: c, tmp_path, branches...


@pytest.mark.parametrize("kind", ["fsync", "fsync_dir"])
def test_eio_on_barrier_propagates_and_turn_is_not_completed(tmp_path, kind):
    fs = FaultyFileSystem(OsFileSystem(), [Fault(kind, error=errno.EIO)])
    log = TranscriptLog.open(tmp_path / "c", fs=fs)
    outcome = commit_turn(log, [msg(0)])
    assert not outcome.completed and "save failed" in (outcome.error or "")
    # The failure is visible: an error event and a system message in the transcript.
    assert any(e["kind"] == "barrier-failed" for e in log.events())
    assert log.messages()[-1].role == "system"


def test_failed_fsync_is_never_retried_recovery_rewrites_into_new_file(tmp_path):
    fs = RecordingFileSystem(FaultyFileSystem(OsFileSystem(), [Fault("fsync", error=errno.EIO)]))
    log = TranscriptLog.open(tmp_path / "c", fs=fs)
    log.append(msg(0))
    with pytest.raises(FsyncFailed):
        log.write()
    failed_at = len(fs.ops)
    log.write()  # the next barrier must not fsync the failed descriptor again
    later = fs.ops[failed_at:]
    main = str(tmp_path / "c" / "conversation.jsonl")
    assert not any(op.kind == "fsync" and op.path == main for op in later)
    assert any(op.kind == "replace" and op.dst == main for op in later)
    log.close()
    assert TranscriptLog.open(tmp_path / "c").messages() == [msg(0)]


def test_enospc_mid_append_leaves_a_transcript_that_loads(tmp_path):
    fs = FaultyFileSystem(OsFileSystem(), [Fault("write", nth=3, partial=10, error=errno.ENOSPC,
                                                 path="conversation.jsonl")])
    log = TranscriptLog.open(tmp_path / "c", fs=fs)
    log.append(msg(0))
    log.append(msg(1))
    with pytest.raises(OSError):
        log.append(msg(2))
    log.close()
    reloaded = TranscriptLog.open(tmp_path / "c")
    assert reloaded.messages() == [msg(0), msg(1)]
    assert len(reloaded.torn) == 1


def test_append_after_failed_append_never_mixes_lines(tmp_path):
    fs = FaultyFileSystem(OsFileSystem(), [Fault("write", nth=2, partial=7, error=errno.ENOSPC,
                                                 path="conversation.jsonl")])
    log = TranscriptLog.open(tmp_path / "c", fs=fs)
    log.append(msg(0))
    with pytest.raises(OSError):
        log.append(msg(1))
    log.append(msg(2))
    log.write()
    log.close()
    reloaded = TranscriptLog.open(tmp_path / "c")
    assert reloaded.messages() == [msg(0), msg(2)] and reloaded.torn == []


def test_symlinked_transcript_stays_a_symlink_after_edit(tmp_path):
    log = TranscriptLog.open(tmp_path / "c")
    log.append(msg(0))
    log.write()
    log.close()
    store = tmp_path / "store"
    store.mkdir()
    main = tmp_path / "c" / "conversation.jsonl"
    os.replace(main, store / "real.jsonl")
    main.symlink_to(store / "real.jsonl")
    log = TranscriptLog.open(tmp_path / "c")
    log.edit(0, msg(5))
    log.append(msg(6))
    log.write()
    assert main.is_symlink()
    assert TranscriptLog.open(tmp_path / "c").messages() == [msg(5), msg(6)]
    assert (store / "real.jsonl").read_bytes() == msg(5).encode() + msg(6).encode()


def test_torn_last_line_loads_prefix_and_keeps_torn_bytes(tmp_path):
    log = TranscriptLog.open(tmp_path / "c")
    for i in range(3):
        log.append(msg(i))
    log.write()
    log.close()
    main = tmp_path / "c" / "conversation.jsonl"
    torn = msg(3).encode()[:17]
    with open(main, "ab") as handle:
        handle.write(torn)
    reloaded = TranscriptLog.open(tmp_path / "c")
    assert reloaded.messages() == [msg(0), msg(1), msg(2)]
    [tail] = reloaded.torn
    assert Path(tail.recovery_file).read_bytes() == torn
    assert main.read_bytes() == b"".join(msg(i).encode() for i in range(3))
    assert reloaded.events()[-1]["kind"] == "torn-tail-recovered"
    # Appending after recovery gives clean lines.
    reloaded.append(msg(4))
    reloaded.write()
    assert TranscriptLog.open(tmp_path / "c").messages() == [msg(0), msg(1), msg(2), msg(4)]


def test_leftover_temp_file_from_interrupted_rewrite_is_discarded(tmp_path):
    log = TranscriptLog.open(tmp_path / "c")
    log.append(msg(0))
    log.write()
    log.close()
    (tmp_path / "c" / ".conversation.jsonl.tmp-1-1").write_bytes(b"partial")
    reloaded = TranscriptLog.open(tmp_path / "c")
    assert reloaded.messages() == [msg(0)]
    assert not any(".tmp-" in n for n in os.listdir(tmp_path / "c"))


def test_event_log_compacts_itself(tmp_path):
    log = TranscriptLog.open(tmp_path / "c", compact_after=10)
    for _ in range(25):
        log.record_event("tick")
    assert len(log.events()) <= 10
    log.compact_events()
    assert log.events()[0]["counts"] == {"tick": 25}


@pytest.mark.parametrize("cut", ["newline", "half"])
def test_a_partial_last_line_is_never_accepted_as_a_message(tmp_path, cut):
    """E2: a crash (or ENOSPC, then a crash) can leave the last line of a transcript without its
    newline, and such a line may still decode. It is a torn tail all the same: loaded as a message, the
    file would keep no newline after it and the next append would merge into it, so the next turn
    (acknowledged by its barrier) would be lost to the line that swallowed it."""
    log = TranscriptLog.open(tmp_path / "c")
    for i in range(2):
        log.append(msg(i))
    log.write()
    log.close()
    main = tmp_path / "c" / "conversation.jsonl"
    line = msg(2).encode()
    partial = line[:-1] if cut == "newline" else line[: len(line) // 2]
    with open(main, "ab") as handle:
        handle.write(partial)  # the unacknowledged turn, cut before its newline (it decodes when cut == newline)
    reloaded = TranscriptLog.open(tmp_path / "c")
    assert reloaded.messages() == [msg(0), msg(1)]
    [tail] = reloaded.torn
    assert Path(tail.recovery_file).read_bytes() == partial
    assert main.read_bytes() == msg(0).encode() + msg(1).encode()
    assert commit_turn(reloaded, [msg(3)]).completed  # the next turn, acknowledged
    reloaded.close()
    again = TranscriptLog.open(tmp_path / "c")
    assert again.messages() == [msg(0), msg(1), msg(3)] and again.torn == [] and again.quarantined == []
    again.close()


def test_a_partial_last_line_is_never_accepted_by_a_file_backed_session(tmp_path):
    """The same through a file-backed session: after the reopen, the next acknowledged turn survives."""
    from perfsuite.engine import FileSession

    path = tmp_path / "s"
    session = FileSession.open(path, create=True)
    session.add_message("root", msg(0))
    session.checkpoint()
    session.close()
    main = path / "conversations" / "root" / "conversation.jsonl"
    with open(main, "ab") as handle:
        handle.write(msg(1).encode()[:-1])  # decodes, but has no newline
    session = FileSession.open(path)
    assert [m.content for m in session.buffers["root"].messages()] == [msg(0).content]
    session.add_message("root", msg(2))
    session.checkpoint()  # acknowledged
    session.close()
    reopened = FileSession.open(path)
    assert [m.content for m in reopened.buffers["root"].messages()] == [msg(0).content, msg(2).content]
    reopened.close()
