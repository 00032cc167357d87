"""Session crash workloads (SPEC section 7, E3's two profiles): portable and file-backed sessions on the recorder.

A :class:`SessionDriver` runs acknowledged mutations on a session and writes the oracle as it goes: for
every acknowledgement, the trace index at which it was given (a synchronous call: when it returned; an
acknowledgement callback: when the callback ran), what it acknowledged (transcript bytes, a mail record,
an agent, a registry or control value) and the files the acknowledged state rests on (invariant 7).
Recovery is the engine's real open path (``Session.open`` / ``FileSession.open``); for a recovered
pending publication it is checked before *and* after ``retry_pending``; then ``deliver_mail`` runs on
every conversation to see what the recovered session would deliver again (invariant 4).

Workloads use ``offload="inline"`` and no running loop: the asynchronous job is drained inline, so the
trace has no cross-thread interleaving and every acknowledgement callback runs at a definite trace index.
The exception is ``session-async``, which runs the job on its real asyncio loop with the thread offload.
"""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Callable, Mapping
from typing import Any

from perfsuite.crash.invariants._sessions import SESSION, session_invariants
from perfsuite.crash.model._trace import WorkloadEnv, owner_alive_after_crash
from perfsuite.crash.workloads._driver import ROOT, SessionDriver, _ids, settings
from perfsuite.crash.workloads._registry import Workload, register_workload
from perfsuite.engine import FileSession, FileSystem, Message, SaveFailed, Session
from perfsuite.engine.testing import Fault, VirtualClock


# -- workloads ---------------------------------------------------------------------------------------------
def _resolving(future: asyncio.Future[tuple[int, BaseException | None]], env: WorkloadEnv
               ) -> Callable[[BaseException | None], None]:
    """An acknowledgement that resolves ``future`` once, with the trace's mark when it ran and its error."""
    def ack(error: BaseException | None) -> None:
        if not future.done():
            future.set_result((env.mark(), error))
    return ack


def open_portable(env: WorkloadEnv, offload: str = "inline") -> Session:
    return Session.open(env.path(SESSION), create=True, fs=env.fs, clock=VirtualClock(), settings=settings(offload),
                        faults=env.faults,
                        id_source=_ids("w"))


def open_file(env: WorkloadEnv) -> FileSession:
    return FileSession.open(env.path(SESSION), create=True, fs=env.fs, clock=VirtualClock(), settings=settings(),
                            faults=env.faults)


def _first_turn(session: Session) -> None:
    session.add_message(ROOT, Message("user", "set up the session", 0.0))
    session.add_message(ROOT, Message("assistant", "the session is set up", 0.5))
    session.checkpoint(ROOT)
    session.close()


def setup_portable(root: str) -> None:
    """The initial tree of the portable workloads: a created session with one committed turn. Creation
    and the first publication are explored by ``session-create`` (where the engine has known bugs)."""
    _first_turn(Session.open(os.path.join(root, SESSION), create=True, clock=VirtualClock(), settings=settings(),
                             id_source=_ids("s")))


def setup_file(root: str) -> None:
    """The initial tree of the file-backed workloads: a created session with one committed turn."""
    _first_turn(FileSession.open(os.path.join(root, SESSION), create=True, clock=VirtualClock(), settings=settings()))


def mixed(d: SessionDriver, rounds: int = 2) -> None:
    """The standard mix: turns with checkpoints, acknowledged mail, background deliveries through the job,
    delivery into transcripts committed by later checkpoints, registry saves after activity changes,
    control state, an agent spawned, working and settled, a discard, and generation retirement."""
    d.turn("turn 1", ROOT, "plan the migration", "here is a plan in three steps")
    d.spawn("spawn a1", "a1", "find the fsync rules for directories")
    d.mail("mail to a1", "a1", "start with rename durability")
    d.background("background completion 1", ROOT, "background command finished: 3 files", sender="a1")
    d.control("goal", "goal", {"text": "ship the migration", "budget": 10})
    for r in range(rounds):
        d.deliver(ROOT)  # consumption, committed by the next root checkpoint
        # Publications between the delivery and the root checkpoint (E7, the consumption ledger): their sidecars must
        # still carry the consumed mail (the ledger), or a crash before the checkpoint loses it.
        d.mail(f"r{r} mail to a1 before the root checkpoint", "a1", f"round {r}: check the rename rules")
        d.control(f"r{r} provider before the root checkpoint", "provider", {"name": f"p{r}"})
        d.turn(f"r{r} root turn", ROOT, f"round {r}: continue", f"round {r}: done " + "x" * 700)
        d.activity("a1", "permission-blocked")
        d.activity("a1", "running" if r % 2 == 0 else "waiting")  # (a no-op file-backed save fails: see tests)
        d.registry(f"r{r} registry save")
        d.deliver("a1")
        d.auto_checkpoint(f"r{r} a1 checkpoint (job)", "a1", f"a1 works on round {r}")
        d.background(f"r{r} monitor batch", ROOT, f"monitor batch {r}: 2 events", sender="a1")
        d.mail(f"r{r} note to root", ROOT, f"note {r} from a1", sender="a1")
        d.control(f"r{r} plan", "plan", {"step": r})
        d.retire()
    d.deliver("a1")
    d.settle("settle a1", "a1", "done", "a1 answer: fsync the directory after rename")
    d.spawn("spawn a2", "a2", "summarise the answer")
    junk = d.mail("mail to a2", "a2", "an obsolete request")
    d.discard("a2", junk.id)
    d.registry("registry save after discard")
    d.deliver(ROOT)
    d.auto_checkpoint("root checkpoint (job)", ROOT, "thanks, merging the answer")
    d.retire()
    d.deliver(ROOT)
    d.add(ROOT, "an unacknowledged tail message")  # flushed only by shutdown


def run_session(env: WorkloadEnv) -> None:
    session = open_portable(env)
    d = SessionDriver(env, session)
    mixed(d)
    d.shutdown("shutdown")


def run_session_file(env: WorkloadEnv) -> None:
    session = open_file(env)
    d = SessionDriver(env, session)
    mixed(d, rounds=2)
    d.shutdown("shutdown")


def run_session_fault(env: WorkloadEnv) -> None:
    """Faults declared on the workload (format 2, the session log): the log's fdatasync of the mail publication
    fails with EIO (a pending publication; the log is poisoned and ``retry_pending`` acknowledges it once,
    rolled over into a new log); the fdatasync of a root checkpoint fails (pending; abandoned, which rolls
    over again so the abandoned record is never adopted, then checkpointed again)."""
    session = open_portable(env)
    d = SessionDriver(env, session)
    d.turn("turn 1", ROOT, "first question", "first answer")
    d.spawn("spawn a1", "a1", "look something up")
    ack, calls = d.callback()
    try:
        session.append_mail(ROOT, "mail whose log fdatasync fails", sender="a1", ack=ack)
        env.note("append_mail returned although its log fdatasync failed", kind="unexpected")
    except SaveFailed:
        env.note("mail publication failed (pending)")
    if calls and session.pending is not None:
        env.note("acknowledged a failed publication", kind="unexpected")
    # An automatic checkpoint requested while that publication is pending (E4: acknowledged only after adoption): its
    # acknowledgement must report failure, never None (the driver counts only None as durable).
    d.auto_checkpoint("root checkpoint requested while pending (job)", ROOT, "a turn while a save is pending")
    if session.pending is not None:
        session.retry_pending()
    at = d._acked_at(calls, "retried mail")
    if at is not None:
        d.ack_mail("retried mail", d.find_mail(ROOT, "mail whose log fdatasync fails"), at)
    d.idle()
    d.add(ROOT, "a turn whose log fdatasync fails " + "y" * 300)
    try:
        session.checkpoint(ROOT)
        env.note("checkpoint returned although its log fdatasync failed", kind="unexpected")
    except SaveFailed:
        env.note("root checkpoint failed (pending)")
    if session.pending is not None:
        session.abandon_pending()
    d.turn("turn after abandon", ROOT, "the same turn, saved again")
    d.deliver(ROOT)
    d.turn("turn with delivery", ROOT, "got the mail")
    d.retire()
    d.shutdown("shutdown")


def run_session_file_fault(env: WorkloadEnv) -> None:
    """The second fsync of the root transcript fails with EIO: a pending publication whose retry rewrites
    the transcript into a new file before its barrier (E1), then replaces the sidecar."""
    session = open_file(env)
    d = SessionDriver(env, session)
    d.turn("turn 1", ROOT, "first question", "first answer")
    d.mail("mail to root", ROOT, "a note")
    d.deliver(ROOT)
    d.add(ROOT, "a turn whose barrier fails")
    d.publishing(ROOT)
    try:
        session.checkpoint(ROOT)
        env.note("checkpoint returned although its barrier failed", kind="unexpected")
    except SaveFailed:
        env.note("root checkpoint failed (pending)")
    # Requested while that publication is pending (E4): reported failed, never acknowledged.
    d.auto_checkpoint("root checkpoint requested while pending", ROOT, "a turn while a save is pending")
    retried = session.pending.batch.texts[ROOT].bytes_from(0) if session.pending is not None else None
    if session.pending is not None:
        session.retry_pending()
    if retried is not None:  # what the retry published: the frozen batch, not the turn added since
        d._ack("retried checkpoint", "transcript", None, conversation=ROOT, data=retried)
    d.turn("turn after retry", ROOT, "and another")
    d.shutdown("shutdown")


def run_session_create(env: WorkloadEnv) -> None:
    """Creation and the first publications from an empty directory (no setup): the crash window before
    the first HEAD adoption (see ``tests/crash/test_engine_findings.py``)."""
    session = open_portable(env)
    d = SessionDriver(env, session)
    d.turn("turn 1", ROOT, "the very first question", "the very first answer")
    d.mail("mail to root", ROOT, "first mail", sender="root")
    d.deliver(ROOT)
    d.turn("turn 2", ROOT, "second question")
    d.shutdown("shutdown")


async def _settled(session: Session) -> None:
    """Until the session's job and queue are empty (the workloads await every step before the next mutation,
    so the session's I/O never interleaves)."""
    while session.activity().job is not None or session.activity().queued:
        await asyncio.sleep(0.001)
    await asyncio.sleep(0)


async def _checkpoint_root(session: Session, d: SessionDriver, env: WorkloadEnv, label: str) -> None:
    """An automatic root checkpoint through the job, awaited; recorded acknowledged (``label``) on success."""
    checkpointed: asyncio.Future[tuple[int, BaseException | None]] = asyncio.get_running_loop().create_future()
    session.request_checkpoint(ROOT, ack=_resolving(checkpointed, env))
    at, error = await checkpointed
    await _settled(session)
    if error is None:
        d.ack_transcript(label, ROOT, at)


def run_session_async(env: WorkloadEnv) -> None:
    """The warm-local path for real: an asyncio loop, the job's blocking steps on the offload thread,
    acknowledgements on the loop. Every step is awaited before the next mutation, so the session's I/O
    never interleaves (the model tracks open files by path)."""

    async def main() -> None:
        session = open_portable(env, offload="thread")
        d = SessionDriver(env, session)
        loop = asyncio.get_running_loop()

        d.turn("turn 1", ROOT, "question", "answer")
        d.spawn("spawn a1", "a1", "background research")
        for r in range(3):
            done: asyncio.Future[tuple[int, BaseException | None]] = loop.create_future()
            body = f"completion {r}"
            session.deliver_background(ROOT, body, sender="a1",
                                       ack=_resolving(done, env))
            at, error = await done
            await _settled(session)
            if error is None:
                d.ack_mail(f"background completion {r} (job)", d.find_mail(ROOT, body), at)
            d.idle()
            d.deliver(ROOT)
            d.add(ROOT, f"reply to completion {r}")
            await _checkpoint_root(session, d, env, f"root checkpoint {r} (job)")
            d.idle()
        d.retire()
        d.shutdown("shutdown")

    asyncio.run(main())


def run_session_group(env: WorkloadEnv) -> None:
    """Group commit (E4) on a real loop: a background delivery accepted with a held admission, three
    more queued behind the gate meanwhile; released, the job publishes the first, then absorbs the three
    into one round: one pwrite of three records, one fdatasync, three acknowledgements in order. A crash
    inside that write leaves a valid prefix of the group, none of it acknowledged. Deterministic: nothing
    depends on timing (the admission, not a race, keeps the three queued)."""
    from perfsuite.engine import Admission

    async def main() -> None:
        session = open_portable(env, offload="thread")
        d = SessionDriver(env, session)
        loop = asyncio.get_running_loop()

        d.turn("turn 1", ROOT, "question", "answer")
        for r in range(2):
            admission = Admission(released=False)
            bodies = [f"round {r} completion {i}" for i in range(4)]
            done: list[asyncio.Future[tuple[int, BaseException | None]]] = [loop.create_future() for _ in bodies]
            for i, body in enumerate(bodies):
                session.deliver_background(ROOT, body, sender="bg", admission=admission if i == 0 else None,
                                           ack=_resolving(done[i], env))
            admission.release()
            for body, future in zip(bodies, done):
                at, error = await future
                if error is None:
                    d.ack_mail(f"{body} (group)", d.find_mail(ROOT, body), at)
            await _settled(session)
            d.deliver(ROOT)
            d.add(ROOT, f"reply to round {r}")
            await _checkpoint_root(session, d, env, f"root checkpoint {r} (job)")
        d.shutdown("shutdown")

    asyncio.run(main())


# -- recovery ----------------------------------------------------------------------------------------------
def snapshot_session(session: Session) -> dict[str, Any]:
    """What an opened session holds, comparable across recoveries (no epochs, tokens or problem text)."""
    pending = session.pending
    return {
        "head": [session.head.seq, session.head.log] if session.head is not None else None,
        "conversations": {c: b.data() for c, b in sorted(session.buffers.items())},
        "agents": {a: {k: r.get(k) for k in ("status", "activity", "parent")}
                   for a, r in sorted(session.sidecar.agents.items())},
        "mailboxes": {c: [(m.id, m.sender, m.kind, m.body) for m in box]
                      for c, box in sorted(session.sidecar.mailboxes.items()) if box},
        "control": dict(session.sidecar.control),
        "root": dict(session.sidecar.root),
        "checkpoint": session.sidecar.checkpoint,
        "pending": None if pending is None else {c: t.bytes_from(0) for c, t in sorted(pending.batch.texts.items())},
    }


def _release(session: Session) -> None:
    """Close; a session still holding a pending publication (its retry failed) releases its lease only."""
    if session.pending is None:
        session.close()
        return
    if session.lease is not None:
        session.store.release_lease(session.lease)
    session._release_machinery()
    session.closed = True


def recovery_view(session: Session) -> dict[str, Any]:
    """What an opened session shows after recovery: its state as opened, after retrying a pending
    publication (if any), the state judged ("final") and the mail redelivered per conversation (E5)."""
    opened = snapshot_session(session)
    retried = None
    if session.pending is not None:
        session.retry_pending()
        retried = snapshot_session(session)
    redelivered = {c: [r.id for r in session.deliver_mail(c)] for c in sorted(session.buffers)}
    return {"open": opened, "retried": retried, "final": retried or opened, "redelivered": redelivered}


def _recover(session: Session) -> dict[str, Any]:
    try:
        view = recovery_view(session)
    finally:
        _release(session)
    return {"profile": session.profile, **view}


def recover_portable(root: str, fs: FileSystem) -> Mapping[str, Any]:
    """``Session.open`` (create: what an application does), retry of a recovered pending publication,
    then what ``deliver_mail`` would deliver again; the lease is released. The owner a LEASE names is
    judged by the crash model of ownership (:func:`owner_alive_after_crash`), not stubbed."""
    session = Session.open(os.path.join(root, SESSION), create=True, fs=fs, clock=VirtualClock(),
                           settings=settings(), id_source=_ids("r"), owner_alive=owner_alive_after_crash)
    return _recover(session)


def recover_file(root: str, fs: FileSystem) -> Mapping[str, Any]:
    """``FileSession.open`` (create), then what ``deliver_mail`` would deliver again; the lock is removed."""
    session = FileSession.open(os.path.join(root, SESSION), create=True, fs=fs, clock=VirtualClock(),
                               settings=settings(), owner_alive=owner_alive_after_crash)
    return _recover(session)


register_workload(Workload(
    "session", "portable session: turns, mail, background deliveries (job), delivery, registry saves, control, "
    "spawn/settle, discard, retirement, shutdown",
    run_session, recover_portable, session_invariants("portable"), setup=setup_portable, max_states=3000,
))
register_workload(Workload(
    "session-file", "file-backed session: the same mix, transcripts in place, sidecar replaced after the barrier",
    run_session_file, recover_file, session_invariants("file"), setup=setup_file,
))
register_workload(Workload(
    "session-fault", "portable session: EIO on the log's fdatasync of a mail publication (pending, retried into "
    "a new log) and of a root checkpoint (pending, abandoned)",
    run_session_fault, recover_portable, session_invariants("portable"), setup=setup_portable, max_states=1500,
    # the mail's commit point (the third fdatasync), then the root checkpoint's: the fourth one the first
    # fault did not claim, after the retry's roll-over (its BASE's sync)
    faults=(Fault("fdatasync", nth=3, path="*.log", error=errno.EIO),
            Fault("fdatasync", nth=4, path="*.log", error=errno.EIO)),
    head_loss=True,
))
register_workload(Workload(
    "session-file-fault", "file-backed session: EIO on a root transcript fsync (pending, retried into a new file)",
    run_session_file_fault, recover_file, session_invariants("file"), setup=setup_file,
    faults=(Fault("fsync", nth=2, path="conversation.jsonl", error=errno.EIO),),
))
register_workload(Workload(
    "session-async", "portable session on a running asyncio loop, job steps on the offload thread",
    run_session_async, recover_portable, session_invariants("portable"), setup=setup_portable, max_states=1500,
))
register_workload(Workload(
    "session-group", "portable session on a running loop: deliveries queued behind a held job, absorbed into one "
    "group commit (one pwrite, one fdatasync for three generations)",
    run_session_group, recover_portable, session_invariants("portable"), setup=setup_portable, max_states=1500,
))
register_workload(Workload(
    "session-create", "portable session created from nothing: the window before the first HEAD adoption",
    run_session_create, recover_portable, session_invariants("portable"),
))
