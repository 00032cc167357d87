"""The group-commit fault crash workload (E4 asynchronous job, group commit; E1 fsyncgate).

``session-group-fault`` runs a portable session on a real asyncio loop with the thread offload, like
``session-group``: per round a background delivery is accepted with a held admission and three more queue
behind the gate meanwhile; released, the job publishes the first alone, then absorbs the three into one
round (one pwrite of three records, ONE shared fdatasync, three generations). The workload's faults fail
that shared fdatasync with EIO in rounds 0 and 1 (:data:`FAILED_ROUNDS`); round 2's passes.

The hazard: a failed shared fdatasync leaves every member's record of unknown durability (fsyncgate: the
kernel may have dropped the dirty pages), so it must fail every member of the group: none acknowledged as
durable, the log never synced again and taken as proof (the retry rolls over into a new log). After round
0's failure the workload retries the pending publication (one pending publication holds the group's
records; its acknowledgements run then, once); after round 1's it abandons it (each member's
acknowledgement fails once). Acknowledgements must arrive in commit order (the order the round chains the
members' generations: the order they were queued). Invariant G
(:mod:`perfsuite.crash.invariants._group`) reads the callbacks' notes; the session invariants check that
every acknowledged delivery survives every crash state.
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Callable

from perfsuite.crash.invariants._group import GROUP_ACKS
from perfsuite.crash.invariants._sessions import SESSION, session_invariants
from perfsuite.crash.model._trace import WorkloadEnv
from perfsuite.crash.workloads._driver import ROOT, SessionDriver
from perfsuite.crash.workloads._registry import Workload, register_workload
from perfsuite.crash.workloads._sessions import (
    _checkpoint_root,
    open_portable,
    recover_portable,
    setup_portable,
)
from perfsuite.engine import Admission, Session
from perfsuite.engine.testing import Fault

ROUNDS = 3
MEMBERS = 3  # deliveries absorbed into each round's group (behind the first, published alone)
FAILED_ROUNDS = (0, 1)  # rounds whose group's shared fdatasync fails: 0 is retried, 1 abandoned
#: the fdatasyncs of ``*.log`` the faults fail (the groups' shared ones), counted on the real engine: turn
#: 1's checkpoint is the first; per round the first delivery's, then the group's, then the root
#: checkpoint's; round 0's retry rolls over into a new log (its BASE is synced by the roll-over, not an
#: fdatasync of a ``*.log``), so round 1's group's is the sixth (the failed one counted).
FAILED_SYNCS = (3, 6)
Seen = tuple[int, BaseException | None, int | None, list[str]]  # an acknowledgement: mark, error, seq, depends


def _noting(env: WorkloadEnv, d: SessionDriver, r: int, i: int, future: asyncio.Future[Seen]
            ) -> Callable[[BaseException | None], None]:
    """Delivery ``i`` of round ``r``'s acknowledgement: every call noted (invariant G); the first resolves
    ``future`` with the trace's mark, the error, and HEAD's generation and the files it rests on then (what
    the acknowledgement covers: the workload writes it into the oracle later, when HEAD has moved on)."""
    def ack(error: BaseException | None) -> None:
        at = env.mark()
        env.note(f"r{r} delivery {i}: acknowledged {'failed' if error is not None else 'durable'}",
                 kind="group-ack", round=r, index=i, ok=error is None, at=at)
        head = d.session.head
        if not future.done():
            future.set_result((at, error, head.seq if head is not None else None, d.depends()))
    return ack


async def _round(env: WorkloadEnv, session: Session, d: SessionDriver, r: int) -> None:
    loop = asyncio.get_running_loop()
    admission = Admission(released=False)
    bodies = [f"round {r} completion {i}" for i in range(MEMBERS + 1)]
    done: list[asyncio.Future[Seen]] = [loop.create_future() for _ in bodies]
    for i, body in enumerate(bodies):
        session.deliver_background(ROOT, body, sender="bg", admission=admission if i == 0 else None,
                                   ack=_noting(env, d, r, i, done[i]))
    env.note(f"r{r}: group of {MEMBERS} queued", kind="group", round=r, members=len(bodies))
    admission.release()
    for _ in range(2000):  # until the job's rounds ended (a failed group leaves its members pending)
        if session.gate.job is None and not session.gate.queue:
            break
        await asyncio.sleep(0.001)
    else:
        env.note(f"r{r}: the job never finished", kind="unexpected")
    if session.pending is not None:  # the group's shared fdatasync failed: its members wait
        if r == FAILED_ROUNDS[-1]:
            session.abandon_pending()
        else:
            session.retry_pending()
    elif r in FAILED_ROUNDS:
        env.note(f"r{r}: no pending publication although the group's fdatasync failed", kind="unexpected")
    for body, future in zip(bodies, done):
        if not future.done():
            env.note(f"r{r}: {body!r} never acknowledged", kind="unexpected")
            continue
        at, error, seq, depends = future.result()
        if error is None:
            try:
                record = d.find_mail(ROOT, body)
            except AssertionError:
                env.note(f"r{r}: {body!r} acknowledged durable but not in the mailbox", kind="unexpected")
                continue
            env.ack(f"{body} (group)", scope=SESSION, kind="mail", at=at, seq=seq, depends=depends, id=record.id,
                    to=record.to, body=record.body)
    d.idle()
    d.deliver(ROOT)
    d.add(ROOT, f"reply to round {r}")
    await _checkpoint_root(session, d, env, f"root checkpoint {r} (job)")


def run_group_fault(env: WorkloadEnv) -> None:
    """The rounds (see the module doc), then shutdown. Deterministic: the admission, not a race, keeps
    the three queued behind the first; every step is awaited before the next mutation."""

    async def main() -> None:
        session = open_portable(env, offload="thread")
        d = SessionDriver(env, session)
        d.turn("turn 1", ROOT, "question", "answer")
        for r in range(ROUNDS):
            await _round(env, session, d, r)
        d.shutdown("shutdown")

    asyncio.run(main())


register_workload(Workload(
    "session-group-fault", "portable session on a running loop: group commits whose shared fdatasync fails "
    "(EIO) in two of three rounds, the group retried once and abandoned once",
    run_group_fault, recover_portable,
    (*session_invariants("portable"), GROUP_ACKS), setup=setup_portable, max_states=1500,
    faults=tuple(Fault("fdatasync", nth=n, path="*.log", error=errno.EIO) for n in FAILED_SYNCS),
))
