"""E4 process offload: the worker is warmed with the real stage/hash path before any
measured publication, and the publication's durable operations reach the caller's recording layer (E1), so
bytes written per publication are measured with a worker process exactly as with a thread. Format 2:
the worker stages and hashes (pure work on materialised bytes); the pwrite and fdatasync of the open,
flock-ed log run on this process's publishing thread. Behaviour only, no timing."""

from __future__ import annotations

import asyncio
import collections

import pytest

from perfsuite.engine import Message, OsFileSystem, Session, SessionSettings
from perfsuite.engine.testing import RecordingFileSystem


def _session(tmp_path, offload: str) -> tuple[Session, RecordingFileSystem]:
    fs = RecordingFileSystem(OsFileSystem(), keep_data=False)
    session = Session.open(tmp_path / offload[0] / "s", create=True, fs=fs,  # same path length: same bytes
                           settings=SessionSettings(chunk_size=1024, offload=offload))
    for i in range(30):
        session.add_message("root", Message("user", f"turn {i} " + "w" * 300, float(i)))
    session.checkpoint()
    return session, fs


def _deliver(session: Session, fs: RecordingFileSystem) -> list:
    """One asynchronous mailbox delivery; the recorded operations from submission to acknowledgement."""
    session.offload()  # started (and warmed) in setup, as the suite's operations do

    async def scenario() -> list:
        mark = fs.mark()
        done = asyncio.get_running_loop().create_future()
        session.deliver_background("root", "x" * 4000, sender="bg", ack=lambda e: done.set_result(fs.mark()))
        end = await done
        return fs.ops[mark:end]

    return asyncio.run(scenario())


def _shape(ops: list) -> collections.Counter:
    return collections.Counter(op.kind for op in ops)


def test_process_offload_reports_the_workers_writes_and_fsyncs(tmp_path) -> None:
    thread, thread_fs = _session(tmp_path, "thread")
    process, process_fs = _session(tmp_path, "process")
    try:
        by_thread = _deliver(thread, thread_fs)
        by_process = _deliver(process, process_fs)
    finally:
        thread.close()
        process.close()
    assert _shape(by_process) == _shape(by_thread)  # the same durable operations, wherever they ran
    assert _shape(by_process) == {"pwrite": 1, "fdatasync": 1}  # format 2's steady path
    written = sum(op.length for op in by_process if op.kind == "pwrite")
    by_thread_written = sum(op.length for op in by_thread if op.kind == "pwrite")
    assert by_thread_written > 4000 and abs(written - by_thread_written) <= 32  # timestamps' digits may differ
    assert all(op.thread.startswith("perfsuite-publish") for op in by_process)  # off the loop, in this process


def test_process_offload_is_warmed_with_the_real_stage_and_hash(tmp_path) -> None:
    session, fs = _session(tmp_path, "process")
    try:
        mark = fs.mark()
        offload = session.offload()
        assert fs.since(mark) == []  # the worker's steps are pure: warming it writes nothing
        imported = offload.submit(eval, "__import__('sys').modules.get('perfsuite.engine._pipeline') is not None")
        assert imported.result(timeout=60) is True  # the worker already ran the engine's stage and hash
        staged = offload.submit(eval, "'hash_tail' in dir(__import__('perfsuite.engine._objects').engine._objects)")
        assert staged.result(timeout=60) is True
    finally:
        session.close()


@pytest.mark.parametrize("keep_data", [True, False])
def test_relayed_operations_keep_the_recording_layers_data_setting(tmp_path, keep_data: bool) -> None:
    fs = RecordingFileSystem(OsFileSystem(), keep_data=keep_data)
    session = Session.open(tmp_path / "s", create=True, fs=fs, settings=SessionSettings(offload="process"))
    session.add_message("root", Message("user", "hello", 1.0))
    session.checkpoint()
    try:
        ops = _deliver(session, fs)
    finally:
        session.close()
    writes = [op for op in ops if op.kind == "pwrite"]
    assert writes and all((len(op.data) == op.length) if keep_data else op.data == b"" for op in writes)
    assert fs.bytes_written >= sum(op.length for op in writes)
