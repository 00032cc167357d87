"""The torn-tail repair crash workload (E2/E3: a crash's torn record is dropped, and the drop itself is durable).

``session-torn-tail`` starts from a real crash state: its setup runs a portable session on the recorder in a
scratch directory, crashes it (in the model) in the middle of a large record's write, and materializes that
state, torn record and the dead owner's LEASE included, as the workload's initial tree
(:func:`torn_tree`). The recorded run then opens it the way an application does after a crash (the
repairing open: the owner is judged dead by :func:`owner_alive_after_crash`), which re-zeroes the torn
tail, and goes on: short turns whose records land where the torn one began, a mail, a checkpoint through
the job, retirement and shutdown. Every crash state of that run is a *second* crash.

The hazard: the session's next record is written over the first bytes of the torn one. Unless the zeros
that replace the torn tail are durable before that record is written (body first, then its header), a
second crash can keep the new record and lose the zeros behind it (a valid record followed by the old
record's tail: damage, and open refuses a session that holds acknowledged state), or keep a zeroed header
in front of the torn body (data after a clean end: damage again). The crash model makes a file's unsynced
writes durable at its next fdatasync, so a re-zeroing that skips its syncs shows only before the next
record's fdatasync: the first turn after the open is the one that tells. The session invariants check every
acknowledgement after every crash state (invariant 0: recovery succeeds).
"""

from __future__ import annotations

import os
import shutil
import tempfile

from perfsuite.crash.invariants._sessions import SESSION, session_invariants
from perfsuite.crash.model._model import materialize, snapshot
from perfsuite.crash.model._replay import build_timeline
from perfsuite.crash.model._trace import OpRecorder, WorkloadEnv, owner_alive_after_crash
from perfsuite.crash.workloads._driver import ROOT, SessionDriver, _ids, settings
from perfsuite.crash.workloads._registry import Workload, register_workload
from perfsuite.crash.workloads._sessions import recover_portable, setup_portable
from perfsuite.engine import Message, OsFileSystem, Session
from perfsuite.engine.testing import VirtualClock

TORN_TEXT = "a long answer the crash cut short " + "t" * 2400  # its record spans a block boundary
TORN_CUT = 3  # the torn write keeps 1/TORN_CUT of its bytes: the header and a third of the body


def torn_tree(root: str) -> None:
    """The initial tree: the portable setup, then one turn whose record's write a crash tore (its first
    third on disk, the rest the log's preallocated zeros: a torn tail, never damage), with everything
    before it durable and the session's LEASE still naming this (now dead) process."""
    scratch = tempfile.mkdtemp(prefix="torn-tail-")
    try:
        setup_portable(scratch)
        initial = snapshot(scratch)
        recorder = OpRecorder(OsFileSystem())
        session = Session.open(os.path.join(scratch, SESSION), fs=recorder, clock=VirtualClock(), settings=settings(),
                               id_source=_ids("t"))
        session.add_message(ROOT, _message("a question before the crash"))
        session.checkpoint(ROOT)
        mark = recorder.mark()
        session.add_message(ROOT, _message(TORN_TEXT))
        session.checkpoint(ROOT)
        ops = recorder.ops
        write = next(op.seq for op in ops[mark:] if op.kind == "pwrite" and op.path.endswith(".log"))
        timeline = build_timeline(ops, scratch, "atomic-rename", initial=initial)
        torn = [m for m in timeline.pending(write + 1) if timeline.micro[m].op == write]
        if len(torn) != 1:
            raise AssertionError(f"the torn turn's record write is {len(torn)} pending micro-ops, not one")
        micro = timeline.micro[torn[0]]
        kept = [m for m in timeline.pending(write + 1) if m != torn[0]]
        state = timeline.state(write + 1, kept, torn=((micro.index, "prefix", len(micro.data) // TORN_CUT),))
        materialize(state, root)
        session.store.close()  # (its descriptors only: the LEASE stays, as a crash leaves it)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _message(text: str) -> Message:
    return Message("assistant", text, 1.0)


def run_torn_tail(env: WorkloadEnv) -> None:
    """The repairing open, then short turns over the torn record's place, a mail, a job checkpoint,
    retirement and shutdown (see the module doc)."""
    session = Session.open(env.path(SESSION), create=True, fs=env.fs, clock=VirtualClock(), settings=settings(),
                           faults=env.faults, id_source=_ids("w"), owner_alive=owner_alive_after_crash)
    if not any("torn unacknowledged publication discarded" in p for p in session.problems):
        env.note(f"the open found no torn tail to repair ({session.problems!r})", kind="unexpected")
    d = SessionDriver(env, session)
    d.turn("turn 1 (over the torn record)", ROOT, "after the crash", "short")
    d.turn("turn 2", ROOT, "go on", "ok")
    d.mail("mail to root", ROOT, "a note after the repair", sender="a1")
    d.deliver(ROOT)
    d.turn("turn 3 (commits the mail's receipt)", ROOT, "read the note", "x" * 900)
    d.auto_checkpoint("root checkpoint (job)", ROOT, "and a last message")
    d.retire()
    d.shutdown("shutdown")


register_workload(Workload(
    "session-torn-tail", "portable session opened after a crash tore a record (the repairing open re-zeroes the "
    "torn tail), then turns over the torn record's place, mail, a job checkpoint, retirement and shutdown",
    run_torn_tail, recover_portable, session_invariants("portable"), setup=torn_tree, max_states=1500,
))
