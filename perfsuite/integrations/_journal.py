"""The LangGraph checkpointer's data model on the engine: records in one session's root conversation, and
the in-memory index they replay into.

A checkpoint record carries the checkpoint without its channel values, its metadata, its parent and the
blobs of the channels whose versions changed (``new_versions``): O(change), never the whole state. A list
channel that grew by appending (a ``messages`` channel under ``add_messages``) is stored as its new items
only, after the version it extends (a *tail*), so a turn on a 6000-message thread writes one turn, not the
thread. A writes record carries one task's pending writes. Both are JSON lines of the root transcript
(E2/E3), so a put is one message appended and one publication: one record and one fdatasync. Reads never
touch the disk: the index answers ``get_tuple`` and ``list``, as replaying every record at open rebuilt it.

The index keeps the newest list it stored or read per channel as the very items the graph handed it, and
hands out copies of that list: a put whose list starts with those same objects is a tail, and the next read
needs no decoding. This relies on LangGraph's rule that nodes return updates instead of mutating state in
place: an item changed in place after its checkpoint is not stored again.
"""

from __future__ import annotations

import base64
import binascii
import operator
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
ChannelKey = tuple[str, str, str]  # thread, namespace, channel
WriteKey = tuple[str, str, str]  # thread, namespace, checkpoint id
Items = tuple[Any, tuple[Any, ...]]  # a list channel's version and its items

_ABSENT = object()  # a channel version with no value (stored as "empty")


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
class Blob:
    """One channel version as stored: the whole value, or (``tail``) the items a list gained after the
    version ``base`` of the same channel."""

    typed: Typed
    tail: bool = False
    base: Any = None


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
        self.blobs: dict[BlobKey, Blob] = {}
        self.writes: dict[WriteKey, dict[tuple[str, int], Write]] = {}
        #: the newest list stored or read per channel, as the objects themselves (what a tail extends)
        self.lists: dict[ChannelKey, Items] = {}
        #: lists of records built but not yet applied (acknowledged), by checkpoint
        self.pending: dict[WriteKey, dict[str, Items]] = {}

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
                fresh = self.pending.pop((thread, ns, cid), {})
                for entry in record["b"]:
                    self._blob(thread, ns, entry)
                    items = fresh.get(str(entry[0]))
                    if items is not None and items[0] == entry[1]:
                        self.lists[(thread, ns, str(entry[0]))] = items
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

    def _blob(self, thread: str, ns: str, entry: Any) -> None:
        """Fold one blob entry in: ``[channel, version, kind, data]``, or a tail ``[..., base]`` that
        must follow a version of the same channel this thread already holds."""
        if not isinstance(entry, list) or len(entry) not in (4, 5):
            raise JournalError(f"a checkpointer record holds a malformed blob: {str(entry)[:80]!r}")
        channel, version = str(entry[0]), entry[1]
        typed = _dec(entry[2:4])
        if len(entry) == 4:
            self.blobs[(thread, ns, channel, version)] = Blob(typed)
            return
        base = entry[4]
        if base == version or (thread, ns, channel, base) not in self.blobs:
            raise JournalError(f"a list tail of channel {channel!r} follows a version the thread does not hold")
        if (thread, ns, channel, version) in self.blobs and version in self._chain(thread, ns, channel, base):
            raise JournalError(f"the list tails of channel {channel!r} form a cycle")
        self.blobs[(thread, ns, channel, version)] = Blob(typed, True, base)

    def _chain(self, thread: str, ns: str, channel: str, version: Any) -> set[Any]:
        """The versions a tail's value is built from, itself included (only asked when a version is stored
        again, so replay stays linear)."""
        seen = {version}
        blob = self.blobs[(thread, ns, channel, version)]
        while blob.tail and blob.base not in seen:
            seen.add(blob.base)
            blob = self.blobs[(thread, ns, channel, blob.base)]
        return seen

    def checkpoint_record(self, thread: str, ns: str, checkpoint: Mapping[str, Any], metadata: Mapping[str, Any],
                          parent: str | None, new_versions: Mapping[str, Any]) -> dict[str, Any]:
        """The record of a new checkpoint: only the channels in ``new_versions`` carry a blob (O(change)),
        a list that starts with the items of the channel's newest known list only its new items."""
        body = dict(checkpoint)
        values = body.pop("channel_values", {}) or {}
        blobs: list[list[Any]] = []
        fresh: dict[str, Items] = {}
        for channel, version in new_versions.items():
            value = values.get(channel, _ABSENT)
            if type(value) is list:  # exactly a list: a subclass may carry more than its items
                items = tuple(value)
                fresh[channel] = (version, items)
                known = self.lists.get((thread, ns, channel))
                if known is not None and _extends(items, known[1]) and known[0] != version:
                    tail = self.serde.dumps_typed(list(items[len(known[1]):]))
                    blobs.append([channel, version, *_enc(tail), known[0]])
                    continue
            typed = ("empty", b"") if value is _ABSENT else self.serde.dumps_typed(value)
            blobs.append([channel, version, *_enc(typed)])
        self.pending[(thread, ns, str(checkpoint["id"]))] = fresh
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
                    if blob is None or (channel, version) in emitted:
                        continue
                    emitted.add((channel, version))
                    if not blob.tail:
                        blobs.append([channel, version, *_enc(blob.typed)])
                    elif (channel, blob.base) in emitted:
                        blobs.append([channel, version, *_enc(blob.typed), blob.base])
                    else:  # its base is not kept: the whole list
                        whole = self.serde.dumps_typed(self.value(thread, ns, channel, version))
                        blobs.append([channel, version, *_enc(whole)])
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
        for key in [k for k in self.lists if k[0] == thread]:
            del self.lists[key]
        for key in [k for k in self.pending if k[0] == thread]:
            del self.pending[key]

    def value(self, thread: str, ns: str, channel: str, version: Any) -> Any:
        """A channel version's value (``_ABSENT`` when it has none): a tail is its base's list plus its items;
        a list is a copy of the newest one known, which then becomes the newest."""
        head = (thread, ns, channel)
        known = self.lists.get(head)
        if known is not None and known[0] == version:
            return list(known[1])
        blob = self.blobs.get((*head, version))
        if blob is None or blob.typed[0] == "empty":
            return _ABSENT
        tails: list[Typed] = []
        seen = {version}
        start: list[Any] | None = None
        while blob.tail:
            tails.append(blob.typed)
            if known is not None and known[0] == blob.base:
                start = list(known[1])
                break
            if blob.base in seen:
                raise JournalError(f"the list tails of channel {channel!r} form a cycle")
            seen.add(blob.base)
            blob = self.blobs[(*head, blob.base)]  # present: a tail is only taken after its base (_blob)
        if start is None:
            if blob.typed[0] == "empty":
                raise JournalError(f"a list tail of channel {channel!r} follows a version with no value")
            start = self.serde.loads_typed(blob.typed)
            if tails and type(start) is not list:
                raise JournalError(f"a list tail of channel {channel!r} follows a value that is not a list")
        for typed in reversed(tails):
            items = self.serde.loads_typed(typed)
            if type(items) is not list:
                raise JournalError(f"a list tail of channel {channel!r} holds no list")
            start.extend(items)
        if type(start) is list:
            self.lists[head] = (version, tuple(start))
        return start

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
            value = self.value(thread, ns, channel, version)
            if value is not _ABSENT:
                values[channel] = value
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


def _extends(items: tuple[Any, ...], prefix: tuple[Any, ...]) -> bool:
    """``items`` starts with exactly the objects of a non-empty ``prefix`` (identity: no item decoded)."""
    return 0 < len(prefix) <= len(items) and all(map(operator.is_, items, prefix))


__all__ = ["KEY", "ROLE", "Blob", "Index", "JournalError", "Saved", "Write", "message", "record_of", "records",
           "without_threads"]
