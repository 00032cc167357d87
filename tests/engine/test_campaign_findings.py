"""Engine defects the issue 27 crash workloads found (each test fails on the engine before its fix):

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
"""

from __future__ import annotations

import os
import re
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


def test_two_writers_staged_batches_are_recovered_once_the_fenced_ones_set_aside(tmp_path):
    path = tmp_path / "s"
    a = Session.open(path, create=True)
    a.add_message("root", Message("user", "turn 1", 1.0))
    a.checkpoint()
    b = Session.open(path, owner_alive=_nobody)  # a second owner: a new lease epoch
    a.add_message("root", Message("user", "A, fenced", 2.0))
    b.add_message("root", Message("user", "B, the owner", 3.0))
    for session in (a, b):  # both commit against the same HEAD; neither adopts (a crash, modelled below)
        batch = session.freeze("checkpoint", ["root"])
        publication = session.publication(batch)
        for step in publication.steps():
            if step.phase == "adopt":
                break
            step.accept(step.func(*step.args))
    crashed = tmp_path / "crashed"
    shutil.copytree(path, crashed)
    first = Session.open(crashed, owner_alive=_nobody)
    assert first.pending is not None and first.pending.batch.texts["root"].bytes_from(0).endswith(
        Message("user", "B, the owner", 3.0).encode())
    first.retry_pending()
    assert contents(first) == ["turn 1", "B, the owner"]
    first.close()
    before = sorted(os.listdir(crashed / "staging")) + sorted(os.listdir(crashed / "objects"))
    again = Session.open(crashed)  # nothing left to recover: the second recovery changes nothing
    assert again.pending is None
    assert sorted(os.listdir(crashed / "staging")) + sorted(os.listdir(crashed / "objects")) == before
    assert os.path.isdir(crashed / "recovery")  # the fenced writer's bytes, kept aside
    again.close()


def test_head_lost_after_an_interrupted_staging_cleanup_recovers_the_newest_generation(tmp_path):
    path = tmp_path / "s"
    session = Session.open(path, create=True)
    for i in range(3):
        session.add_message("root", Message("user", f"turn {i}", float(i)))
        session.checkpoint()  # acknowledged: generation i + 1
    newest = session.head.manifest
    tag = re.search(r"manifest-\d+-e\d+-(.*)\.json$", newest).group(1)  # its publication (staging) id
    session.close()
    # The crash: the adopted publication's staging directory is back without its batch record (the record's
    # unlink reached the disk, the directory's removal did not), and then HEAD is lost.
    os.makedirs(path / "staging" / tag)
    os.remove(path / "HEAD")
    reopened = Session.open(path)
    assert reopened.head is not None and reopened.head.manifest == newest
    assert contents(reopened) == ["turn 0", "turn 1", "turn 2"]
    assert os.path.exists(path / newest)
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


def test_an_abandoned_manifest_is_removed_durably_before_its_staging(tmp_path):
    """5. Abandon removed the failed attempt's committed manifest, then its staging, without syncing the
    objects directory in between: a crash could keep the manifest and lose the staging, and with HEAD
    lost that manifest counts as adopted (its staging is gone), so the abandoned turn came back."""
    from perfsuite.engine import Fault, FaultyFileSystem, OsFileSystem, RecordingFileSystem

    path = tmp_path / "s"
    recorder = RecordingFileSystem(FaultyFileSystem(OsFileSystem()))
    session = Session.open(path, create=True, fs=recorder)
    session.add_message("root", Message("user", "turn 0", 0.0))
    session.checkpoint()
    recorder.inner.add(Fault("fsync_dir", path=os.path.abspath(path)))  # HEAD's directory fsync fails once
    session.add_message("root", Message("user", "abandoned", 1.0))
    try:
        session.checkpoint()
        raise AssertionError("the checkpoint succeeded although HEAD's directory fsync failed")
    except SaveFailed:
        pass
    mark = recorder.mark()
    session.abandon_pending()
    ops = [(op.kind, os.path.relpath(op.path, path)) for op in recorder.since(mark)]
    removed = next(i for i, (kind, rel) in enumerate(ops) if kind == "remove" and rel.startswith("objects/manifest-"))
    staging = next(i for i, (kind, rel) in enumerate(ops) if kind in ("remove", "rmdir") and rel.startswith("staging"))
    assert ("fsync_dir", "objects") in ops[removed:staging], ops
    session.close()


def test_a_lost_head_with_a_newer_intact_staged_generation_refuses_instead_of_loading_an_older_one(tmp_path):
    """6. HEAD lost while a newer intact manifest still has its staging directory: the cleanup after an
    adoption is not synced, so that generation may have been adopted and acknowledged; open used to load
    the older one. It refuses with one line naming the repair command."""
    from perfsuite.engine import SessionError

    path = tmp_path / "s"
    session = Session.open(path, create=True)
    session.add_message("root", Message("user", "turn 0", 0.0))
    session.checkpoint()
    session.add_message("root", Message("user", "turn 1", 1.0))
    publication = session.publication(session.freeze("checkpoint", ["root"]))
    for step in publication.steps():  # committed, then the crash: HEAD never moved, staging stays
        if step.phase == "adopt":
            break
        step.accept(step.func(*step.args))
    session._release_owner()
    os.remove(path / "HEAD")
    try:
        Session.open(path)
        raise AssertionError("open loaded an older generation while a newer one may have been adopted")
    except SessionError as exc:
        assert "\n" not in str(exc) and "session repair" in str(exc) and "may have been adopted" in str(exc)
