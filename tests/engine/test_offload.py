"""E4 process offload (issue 17 item 2): the worker is warmed with the real stage/hash path before any
measured publication, and its writes and fsyncs reach the caller's recording layer (E1), so bytes written
per publication are measured in a worker process exactly as in a thread. Behaviour only, no timing."""

from __future__ import annotations

import asyncio
import collections

import pytest

from perfsuite.engine import Message, OsFileSystem, RecordingFileSystem, Session, SessionSettings


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
    assert _shape(by_process)["fsync"] >= 2 and _shape(by_process)["fsync_dir"] >= 1
    written = sum(op.length for op in by_process if op.kind == "write")
    by_thread_written = sum(op.length for op in by_thread if op.kind == "write")
    assert by_thread_written > 4000 and abs(written - by_thread_written) <= 32  # timestamps' digits may differ
    assert any(op.thread.startswith("process:") for op in by_process)  # recorded in the worker, relayed


def test_process_offload_is_warmed_with_the_real_stage_and_hash(tmp_path) -> None:
    session, fs = _session(tmp_path, "process")
    try:
        mark = fs.mark()
        offload = session.offload()
        warm = fs.since(mark)
        staged = [op for op in warm if op.kind == "write" and "/staging/" in op.path]
        assert staged and sum(op.length for op in staged) >= 1024  # representative bytes, really staged
        assert any(op.kind == "fsync" and "/staging/" in op.path for op in warm)
        assert not any((tmp_path / "p" / "s" / "staging").glob("warm-up*"))  # cleaned up in setup
        imported = offload.submit(eval, "__import__('sys').modules.get('perfsuite.engine._pipeline') is not None")
        assert imported.result(timeout=60) is True  # the worker already runs the engine's code
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
    writes = [op for op in ops if op.kind == "write"]
    assert writes and all((len(op.data) == op.length) if keep_data else op.data == b"" for op in writes)
    assert fs.bytes_written >= sum(op.length for op in writes)
