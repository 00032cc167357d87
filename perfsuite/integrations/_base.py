"""What both engine checkpointers share: the session they open, the replay into the index, the reads, and
the plans of the operations that remove or copy a thread's records (each plan is the threads whose records
leave the root transcript and the records that go in, applied as one publication)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from perfsuite.engine import ROOT, FileSystem, Session, SessionError, SessionSettings
from perfsuite.integrations._journal import Index, JournalError, Saved, message, records, without_threads

#: ``prune`` strategies of the checkpointer contract
STRATEGIES = ("keep_latest", "delete")


@dataclass(frozen=True, slots=True)
class Plan:
    """One change of the journal: ``drop`` threads' records leave the root transcript (a rewrite from the
    first of them on), ``add`` records are appended; all of it one publication."""

    drop: frozenset[str] = frozenset()
    add: list[dict[str, Any]] = field(default_factory=list)


def thread_and_ns(config: RunnableConfig) -> tuple[str, str]:
    configurable = config["configurable"]
    return str(configurable["thread_id"]), str(configurable.get("checkpoint_ns", ""))


def open_session(path: str | os.PathLike[str], *, create: bool, settings: SessionSettings | None,
                 fs: FileSystem | None, asynchronous: bool) -> Session:
    """The saver's one session (one lease, one log, one fdatasync per publication, group commit across
    threads), with the engine's asynchronous job on or off."""
    return Session.open(path, create=create, fs=fs,
                        settings=replace(settings or SessionSettings(), asynchronous=asynchronous))


class EngineCheckpointer(BaseCheckpointSaver[int]):
    """A ``BaseCheckpointSaver`` over one engine session: every thread's records in its root conversation,
    an in-memory index replayed from them at open (reads never touch the disk)."""

    def __init__(self, session: Session, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        self.session = session
        self.index = Index(self.serde)
        try:
            for record in records(session.conversation(ROOT)):
                self.index.apply(record)
        except JournalError as exc:
            session.close()
            raise SessionError(f"{session.root}: not a LangGraph checkpointer session: {exc}") from exc

    # -- reads (the index) ----------------------------------------------------------------------------
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread, ns = thread_and_ns(config)
        cid = get_checkpoint_id(config) or self.index.latest(thread, ns)
        try:
            return None if cid is None else self.index.tuple_for(thread, ns, cid)
        except JournalError as exc:  # a value decoded only when read (a list tail over a non-list): one line
            raise SessionError(f"{self.session.root}: a checkpointer record cannot be read: {exc}") from exc

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None, limit: int | None = None) -> Iterator[CheckpointTuple]:
        try:
            return iter(self.index.search(config, wanted=filter, before=before, limit=limit))
        except JournalError as exc:
            raise SessionError(f"{self.session.root}: a checkpointer record cannot be read: {exc}") from exc

    # -- records and plans ----------------------------------------------------------------------------
    def _checkpoint_record(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                           new_versions: ChannelVersions) -> tuple[dict[str, Any], RunnableConfig]:
        thread, ns = thread_and_ns(config)
        parent = config["configurable"].get("checkpoint_id")
        record = self.index.checkpoint_record(thread, ns, checkpoint, get_checkpoint_metadata(config, metadata),
                                              None if parent is None else str(parent), new_versions)
        return record, {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}}

    def _writes_record(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                       task_path: str) -> dict[str, Any] | None:
        thread, ns = thread_and_ns(config)
        return self.index.writes_record(thread, ns, str(config["configurable"]["checkpoint_id"]), writes, task_id,
                                        task_path)

    def _has(self, thread: str) -> bool:
        return thread in self.index.storage or any(key[0] == thread for key in self.index.writes)

    def _plan_delete(self, threads: Sequence[str]) -> Plan | None:
        drop = frozenset(t for t in threads if self._has(t))
        return Plan(drop) if drop else None

    def _plan_copy(self, source: str, target: str) -> Plan | None:
        added = self.index.rebuilt(source, target, lambda _ns, _cid, _saved: True)
        return Plan(add=added) if added else None

    def _plan_prune(self, threads: Sequence[str], strategy: str) -> Plan | None:
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown prune strategy {strategy!r}: expected one of {', '.join(STRATEGIES)}")
        if strategy == "delete":
            return self._plan_delete(threads)
        drop = frozenset(t for t in threads if self._has(t))
        added = []
        for thread in sorted(drop):
            latest = {ns: max(cps) for ns, cps in self.index.storage.get(thread, {}).items() if cps}
            added += self.index.rebuilt(thread, thread, _is_latest(latest))
        return Plan(drop, added) if drop else None

    def _plan_delete_runs(self, run_ids: Sequence[str]) -> Plan | None:
        runs = set(run_ids)
        if not runs:
            return None
        drop = frozenset(thread for thread, namespaces in self.index.storage.items()
                         if any(saved.meta.get("run_id") in runs for cps in namespaces.values()
                                for saved in cps.values()))
        added = []
        for thread in sorted(drop):
            added += self.index.rebuilt(thread, thread, lambda _ns, _cid, saved: saved.meta.get("run_id") not in runs)
        return Plan(drop, added) if drop else None

    def _stage(self, plan: Plan) -> None:
        """Put a plan into the root conversation (not yet published): a rewrite without the dropped threads'
        records, then the added records."""
        buffer = self.session.conversation(ROOT)
        if plan.drop:
            buffer.replace_messages([*without_threads(buffer, set(plan.drop)), *map(message, plan.add)])
        else:
            for record in plan.add:
                self.session.add_message(ROOT, message(record))

    def _applied(self, plan: Plan) -> None:
        """After the plan's publication is acknowledged: the index as a reopen would rebuild it."""
        for thread in plan.drop:
            self.index.forget(thread)
        for record in plan.add:
            self.index.apply(record)


def _is_latest(latest: dict[str, str]) -> Callable[[str, str, Saved], bool]:
    """``keep_latest``'s choice: the newest checkpoint of each namespace."""
    return lambda ns, cid, _saved: latest.get(ns) == cid


__all__ = ["STRATEGIES", "EngineCheckpointer", "Plan", "open_session", "thread_and_ns"]
