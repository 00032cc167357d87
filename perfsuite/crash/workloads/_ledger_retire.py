"""The mail ledger across retirement (E7 at-least-once mail; E3 retirement keeps the last N generations).

``session-ledger-retire`` runs a portable session with small logs (4 KiB) and two kept generations. Per round
acknowledged mail goes to an agent (``a1``) and to the root, and is delivered (consumed: it leaves the live
mailbox for the per-conversation ledger, its receipt in the receiving transcript not yet committed); then a
second agent's large turns roll the log over, a compaction copies every live byte into a new log and one
more turns follow it, so retirement deletes the logs that held the mail's records and the publications
that consumed it. After that, more acknowledged mail to the same mailboxes and
another turn publish those mailboxes again, and only then do the receiving transcripts commit their
receipts (a job checkpoint of ``a1``, a root turn).

The hazard: a ledger entry is the only durable trace of consumed mail until the receiving transcript commits
its receipt. Retirement deletes whole logs, never a ledger: the mailboxes every later publication writes
must still carry each consumed record, whatever log its own record was in, or a crash between retirement
and the receipt's commit loses acknowledged mail (invariant 4: every acknowledged mail is in its mailbox or
its receipt in the receiving transcript).
"""

from __future__ import annotations

from perfsuite.crash.invariants._sessions import session_invariants
from perfsuite.crash.model._trace import WorkloadEnv
from perfsuite.crash.workloads._driver import ROOT, SessionDriver
from perfsuite.crash.workloads._registry import Workload, register_workload
from perfsuite.crash.workloads._sessions import open_portable, recover_portable, setup_portable

ROUNDS = 2
FILL = 2  # large a2 turns per round (a roll-over among them), before the compaction


def _retire_deleting(env: WorkloadEnv, d: SessionDriver, label: str) -> None:
    """Retirement to the end; noted unexpected unless it deleted a log (the workload's point)."""
    removed, more = d.session.retire()
    while more:
        deleted, more = d.session.retire()
        removed += deleted
    if not removed:
        env.note(f"{label}: retirement deleted no log", kind="unexpected")


def run_ledger_retire(env: WorkloadEnv) -> None:
    """The rounds (see the module doc), then shutdown."""
    d = SessionDriver(env, open_portable(env))
    d.turn("turn 1", ROOT, "question", "answer")
    d.spawn("spawn a1", "a1", "research the ledger")
    d.spawn("spawn a2", "a2", "write a long report")
    for r in range(ROUNDS):
        d.mail(f"r{r} mail to a1", "a1", f"round {r}: a request for a1")
        d.mail(f"r{r} mail to root", ROOT, f"round {r}: a note for root", sender="a1")
        d.deliver("a1")  # consumed: in the ledger until a1's transcript commits the receipt
        d.deliver(ROOT)
        for i in range(FILL):
            d.turn(f"r{r} a2 turn {i}", "a2", f"round {r} part {i} " + "r" * 900)
        d.session.compact()  # a BASE copying every live byte: once two generations are past it, the rest retire
        for i in range(2):  # two generations past the compaction's BASE: the logs before it hold no retained one
            d.turn(f"r{r} a2 turn {i} after compaction", "a2", f"round {r}: compacted {i}")
        _retire_deleting(env, d, f"r{r}")
        d.mail(f"r{r} mail to a1 after retirement", "a1", f"round {r}: a follow-up for a1")
        d.mail(f"r{r} mail to root after retirement", ROOT, f"round {r}: a follow-up for root", sender="a2")
        d.turn(f"r{r} a2 turn after retirement", "a2", f"round {r}: done")
        d.deliver("a1")
        d.auto_checkpoint(f"r{r} a1 checkpoint (job)", "a1", f"a1 read round {r}")  # commits a1's receipts
        d.deliver(ROOT)
        d.turn(f"r{r} root turn", ROOT, f"round {r}: thanks", "ok")  # commits root's receipts
    d.retire()
    d.shutdown("shutdown")


register_workload(Workload(
    "session-ledger-retire", "portable session, 4 KiB logs: mail delivered (in the ledger), then retirement deletes "
    "the logs that held it, more mail to the same mailboxes, and only then the receipts' commits",
    run_ledger_retire, recover_portable, session_invariants("portable"), setup=setup_portable, max_states=1500,
))
