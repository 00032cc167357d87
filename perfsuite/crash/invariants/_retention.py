"""Invariant R (E3: retirement keeps the last N generations): every retained generation restores what it held.

The check reads the oracle only: a workload that restores its retained generations (``session-retention``,
:mod:`perfsuite.crash.workloads._retention`) notes each restore that failed or gave back other messages than
the generation held (``unrestorable``). Like invariant 7's workload notes, it holds for the whole trace, not
per crash state: what retirement deleted is decided by the run, and a crash only makes it durable or not.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from perfsuite.crash.invariants._checks import CheckContext, Invariant
from perfsuite.crash.model._trace import Note


def retained_problems(notes: Sequence[Note]) -> Iterator[str]:
    """Each restore of a retained generation that failed or gave back other messages, by its note."""
    for note in notes:
        if note.kind == "unrestorable":
            yield f"op #{note.at}: {note.label}"


def check_retained(ctx: CheckContext) -> Iterator[str]:
    yield from retained_problems(ctx.trace.oracle.notes)


RETAINED = Invariant("R", "every retained generation restores what it held", check_retained, per="trace")
