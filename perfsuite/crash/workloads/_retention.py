"""The retained-generations crash workload (E3: retirement keeps the last N generations, across reopens).

``session-retention`` runs a portable session with small logs (4 KiB) and four kept generations through
roll-overs, ``replace_messages`` rewrites and checkpoints, with retirement between, and *reopens* it (close,
then ``Session.open``) several times; after each reopen it retires to the end (``while retire()[1]``) and
restores every retained generation (the last ``keep_generations``), each of which must succeed and give back
the messages that generation held (invariant R, :mod:`perfsuite.crash.invariants._retention`).

The hazard: an open store has replayed only HEAD's log. Once the logs rolled over with rewrites between,
HEAD's log's BASE no longer references the oldest logs while an older retained log's BASE still does, so
retirement after a reopen must read that log's BASE references before it decides, or it deletes a log a
retained generation rests on; and a restore replays an older log whose BASE names logs HEAD's does not, so
the new BASE it writes must learn their salts. A restore is itself a rewrite (a roll-over into a new log
under a new epoch): the oracle counts its bytes as recoverable from its start (invariant 1), like a
``replace_messages`` checkpoint's.

Turns are hex of seeded random bytes, so their sizes are what the logs hold and the roll-overs fall where
the schedule puts them, run after run.
"""

from __future__ import annotations

import os
import random

from perfsuite.crash.invariants._retention import RETAINED
from perfsuite.crash.invariants._sessions import SESSION, session_invariants
from perfsuite.crash.model._trace import WorkloadEnv
from perfsuite.crash.workloads._driver import LOG_CAPACITY, ROOT, SessionDriver, _ids
from perfsuite.crash.workloads._registry import Workload, register_workload
from perfsuite.crash.workloads._sessions import recover_portable, setup_portable
from perfsuite.engine import Session, SessionSettings
from perfsuite.engine.testing import VirtualClock

KEEP = 4  # generations retirement keeps: a restore of each must give back what it held
REWRITE = -1  # a step of the schedule: ``replace_messages`` with one fresh turn, then a checkpoint
RETIRE = 0  # a step of the schedule: retirement to the end, in the same process (the store knows every log)
#: Per round: turn sizes (random bytes, hex-encoded, so twice that in the log), rewrites and retirements; each
#: round ends with a reopen, retirement and a restore of every retained generation. The first round rolls the
#: logs over twice with rewrites between (HEAD's log 3's BASE then no longer names log 1, log 2's does, and
#: log 2 holds retained generations); each later round again leaves a retained generation on a log HEAD's
#: log's BASE does not name (the restores' own logs among them), so the old retirement fails every round.
SCHEDULE: tuple[tuple[int, ...], ...] = (
    (600, 100, 100, 200, REWRITE, RETIRE, 400, REWRITE, 300, REWRITE),
    (100, 1200, REWRITE, 200, RETIRE, REWRITE, 800, 1200),
    (800, 600, 300, REWRITE, REWRITE, RETIRE, 1200, 1200, 100),
)
SEED = 44


def retention_settings() -> SessionSettings:
    """The driver's small chunks, logs and retirement slices, but four kept generations: enough for a
    retained generation to rest on a log HEAD's log no longer references."""
    return SessionSettings(chunk_size=512, keep_generations=KEEP, retire_slice=6, offload="inline",
                           log_capacity=LOG_CAPACITY)


def _open(env: WorkloadEnv, prefix: str) -> Session:
    return Session.open(env.path(SESSION), create=True, fs=env.fs, clock=VirtualClock(),
                        settings=retention_settings(), faults=env.faults, id_source=_ids(prefix))


def restore_retained(env: WorkloadEnv, d: SessionDriver, held: dict[int, bytes], label: str) -> None:
    """Restore every retained generation, oldest first, each acknowledged (a restore returns only after its
    roll-over's HEAD is durable). Restoring the oldest makes it the newest, so the next oldest is still
    retained; the last restore brings back the newest state. A restore that fails or gives back other
    bytes than the generation held is noted (invariant R); the session goes on from there."""
    session = d.session
    assert session.head is not None
    newest = session.head.seq
    for generation in range(max(1, newest - KEEP + 1), newest + 1):
        want = held.get(generation)
        if want is None:
            continue  # (before the setup's generation: never held)
        d.rewriting(ROOT, want)
        d.publishing(ROOT)
        what = f"{label}: restore of generation {generation} (of {newest})"
        try:
            session.restore(generation)
        except Exception as exc:  # a retired log, a salt the store forgot: a finding, noted
            error = str(exc).replace(env.root + os.sep, "")  # (paths relative: the same message run after run)
            env.note(f"{what} failed: {type(exc).__name__}: {error}", kind="unrestorable", generation=generation)
            continue
        got = session.buffers[ROOT].data()
        if got != want:
            env.note(f"{what} gave back {len(got)}B of {ROOT!r}, the generation held {len(want)}B",
                     kind="unrestorable", generation=generation)
        d.ack_transcript(what, ROOT)
        assert session.head is not None
        held[session.head.seq] = got
        d.idle()


def run_retention(env: WorkloadEnv) -> None:
    """The rounds of :data:`SCHEDULE`, each ended by close, reopen, retirement and the restores (see the
    module doc); then a last retirement and shutdown."""
    rnd = random.Random(SEED)
    session = _open(env, "w0-")
    d = SessionDriver(env, session)
    assert session.head is not None
    held = {session.head.seq: session.buffers[ROOT].data()}  # generation -> the root transcript it holds
    for r, steps in enumerate(SCHEDULE):
        for i, step in enumerate(steps):
            if step == RETIRE:
                d.retire()
                continue
            text = rnd.randbytes(step if step > 0 else 200).hex()
            if step == REWRITE:
                d.rewrite(f"r{r} rewrite {i}", ROOT, text)
            else:
                d.turn(f"r{r} turn {i} ({step}B)", ROOT, text)
            assert d.session.head is not None
            held[d.session.head.seq] = d.session.buffers[ROOT].data()
        assert d.session.head is not None
        closed = d.session.head
        d.session.close()
        d = SessionDriver(env, _open(env, f"w{r + 1}-"), serial=d.serial)
        head = d.session.head
        if head is None or head.seq != closed.seq or d.session.buffers[ROOT].data() != held[closed.seq]:
            env.note(f"r{r}: the reopen did not load generation {closed.seq}, which it closed", kind="unexpected")
        d.retire()  # after the reopen: the store has replayed HEAD's log only
        restore_retained(env, d, held, f"r{r} after the reopen")
    d.retire()
    d.shutdown("shutdown")


register_workload(Workload(
    "session-retention", "portable session, 4 KiB logs, four kept generations: roll-overs, rewrites and "
    "checkpoints, then reopens, each followed by retirement and a restore of every retained generation",
    run_retention, recover_portable, (*session_invariants("portable"), RETAINED), setup=setup_portable,
    max_states=1500,
))
