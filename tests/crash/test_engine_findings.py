"""Engine bugs the crash checker found (SPEC section 7), kept as regression tests now that they are fixed.

A. A crash after the first publication created its manifest but before HEAD existed (an empty or torn
   manifest, no HEAD) makes the session unopenable: ``GenerationStore.open_newest_intact`` treats the
   never-adopted manifest as a fallback candidate and raises "no intact generation to fall back to".
B. A crash between the first publication's commit and its HEAD replace: ``open_newest_intact`` adopts
   the orphan manifest as the session's head *without* writing HEAD (``Session._open`` only repairs HEAD
   when there were problems), so every later adoption expects that HEAD and fails with ``StaleHead``.
C. A crash during creation after ``objects/`` became durable but before ``staging/`` did (the
   directories are created, then synced): ``Session._open`` skips ``initialise`` when ``objects/`` exists
   and ``_recover_staging`` lists a missing ``staging/``: ``FileNotFoundError``.
D. (Not a crash bug.) A file-backed publication whose selection is empty (e.g. ``save_registry`` right
   after a checkpoint) fails: ``Session._noop_install`` reads ``publication.hashed``, which
   ``FilePublication`` does not have; the save is reported failed and its batch blocks ``close``.
E. Stale staging: the engine removes an adopted batch's staging directory without ever fsyncing
   ``staging/``, so a crash may bring it back; ``Session._recover_staging`` then recovers it as the
   pending publication whenever its publication is not on the adopted chain limited to
   ``keep_generations + 1`` manifests (its manifest is older, or an orphan), without checking the batch's
   recorded ``base`` against HEAD. Its transcript bytes are *older* than the committed ones, and
   ``retry_pending`` publishes them: acknowledged turns and mail receipts are lost.

Format 2 (the session log) replaced the manifests, HEAD per publication and staging: the tests below are the
same windows in the new layout (the first publication cut before its commit point; a creation cut
before HEAD; a crash between directory creations; a retired log resurrected by a crash, the analogue of
E: retirement deletes whole logs without a directory fsync).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from perfsuite.crash import CrashConfig, OpRecorder, build_timeline, materialize, run_campaign
from perfsuite.engine import FileSession, Message, OsFileSystem, Session, SessionSettings

CHILD = textwrap.dedent(
    """
    import sys
    from perfsuite.engine import Message, OsFileSystem, Session
    from perfsuite.engine.testing import Fault, FaultyFileSystem
    faults = {"pwrite": Fault("pwrite", path="*.log", nth=2, crash="after"),  # the first GEN, before its sync
              "head-replace": Fault("replace", path="HEAD", crash="before")}  # the creation's HEAD
    fs = FaultyFileSystem(OsFileSystem(), [faults[sys.argv[2]]], on_crash="kill")
    session = Session.open(sys.argv[1], create=True, fs=fs)
    session.add_message("root", Message("user", "the first turn", 1.0))
    print("COMMITTING", flush=True)
    session.checkpoint()
    print("NOT REACHED", flush=True)
    """
)


def killed_during_first_publication(path, fault: str) -> str:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(path), fault], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    return proc.stdout


def test_a_kill_before_the_first_commit_point_leaves_an_openable_session(tmp_path):
    path = tmp_path / "s"
    assert "COMMITTING" in killed_during_first_publication(path, "pwrite")  # written, never fdatasynced
    assert (path / "HEAD").exists()  # format 2: HEAD exists from creation on
    session = Session.open(path)  # the record is complete in the page cache a process kill keeps
    assert session.pending is None and [m.content for m in session.buffers["root"].messages()] == ["the first turn"]
    session.add_message("root", Message("user", "after the crash", 2.0))
    session.checkpoint()
    session.close()


def test_a_kill_before_the_first_head_replace_leaves_a_publishable_session(tmp_path):
    path = tmp_path / "s"
    killed_during_first_publication(path, "head-replace")  # inside creation: log 1 written, HEAD not yet
    assert not (path / "HEAD").exists() and os.listdir(path / "log")
    session = Session.open(path)  # nothing was ever committed: the creation is finished afresh
    assert session.head is not None and session.head.seq == 0 and session.pending is None
    session.add_message("root", Message("user", "after the crash", 2.0))
    session.checkpoint()
    session.close()
    assert [m.content for m in Session.open(path).buffers["root"].messages()] == ["after the crash"]


def test_a_crash_during_creation_leaves_an_openable_session(tmp_path):
    root = tmp_path / "record"
    root.mkdir()
    recorder = OpRecorder(OsFileSystem())
    Session.open(root / "s", create=True, fs=recorder).close()
    tl = build_timeline(recorder.ops, str(root), "atomic-rename")
    # The crash point: right after the last mkdir, before the directory fsyncs; every pending operation
    # reached the disk except the creation of s/logs (allowed: its parent was not yet synced).
    k = max(i for i, op in enumerate(recorder.ops) if op.kind == "mkdir") + 1
    kept = [m for m in tl.pending(k) if tl.micro[m].path != "s/logs"]
    state = tl.state(k, kept)
    assert ("s/log", None) in state.files and ("s/logs", None) not in state.files
    materialize(state, str(tmp_path / "crashed"))
    session = Session.open(tmp_path / "crashed" / "s", create=True)  # format 1: FileNotFoundError (staging)
    session.close()


def test_the_session_create_workload_is_clean(tmp_path):
    """The systematic version of A-C: ``perfsuite crashcheck --workload session-create``."""
    report = run_campaign(CrashConfig(workloads=("session-create",), models=("atomic-rename",), max_states=400,
                                      jobs=2, keep_dir=str(tmp_path)))
    assert report.violations == ()


def test_a_file_backed_registry_save_that_changes_nothing_is_a_no_op(tmp_path):
    session = FileSession.open(tmp_path / "s", create=True)
    session.add_message("root", Message("user", "hello", 1.0))
    session.checkpoint()
    report = session.save_registry()  # today: SaveFailed ('FilePublication' object has no attribute 'hashed')
    assert report.outcome == "noop" and session.pending is None
    session.close()


def test_a_retired_log_a_crash_resurrects_is_never_adopted(tmp_path):
    """Retirement unlinks whole logs without a directory fsync, so a crash may bring one back: it is older
    than HEAD's log, referenced by nothing, so open ignores it and a later slice deletes it again."""
    import shutil

    path = tmp_path / "s"
    settings = SessionSettings(chunk_size=512, keep_generations=1, log_capacity=4096)
    session = Session.open(path, create=True, settings=settings)
    saved: dict[str, bytes] = {}
    for i in range(12):
        session.add_message("root", Message("user", f"turn {i} " + "x" * 300, float(i)))
        session.checkpoint()  # acknowledged
        for name in os.listdir(path / "log"):
            saved.setdefault(name, (path / "log" / name).read_bytes())
        while session.retire()[1]:
            pass
    session.close()
    gone = sorted(set(saved) - set(os.listdir(path / "log")))
    assert gone  # retirement deleted whole logs
    for name in gone:  # the crash state: their unsynced removals did not reach the disk
        (path / "log" / name).write_bytes(saved[name])
    reopened = Session.open(path, settings=settings)
    assert [m.content.split()[1] for m in reopened.buffers["root"].messages()] == [str(i) for i in range(12)]
    while reopened.retire()[1]:
        pass
    assert not set(gone) & set(os.listdir(path / "log"))
    reopened.close()
    shutil.rmtree(path)
