"""Open-path fault hooks on the I/O layer: how the crash checker's open-path seeded bugs (those of the
corruption probes) build a broken engine without patching a class. Production layers carry none."""

from __future__ import annotations

import pytest

from perfsuite.engine import Message, OsFileSystem, OwnerConflict, Session, TranscriptLog
from perfsuite.engine.testing import FaultHooks, RecordingFileSystem, with_fault_hooks


def test_the_hooks_ride_on_the_layer_and_through_its_wrappers() -> None:
    hooks = FaultHooks(cut_at_first_bad_line=True)
    assert OsFileSystem().fault_hooks is None
    hooked = with_fault_hooks(OsFileSystem(), hooks)
    assert hooked.fault_hooks is hooks
    assert RecordingFileSystem(hooked).fault_hooks is hooks  # a wrapper carries the hooks of what it wraps


def _damaged_transcript(tmp_path) -> str:
    logdir = str(tmp_path / "log")
    log = TranscriptLog.open(logdir)
    for i in range(4):
        log.append(Message("user", f"message {i}", float(i)))
    log.write(sync=True)
    path = tmp_path / "log" / "conversation.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([lines[0], b"{not json\n", *lines[1:]]))  # damage in the middle
    return logdir


def test_cut_at_first_bad_line_loses_what_the_engine_keeps(tmp_path) -> None:
    """E2: a damaged middle line is quarantined and every later message kept; the seeded bug cuts there."""
    kept = TranscriptLog.open(_damaged_transcript(tmp_path / "a"))
    assert [m.content for m in kept.messages()] == [f"message {i}" for i in range(4)]
    cut = TranscriptLog.open(_damaged_transcript(tmp_path / "b"),
                             fs=with_fault_hooks(OsFileSystem(), FaultHooks(cut_at_first_bad_line=True)))
    assert [m.content for m in cut.messages()] == ["message 0"]


def test_torn_lease_owned_makes_a_torn_lease_unopenable(tmp_path) -> None:
    """A torn LEASE names no owner and is broken; with the hook it is "owned by pid 0"."""
    Session.open(tmp_path / "s", create=True).close()
    (tmp_path / "s" / "LEASE").write_bytes(b"")
    with pytest.raises(OwnerConflict, match="pid 0"):
        Session.open(tmp_path / "s", fs=with_fault_hooks(OsFileSystem(), FaultHooks(torn_lease_owned=True)))
    Session.open(tmp_path / "s").close()
