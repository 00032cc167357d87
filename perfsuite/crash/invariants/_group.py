"""Invariant G (E4 group commit, E1 fsyncgate): a group's members are acknowledged durable only after a
sync that succeeded, at most once each, and in commit order.

A workload that commits groups (``session-group-fault``, :mod:`perfsuite.crash.workloads._group_fault`)
notes every acknowledgement callback as it runs (``group-ack``: round, member index in commit order,
``ok``). The check reads those notes and the trace: a durable acknowledgement must not follow a failed
``fdatasync`` with no successful ``fsync``/``fdatasync`` since (the failed sync was the group's commit
point: nothing made its records durable; the engine's retry rolls over into a new log, which is synced);
no member is acknowledged twice; within a round, members are acknowledged durable in commit order. Like
invariants 7 and R it holds for the whole trace, not per crash state (the crash states' check that every
acknowledged delivery is recovered is invariant 4's).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from perfsuite.crash.invariants._checks import CheckContext, Invariant
from perfsuite.crash.model._trace import Note
from perfsuite.engine.testing import FsOp

SYNCED = frozenset({"fsync", "fdatasync"})


def group_ack_problems(notes: Sequence[Note], ops: Sequence[FsOp]) -> Iterator[str]:
    """Each acknowledgement of a group member that breaks invariant G, as one line (see the module doc)."""
    failures: list[int] = []  # trace indices of failed fdatasyncs
    syncs: list[int] = []  # trace indices of successful file syncs
    for index, op in enumerate(ops):
        if op.kind == "fdatasync_failed":
            failures.append(index)
        elif op.kind in SYNCED:
            syncs.append(index)
    seen: set[tuple[int, int]] = set()
    durable: dict[int, list[int]] = {}
    for note in notes:
        if note.kind != "group-ack":
            continue
        r, i, at = int(note.detail["round"]), int(note.detail["index"]), int(note.detail["at"])
        if (r, i) in seen:
            yield f"op #{at}: {note.label}: a second acknowledgement of the same member"
            continue
        seen.add((r, i))
        if not note.detail["ok"]:
            continue
        failed_at = max((f for f in failures if f < at), default=-1)
        last_sync = max((s for s in syncs if s < at), default=-1)
        if failed_at > last_sync:
            yield (f"op #{at}: {note.label} right after the failed fdatasync op #{failed_at}, with no successful "
                   "sync since (a member of a failed group acknowledged as durable)")
        order = durable.setdefault(r, [])
        if order and i < order[-1]:
            yield f"op #{at}: {note.label} after member {order[-1]} (not in commit order)"
        order.append(i)


def check_group_acks(ctx: CheckContext) -> Iterator[str]:
    yield from group_ack_problems(ctx.trace.oracle.notes, ctx.trace.ops)


GROUP_ACKS = Invariant("G", "a group's members are acknowledged once, in commit order, never after a failed sync",
                       check_group_acks, per="trace")
