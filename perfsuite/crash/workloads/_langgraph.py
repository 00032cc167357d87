"""The LangGraph saver under crash states (E3: a put is durable when it returns).

``langgraph-saver`` opens an :class:`~perfsuite.integrations.langgraph.EngineSaver` on the recorded file
system (a session the setup created, small logs so publications roll over) and drives it through its public
methods only: a parent chain of checkpoints on one thread whose ``messages`` channel grows by appending
(each put's list is the list ``get_tuple`` returned plus one new item, so the saver stores it as a *tail*
after the previous version) while a second channel changes every put and a third every other one (O(change):
an unchanged channel is read back from an older record), a task's ``put_writes`` after every put, a child
namespace, a second thread removed by ``delete_thread``, a third one pruned to its newest checkpoint
(``prune``, keep_latest) and continued, then the first thread again. Each operation is noted when it starts
and acknowledged when it returned (:mod:`perfsuite.crash.invariants._langgraph`).

Recovery is the engine's open on the crash state (the crashed writer's lease broken by the crash model of
ownership, a recovered pending publication retried), then a saver reopened on it, read back through
``list`` and ``get_tuple``: invariant S checks every acknowledged checkpoint and write is there with exactly
the values put, nothing unacknowledged is half there, and reopening never raises (invariant 0).

The workload needs the ``langgraph`` extra: without it it is no standard workload, and naming it is one line.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Mapping
from typing import Any

from perfsuite.crash.bugs._seeded import langgraph_missing
from perfsuite.crash.invariants._checks import Invariant, check_idempotent, check_recovery_succeeds
from perfsuite.crash.invariants._langgraph import CHECKPOINT, PUT, REMOVE, REMOVED, SAVER, WRITES, WRITTEN
from perfsuite.crash.invariants._sessions import SESSION
from perfsuite.crash.model._model import CrashCheckError
from perfsuite.crash.model._trace import WorkloadEnv, owner_alive_after_crash
from perfsuite.crash.workloads._driver import _ids, settings
from perfsuite.crash.workloads._registry import Workload, register_workload
from perfsuite.crash.workloads._sessions import _release
from perfsuite.engine import FileSystem, Session
from perfsuite.engine.testing import VirtualClock

NAME = "langgraph-saver"
#: what a step records: (label, kind, detail): a note when an operation starts, an acknowledgement when it returned
Record = Callable[[str, str, dict[str, Any]], None]


class SaverSteps:
    """The saver operations both campaigns run, each recorded before it starts and after it returned.

    ``turn`` reads the thread's newest checkpoint back (``get_tuple``), puts its child (the ``messages`` list
    it read plus one item, ``count`` changed, ``summary`` changed every other turn) and the task's writes;
    ``remove`` deletes or prunes a thread. Checkpoint ids are ``prefix`` and a serial, so they sort in put
    order (LangGraph's newest is the greatest id)."""

    def __init__(self, saver: Any, record: Record, prefix: str = "") -> None:
        self.saver = saver
        self.record = record
        self.prefix = prefix
        self.serial = itertools.count(1)

    def _newest(self, thread: str, ns: str) -> Any:
        return self.saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ns}})

    def turn(self, thread: str, ns: str = "") -> str:
        """One put (with its parent, when the thread has one) and one put_writes; returns the checkpoint id."""
        from langgraph.checkpoint.base import empty_checkpoint

        serial = next(self.serial)
        cid = f"{self.prefix}{serial:06d}"
        prev = self._newest(thread, ns)
        values = dict(prev.checkpoint["channel_values"]) if prev is not None else {}
        versions = dict(prev.checkpoint["channel_versions"]) if prev is not None else {}
        item = {"id": cid, "text": f"turn {cid} on {thread}"}
        changed = {"messages": [*values.get("messages", []), item], "count": serial}  # the list: the same objects
        if serial % 2 == 1 or "summary" not in values:
            changed["summary"] = f"summary after {cid}"
        values.update(changed)
        new_versions = {channel: int(versions.get(channel, 0)) + 1 for channel in changed}
        versions.update(new_versions)
        parent = prev.config["configurable"]["checkpoint_id"] if prev is not None else None
        metadata = {"source": "loop", "step": serial, "parents": {}, "run_id": f"run-{thread}"}
        checkpoint = {**empty_checkpoint(), "id": cid, "channel_values": values, "channel_versions": versions}
        config: dict[str, Any] = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
        if parent is not None:
            config["configurable"]["checkpoint_id"] = parent
        detail = {"op": f"{self.prefix}put-{serial}", "thread": thread, "ns": ns, "id": cid, "parent": parent,
                  "values": values, "metadata": metadata}
        self.record(f"put {cid} on {thread}", PUT, detail)
        self.saver.put(config, checkpoint, metadata, new_versions)
        self.record(f"put {cid} on {thread}", CHECKPOINT, detail)
        task = f"task-{cid}"
        writes: list[tuple[str, Any]] = [("messages", [{"id": f"{cid}-w", "text": "a pending write"}]),
                                         ("count", serial + 1)]
        detail = {"op": f"{self.prefix}writes-{serial}", "thread": thread, "ns": ns, "id": cid, "task": task,
                  "writes": [list(w) for w in writes]}
        self.record(f"put_writes {task}", WRITES, detail)
        self.saver.put_writes({"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": cid}},
                              writes, task)
        self.record(f"put_writes {task}", WRITTEN, detail)
        return cid

    def remove(self, thread: str, *, prune: bool = False) -> None:
        """``delete_thread`` (nothing kept) or ``prune`` keep_latest (the newest checkpoint of each namespace)."""
        kept: list[str] = []
        if prune:
            newest: dict[str, str] = {}
            for tup in self.saver.list({"configurable": {"thread_id": thread}}):
                c = tup.config["configurable"]
                newest[c["checkpoint_ns"]] = max(newest.get(c["checkpoint_ns"], ""), c["checkpoint_id"])
            kept = sorted(newest.values())
        detail = {"op": f"{self.prefix}remove-{next(self.serial)}", "thread": thread, "kept": kept}
        label = f"{'prune' if prune else 'delete_thread'} {thread}"
        self.record(label, REMOVE, detail)
        if prune:
            self.saver.prune([thread], strategy="keep_latest")
        else:
            self.saver.delete_thread(thread)
        self.record(label, REMOVED, detail)


def saver_view(saver: Any) -> dict[str, Any]:
    """What a saver reads back through its public methods: every checkpoint (values, metadata, parent), each
    task's pending writes, and the checkpoint ``get_tuple`` reads as newest per thread and namespace."""
    checkpoints: dict[str, Any] = {}
    writes: dict[str, list[list[Any]]] = {}
    namespaces: set[tuple[str, str]] = set()
    for tup in saver.list(None):
        c = tup.config["configurable"]
        key = f"{c['thread_id']}|{c['checkpoint_ns']}|{c['checkpoint_id']}"
        namespaces.add((c["thread_id"], c["checkpoint_ns"]))
        parent = tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None
        checkpoints[key] = {"values": dict(tup.checkpoint["channel_values"]), "metadata": dict(tup.metadata),
                            "parent": parent}
        for task, channel, value in tup.pending_writes or ():
            writes.setdefault(f"{key}|{task}", []).append([channel, value])
    latest = {}
    for thread, ns in sorted(namespaces):
        newest = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ns}})
        latest[f"{thread}|{ns}"] = newest.config["configurable"]["checkpoint_id"] if newest is not None else None
    return {"checkpoints": checkpoints, "writes": writes, "latest": latest}


def saver_faults(fs: FileSystem) -> Any:
    """The saver's fault hooks a seeded bug's layer carries (``SaverFaulted``), else none."""
    from perfsuite.integrations.langgraph import SaverFaults

    return SaverFaults(**dict.fromkeys(getattr(fs, "saver_faults", ()), True))


def _needs_langgraph() -> None:
    reason = langgraph_missing()
    if reason is not None:
        raise CrashCheckError(f"{NAME}: {reason}")


def setup_saver(root: str) -> None:
    """The initial tree: the saver's session, created (creation is ``session-create``'s window)."""
    _needs_langgraph()
    Session.open(os.path.join(root, SESSION), create=True, clock=VirtualClock(), settings=settings(),
                 id_source=_ids("s")).close()


def run_saver(env: WorkloadEnv) -> None:
    """The operations of the module doc, on one saver, then its close."""
    from perfsuite.integrations.langgraph import EngineSaver

    def record(label: str, kind: str, detail: dict[str, Any]) -> None:
        if kind in (PUT, WRITES, REMOVE):
            env.note(label, kind=kind, **detail)
        else:
            env.ack(label, scope=SESSION, kind=kind, **detail)

    saver = EngineSaver(env.path(SESSION), fs=env.fs, settings=settings(), faults=saver_faults(env.fs))
    steps = SaverSteps(saver, record)
    for _ in range(3):
        steps.turn("t1")
    steps.turn("t1", ns="child")
    steps.turn("t2")
    steps.turn("t2")
    steps.remove("t2")
    for _ in range(3):
        steps.turn("t3")
    steps.remove("t3", prune=True)
    steps.turn("t3")  # its list now extends the whole list the prune rewrote
    steps.turn("t1")
    steps.turn("t1")
    saver.close()


def reopen_saver(path: str, fs: FileSystem) -> dict[str, Any]:
    """A saver opened on ``path`` (the engine's open path inside), read back (:func:`saver_view`), closed."""
    from perfsuite.integrations.langgraph import EngineSaver

    saver = EngineSaver(path, create=False, fs=fs, settings=settings())
    try:
        return saver_view(saver)
    finally:
        saver.close()


def recover_saver(root: str, fs: FileSystem) -> Mapping[str, Any]:
    """The engine's open of the crash state (the crashed writer's lease judged by the crash model of
    ownership; a recovered pending publication retried), then a saver reopened on it and read back."""
    _needs_langgraph()
    path = os.path.join(root, SESSION)
    session = Session.open(path, create=True, fs=fs, clock=VirtualClock(), settings=settings(), id_source=_ids("r"),
                           owner_alive=owner_alive_after_crash)
    try:
        if session.pending is not None:
            session.retry_pending()
    finally:
        _release(session)
    return reopen_saver(path, fs)


register_workload(Workload(
    NAME, "LangGraph EngineSaver: a parent chain whose messages list grows by tails, a second channel changing, "
    "put_writes per put, a child namespace, delete_thread, prune (keep_latest), reopened after every crash state",
    run_saver, recover_saver, (Invariant("0", "recovery succeeds", check_recovery_succeeds), SAVER,
                               Invariant("6", "recovery is idempotent", check_idempotent)),
    standard=langgraph_missing() is None, setup=setup_saver, max_states=1500,
))
