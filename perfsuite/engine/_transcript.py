"""E2: the transcript log (contract of seed 000, *Transcript Persistence*).

A conversation directory holds the main transcript, branch transcripts, view transcripts, a
model-selection trace and a recovery event log, as JSON lines. ``append`` writes through to the page
cache in O(size of message); ``write(sync=True)`` is the barrier; rewrites go through atomic replace;
a torn trailing line is recovered on load without losing anything complete, and a damaged line in the
middle is quarantined without losing anything after it (:func:`scan_lines`). The
records themselves (messages, damage found, the line scan) are in ``_jsonl``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from perfsuite.engine._damage import DAMAGE, describe
from perfsuite.engine._fs import O_APPEND_CREATE, FileSystem, FsyncFailed, OsFileSystem
from perfsuite.engine._jsonl import Message, Quarantined, TornTail, TranscriptError, encode_record, scan_lines

MAIN_FILE = "conversation.jsonl"
BRANCH_DIR = "branches"
VIEW_DIR = "views"
MODEL_TRACE_FILE = "model-selection.jsonl"
EVENT_LOG_FILE = "events.jsonl"
RECOVERY_DIR = "recovery"
TEMP_MARK = ".tmp-"


@dataclass
class _JsonlFile:
    """One JSON-lines file of the log: its in-memory records and its durability state."""

    path: str
    records: list[Any] = field(default_factory=list)
    fd: int | None = None
    dirty: bool = False  # written since the last successful barrier
    unknown: bool = False  # a write or fsync failed: contents unknown, recovery rewrites it (fsyncgate)
    new_entry: bool = False  # its directory entry is not yet durable
    exists: bool = False


class TranscriptLog:
    """The transcript of one conversation directory (E2). Not thread-safe: one owner, one loop."""

    def __init__(self, logdir: str, fs: FileSystem, *, created: list[str], compact_after: int = 1000) -> None:
        self.logdir = os.path.abspath(logdir)
        self.fs = fs
        self.compact_after = compact_after
        # Namespace work owed to the first barrier: every directory the log created and the parent
        # that already existed (synced up to it, never beyond).
        self._pending_dirs: set[str] = {os.path.dirname(d) for d in created}
        self._main = _JsonlFile(os.path.join(self.logdir, MAIN_FILE))
        self._branches: dict[str, _JsonlFile] = {}
        self._views: dict[str, _JsonlFile] = {}
        self._model = _JsonlFile(os.path.join(self.logdir, MODEL_TRACE_FILE))
        self._events = _JsonlFile(os.path.join(self.logdir, EVENT_LOG_FILE))
        self.torn: list[TornTail] = []
        self.quarantined: list[Quarantined] = []

    # -- construction -------------------------------------------------------------------------------
    @classmethod
    def open(cls, logdir: str | os.PathLike[str], *, fs: FileSystem | None = None, compact_after: int = 1000,
             committed: int = 0) -> TranscriptLog:
        """Open (or create) the log in ``logdir``; an existing one is loaded with torn-tail recovery and
        quarantine of damaged middle lines. ``committed``: bytes of the main transcript the caller knows
        were made durable (a file-backed sidecar records them): a main transcript whose complete lines
        (plus lines quarantined earlier) fall short of it has lost committed messages, and open refuses
        before repairing anything. Damage is a one-line :class:`TranscriptError`."""
        fs = fs or OsFileSystem()
        path = os.path.abspath(os.fspath(logdir))
        try:
            created = fs.makedirs(path)
            if not created and not fs.isdir(path):
                raise TranscriptError(f"{path}: not a directory, so not a transcript log")
            log = cls(path, fs, created=created, compact_after=compact_after)
            if not created:
                log._load(committed)
        except DAMAGE as exc:
            raise TranscriptError(f"{path}: cannot load the transcript log: {describe(exc)}") from exc
        return log

    def _files(self) -> Iterator[_JsonlFile]:
        yield self._main
        yield from self._branches.values()
        yield from self._views.values()
        yield self._model
        yield self._events

    def _load(self, committed: int = 0) -> None:
        names = self.fs.listdir(self.logdir)
        for name in names:
            if TEMP_MARK in name:  # an interrupted rewrite: never authoritative, the old file is complete
                self.fs.remove(os.path.join(self.logdir, name))
        self._load_file(self._main, Message.from_json, committed)  # first: a refusal repairs nothing
        self._load_file(self._model, dict)
        self._load_file(self._events, dict)
        for subdir, table in ((BRANCH_DIR, self._branches), (VIEW_DIR, self._views)):
            directory = os.path.join(self.logdir, subdir)
            if not self.fs.exists(directory):
                continue
            if not self.fs.isdir(directory):
                raise TranscriptError(f"{directory}: not a directory")
            for name in self.fs.listdir(directory):
                if TEMP_MARK in name:
                    self.fs.remove(os.path.join(directory, name))
                elif name.endswith(".jsonl"):
                    entry = _JsonlFile(os.path.join(directory, name))
                    self._load_file(entry, Message.from_json)
                    table[name[: -len(".jsonl")]] = entry
        for tail in self.torn:
            self.record_event("torn-tail-recovered", file=os.path.relpath(tail.path, self.logdir),
                              offset=tail.offset, nbytes=tail.nbytes,
                              recovery_file=os.path.relpath(tail.recovery_file, self.logdir))
        for line in self.quarantined:
            self.record_event("corrupt-line-quarantined", file=os.path.relpath(line.path, self.logdir),
                              offset=line.offset, nbytes=line.nbytes,
                              recovery_file=os.path.relpath(line.recovery_file, self.logdir))

    def _load_file(self, entry: _JsonlFile, decode: Any, committed: int = 0) -> None:
        hooks = self.fs.fault_hooks
        if hooks is not None and hooks.cut_at_first_bad_line:  # a seeded bug checks no committed size
            committed = 0
        if not self.fs.exists(entry.path):
            if committed:
                raise TranscriptError(f"{entry.path}: missing, but {committed}B of it were committed")
            return
        if self.fs.isdir(entry.path):
            raise TranscriptError(f"{entry.path}: is a directory, not a transcript file")
        try:
            data = self.fs.read(entry.path)
        except FileNotFoundError:
            raise TranscriptError(f"{entry.path}: is a dangling symbolic link") from None
        records, bad, tail = scan_lines(data, decode)
        if hooks is not None and hooks.cut_at_first_bad_line and bad:  # the first bad line ends the log
            records, _, _ = scan_lines(data[: bad[0][0]], decode)
            bad, tail = [], bad[0][0]
        if hooks is not None and hooks.accept_partial_line and tail < len(data):  # a seeded bug (FaultHooks)
            records, bad, tail = _accept_partial_line(data, decode, records, bad, tail)
        if committed and tail + self._quarantined_bytes(entry.path) < committed:
            raise TranscriptError(f"{entry.path}: {tail}B of complete lines, but {committed}B were committed: "
                                  "committed messages were cut off")
        entry.exists = True
        entry.records = records
        if bad or tail < len(data):
            self._recover_damage(entry, data, bad, tail)

    def _recovery_stem(self, path: str) -> str:
        return os.path.relpath(path, self.logdir).replace(os.sep, "__")

    def _quarantined_bytes(self, path: str) -> int:
        """Bytes of ``path`` quarantined by earlier loads (they still count as committed: they are kept)."""
        recovery_dir = os.path.join(self.logdir, RECOVERY_DIR)
        if not self.fs.isdir(recovery_dir):
            return 0
        prefix = f"{self._recovery_stem(path)}.corrupt-"
        total = 0
        for name in self.fs.listdir(recovery_dir):
            if name.startswith(prefix):
                try:
                    total += self.fs.size(os.path.join(recovery_dir, name))
                except OSError:  # a damaged recovery file (a dangling link) counts as nothing kept
                    continue
        return total

    def _recover_damage(self, entry: _JsonlFile, data: bytes, bad: list[tuple[int, bytes]], tail: int) -> None:
        """Preserve the quarantined lines and the torn tail in recovery files first (synced), then rewrite
        the file to its intact lines, byte for byte: later loads find nothing to repair (idempotent)."""
        recovery_dir = os.path.join(self.logdir, RECOVERY_DIR)
        for directory in self.fs.makedirs(recovery_dir):
            self._pending_dirs.add(os.path.dirname(directory))
        serial = len(self.fs.listdir(recovery_dir))
        for offset, line in bad:
            kept = os.path.join(recovery_dir, f"{self._recovery_stem(entry.path)}.corrupt-{serial}-{offset}")
            self.fs.write_new(kept, line, exclusive=True, sync=True)
            self.quarantined.append(Quarantined(entry.path, offset, len(line), kept))
            serial += 1
        if tail < len(data):
            stem = os.path.basename(entry.path)
            recovery_file = os.path.join(recovery_dir, f"{stem}.torn-{serial}-{tail}")
            self.fs.write_new(recovery_file, data[tail:], exclusive=True, sync=True)
            self.torn.append(TornTail(entry.path, tail, len(data) - tail, recovery_file))
        self.fs.sync_dir(recovery_dir)
        self._sync_pending_dirs()
        intact, start = [], 0
        for offset, line in bad:
            intact.append(data[start:offset])
            start = offset + len(line)
        intact.append(data[start:tail])
        self.fs.atomic_replace(entry.path, b"".join(intact))

    # -- reading ------------------------------------------------------------------------------------
    def messages(self, branch: str = "main") -> list[Message]:
        return list(self._branch(branch).records)

    def __len__(self) -> int:
        return len(self._main.records)

    def branches(self) -> list[str]:
        return ["main", *sorted(self._branches)]

    def views(self) -> list[str]:
        return sorted(self._views)

    def view(self, name: str) -> list[Message]:
        return list(self._views[name].records) if name in self._views else []

    def model_trace(self) -> list[dict[str, Any]]:
        return list(self._model.records)

    def events(self) -> list[dict[str, Any]]:
        return list(self._events.records)

    def _branch(self, branch: str) -> _JsonlFile:
        if branch == "main":
            return self._main
        try:
            return self._branches[branch]
        except KeyError:
            raise TranscriptError(f"no branch {branch!r} in {self.logdir}") from None

    # -- appends (buffered by the OS until a barrier) ------------------------------------------------
    def append(self, message: Message, *, branch: str = "main") -> None:
        """Write one message through to the OS. O(size of message), independent of transcript length."""
        self._append_record(self._branch(branch), message, message.encode())

    def append_view(self, name: str, message: Message) -> None:
        entry = self._views.get(name)
        if entry is None:
            entry = self._views[name] = _JsonlFile(self._subdir_path(VIEW_DIR, name))
        self._append_record(entry, message, message.encode())

    def record_model_selection(self, **selection: Any) -> None:
        self._append_record(self._model, selection, encode_record(selection))

    def record_event(self, kind: str, **fields: Any) -> None:
        """Append to the recovery event log in O(1): it is never re-read on append."""
        record = {"kind": kind, "time": time.time(), **fields}
        self._append_record(self._events, record, encode_record(record))
        if len(self._events.records) > self.compact_after:
            self.compact_events()

    def _append_record(self, entry: _JsonlFile, record: Any, line: bytes) -> None:
        if entry.unknown:
            self._rewrite(entry, entry.records)
        if entry.fd is None:
            self._ensure_parent(entry.path)
            if not entry.exists:
                entry.new_entry = True
            entry.fd = self.fs.open(entry.path, O_APPEND_CREATE)
            entry.exists = True
        try:
            self.fs.write_all(entry.fd, line)
        except OSError:
            # Torn bytes may be on disk: the next operation rewrites the file from memory.
            entry.unknown = True
            self._close(entry)
            raise
        entry.records.append(record)
        entry.dirty = True

    def _subdir_path(self, subdir: str, name: str) -> str:
        if not name or "/" in name or name.startswith("."):
            raise TranscriptError(f"invalid transcript name {name!r}")
        return os.path.join(self.logdir, subdir, f"{name}.jsonl")

    def _ensure_parent(self, path: str) -> None:
        for directory in self.fs.makedirs(os.path.dirname(path)):
            self._pending_dirs.add(os.path.dirname(directory))

    def _close(self, entry: _JsonlFile) -> None:
        if entry.fd is not None:
            fd, entry.fd = entry.fd, None
            try:
                self.fs.close(fd)
            except OSError:
                pass

    # -- the barrier ----------------------------------------------------------------------------------
    def write(self, sync: bool = True) -> None:
        """The barrier (E2). Files whose contents are unknown are first rewritten into new files.
        With ``sync``: fsync every written transcript, the model trace and the event log, then (POSIX)
        their directories, including directories this log created up to the parent that existed.
        A failure raises and marks the file unknown; it is never retried and then acknowledged."""
        for entry in self._files():
            if entry.unknown:
                self._rewrite(entry, entry.records)
        if not sync:
            return
        synced: list[_JsonlFile] = []
        for entry in self._files():
            if entry.dirty and entry.fd is not None:
                try:
                    self.fs.fsync_file(entry.fd, entry.path)
                except FsyncFailed:
                    entry.unknown = True  # fsyncgate: never fsync this descriptor again
                    self._close(entry)
                    raise
                synced.append(entry)
        for entry in synced:
            if entry.new_entry:
                self._pending_dirs.add(os.path.dirname(entry.path))
        try:
            self._sync_pending_dirs()
        except FsyncFailed as exc:
            self._forget_names_under(str(exc.filename or ""))
            raise
        for entry in synced:
            entry.dirty = False
            entry.new_entry = False

    def _forget_names_under(self, directory: str) -> None:
        """A directory fsync failed: entries it was to make durable may be gone, and fsyncing it again
        proves nothing (fsyncgate). Every file under it is rewritten into a new name next time."""
        prefix = directory.rstrip(os.sep) + os.sep
        for entry in self._files():
            if entry.exists and entry.path.startswith(prefix):
                entry.unknown = True
                self._close(entry)

    def _sync_pending_dirs(self) -> None:
        pending = sorted(self._pending_dirs, key=lambda p: (-p.count(os.sep), p))
        for directory in pending:
            self.fs.sync_dir(directory)
            self._pending_dirs.discard(directory)

    # -- rewrites (atomic replace) --------------------------------------------------------------------
    def _rewrite(self, entry: _JsonlFile, records: Iterable[Any]) -> None:
        """Temp write, temp fsync, replace, directory fsync (E1). A crash leaves the old complete file."""
        records = list(records)
        payload = b"".join(r.encode() if isinstance(r, Message) else encode_record(r) for r in records)
        self._ensure_parent(entry.path)
        self._close(entry)  # the descriptor names the old inode; reopen after the replace
        try:
            self.fs.atomic_replace(entry.path, payload)
            self._sync_pending_dirs()
        except OSError as exc:
            # Old or new bytes may be on disk: the in-memory records decide at the next rewrite.
            entry.unknown = True
            if isinstance(exc, FsyncFailed):
                self._forget_names_under(os.path.dirname(entry.path))
            raise
        entry.records = records
        entry.exists = True
        entry.unknown = entry.dirty = entry.new_entry = False

    def fork(self, name: str, *, upto: int | None = None, source: str = "main") -> None:
        """Create branch ``name`` from the first ``upto`` messages of ``source`` (all by default)."""
        if name == "main" or name in self._branches:
            raise TranscriptError(f"branch {name!r} already exists")
        records = self._branch(source).records[: upto if upto is not None else None]
        entry = _JsonlFile(self._subdir_path(BRANCH_DIR, name))
        self._rewrite(entry, records)
        self._branches[name] = entry
        self.record_event("fork", branch=name, source=source, messages=len(records))

    def undo(self, count: int = 1, *, branch: str = "main") -> list[Message]:
        """Drop the last ``count`` messages of ``branch`` by atomic rewrite; return what was removed."""
        entry = self._branch(branch)
        if count <= 0 or count > len(entry.records):
            raise TranscriptError(f"cannot undo {count} of {len(entry.records)} messages")
        removed = entry.records[-count:]
        self._rewrite(entry, entry.records[:-count])
        self.record_event("undo", branch=branch, count=count)
        return removed

    def edit(self, index: int, message: Message, *, branch: str = "main") -> None:
        """Replace message ``index`` of ``branch`` by atomic rewrite (through a symlink if there is one)."""
        entry = self._branch(branch)
        records = list(entry.records)
        try:
            records[index] = message
        except IndexError:
            raise TranscriptError(f"no message {index} in branch {branch!r}") from None
        self._rewrite(entry, records)
        self.record_event("edit", branch=branch, index=index)

    def replace_all(self, messages: Iterable[Message], *, branch: str = "main") -> None:
        """Replace a branch's whole content by atomic rewrite (a writer that is not append-only)."""
        self._rewrite(self._branch(branch), list(messages))
        self.record_event("rewrite", branch=branch)

    def compact_events(self) -> None:
        """Checkpoint compaction of the recovery event log: one checkpoint record, atomically replaced."""
        counts: dict[str, int] = {}
        for record in self._events.records:
            kind = str(record.get("kind"))
            if kind == "checkpoint":
                for k, v in record.get("counts", {}).items():
                    counts[k] = counts.get(k, 0) + int(v)
            else:
                counts[kind] = counts.get(kind, 0) + 1
        checkpoint = {"kind": "checkpoint", "time": time.time(), "counts": counts}
        self._rewrite(self._events, [checkpoint])

    def close(self) -> None:
        for entry in self._files():
            self._close(entry)

    def __enter__(self) -> TranscriptLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _accept_partial_line(data: bytes, decode: Any, records: list[Any], bad: list[tuple[int, bytes]], tail: int
                         ) -> tuple[list[Any], list[tuple[int, bytes]], int]:
    """``FaultHooks.accept_partial_line`` (a checker's broken engine, never production): a last line
    without its newline that decodes is loaded as a message instead of being recovered as a torn tail."""
    try:
        record = decode(json.loads(data[tail:]))
    except (*DAMAGE, UnicodeDecodeError):
        return records, bad, tail
    return [*records, record], bad, len(data)


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """What a caller may report: ``completed`` only when the barrier succeeded (E2 callers)."""

    completed: bool
    error: str | None = None


def commit_turn(log: TranscriptLog, messages: Iterable[Message], *, branch: str = "main") -> TurnOutcome:
    """Append a turn's messages and return only after the barrier. A failure becomes an error event and
    a visible system message, never a completion."""
    try:
        for message in messages:
            log.append(message, branch=branch)
        log.write(sync=True)
    except OSError as exc:
        reason = f"save failed: {exc.strerror or exc}" + (f" ({exc.filename})" if exc.filename else "")
        try:
            log.record_event("barrier-failed", error=reason)
            log.append(Message("system", f"[{reason}] this turn is not known to be on disk", time.time()),
                       branch=branch)
        except OSError:
            pass  # the disk is failing; the outcome below still says so
        return TurnOutcome(False, reason)
    return TurnOutcome(True)


# The records are re-exported: the engine's other modules and the facade name them here.
__all__ = [
    "MAIN_FILE", "TEMP_MARK", "Message", "Quarantined", "TornTail", "TranscriptError", "TranscriptLog", "TurnOutcome",
    "commit_turn", "scan_lines",
]
