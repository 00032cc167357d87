"""The sidecar's dirty journal across save rounds (format 2 deltas; E7 registry saves, E3 control state).

``session-sidecar-rounds`` runs a portable session on a real asyncio loop with the thread offload. Per round
an agent's activity changes (an observational change: dirty, no publication of its own), then a background
delivery is accepted with a held admission: its freeze captures the dirty keys, the activity among them, at
their current versions. While that publication is in flight the same key is set again (and a second agent's
activity cleared back to ``idle``); the admission is released, the delivery is adopted, and then an
explicit registry save, acknowledged, publishes what is dirty. A control key is set and cleared (``None``)
by acknowledged saves in alternate rounds, so a cleared value must never come back.

The hazard: the install of the in-flight publication must mark a key clean only at the version it
captured. Marked clean although it changed again since, the key is left out of the next save's delta, so
the acknowledged registry save does not hold the newer value: after a crash (or simply after a reopen)
the older value is back, a key set before an acknowledged save lost and a superseded one resurrected.
The session invariants check every acknowledged value after every crash state (invariant 1); the workload
also reopens the session once at the end and notes any acknowledged value it did not load.
"""

from __future__ import annotations

import asyncio
from typing import Any

from perfsuite.crash.invariants._sessions import SESSION, session_invariants
from perfsuite.crash.model._trace import WorkloadEnv
from perfsuite.crash.workloads._driver import ROOT, SessionDriver, _ids, settings
from perfsuite.crash.workloads._registry import Workload, register_workload
from perfsuite.crash.workloads._sessions import (
    _checkpoint_root,
    _resolving,
    _settled,
    open_portable,
    recover_portable,
    setup_portable,
)
from perfsuite.engine import Admission, Session
from perfsuite.engine.testing import VirtualClock

ROUNDS = 3
#: per round: a1's activity captured by the in-flight delivery, then set again while it is in flight
FLIGHT = (("permission-blocked", "running"), ("waiting", "permission-blocked"), ("running", "waiting"))


async def _round(env: WorkloadEnv, session: Session, d: SessionDriver, r: int) -> None:
    captured, again = FLIGHT[r]
    d.activity("a1", captured)
    d.activity("a2", "running")
    admission = Admission(released=False)
    done: asyncio.Future[tuple[int, BaseException | None]] = asyncio.get_running_loop().create_future()
    body = f"round {r} completion"
    session.deliver_background(ROOT, body, sender="a1", admission=admission, ack=_resolving(done, env))
    if session.activity().job is None:
        env.note(f"r{r}: the delivery was not accepted before its admission", kind="unexpected")
    d.activity("a1", again)  # set again while the publication that captured it is in flight
    d.activity("a2", "idle")  # and a second key cleared back
    admission.release()
    at, error = await done
    await _settled(session)
    if error is None:
        d.ack_mail(f"r{r} {body} (job)", d.find_mail(ROOT, body), at)
    else:
        env.note(f"r{r}: the delivery failed: {type(error).__name__}", kind="unexpected")
    d.registry(f"r{r} registry save")  # acknowledges every agent's live activity
    d.control(f"r{r} plan", "plan", {"step": r} if r % 2 == 0 else None)  # set, cleared, set again
    d.deliver(ROOT)
    d.add(ROOT, f"reply to round {r}")
    await _checkpoint_root(session, d, env, f"r{r} root checkpoint (job)")


def _reopened_problems(env: WorkloadEnv, want: dict[str, Any]) -> None:
    """Reopen the closed session and note every acknowledged activity or control value it did not load."""
    session = Session.open(env.path(SESSION), fs=env.fs, clock=VirtualClock(), settings=settings(),
                           faults=env.faults, id_source=_ids("x"))
    try:
        for key, value in want.items():
            kind, _, name = key.partition(":")
            got = session.sidecar.control.get(name) if kind == "control" else \
                session.sidecar.agents.get(name, {}).get(kind)
            if got != value:
                env.note(f"after a reopen {key} is {got!r}, the last acknowledged save held {value!r}",
                         kind="unexpected")
    finally:
        session.close()


def run_sidecar_rounds(env: WorkloadEnv) -> None:
    """The rounds (see the module doc), then shutdown and a reopen. Deterministic: the held admission, not
    a race, keeps each delivery in flight while its captured keys change again."""

    async def main() -> None:
        session = open_portable(env, offload="thread")
        d = SessionDriver(env, session)
        d.turn("turn 1", ROOT, "question", "answer")
        d.spawn("spawn a1", "a1", "background research")
        d.spawn("spawn a2", "a2", "a second helper")
        for r in range(ROUNDS):
            await _round(env, session, d, r)
        d.shutdown("shutdown")

    asyncio.run(main())
    want: dict[str, Any] = {}
    for ack in env.oracle().acks:
        if ack.kind == "value":
            want[str(ack.detail["key"])] = ack.detail["value"]
    _reopened_problems(env, want)


register_workload(Workload(
    "session-sidecar-rounds", "portable session on a running loop: agent activity set again while a delivery that "
    "captured it is in flight, an acknowledged registry save after each, a control key set and cleared",
    run_sidecar_rounds, recover_portable, session_invariants("portable"), setup=setup_portable, max_states=1500,
))
