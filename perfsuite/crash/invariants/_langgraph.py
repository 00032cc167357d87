"""Invariant S: what the LangGraph saver acknowledged is read back exactly, nothing else half there.

The saver's workloads (the crash-state workload ``langgraph-saver`` and the kill campaign's ``langgraph``
profile) record each operation twice: a note when it starts (``lg-put``, ``lg-put-writes``, ``lg-remove``)
and an acknowledgement when it returned (``lg-checkpoint``, ``lg-writes``, ``lg-removed``), both carrying the
operation's serial ``op`` and what it stores: the checkpoint's id, parent, channel values and metadata, or
one task's writes, or the thread a ``delete_thread`` or ``prune`` removes (and the ids a prune keeps).

The recovery view is what a saver reopened on the recovered session reads through its public methods
(``list`` and ``get_tuple``): every checkpoint with its values, metadata, parent and pending writes by task.
The check, with the model built from the acknowledgements in order (a removal takes its thread's checkpoints
out, a prune all but the ones it kept):

- every checkpoint and every task's writes of the model is read back with exactly the values put (E3:
  durable when ``put``/``put_writes`` returned), unless a removal of its thread was under way (noted, not
  acknowledged), which takes all it removes or none of it (one publication);
- every checkpoint or task's writes read back that the model lacks is one an unacknowledged operation was
  storing, wholly and exactly (never half-written, never a value nobody put), and not one an acknowledged
  removal took out (never resurrected);
- ``get_tuple`` without a checkpoint id reads the newest checkpoint ``list`` holds for the thread.

The functions are pure (the view and the records only), shared by the crash-state and kill campaigns.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from perfsuite.crash.invariants._checks import CheckContext, Invariant
from perfsuite.crash.model._trace import Ack, Note

#: the record kinds of the saver's workloads: an operation's start (note) and its acknowledgement
PUT, WRITES, REMOVE = "lg-put", "lg-put-writes", "lg-remove"
CHECKPOINT, WRITTEN, REMOVED = "lg-checkpoint", "lg-writes", "lg-removed"


def checkpoint_key(detail: Mapping[str, Any]) -> str:
    return f"{detail['thread']}|{detail['ns']}|{detail['id']}"


def writes_key(detail: Mapping[str, Any]) -> str:
    return f"{checkpoint_key(detail)}|{detail['task']}"


def stored_checkpoint(detail: Mapping[str, Any]) -> dict[str, Any]:
    """What a read must give back of one put (the form of the recovery view's checkpoints)."""
    return {"values": detail["values"], "metadata": detail["metadata"], "parent": detail["parent"]}


def stored_writes(detail: Mapping[str, Any]) -> list[list[Any]]:
    return [list(w) for w in detail["writes"]]


@dataclass(slots=True)
class _Model:
    """The acknowledged state, and what the operations under way (noted, not acknowledged) may add or take."""

    checkpoints: dict[str, dict[str, Any]] = field(default_factory=dict)
    writes: dict[str, list[list[Any]]] = field(default_factory=dict)
    removed: dict[str, int] = field(default_factory=dict)  # key -> the ``at`` of the removal that took it
    acked_at: dict[str, int] = field(default_factory=dict)  # key -> the ``at`` of its acknowledgement
    attempted_checkpoints: dict[str, list[tuple[int, dict[str, Any]]]] = field(default_factory=dict)
    attempted_writes: dict[str, list[tuple[int, list[list[Any]]]]] = field(default_factory=dict)
    removing: list[tuple[Note, set[str]]] = field(default_factory=list)  # removals under way, what they take


def _takes(detail: Mapping[str, Any], key: str) -> bool:
    """A removal (``thread``; a prune: ``kept`` ids stay) takes the checkpoint or writes under ``key``."""
    thread, _ns, cid = key.split("|")[:3]
    return thread == str(detail["thread"]) and cid not in detail.get("kept", ())


def build_model(acks: Sequence[Ack], notes: Sequence[Note]) -> _Model:
    """The model of the module doc from the records before a crash (acknowledgements in order)."""
    model = _Model()
    acked = {a.detail.get("op") for a in acks if a.kind in (CHECKPOINT, WRITTEN, REMOVED)}
    for note in notes:
        if note.kind == PUT:
            model.attempted_checkpoints.setdefault(checkpoint_key(note.detail), []).append(
                (note.at, stored_checkpoint(note.detail)))
        elif note.kind == WRITES:
            model.attempted_writes.setdefault(writes_key(note.detail), []).append((note.at, stored_writes(note.detail)))
    for ack in acks:
        if ack.kind == CHECKPOINT:
            model.checkpoints[checkpoint_key(ack.detail)] = stored_checkpoint(ack.detail)
            model.removed.pop(checkpoint_key(ack.detail), None)
            model.acked_at[checkpoint_key(ack.detail)] = ack.at
        elif ack.kind == WRITTEN:
            model.writes[writes_key(ack.detail)] = stored_writes(ack.detail)
            model.acked_at[writes_key(ack.detail)] = ack.at
        elif ack.kind == REMOVED:
            for table in (model.checkpoints, model.writes):
                for key in [k for k in table if _takes(ack.detail, k)]:
                    del table[key]
                    model.removed[key] = ack.at
    for note in notes:  # a removal under way takes what was acknowledged before it started, nothing put since
        if note.kind == REMOVE and note.detail.get("op") not in acked:
            taken = {k for k in (*model.checkpoints, *model.writes)
                     if _takes(note.detail, k) and model.acked_at[k] <= note.at}
            model.removing.append((note, taken))
    return model


def excused(model: _Model, view: Mapping[str, Any]) -> tuple[set[str], list[str]]:
    """What removals under way at the crash took (they landed: none of what they take is read back), and a
    problem for each one that took part of it only (one publication: all or none)."""
    keys: set[str] = set()
    problems = []
    for note, taken in model.removing:
        present = {k for k in taken if k in view["checkpoints"] or k in view["writes"]}
        if present and present != taken:
            problems.append(f"a removal of thread {note.detail['thread']!r} under way at the crash took "
                            f"{len(taken) - len(present)} of its {len(taken)} checkpoints and writes, not all or none")
        if not present:
            keys |= taken
    return keys, problems


def saver_problems(view: Mapping[str, Any], acks: Sequence[Ack], notes: Sequence[Note]) -> Iterator[str]:
    """Invariant S over one recovery view (see the module doc)."""
    model = build_model(acks, notes)
    got_cps: Mapping[str, Any] = view["checkpoints"]
    got_writes: Mapping[str, Any] = view["writes"]
    landed, problems = excused(model, view)
    yield from problems
    for table, got, what in ((model.checkpoints, got_cps, "checkpoint"), (model.writes, got_writes, "writes")):
        for key, want in table.items():
            if key not in got:
                if key not in landed:
                    yield f"acknowledged {what} {key} is missing after reopen"
            elif got[key] != want:
                yield f"acknowledged {what} {key} reads back other values: {_diff(got[key], want)}"
    attempts = ((got_cps, model.checkpoints, model.attempted_checkpoints, "checkpoint"),
                (got_writes, model.writes, model.attempted_writes, "writes"))
    for got, table, attempted, what in attempts:
        for key, value in got.items():
            if key in table:
                continue
            tries = attempted.get(key, [])
            if key in model.removed and all(at < model.removed[key] for at, _v in tries):
                yield f"{what} {key}, removed by an acknowledged delete or prune, is back after reopen"
            elif not tries:
                yield f"{what} {key} is read back although nothing put it"
            elif all(value != v for _at, v in tries):
                yield f"unacknowledged {what} {key} is half there: {_diff(value, tries[-1][1])}"
    for thread_ns, latest in view.get("latest", {}).items():
        newest = max((k.split("|")[2] for k in got_cps if k.rsplit("|", 1)[0] == thread_ns), default=None)
        if latest != newest:
            yield f"get_tuple of {thread_ns} reads checkpoint {latest}, list's newest is {newest}"


def _diff(got: Any, want: Any) -> str:
    if isinstance(got, Mapping) and isinstance(want, Mapping):
        keys = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
        return ", ".join(f"{k}: {str(got.get(k))[:60]} != {str(want.get(k))[:60]}" for k in keys[:3])
    return f"{str(got)[:80]} != {str(want)[:80]}"


def check_saver(ctx: CheckContext) -> Iterator[str]:
    assert ctx.outcome is not None
    view = ctx.outcome.view if ctx.outcome.error is None else None
    if view is not None:
        yield from saver_problems(view, ctx.trace.oracle.acks_before(ctx.at), ctx.trace.oracle.notes_before(ctx.at))


SAVER = Invariant("S", "every acknowledged put and put_writes read back exactly; nothing unacknowledged half there",
                  check_saver)
