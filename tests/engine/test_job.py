"""E4/E5: the asynchronous publication job and the mutation gate, on a real event loop.

Behaviour only: completion is awaited through acknowledgements, never through sleeps of guessed length.
"""

from __future__ import annotations

import asyncio
import errno

import pytest

from perfsuite.engine import Message, OsFileSystem, SaveFailed, Session, SessionSettings
from perfsuite.engine._gate import DrainRefused, DrainTimeout
from perfsuite.engine._job import Admission
from perfsuite.engine.testing import Fault, FaultyFileSystem


def make(tmp_path, fs=None, **settings) -> Session:
    session = Session.open(tmp_path / "s", create=True, fs=fs or OsFileSystem(),
                           settings=SessionSettings(chunk_size=1024, **settings))
    for i in range(30):
        session.add_message("root", Message("user", f"turn {i} " + "w" * 300, float(i)))
    session.checkpoint()
    return session


def committed_mail(session: Session) -> list[str]:
    sidecar = session.committed_sidecar()  # format 2: the committed document
    return [r["body"] for r in sidecar["mailboxes"].get("root", [])]


async def until(predicate, timeout: float = 20.0) -> None:
    """Yield to the loop until ``predicate()`` holds (a behaviour barrier, not a timing assertion)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.001)


def test_background_delivery_returns_at_once_and_acknowledges_once_after_adoption(tmp_path):
    session = make(tmp_path)

    async def scenario() -> None:
        acks: list[BaseException | None] = []
        head_before = session.head
        session.deliver_background("root", "build finished", sender="job-7", ack=acks.append)
        assert acks == [] and session.gate.job is not None  # accepted, not yet adopted
        assert session.mailbox("root") == []  # tentative: hidden from delivery until adoption
        await until(lambda: acks)
        assert acks == [None]
        assert session.head.seq == head_before.seq + 1
        assert [m.body for m in session.mailbox("root")] == ["build finished"]
        assert session.gate.idle

    asyncio.run(scenario())
    session.close()


def test_background_arrival_during_accepted_job_queues_and_runs_before_it_mutates(tmp_path):
    session = make(tmp_path)

    async def scenario() -> None:
        admission = Admission(released=False)
        acks: list[str] = []
        session.deliver_background("root", "first", sender="a", ack=lambda e: acks.append("first"),
                                   admission=admission)
        records_before = sum(len(b) for b in session.sidecar.mailboxes.values())
        session.deliver_background("root", "second", sender="b", ack=lambda e: acks.append("second"))
        # Queued as a preparation continuation: nothing mutated, no snapshot held.
        assert len(session.gate.queue) == 1
        assert sum(len(b) for b in session.sidecar.mailboxes.values()) == records_before
        admission.release()
        await until(lambda: len(acks) == 2)
        assert acks == ["first", "second"]
        assert committed_mail(session) == ["first", "second"]

    asyncio.run(scenario())
    session.close()


def test_synchronous_append_during_a_job_drains_it_then_commits(tmp_path):
    session = make(tmp_path)

    async def scenario() -> None:
        acks: list[BaseException | None] = []
        session.deliver_background("root", "async one", sender="bg", ack=acks.append)
        assert session.gate.job is not None
        session.append_mail("root", "sync one")  # drains the accepted job first, inline
        assert acks == [None] and session.gate.job is None
        assert committed_mail(session) == ["async one", "sync one"]
        assert session.gate.drains == 1 and session.drain_ms

    asyncio.run(scenario())
    session.close()


def test_drain_from_inside_a_preparation_raises_and_token_reenters(tmp_path):
    session = make(tmp_path)
    outcomes: list[str] = []

    def preparation(token) -> None:
        with pytest.raises(DrainRefused):
            session.append_mail("root", "no token")
        session.append_mail("root", "with token", token=token)
        outcomes.append("ok")

    session.submit_preparation("test", preparation)
    assert outcomes == ["ok"]
    assert committed_mail(session) == ["with token"]
    session.close()


def test_callback_firing_during_a_preparation_without_the_token_defers(tmp_path):
    session = make(tmp_path)
    order: list[str] = []

    def unrelated_timer_callback() -> None:
        # Fires "during" the preparation: it inherits nothing and queues like any other caller.
        session.submit_preparation("timer", lambda token: order.append("timer ran"))
        order.append("timer deferred")

    def preparation(token) -> None:
        unrelated_timer_callback()
        order.append("preparation done")

    session.submit_preparation("outer", preparation)
    assert order == ["timer deferred", "preparation done", "timer ran"]
    session.close()


def test_stalled_admission_signals_at_the_limit_keeps_job_and_acknowledges_once_on_release(tmp_path):
    session = make(tmp_path, drain_limit_s=0.25)

    async def scenario() -> None:
        admission = Admission(released=False)
        acks: list[BaseException | None] = []
        session.deliver_background("root", "stalled", sender="bg", ack=acks.append, admission=admission)
        with pytest.raises(DrainTimeout):
            session.drain()
        assert session.gate.job is not None and acks == []  # retained, unacknowledged
        asyncio.get_running_loop().call_soon(admission.release)
        await until(lambda: acks)
        await asyncio.sleep(0.05)
        assert acks == [None]
        assert committed_mail(session) == ["stalled"]

    asyncio.run(scenario())
    session.close()


def test_async_failure_before_adoption_is_pending_and_never_acknowledged_twice(tmp_path):
    faulty = FaultyFileSystem(OsFileSystem())
    session = make(tmp_path, fs=faulty)

    async def scenario() -> None:
        faulty.add(Fault("fdatasync", path="*.log", error=errno.EIO))  # format 2's commit point
        acks: list[BaseException | None] = []
        session.deliver_background("root", "doomed", sender="bg", ack=acks.append)
        await until(lambda: session.gate.job is None)
        assert session.pending is not None and session.save_failed and acks == []
        assert session.mailbox("root") == []  # rolled-back-to-be records never deliverable
        # Later publications never carry the tentative record (a frozen sidecar cannot resurrect it).
        session.spawn_agent("helper")
        assert committed_mail(session) == []
        session.abandon_pending()
        assert len(acks) == 1 and acks[0] is not None
        session.save_registry()
        assert committed_mail(session) == [] and session.deliver_mail("root") == []
        with pytest.raises(Exception, match="no pending"):
            session.abandon_pending()
        assert len(acks) == 1

    asyncio.run(scenario())
    session.close()


def test_async_checkpoint_coalesces_and_keeps_later_edits_dirty(tmp_path):
    session = make(tmp_path)

    async def scenario() -> None:
        admission = Admission(released=False)
        session.add_message("root", Message("user", "edit 1", 1.0))
        session.request_checkpoint("root", admission=admission)
        session.add_message("root", Message("user", "edit 2", 2.0))
        session.request_checkpoint("root")  # coalesced into the accepted one
        session.request_checkpoint("root")
        assert len(session.gate.queue) == 0
        admission.release()
        await until(lambda: session.gate.idle and session.active is None)
        assert session.buffers["root"].modified  # edit 2 came after the freeze
        session.request_checkpoint("root")
        await until(lambda: not session.buffers["root"].modified)

    asyncio.run(scenario())
    session.close()


def test_checkpoint_after_save_failure_is_not_blindly_retried(tmp_path):
    faulty = FaultyFileSystem(OsFileSystem())
    session = make(tmp_path, fs=faulty)
    session.add_message("root", Message("user", "x", 1.0))
    faulty.add(Fault("fdatasync", path="*.log", error=errno.EIO))  # format 2's commit point
    with pytest.raises(SaveFailed):
        session.checkpoint()
    reports = len(session.reports)
    session.request_checkpoint("root")
    assert len(session.reports) == reports  # the preparation saw retained recovery and did nothing
    session.retry_pending()
    session.close()


@pytest.mark.parametrize("offload", ["thread", "process", "inline"])
def test_offload_settings_publish_the_same_bytes(tmp_path, offload):
    session = make(tmp_path, offload=offload)

    async def scenario() -> None:
        session.add_message("root", Message("user", "offloaded", 1.0))
        acks: list[BaseException | None] = []
        session.deliver_background("root", f"via {offload}", sender="bg", ack=acks.append)
        await until(lambda: acks)
        session.request_checkpoint("root")
        await until(lambda: session.gate.idle and session.active is None)

    asyncio.run(scenario())
    session.close()
    reopened = Session.open(tmp_path / "s")
    assert reopened.buffers["root"].messages()[-1].content == "offloaded"
    assert [m.body for m in reopened.mailbox("root")] == [f"via {offload}"]
    reopened.close()


@pytest.mark.parametrize("agent_modified", [True, False])
def test_shutdown_order_agents_then_registry_then_root_then_lease(tmp_path, agent_modified):
    from perfsuite.engine.testing import RecordingFileSystem

    fs = RecordingFileSystem(OsFileSystem())
    session = make(tmp_path, fs=fs)
    session.spawn_agent("a1")
    if agent_modified:
        session.add_message("a1", Message("assistant", "agent text", 1.0))
    session.add_message("root", Message("assistant", "root text", 2.0))
    session.set_activity("a1", "running")
    assert session.registry_debounce.pending
    mark, before = fs.mark(), len(session.reports)
    session.shutdown()
    kinds = [f"{r.kind}:{','.join(r.changed)}" for r in list(session.reports)[before:]]
    if agent_modified:  # the agent's checkpoint carries the sidecar and absorbs the registry save
        assert kinds == ["checkpoint:conversations/a1.jsonl,sidecar.json",
                         "checkpoint:conversations/root.jsonl,sidecar.json"]
    else:
        assert kinds == ["registry:sidecar.json", "checkpoint:conversations/root.jsonl,sidecar.json"]
    assert not session.registry_debounce.pending
    removes = [op for op in fs.since(mark) if op.kind == "remove"]
    assert removes[-1].path.endswith("LEASE")
    reopened = Session.open(tmp_path / "s")
    assert reopened.sidecar.agents["a1"]["activity"] == "running"
    assert reopened.buffers["root"].messages()[-1].content == "root text"


@pytest.mark.parametrize("observed", [False, True])
def test_a_thread_offloaded_job_hands_its_blocking_steps_to_the_worker_at_once(tmp_path, observed):
    """A hand-off to the worker and back costs more than a small publication's stage, hash,
    select, commit and adopt, so the thread offload runs them in one hand-off, each accepted on the worker;
    while someone observes the phases (events on the loop thread, in order), each step is its own. The
    same publication either way: its phases, its one pwrite and fdatasync, its acknowledgement."""
    from perfsuite.engine.testing import RecordingFileSystem

    recorder = RecordingFileSystem(OsFileSystem())
    session = make(tmp_path, fs=recorder, offload="thread")
    events: list = []
    if observed:
        session.observers.subscribe(events.append)

    async def scenario() -> None:
        mark = recorder.mark()
        acks: list[BaseException | None] = []
        session.deliver_background("root", "chained", sender="bg", ack=acks.append)
        await until(lambda: acks)
        assert acks == [None]
        assert [op.kind for op in recorder.since(mark) if op.kind in ("pwrite", "fdatasync")] == ["pwrite", "fdatasync"]

    asyncio.run(scenario())
    job = session.jobs[-1]
    report = session.reports[-1]
    assert report.outcome == "adopted" and set(report.phases_ms) >= {"stage", "hash", "select", "commit", "adopt"}
    # advances of the job on the loop: with the chain, the hand-off of stage to adopt and its return, then
    # finish; observed, a submission and a completion per blocking step
    assert (job.trace.advances <= 4) is (not observed), job.trace.advances
    session.close()
    reopened = Session.open(tmp_path / "s")
    assert [m.body for m in reopened.mailbox("root")] == ["chained"]
    reopened.close()
