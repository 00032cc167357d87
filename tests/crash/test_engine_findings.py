"""Engine bugs the crash checker found (issue 10), kept as regression tests now that they are fixed.

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
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

from perfsuite.crash import CrashConfig, TraceRecorder, build_timeline, materialize, run_campaign
from perfsuite.engine import FileSession, Message, OsFileSystem, RecordingFileSystem, Session, SessionSettings

CHILD = textwrap.dedent(
    """
    import sys
    from perfsuite.engine import Fault, FaultyFileSystem, Message, OsFileSystem, Session
    faults = {"manifest-open": Fault("open", path="manifest-*.json", crash="after"),
              "head-replace": Fault("replace", path="HEAD", crash="before")}
    fs = FaultyFileSystem(OsFileSystem(), [faults[sys.argv[2]]], on_crash="kill")
    session = Session.open(sys.argv[1], create=True, fs=fs)
    session.add_message("root", Message("user", "the first turn", 1.0))
    print("COMMITTING", flush=True)
    session.checkpoint()
    print("NOT REACHED", flush=True)
    """
)


def killed_during_first_publication(path, fault: str) -> None:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(path), fault], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == -signal.SIGKILL and "COMMITTING" in proc.stdout, proc.stderr


def test_a_kill_inside_the_first_manifest_write_leaves_an_openable_session(tmp_path):
    path = tmp_path / "s"
    killed_during_first_publication(path, "manifest-open")  # SIGKILL right after the manifest's open
    assert not (path / "HEAD").exists()
    session = Session.open(path)  # today: SessionError "... corrupt manifest ...; no intact generation"
    session.close()


def test_a_kill_before_the_first_head_replace_leaves_a_publishable_session(tmp_path):
    path = tmp_path / "s"
    killed_during_first_publication(path, "head-replace")
    session = Session.open(path)
    assert session.head is None  # the orphan manifest was never adopted and is not resurrected
    assert session.pending is not None and session.pending.recovered  # ... but its staged bytes are offered
    session.retry_pending()
    assert [m.content for m in session.buffers["root"].messages()] == ["the first turn"]
    session.add_message("root", Message("user", "after the crash", 2.0))
    session.checkpoint()
    session.close()


def test_a_crash_during_creation_leaves_an_openable_session(tmp_path):
    root = tmp_path / "record"
    root.mkdir()
    recorder = TraceRecorder(OsFileSystem())
    Session.open(root / "s", create=True, fs=recorder).close()
    tl = build_timeline(recorder.ops, str(root), "atomic-rename")
    # The crash point: right after the last mkdir, before the directory fsyncs; every pending operation
    # reached the disk except the creation of s/staging (allowed: its parent was not yet synced).
    k = max(i for i, op in enumerate(recorder.ops) if op.kind == "mkdir") + 1
    kept = [m for m in tl.pending(k) if tl.micro[m].path != "s/staging"]
    state = tl.state(k, kept)
    assert state.get("s/objects") is None and ("s/objects", None) in state.files
    assert ("s/staging", None) not in state.files
    materialize(state, str(tmp_path / "crashed"))
    session = Session.open(tmp_path / "crashed" / "s", create=True)  # today: FileNotFoundError (staging)
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


def test_a_resurrected_staging_directory_of_an_adopted_publication_is_not_recovered(tmp_path):
    path = tmp_path / "s"
    fs = RecordingFileSystem(OsFileSystem())
    settings = SessionSettings(chunk_size=512, keep_generations=2)
    session = Session.open(path, create=True, fs=fs, settings=settings)
    session.add_message("root", Message("user", "turn 0 " + "x" * 600, 0.0))
    session.checkpoint()
    staging = os.path.join(str(path), "staging")
    first = {op.path: op.data for op in fs.ops if op.kind == "write" and op.path.startswith(staging + os.sep)}
    for i in range(1, 5):
        session.add_message("root", Message("user", f"turn {i}", float(i)))
        session.checkpoint()  # acknowledged
    session.close()
    # A crash state the page-cache model allows: the first publication's staging directory and its batch
    # record (written without fsync, removed without a directory fsync) came back after a power loss.
    batch = next(p for p in first if p.endswith("batch.json"))
    os.makedirs(os.path.dirname(batch), exist_ok=True)
    with open(batch, "wb") as handle:
        handle.write(first[batch])
    assert json.loads(first[batch])["base"] is None  # it was frozen against no head at all
    reopened = Session.open(path, settings=settings)
    if reopened.pending is not None:  # today: the stale batch is "recovered", holding turn 0 only
        reopened.retry_pending()  # ... and its retry publishes it over turns 1-4
    assert [m.content.split()[1] for m in reopened.buffers["root"].messages()] == ["0", "1", "2", "3", "4"]
    reopened.close()
