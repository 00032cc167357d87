"""Group commit in the asynchronous job. Publications that become pending while the job's
fdatasync is in flight are written together when it returns, in one pwrite, and share the next
fdatasync; each is its own generation, acknowledged once, in order. Counted by the recording layer; a
blocking I/O layer (not a timer) holds the first sync until the others are queued, so nothing here
depends on timing."""

from __future__ import annotations

import asyncio
import threading

import pytest

from perfsuite.engine import Admission, DelegatingFileSystem, Message, OsFileSystem, Session, SessionSettings
from perfsuite.engine.testing import RecordingFileSystem


class HeldSync(DelegatingFileSystem):
    """The next fdatasync blocks (on the offload thread) until ``release`` is called."""

    def __init__(self, inner) -> None:
        super().__init__(inner)
        self.armed = False
        self.entered = threading.Event()
        self.gate = threading.Event()

    def fdatasync(self, fd: int) -> None:
        if self.armed:
            self.armed = False
            self.entered.set()
            self.gate.wait(30)
        super().fdatasync(fd)


def _session(tmp_path, *, group: bool = True) -> tuple[Session, RecordingFileSystem, HeldSync]:
    recorder = RecordingFileSystem(OsFileSystem())
    held = HeldSync(recorder)
    session = Session.open(tmp_path / "s", create=True, fs=held,
                           settings=SessionSettings(offload="thread", group_commit=group))
    session.add_message("root", Message("user", "hello", 1.0))
    session.checkpoint()
    return session, recorder, held


async def _deliver_while_the_first_sync_is_in_flight(session, recorder, held, k: int) -> tuple[list, list]:
    loop = asyncio.get_running_loop()
    acks: list[tuple[int, BaseException | None]] = []
    done = loop.create_future()

    def ack(i: int):
        def callback(error: BaseException | None) -> None:
            acks.append((i, error))
            if len(acks) == k + 1 and not done.done():
                loop.call_soon_threadsafe(done.set_result, None)
        return callback

    mark = recorder.mark()
    held.armed = True
    session.deliver_background("root", "completion 0", sender="bg", ack=ack(0))
    while not held.entered.is_set():  # the first publication's fdatasync is now in flight
        await asyncio.sleep(0.001)
    for i in range(1, k + 1):  # these become pending behind the gate meanwhile
        session.deliver_background("root", f"completion {i}", sender="bg", ack=ack(i))
    held.gate.set()
    await asyncio.wait_for(done, 30)
    return acks, recorder.since(mark)


@pytest.mark.parametrize("k", [1, 3, 6])
def test_k_publications_pending_during_one_sync_share_the_next_one(tmp_path, k):
    session, recorder, held = _session(tmp_path)
    acks, ops = asyncio.run(_deliver_while_the_first_sync_is_in_flight(session, recorder, held, k))
    assert acks == [(i, None) for i in range(k + 1)]  # each acknowledged once, in order
    syncs = [op for op in ops if op.kind == "fdatasync"]
    writes = [op for op in ops if op.kind == "pwrite"]
    assert len(syncs) == 2 and len(writes) == 2  # the first alone, then the k pending ones: one each
    assert not [op for op in ops if op.kind in ("fsync", "fsync_dir", "replace")]
    reports = list(session.reports)[-(k + 1):]
    assert [r.group for r in reports] == [1] + [k] * k and all(r.outcome == "adopted" for r in reports)
    assert [r.seq for r in reports] == list(range(reports[0].seq, reports[0].seq + k + 1))  # own generations
    assert writes[1].offset == writes[0].offset + writes[0].length  # one pwrite at the tail: k records
    session.close()
    reopened = Session.open(tmp_path / "s")
    assert [m.body for m in reopened.mailbox("root")] == [f"completion {i}" for i in range(k + 1)]
    reopened.close()


def test_without_group_commit_each_pending_publication_pays_its_own_sync(tmp_path):
    session, recorder, held = _session(tmp_path, group=False)
    acks, ops = asyncio.run(_deliver_while_the_first_sync_is_in_flight(session, recorder, held, 3))
    assert acks == [(i, None) for i in range(4)]
    assert sum(op.kind == "fdatasync" for op in ops) == 4
    session.close()


def test_a_drain_absorbs_nothing_more(tmp_path):
    """E5: a synchronous caller drains the accepted job to its end; work queued behind it stays queued
    (never reported committed by the drain) and runs afterwards in its own job."""
    session, _recorder, _held = _session(tmp_path)

    async def scenario() -> tuple[list, int]:
        admission = Admission(released=False)
        acks: list[str] = []
        session.deliver_background("root", "first", sender="a", ack=lambda e: acks.append("first"),
                                   admission=admission)
        session.deliver_background("root", "second", sender="b", ack=lambda e: acks.append("second"))
        assert len(session.gate.queue) == 1
        admission.release()
        session.drain()  # the first job to its end, inline: the queued delivery is not absorbed
        drained = list(acks)
        for _ in range(400):
            if len(acks) == 2:
                break
            await asyncio.sleep(0.005)
        return drained, len(session.jobs)

    drained, jobs = asyncio.run(scenario())
    assert drained == ["first"] and jobs >= 2
    session.close()


def test_a_failed_group_sync_fails_every_member_and_acknowledges_none(tmp_path):
    from perfsuite.engine.testing import Fault, FaultyFileSystem

    faulty = FaultyFileSystem(OsFileSystem())
    held = HeldSync(faulty)
    session = Session.open(tmp_path / "s", create=True, fs=held, settings=SessionSettings(offload="thread"))
    session.add_message("root", Message("user", "hello", 1.0))
    session.checkpoint()

    async def scenario() -> list:
        acks: list[tuple[int, BaseException | None]] = []
        held.armed = True
        session.deliver_background("root", "completion 0", sender="bg", ack=lambda e: acks.append((0, e)))
        while not held.entered.is_set():
            await asyncio.sleep(0.001)
        for i in range(1, 4):
            session.deliver_background("root", f"completion {i}", sender="bg",
                                       ack=lambda e, i=i: acks.append((i, e)))
        faulty.add(Fault("fdatasync", nth=2, path="*.log"))  # the group's shared sync (the first passes)
        held.gate.set()
        for _ in range(400):
            if session.gate.job is None and not session.gate.queue:
                break
            await asyncio.sleep(0.005)
        return acks

    acks = asyncio.run(scenario())
    assert acks == [(0, None)]  # the group's members wait for a retry or an abandon
    assert session.pending is not None and session.mailbox("root")[-1].body == "completion 0"
    session.retry_pending()  # one pending publication holds the group's records: rolled over, acknowledged
    assert sorted(i for i, e in acks if e is None) == [0, 1, 2, 3]
    session.close()
    assert [m.body for m in Session.open(tmp_path / "s").mailbox("root")] == [f"completion {i}" for i in range(4)]
