"""Format 2: the committed state a session log describes, and how its records change it.

A state is what a generation holds: every artifact (a transcript, an attachment) as chunks whose bytes
lie in *extents* of the session's logs, and the sidecar document. A BASE record carries a whole state
(the artifacts' chunk digests and extents, referencing older logs' bytes rather than copying them, and
the full sidecar); a GEN record carries one publication's change: per changed artifact the bytes written
from an offset (inline, in its payload) with the digests of the chunks they touch, and the sidecar as
put/delete operations on exactly the keys that changed. Applying either is O(change) but for the tuple
of chunk references of a changed artifact (about one per 64 KiB, copied per change).

Readers verify: a record's sha256 when the log is scanned, each chunk's digest when its bytes are
reassembled from their extents (:func:`assemble`).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from perfsuite.engine._confined import STATE_BYTES
from perfsuite.engine._objects import ArtifactEntry, ChunkRef

#: in a record's meta, extents in log 0 are in that record's own payload (offset relative to it)
THIS = 0


@dataclass(frozen=True, slots=True)
class Extent:
    """``length`` bytes at ``offset`` of log ``log``. In memory, a negative ``log`` names a staged record
    not yet placed in a log (its offset relative to the record's payload), resolved at commit."""

    log: int
    offset: int
    length: int

    def to_json(self) -> list[int]:
        return [self.log, self.offset, self.length]


@dataclass(frozen=True, slots=True)
class Piece:
    """One chunk of an artifact: its digest and size, and the extents its bytes lie in, in order."""

    digest: str
    size: int
    extents: tuple[Extent, ...]


@dataclass(frozen=True, slots=True)
class ArtifactState:
    """An artifact as of a generation. ``source`` (memory only) is the frozen buffer line list these bytes
    were published from, so the next freeze of the same list knows its committed prefix is unchanged."""

    size: int
    pieces: tuple[Piece, ...]
    source: Any = field(default=None, compare=False)

    def entry(self) -> ArtifactEntry:
        """The artifact as format 1's manifest entry (chunk digests and sizes)."""
        return ArtifactEntry(tuple(ChunkRef(p.digest, p.size) for p in self.pieces), self.size)

    def logs(self) -> set[int]:
        return {e.log for p in self.pieces for e in p.extents}

    def piece_start(self, index: int) -> int:
        """The offset where piece ``index`` starts (walked from the end: appends touch the last pieces)."""
        offset = self.size
        for piece in reversed(self.pieces[index:]):
            offset -= piece.size
        return offset


def extents_between(artifact: ArtifactState, start: int, end: int) -> list[Extent]:
    """The extents holding bytes ``[start, end)`` of ``artifact``. An extent wholly inside is reused, not
    rebuilt: a tail chunk fed by many small checkpoints holds one extent per record, and every checkpoint
    walks them (twice: select, then install), so this loop is the checkpoint's CPU (O(change))."""
    out: list[Extent] = []
    if start < 0:  # no byte lies before 0: without this clamp a range ending at 0 kept a zero-length extent
        start = 0
    if end <= start:
        return out
    pieces = artifact.pieces
    index = len(pieces)
    offset = artifact.size
    while index > 0 and offset > start:  # back to the piece holding ``start``
        index -= 1
        offset -= pieces[index].size
    append = out.append
    for piece in pieces[index:]:
        for extent in piece.extents:
            length = extent.length
            stop = offset + length
            if length and stop > start:
                if offset >= start and stop <= end:
                    append(extent)
                else:
                    lo = start if start > offset else offset
                    hi = end if end < stop else stop
                    append(Extent(extent.log, extent.offset + lo - offset, hi - lo))
            offset = stop
            if offset >= end:
                return out
    return out


def cut(extents: Sequence[Extent], sizes: Iterable[int]) -> list[tuple[Extent, ...]]:
    """``extents`` (a byte stream) cut into consecutive pieces of ``sizes`` bytes (an extent that fits
    whole is reused, see :func:`extents_between`)."""
    out: list[tuple[Extent, ...]] = []
    queue = list(extents)
    count = len(queue)
    position = 0
    for size in sizes:
        piece: list[Extent] = []
        need = size
        while need > 0:
            if position >= count:
                raise ValueError("chunk sizes exceed the bytes written")
            extent = queue[position]
            length = extent.length
            if length <= need:
                piece.append(extent)
                position += 1
                need -= length
            else:
                piece.append(Extent(extent.log, extent.offset, need))
                queue[position] = Extent(extent.log, extent.offset + need, length - need)
                need = 0
        out.append(tuple(piece))
    if position < count:
        raise ValueError("bytes written beyond the chunks that describe them")
    return out


def splice(old: ArtifactState | None, at: int, size: int, first: int, chunks: Sequence[ChunkRef],
           written: Extent) -> ArtifactState:
    """``old`` with its bytes from ``at`` replaced by ``written`` (``size - at`` bytes), described from
    chunk ``first`` on by ``chunks``: a GEN record's change to one artifact. Raises ValueError for a
    change that does not fit ``old`` (damage or an engine bug, never guessed around)."""
    pieces = old.pieces if old is not None else ()
    if not 0 <= first <= len(pieces) or (old is None and (at or first)):
        raise ValueError("a change names chunks the artifact does not have")
    start = old.piece_start(first) if old is not None else 0
    old_size = old.size if old is not None else 0
    if not start <= at <= old_size or written.length != size - at:
        raise ValueError("a change does not fit the artifact it changes")
    if start + sum(c.size for c in chunks) != size:
        raise ValueError("a change's chunk sizes do not add up to the artifact's size")
    stream = extents_between(old, start, at) if old is not None else []
    if written.length:
        stream.append(written)
    new = tuple(Piece(c.digest, c.size, extents) for c, extents in zip(chunks, cut(stream, (c.size for c in chunks))))
    return ArtifactState(size, tuple(pieces[:first]) + new)


def resolve(artifact: ArtifactState, placed: Mapping[int, tuple[int, int]]) -> ArtifactState:
    """Placeholder extents (negative logs, see :class:`Extent`) resolved to ``placed[log] = (log number,
    absolute offset of that record's payload)``."""
    if not any(e.log < 0 for p in artifact.pieces for e in p.extents):
        return artifact
    pieces = []
    for piece in artifact.pieces:
        if any(e.log < 0 for e in piece.extents):
            piece = Piece(piece.digest, piece.size, tuple(
                Extent(placed[e.log][0], placed[e.log][1] + e.offset, e.length) if e.log < 0 else e
                for e in piece.extents))
        pieces.append(piece)
    return ArtifactState(artifact.size, tuple(pieces), artifact.source)


# -- the sidecar document ---------------------------------------------------------------------------------------
def empty_document() -> dict[str, Any]:
    """The sidecar document of a session that has committed nothing (format 1's detached empty sidecar)."""
    return {"version": 1, "agents": {}, "mailboxes": {}, "control": {"goal": None, "plan": None, "provider": None},
            "root": {}, "next_mail": 1, "checkpoint": None}


_MISSING = object()


def doc_value(doc: Mapping[str, Any], section: str, name: str | None) -> Any:
    """A key's value in a sidecar document (None when absent), as :class:`SidecarCapture` names keys; also
    ``("root", None)`` (the projection without its prompt index), ``("prompt_index", None)`` and
    ``("marker", "epoch" | conversation)``."""
    if section in ("agents", "mailboxes", "control"):
        return doc.get(section, {}).get(name)
    if section == "next_mail":
        return doc.get("next_mail", 1)
    if section == "root":
        return {k: v for k, v in doc.get("root", {}).items() if k != "prompt_index"}
    if section == "prompt_index":
        return doc.get("root", {}).get("prompt_index")
    if section == "marker":
        marker = doc.get("checkpoint") or {}
        return marker.get("epoch") if name == "epoch" else (marker.get("conversations") or {}).get(name)
    raise ValueError(f"unknown sidecar key {section!r}")


def json_copy(value: Any) -> Any:
    """A deep copy of a JSON value (dicts, lists, tuples of strings, numbers, booleans, None): what
    ``copy.deepcopy`` gives for these, without its memo, at every publication's sidecar operations."""
    if isinstance(value, dict):
        return {k: json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_copy(v) for v in value]
    if isinstance(value, tuple):
        return tuple(json_copy(v) for v in value)
    if value is None or isinstance(value, (str, int, float)):
        return value  # immutable (bool is an int)
    return copy.deepcopy(value)


def apply_ops(doc: dict[str, Any], ops: Iterable[Sequence[Any]]) -> None:
    """Apply a GEN record's sidecar operations to ``doc`` in place: ``put``/``del`` of a key, ``index``
    (prompt-index offsets appended), ``madd``/``mdel`` (mail records appended to a mailbox, removed by
    id). Values are deep-copied so the document shares nothing with a caller."""
    value: Any  # a JSON value: its type is the operation's
    for op in ops:
        verb, section, name, value = op[0], op[1], op[2], (op[3] if len(op) > 3 else None)
        value = json_copy(value)
        if verb in ("madd", "mdel"):  # a mailbox's delta: records appended, records removed by id
            table = doc.setdefault("mailboxes", {})
            box = list(table.get(name) or [])
            if verb == "madd":
                box.extend(value or [])
            else:
                gone = set(value or [])
                box = [r for r in box if not (isinstance(r, dict) and r.get("id") in gone)]
            if box:
                table[name] = box
            else:
                table.pop(name, None)
        elif section in ("agents", "mailboxes", "control"):
            table = doc.setdefault(section, {})
            if verb == "del" or (value is None and section != "control"):
                table.pop(name, None)
            else:
                table[name] = value
        elif section == "next_mail":
            doc["next_mail"] = int(value)
        elif section == "root":
            index = doc.get("root", {}).get("prompt_index", _MISSING)
            doc["root"] = dict(value or {})
            if index is not _MISSING:
                doc["root"]["prompt_index"] = index
        elif section == "prompt_index":
            root = doc.setdefault("root", {})
            if verb == "index":
                root.setdefault("prompt_index", []).extend(value)
            else:
                root["prompt_index"] = list(value or [])
        elif section == "marker":
            marker = doc.get("checkpoint")
            if not isinstance(marker, dict):
                marker = doc["checkpoint"] = {"epoch": None, "conversations": {}}
            if name == "epoch":
                marker["epoch"] = value
            else:
                marker.setdefault("conversations", {})[name] = value
        else:
            raise ValueError(f"unknown sidecar operation {op!r}")


# -- the state --------------------------------------------------------------------------------------------------
@dataclass
class LogState:
    """A generation's whole state, and where the log chain stands (the last record's seq, digest, epoch).
    ``prompt_reset`` (memory only) identifies the root buffer's prompt-index list the committed one is a
    prefix of, so the next root commit appends offsets instead of rewriting the index."""

    generation: int
    seq: int
    digest: str | None
    epoch: int
    artifacts: dict[str, ArtifactState]
    sidecar: dict[str, Any]
    prompt_reset: int | None = None

    def logs(self) -> set[int]:
        out: set[int] = set()
        for artifact in self.artifacts.values():
            out |= artifact.logs()
        return out

    def live_bytes(self) -> dict[int, int]:
        """Bytes of each log the state's artifacts reference (space amplification's denominator)."""
        out: dict[int, int] = {}
        for artifact in self.artifacts.values():
            for piece in artifact.pieces:
                for extent in piece.extents:
                    out[extent.log] = out.get(extent.log, 0) + extent.length
        return out


def base_meta(state: LogState, logs: Mapping[int, str], carried: int, inline: Mapping[int, int] | None = None
              ) -> dict[str, Any]:
    """A BASE record's meta for ``state``: ``logs`` names every referenced log's salt; ``carried`` GEN
    records follow it in the same write (they are not proof that the log was adopted); ``inline`` maps a
    log whose extents were copied into the BASE's payload to where that copy starts (compaction)."""
    artifacts = {}
    for name, artifact in sorted(state.artifacts.items()):
        artifacts[name] = {"size": artifact.size,
                           "pieces": [[p.digest, p.size, [e.to_json() for e in p.extents]] for p in artifact.pieces]}
    return {"generation": state.generation, "epoch": state.epoch, "carried": carried,
            "logs": {str(n): salt for n, salt in sorted(logs.items())}, "artifacts": artifacts,
            "sidecar": state.sidecar}


def _extent(record: Sequence[Any], log: int, payload: int) -> Extent:
    number, offset, length = int(record[0]), int(record[1]), int(record[2])
    if offset < 0 or length < 0 or number < 0:
        raise ValueError("an extent is negative")
    return Extent(log, payload + offset, length) if number == THIS else Extent(number, offset, length)


def state_from_base(meta: Mapping[str, Any], seq: int, digest: str, epoch: int, log: int, payload: int
                    ) -> LogState:
    """The state a BASE record describes (its inline extents resolved against its payload at ``payload``)."""
    artifacts: dict[str, ArtifactState] = {}
    total = 0
    for name, entry in dict(meta["artifacts"]).items():
        pieces = []
        for digest_, size, extents in entry["pieces"]:
            resolved = tuple(_extent(e, log, payload) for e in extents)
            if sum(e.length for e in resolved) != int(size) or len(str(digest_)) != 64:
                raise ValueError(f"a chunk of {name} does not add up")
            pieces.append(Piece(str(digest_), int(size), resolved))
        artifact = ArtifactState(int(entry["size"]), tuple(pieces))
        if sum(p.size for p in artifact.pieces) != artifact.size:
            raise ValueError(f"the chunks of {name} do not add up to its size")
        artifacts[str(name)] = artifact
        total += artifact.size
        if total > STATE_BYTES:  # before any byte is assembled: extents may overlap (a BASE of 40 KB naming 32 GB)
            raise ValueError(f"its artifacts name more than the {STATE_BYTES} bytes a session holds")
    sidecar = meta["sidecar"]
    if not isinstance(sidecar, dict):
        raise ValueError("the sidecar document is not an object")
    return LogState(int(meta["generation"]), seq, digest, epoch, artifacts, json_copy(sidecar))


def apply_gen(state: LogState, meta: Mapping[str, Any], seq: int, digest: str, epoch: int, log: int,
              payload: int, payload_length: int) -> None:
    """Apply a GEN record to ``state`` in place (at open; the session installs its own publications the
    same way). Raises ValueError when the record does not fit the state it follows."""
    if int(meta["generation"]) != state.generation + 1:
        raise ValueError(f"generation {meta['generation']} does not follow generation {state.generation}")
    for change in meta.get("artifacts", ()):
        rel, length = int(change["data"][0]), int(change["data"][1])
        if rel < 0 or rel + length > payload_length:
            raise ValueError("a change's bytes lie outside its record")
        chunks = [ChunkRef(str(d), int(n)) for d, n in change["chunks"]]
        name = str(change["name"])
        state.artifacts[name] = splice(state.artifacts.get(name), int(change["at"]), int(change["size"]),
                                       int(change["from"]), chunks, Extent(log, payload + rel, length))
    apply_ops(state.sidecar, meta.get("sidecar", ()))
    state.generation, state.seq, state.digest, state.epoch = int(meta["generation"]), seq, digest, epoch


Reader = Callable[[int], bytes | memoryview]  # log number -> that log's bytes


def assemble(artifact: ArtifactState, read: Reader, *, name: str = "artifact") -> bytes:
    """An artifact's bytes, every chunk checked against its digest (readers verify, E3). Each extent lies
    inside its log's real bytes, and a chunk is verified before its bytes are kept: nothing unverified is
    copied, and the result is one copy of the verified views."""
    parts: list[memoryview] = []
    for piece in artifact.pieces:
        hasher = hashlib.sha256()
        got = 0
        views = []
        for extent in piece.extents:
            data = read(extent.log)
            if extent.offset + extent.length > len(data):
                raise ValueError(f"a chunk of {name} lies past the end of log {extent.log}")
            view = memoryview(data)[extent.offset : extent.offset + extent.length]
            got += extent.length
            if got > piece.size:
                raise ValueError(f"a chunk of {name} is longer than its size")
            hasher.update(view)
            views.append(view)
        if got != piece.size or hasher.hexdigest() != piece.digest:
            raise ValueError(f"a chunk of {name} does not match its digest")
        parts.extend(views)
    return b"".join(parts)


__all__ = [
    "THIS",
    "ArtifactState",
    "Extent",
    "LogState",
    "Piece",
    "apply_gen",
    "apply_ops",
    "assemble",
    "base_meta",
    "doc_value",
    "empty_document",
    "extents_between",
    "resolve",
    "splice",
    "state_from_base",
]
