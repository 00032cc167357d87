"""The steady commit path's small costs (E4 asynchronous acknowledgement, E3 lease reads): the job acknowledges in
the loop turn that accepts its worker's result, and a bounded read of a small own file (LEASE, read twice per
publication) ends at its size without a second read for end of file, yet still reads every byte of a file
whose size moved since it was taken."""

from __future__ import annotations

import asyncio
import os

import pytest

from perfsuite.engine import Message, OsFileSystem, Session, SessionSettings
from perfsuite.engine._confined import TooLarge, read_bounded
from perfsuite.engine.testing import RecordingFileSystem


def _session(tmp_path) -> tuple[Session, RecordingFileSystem]:
    recorder = RecordingFileSystem(OsFileSystem())
    session = Session.open(tmp_path / "s", create=True, fs=recorder,
                           settings=SessionSettings(chunk_size=1024, offload="thread"))
    session.add_message("root", Message("user", "turn", 1.0))
    session.checkpoint()
    return session, recorder


def test_a_chained_job_acknowledges_in_the_turn_that_accepts_the_workers_result(tmp_path):
    """Two advances on the loop: the hand-off of stage to adopt, then the turn that accepts the chain's result,
    runs the finish and ends the round (acknowledged there, once, after the one pwrite and fdatasync)."""
    session, recorder = _session(tmp_path)

    async def scenario() -> None:
        mark = recorder.mark()
        acks: list[BaseException | None] = []
        done = asyncio.get_running_loop().create_future()

        def ack(error: BaseException | None) -> None:
            acks.append(error)
            done.set_result(None)

        session.deliver_background("root", "one turn", sender="bg", ack=ack)
        await done
        assert acks == [None]
        assert [op.kind for op in recorder.since(mark) if op.kind in ("pwrite", "fdatasync")] == ["pwrite", "fdatasync"]

    asyncio.run(scenario())
    job = session.jobs[-1]
    assert job.done and job.trace.advances == 2, job.trace.advances
    assert session.reports[-1].outcome == "adopted"
    session.close()
    reopened = Session.open(tmp_path / "s")
    assert [m.body for m in reopened.mailbox("root")] == ["one turn"]
    reopened.close()


@pytest.mark.parametrize("size", [0, 1, 4095, (1 << 16) - 1, 1 << 16, (1 << 16) + 1, 300_000])
def test_a_bounded_read_returns_every_byte(tmp_path, size):
    path = tmp_path / "f"
    data = os.urandom(size)
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert read_bounded(fd, size, 1 << 20, str(path)) == data
    finally:
        os.close(fd)


@pytest.mark.parametrize("stale", [10, 500])
def test_a_bounded_read_given_a_stale_size_still_reads_to_the_end(tmp_path, stale):
    """The size taken before the read may be old (the file grew or shrank since): the read goes on to the end."""
    path = tmp_path / "f"
    data = b"x" * 100
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert read_bounded(fd, stale, 1 << 20, str(path)) == data
    finally:
        os.close(fd)


def test_a_bounded_read_refuses_a_file_past_its_limit_even_when_it_grew_after_its_size_was_taken(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"y" * 200)
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(TooLarge):
            read_bounded(fd, 50, 100, str(path))
    finally:
        os.close(fd)
