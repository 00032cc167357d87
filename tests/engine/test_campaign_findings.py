"""Engine defects the crash campaigns' blind-class workloads found (each test fails on the engine before its fix):

1. A fenced file-backed writer (another opener took ``session.pid`` over, on a layer without ``flock``)
   wrote its turn into the transcripts in place before its commit-point check fenced it, so its
   successor's next acknowledged turn was appended after foreign lines; its abandon then wrote its own
   committed sidecar and transcripts over its successor's.
2. Two unadopted staged batches frozen against the same HEAD (a fenced owner's and its successor's):
   recovery kept the later as the pending publication and left the other in place, so a second recovery
   changed the session (not idempotent) and the fenced owner's bytes were never set aside.
3. HEAD lost on top of a crash that interrupted an adopted publication's staging cleanup (its batch record
   gone, the directory still there): that generation counted as unadopted, an older one was loaded and
   the acknowledged one's manifest deleted.
4. A quarantine file under ``recovery/`` that became a dangling link made open refuse the session.
5. Abandon removed a failed attempt's manifest and then its staging without a directory sync between.
6. HEAD lost while a newer intact manifest still has its staging: open loaded the older generation.

Format 2 (the session log) has no staging directories or manifests: 1 and 4 (file-backed) stand as they were;
2, 3, 5 and 6 are their format-2 analogues (the same hazard on the session log), each stated in its test.
"""

from __future__ import annotations

import os
import shutil

from perfsuite.engine import (
    DelegatingFileSystem,
    FileSession,
    Message,
    OwnerConflict,
    SaveFailed,
    Session,
)


def _nobody(_pid: int) -> bool:
    return False


class _NoFlock(DelegatingFileSystem):
    def lock(self, fd: int) -> bool | None:
        return None


def contents(session: Session) -> list[str]:
    return [m.content for m in session.buffers["root"].messages()]


def test_a_fenced_file_backed_writer_writes_nothing_into_its_successors_files(tmp_path):
    path = tmp_path / "s"
    a = FileSession.open(path, create=True)
    a.add_message("root", Message("user", "A's first turn", 1.0))
    a.checkpoint()
    b = FileSession.open(path, fs=_NoFlock(a.fs), owner_alive=_nobody)  # takes session.pid over
    b.add_message("root", Message("user", "B's turn", 2.0))
    b.checkpoint()
    a.add_message("root", Message("user", "A's turn after the takeover", 3.0))
    try:
        a.checkpoint()
        raise AssertionError("a fenced writer's checkpoint succeeded")
    except (SaveFailed, OwnerConflict):
        pass
    b.add_message("root", Message("user", "B's second turn", 4.0))
    b.checkpoint()  # acknowledged
    a.abandon_pending()  # the fenced writer's rollback must not touch B's files
    assert "rolled back in memory only" in a.problems[-1]
    a._release_owner()
    b.close()
    reopened = FileSession.open(path)
    assert contents(reopened) == ["A's first turn", "B's turn", "B's second turn"]
    reopened.close()


def _log_bytes(path) -> dict[str, bytes]:
    logs = path / "log"
    return {name: (logs / name).read_bytes() for name in sorted(os.listdir(logs))}


def test_a_fenced_portable_writer_writes_nothing_into_any_log_and_recovery_is_idempotent(tmp_path):
    """2 (format 2). A second owner on a layer without flock (another host) broke A's lease: its open rolls
    over into a log of its own, and A's next checkpoint is fenced before its record is written (the lease
    re-checked before the pwrite), so no log holds A's fenced turn; a crash copy recovers to B's state, and
    a second recovery changes nothing (format 1: two staged batches against one HEAD)."""
    path = tmp_path / "s"
    a = Session.open(path, create=True)
    a.add_message("root", Message("user", "turn 1", 1.0))
    a.checkpoint()
    b = Session.open(path, fs=_NoFlock(a.fs), owner_alive=_nobody)  # a new lease epoch
    assert b.head is not None and b.head.log > a.head.log  # B writes into a log A never had
    a.add_message("root", Message("user", "A, fenced", 2.0))
    try:
        a.checkpoint()
        raise AssertionError("a fenced writer's checkpoint succeeded")
    except (SaveFailed, OwnerConflict):
        pass
    b.add_message("root", Message("user", "B, the owner", 3.0))
    b.checkpoint()
    assert not any(b"A, fenced" in data for data in _log_bytes(path).values())
    crashed = tmp_path / "crashed"
    shutil.copytree(path, crashed)
    first = Session.open(crashed, owner_alive=_nobody)
    assert contents(first) == ["turn 1", "B, the owner"] and first.pending is None
    first._release_owner()
    before = _log_bytes(crashed)
    again = Session.open(crashed)  # nothing left to recover: the second recovery changes nothing
    assert contents(again) == ["turn 1", "B, the owner"] and _log_bytes(crashed) == before
    again.close()
    a._release_owner()
    b.close()


def test_head_lost_with_an_older_log_still_there_recovers_the_newest_log(tmp_path):
    """3 (format 2). HEAD lost while an older log is still there (compacted past, not yet retired): the
    newest log, proven adopted by the records appended to it, is recovered with every acknowledged turn,
    and the older one is not taken for it (format 1: an interrupted staging cleanup)."""
    path = tmp_path / "s"
    session = Session.open(path, create=True)
    session.add_message("root", Message("user", "turn 0", 0.0))
    session.checkpoint()
    session.compact()  # a second log; the first one stays until retirement
    for i in (1, 2):
        session.add_message("root", Message("user", f"turn {i}", float(i)))
        session.checkpoint()  # acknowledged, appended to the second log
    newest = session.head
    session._release_owner()
    assert len(os.listdir(path / "log")) == 2
    os.remove(path / "HEAD")
    reopened = Session.open(path)
    assert reopened.head is not None and reopened.head.log == newest.log
    assert contents(reopened) == ["turn 0", "turn 1", "turn 2"]
    assert any("proven adopted" in p for p in reopened.problems)
    reopened.close()


def test_a_dangling_quarantine_file_does_not_block_open(tmp_path):
    path = tmp_path / "s"
    session = FileSession.open(path, create=True)
    session.add_message("root", Message("user", "kept", 1.0))
    session.checkpoint()
    session.close()
    main = path / "conversations" / "root" / "conversation.jsonl"
    with open(main, "ab") as handle:
        handle.write(b'{"damaged in place\n' + Message("user", "after the damage", 2.0).encode())
    session = FileSession.open(path)  # quarantines the damaged line under recovery/
    session.close()
    [kept] = [n for n in os.listdir(path / "conversations" / "root" / "recovery") if ".corrupt-" in n]
    target = path / "conversations" / "root" / "recovery" / kept
    os.remove(target)
    os.symlink(tmp_path / "nowhere", target)
    reopened = FileSession.open(path)
    assert contents(reopened) == ["kept", "after the damage"]
    reopened.close()


def test_an_abandon_rolls_over_durably_so_the_abandoned_record_never_comes_back(tmp_path):
    """5 (format 2). A record whose fdatasync failed may still reach the disk (the page cache), so abandon
    rolls over before it returns: a new log (its name durable), its BASE of the committed state
    fdatasynced, then HEAD replaced and its directory fsynced; the failed log is never synced again, and a
    reopen does not have the abandoned turn although its record is in the old log (format 1: the failed
    attempt's manifest removed durably before its staging)."""
    from perfsuite.engine import OsFileSystem
    from perfsuite.engine.testing import Fault, FaultyFileSystem, RecordingFileSystem

    path = tmp_path / "s"
    recorder = RecordingFileSystem(FaultyFileSystem(OsFileSystem()))
    session = Session.open(path, create=True, fs=recorder)
    session.add_message("root", Message("user", "turn 0", 0.0))
    session.checkpoint()
    failed_log = session.store.log_path(session.head.log)
    recorder.inner.add(Fault("fdatasync", path=failed_log))  # the log's fdatasync fails once
    session.add_message("root", Message("user", "abandoned", 1.0))
    try:
        session.checkpoint()
        raise AssertionError("the checkpoint succeeded although its fdatasync failed")
    except SaveFailed:
        pass
    mark = recorder.mark()
    session.abandon_pending()
    ops = [(op.kind, os.path.relpath(op.path, path)) for op in recorder.since(mark)]
    new_log = os.path.relpath(session.store.log_path(session.head.log), path)
    assert new_log != os.path.relpath(failed_log, path)
    base = ops.index(("fdatasync", new_log))
    head = next(i for i, (kind, rel) in enumerate(ops) if kind == "replace" and rel.startswith(".HEAD.tmp"))
    assert ("fsync_dir", "log") in ops[:base] and base < head and ("fsync_dir", ".") in ops[head:], ops
    assert ("fdatasync", os.path.relpath(failed_log, path)) not in ops
    session.close()
    with open(failed_log, "rb") as handle:
        assert b"abandoned" in handle.read()  # the record reached the file, uninstalled
    reopened = Session.open(path)
    assert contents(reopened) == ["turn 0"]
    reopened.close()


def test_a_lost_head_with_a_newer_unproven_log_refuses_instead_of_loading_an_older_one(tmp_path):
    """6 (format 2). HEAD lost while a newer valid log is not proven adopted (a roll-over whose HEAD switch
    may have landed: nothing appended to it yet, no successor names it): its carried records may have been
    acknowledged, so open refuses with one line naming the repair command instead of loading the older
    log (format 1: a newer intact manifest whose staging survived)."""
    from perfsuite.engine import SessionError

    path = tmp_path / "s"
    session = Session.open(path, create=True)
    session.add_message("root", Message("user", "turn 0", 0.0))
    session.checkpoint()
    session.add_message("root", Message("user", "turn 1", 1.0))
    session.checkpoint()  # appended: the first log is proven adopted
    session.compact()  # a new log holding only its BASE
    session._release_owner()
    os.remove(path / "HEAD")
    try:
        Session.open(path)
        raise AssertionError("open loaded an older log while a newer one may have been adopted")
    except SessionError as exc:
        assert "\n" not in str(exc) and "session repair" in str(exc) and "not proven adopted" in str(exc)
