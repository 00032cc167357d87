"""The LangGraph checkpointer's data model on the engine: records in one session's root conversation, and
the in-memory index they replay into.

A checkpoint record carries the checkpoint without its channel values, its metadata, its parent and the
blobs of the channels whose versions changed (``new_versions``): O(change), never the whole state. A
writes record carries one task's pending writes. Both are JSON lines of the root transcript (E2/E3), so a
put is one message appended and one publication: one record and one fdatasync. Reads never touch the disk:
the index answers ``get_tuple`` and ``list``, as replaying every record at open rebuilt it.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import WRITES_IDX_MAP, Checkpoint, CheckpointTuple, writes_sort_key
from langgraph.checkpoint.serde.base import SerializerProtocol

from perfsuite.engine import ConversationBuffer, Message

#: the role of every record's message in the root transcript; other messages there are left alone
ROLE = "langgraph"
#: the record's key in the message's hidden fields
KEY = "lg"

Typed = tuple[str, bytes]
BlobKey = tuple[str, str, str, Any]  # thread, namespace, channel, version
WriteKey = tuple[str, str, str]  # thread, namespace, checkpoint id


class JournalError(Exception):
    """A record of the root transcript is not a checkpointer record this code can read (one line)."""


@dataclass(frozen=True, slots=True)
class Saved:
    """One checkpoint as the index holds it: serialized, as stored; ``meta`` is the loaded metadata the
    list filters and ``delete_for_runs`` read."""

    checkpoint: Typed  # the checkpoint without channel_values
    metadata: Typed
    parent: str | None
    meta: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Write:
    """One pending write, serialized."""

    task: str
    channel: str
    value: Typed
    path: str


def _enc(typed: Typed) -> list[str]:
    return [typed[0], base64.b64encode(typed[1]).decode("ascii")]


def _dec(field: Any) -> Typed:
    if not (isinstance(field, list) and len(field) == 2 and all(isinstance(x, str) for x in field)):
        raise JournalError(f"a checkpointer record holds a malformed value: {str(field)[:80]!r}")
    try:
        return field[0], base64.b64decode(field[1], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise JournalError(f"a checkpointer record holds a value that is not base64: {exc}") from exc


def message(record: Mapping[str, Any]) -> Message:
    """The transcript entry of one record (hidden fields only; its content stays empty)."""
    return Message(ROLE, "", 0.0, {KEY: dict(record)})


def record_of(entry: Message) -> Mapping[str, Any] | None:
    """The checkpointer record a transcript entry carries, or None for any other message."""
    if entry.role != ROLE or not entry.meta:
        return None
    record = entry.meta.get(KEY)
    if not isinstance(record, Mapping) or record.get("k") not in ("cp", "w"):
        raise JournalError(f"a {ROLE} message of the root transcript holds no checkpointer record")
    return record


def records(buffer: ConversationBuffer) -> Iterator[Mapping[str, Any]]:
    """Every checkpointer record of the root transcript, in publication order."""
    for entry in buffer.messages():
        record = record_of(entry)
        if record is not None:
            yield record


def without_threads(buffer: ConversationBuffer, threads: set[str]) -> list[Message]:
    """The root transcript's entries minus every record of ``threads`` (a rewrite keeps the rest as is)."""
    kept = []
    for entry in buffer.messages():
        record = record_of(entry)
        if record is None or record.get("t") not in threads:
            kept.append(entry)
    return kept


class Index:
    """Threads -> namespaces -> checkpoints, their channel blobs and pending writes, as the records say.

    :meth:`apply` is the one way in, at replay and after a record's acknowledgement alike, so what a reader
    sees in this process is what a reopen rebuilds."""

    def __init__(self, serde: SerializerProtocol) -> None:
        self.serde = serde
        self.storage: dict[str, dict[str, dict[str, Saved]]] = {}
        self.blobs: dict[BlobKey, Typed] = {}
        self.writes: dict[WriteKey, dict[tuple[str, int], Write]] = {}

    # -- records --------------------------------------------------------------------------------------
    def apply(self, record: Mapping[str, Any]) -> None:
        """Fold one record in (a checkpoint with its changed blobs, or one task's writes)."""
        try:
            thread, ns, cid = str(record["t"]), str(record["ns"]), str(record["id"])
            if record["k"] == "cp":
                parent = record.get("p")
                metadata = _dec(record["m"])
                saved = Saved(_dec(record["c"]), metadata, None if parent is None else str(parent),
                              self.serde.loads_typed(metadata))
                self.storage.setdefault(thread, {}).setdefault(ns, {})[cid] = saved
                for channel, version, kind, data in record["b"]:
                    self.blobs[(thread, ns, str(channel), version)] = _dec([kind, data])
                return
            stored = self.writes.setdefault((thread, ns, cid), {})
            for idx, channel, kind, data in record["w"]:
                key = (str(record["task"]), int(idx))
                if key[1] >= 0 and key in stored:
                    continue  # a regular write is kept once per (task, index): put_writes is idempotent
                stored[key] = Write(key[0], str(channel), _dec([kind, data]), str(record.get("path", "")))
        except JournalError:
            raise
        except Exception as exc:  # untrusted bytes stay data: any decoding failure is one line, never a traceback
            raise JournalError(f"a checkpointer record is malformed ({type(exc).__name__}: {exc})") from exc

    def checkpoint_record(self, thread: str, ns: str, checkpoint: Mapping[str, Any], metadata: Mapping[str, Any],
                          parent: str | None, new_versions: Mapping[str, Any]) -> dict[str, Any]:
        """The record of a new checkpoint: only the channels in ``new_versions`` carry a blob (O(change))."""
        body = dict(checkpoint)
        values = body.pop("channel_values", {}) or {}
        blobs = []
        for channel, version in new_versions.items():
            typed = self.serde.dumps_typed(values[channel]) if channel in values else ("empty", b"")
            blobs.append([channel, version, *_enc(typed)])
        return {"k": "cp", "t": thread, "ns": ns, "id": str(checkpoint["id"]), "p": parent,
                "c": _enc(self.serde.dumps_typed(body)), "m": _enc(self.serde.dumps_typed(dict(metadata))),
                "b": blobs}

    def writes_record(self, thread: str, ns: str, cid: str, writes: Iterable[tuple[str, Any]], task: str,
                      path: str) -> dict[str, Any] | None:
        """The record of one task's writes, without those already stored; None when nothing is new."""
        stored = self.writes.get((thread, ns, cid), {})
        fresh = []
        for idx, (channel, value) in enumerate(writes):
            key = (task, WRITES_IDX_MAP.get(channel, idx))
            if key[1] >= 0 and key in stored:
                continue
            fresh.append([key[1], channel, *_enc(self.serde.dumps_typed(value))])
        if not fresh:
            return None
        return {"k": "w", "t": thread, "ns": ns, "id": cid, "task": task, "path": path, "w": fresh}

    def rebuilt(self, thread: str, target: str, keep: Callable[[str, str, Saved], bool]) -> list[dict[str, Any]]:
        """Records that rebuild ``thread``'s kept checkpoints (and their writes) under ``target``: each
        blob once, with the first kept checkpoint that references it (a pruned ancestor's blobs move on)."""
        out: list[dict[str, Any]] = []
        for ns, checkpoints in sorted(self.storage.get(thread, {}).items()):
            emitted: set[tuple[str, Any]] = set()
            for cid in sorted(checkpoints):
                saved = checkpoints[cid]
                if not keep(ns, cid, saved):
                    continue
                versions = self.serde.loads_typed(saved.checkpoint).get("channel_versions", {})
                blobs = []
                for channel, version in versions.items():
                    blob = self.blobs.get((thread, ns, channel, version))
                    if blob is not None and (channel, version) not in emitted:
                        emitted.add((channel, version))
                        blobs.append([channel, version, *_enc(blob)])
                out.append({"k": "cp", "t": target, "ns": ns, "id": cid, "p": saved.parent,
                            "c": _enc(saved.checkpoint), "m": _enc(saved.metadata), "b": blobs})
                for key, write in self._ordered(thread, ns, cid):
                    out.append({"k": "w", "t": target, "ns": ns, "id": cid, "task": write.task, "path": write.path,
                                "w": [[key[1], write.channel, *_enc(write.value)]]})
        return out

    def forget(self, thread: str) -> None:
        """Drop every trace of ``thread`` (after its records left the transcript)."""
        self.storage.pop(thread, None)
        for key in [k for k in self.writes if k[0] == thread]:
            del self.writes[key]
        for blob in [k for k in self.blobs if k[0] == thread]:
            del self.blobs[blob]

    # -- reads ----------------------------------------------------------------------------------------
    def _ordered(self, thread: str, ns: str, cid: str) -> list[tuple[tuple[str, int], Write]]:
        stored = self.writes.get((thread, ns, cid), {})
        return sorted(stored.items(), key=lambda item: writes_sort_key(item[1].path, *item[0]))

    def tuple_for(self, thread: str, ns: str, cid: str) -> CheckpointTuple | None:
        saved = self.storage.get(thread, {}).get(ns, {}).get(cid)
        if saved is None:
            return None
        checkpoint = self.serde.loads_typed(saved.checkpoint)
        values = {}
        for channel, version in checkpoint.get("channel_versions", {}).items():
            blob = self.blobs.get((thread, ns, channel, version))
            if blob is not None and blob[0] != "empty":
                values[channel] = self.serde.loads_typed(blob)
        parent: RunnableConfig | None = None
        if saved.parent:
            parent = {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": saved.parent}}
        return CheckpointTuple(
            config={"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": cid}},
            checkpoint=cast(Checkpoint, {**checkpoint, "channel_values": values}),
            metadata=self.serde.loads_typed(saved.metadata),
            parent_config=parent,
            pending_writes=[(w.task, w.channel, self.serde.loads_typed(w.value))
                            for _key, w in self._ordered(thread, ns, cid)],
        )

    def latest(self, thread: str, ns: str) -> str | None:
        return max(self.storage.get(thread, {}).get(ns, {}), default=None)

    def search(self, config: RunnableConfig | None, *, wanted: Mapping[str, Any] | None,
               before: RunnableConfig | None, limit: int | None) -> list[CheckpointTuple]:
        """``list``'s contract: newest first per namespace, by thread and namespace when the config names them,
        the checkpoint id when it names one, ids before ``before``'s, metadata equal on every filter key, at
        most ``limit``."""
        configurable = (config or {}).get("configurable", {})
        threads = [str(configurable["thread_id"])] if "thread_id" in configurable else sorted(self.storage)
        wanted_ns = configurable.get("checkpoint_ns")
        wanted_id = configurable.get("checkpoint_id")
        before_id = (before or {}).get("configurable", {}).get("checkpoint_id")
        found: list[CheckpointTuple] = []
        for thread in threads:
            for ns, checkpoints in self.storage.get(thread, {}).items():
                if wanted_ns is not None and ns != wanted_ns:
                    continue
                for cid in sorted(checkpoints, reverse=True):
                    if limit is not None and len(found) >= limit:
                        return found
                    if (wanted_id and cid != wanted_id) or (before_id and cid >= before_id):
                        continue
                    meta = checkpoints[cid].meta
                    if wanted and not all(meta.get(k) == v for k, v in wanted.items()):
                        continue
                    tup = self.tuple_for(thread, ns, cid)
                    if tup is not None:
                        found.append(tup)
        return found


__all__ = ["KEY", "ROLE", "Index", "JournalError", "Saved", "Write", "message", "record_of", "records",
           "without_threads"]
