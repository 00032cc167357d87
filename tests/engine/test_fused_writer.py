"""The synchronous writer's fused path (E4): an unobserved publication without step-order or early-acknowledgement
hooks runs its phases without Step objects, and must do exactly what the stepped driver does: the same I/O
operations in the same order (one pwrite, one fdatasync), the same report; a listener or such a hook takes the
stepped driver; its own seeded bug (``fused_unsynced``) reaches it and nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from perfsuite.engine import Message, OsFileSystem, SaveFailed, Session
from perfsuite.engine.testing import Fault, FaultHooks, FaultyFileSystem, RecordingFileSystem


def _session(tmp_path: Any, name: str, faults: FaultHooks | None = None) -> tuple[Session, RecordingFileSystem]:
    recorder = RecordingFileSystem(OsFileSystem(), keep_data=False)
    session = Session.open(tmp_path / name, create=True, fs=recorder, faults=faults)
    session.add_message("root", Message("user", "turn", 1.0))
    session.checkpoint()
    return session, recorder


def _publish(session: Session, recorder: RecordingFileSystem) -> list[tuple[str, str]]:
    """One mail publication and one root checkpoint; the operations they did (kind, file name)."""
    mark = recorder.mark()
    session.append_mail("root", "x" * 4000, sender="bg", kind="completion")
    session.add_message("root", Message("assistant", "y" * 2000, 2.0))
    session.checkpoint("root")
    return [(op.kind, op.path.rsplit("/", 1)[-1]) for op in recorder.since(mark)]


def test_the_fused_and_the_stepped_writer_do_the_same_operations_and_report_the_same(tmp_path) -> None:
    fused, fused_io = _session(tmp_path, "fused")
    stepped, stepped_io = _session(tmp_path, "stepped")
    seen: list[Any] = []
    stepped.observers.subscribe(seen.append)  # a listener: the stepped driver, phase events emitted
    fused_ops, stepped_ops = _publish(fused, fused_io), _publish(stepped, stepped_io)
    assert fused_ops == stepped_ops
    # E4: per publication one pwrite and one fdatasync of the log (the lease reads around them are reads, which
    # the recorder does not list; a fenced writer writing nothing is test_campaign_findings')
    assert fused_ops == [("pwrite", "00000001.log"), ("fdatasync", "00000001.log")] * 2
    assert [e.phase for e in seen if type(e).__name__ == "PhaseStarted"][:6] == [
        "stage", "hash", "select", "commit", "adopt", "finish"]
    for a, b in zip(list(fused.reports)[-2:], list(stepped.reports)[-2:], strict=True):
        # (record sizes differ by the ids and times in the records: each session draws its own)
        assert (a.outcome, a.changed, a.staged_bytes, a.hashed_bytes, a.seq, a.driver, a.group) == \
            (b.outcome, b.changed, b.staged_bytes, b.hashed_bytes, b.seq, b.driver, b.group)
        assert a.record_bytes > 0 and b.record_bytes > 0
        assert sorted(a.phases_ms) == sorted(b.phases_ms) == sorted(
            ["freeze", "stage", "hash", "select", "commit", "adopt", "finish"])
    fused.close()
    stepped.close()


def test_a_failed_fdatasync_fails_the_fused_publication_in_adopt(tmp_path) -> None:
    """E1/E4: the fused path marks the phase that failed, and the publication stays pending, unacknowledged."""
    faulty = FaultyFileSystem(OsFileSystem())
    session = Session.open(tmp_path / "s", create=True, fs=faulty)
    session.add_message("root", Message("user", "turn", 1.0))
    session.checkpoint()
    faulty.add(Fault("fdatasync", path="*.log"))
    acks: list[BaseException | None] = []
    with pytest.raises(SaveFailed) as failed:
        session.append_mail("root", "body", ack=acks.append)
    assert failed.value.phase == "adopt" and acks == []
    assert session.pending is not None and list(session.reports)[-1].outcome == "failed"
    session.abandon_pending()
    assert len(acks) == 1 and acks[0] is not None  # failed once, never acknowledged as durable
    session.close()


def test_the_fused_writers_seeded_bug_drops_its_fdatasync_and_only_there(tmp_path) -> None:
    """``fused_unsynced`` (the crash campaign's ``fused-writer-unsynced``) reaches the fused path: an acknowledged
    publication without an fdatasync; a listener (the stepped driver) keeps the commit point."""
    broken, recorder = _session(tmp_path, "broken", FaultHooks(fused_unsynced=True))
    ops = _publish(broken, recorder)
    assert [k for k, _ in ops if k in ("pwrite", "fdatasync")] == ["pwrite", "pwrite"]
    broken.observers.subscribe(lambda _event: None)
    ops = _publish(broken, recorder)
    assert [k for k, _ in ops if k in ("pwrite", "fdatasync")] == ["pwrite", "fdatasync", "pwrite", "fdatasync"]
    broken.close()
