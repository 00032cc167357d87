"""E3 file-backed profile: a PID lock, transcripts as E2 logs written in place, and a sidecar atomically
replaced only *after* its transcripts are durable. Always synchronous.

Layout::

    session.pid                   PID lock, created exclusively: "<pid> <owner token>"
    conversations/<id>/           one E2 transcript log per conversation
    sidecar.json                  atomically replaced after the transcripts' barrier (the commit point);
                                  written empty at creation, so a session always has one
    attachments/<name>            file snapshots, atomically written
    logs/                         diagnostic logs (E8)

Ownership (E3 fencing): the owner holds an advisory ``flock`` on the session directory itself for as
long as it is open, so deleting ``session.pid`` lets no second writer in; and before every sidecar
replace (the commit point) it checks that ``session.pid`` still names its token, so a writer that ignored
the lock (or a platform without ``flock``: Windows, where only this check fences, with a window between
the check and the replace) is fenced before it can acknowledge anything. A missing ``session.pid`` under a
held lock is simply written again.

Damage (E2, E3): the sidecar's checkpoint marker records how many bytes of each
conversation are committed, so a transcript that lost committed bytes (deleted, truncated, cut by a torn
region) refuses open instead of loading less; a damaged middle line is quarantined by the E2 log.
"""

from __future__ import annotations

import bisect
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from perfsuite.engine._buffer import ConversationBuffer
from perfsuite.engine._clock import Clock, SystemClock
from perfsuite.engine._confined import CONTROL_BYTES, DOCUMENT_BYTES
from perfsuite.engine._damage import DAMAGE, describe, environmental
from perfsuite.engine._fs import O_EXCL_CREATE, WINDOWS, FileSystem, OsFileSystem
from perfsuite.engine._generations import NotAFile, OwnerConflict, SessionError, read_control
from perfsuite.engine._objects import digest_bytes
from perfsuite.engine._pipeline_values import Batch
from perfsuite.engine._repair import Aside, RepairReport, repair_file_tree
from perfsuite.engine._session import Session
from perfsuite.engine._session_values import ATTACHMENT_PREFIX, CONVERSATION_PREFIX, SessionSettings
from perfsuite.engine._sidecar import ROOT, SIDECAR_ARTIFACT, Sidecar, encode_sidecar
from perfsuite.engine._steps import Step
from perfsuite.engine._transcript import MAIN_FILE, Message, TranscriptError, TranscriptLog

PID_LOCK = "session.pid"


@dataclass
class FilePublication:
    """The same phases as the portable pipeline, mapped onto files written in place."""

    batch: Batch
    session: FileSession
    phases_ms: dict[str, float] = field(default_factory=dict)
    sidecar_bytes: bytes = b""
    changed: tuple[str, ...] = ()
    outcome: str = "running"
    error: BaseException | None = None
    failed_phase: str | None = None
    adopted: bool = False
    on_phase: Any = None  # the session's phase observer while someone listens (engine events)
    early_ack: Any = None  # documented fault hooks (``FaultHooks``): seeded bugs only
    reorder: Any = None
    main_ms: dict[str, float] | None = None  # as Publication's: the job's loop-thread times, else None

    def steps(self) -> Iterator[Step]:
        yield Step("stage", self._stage, (), _ignore, True)
        yield Step("hash", self._hash, (), _ignore, True)
        yield Step("select", self._select, (), _ignore, False)
        if not self.changed:
            self.outcome = "noop"
            yield Step("finish", self.session._noop_install, (self,), _ignore, False)
            return
        yield Step("commit", self._commit, (), _ignore, True)
        yield Step("adopt", self._adopt, (), _ignore, True)
        yield Step("finish", self.session._finish, (self,), _ignore, False)

    def _stage(self) -> None:
        """Write the frozen transcripts through to their logs (page cache) and encode the sidecar. An
        append-only change appends only the new lines; anything else is an atomic rewrite (E2). The owner
        is checked first: transcripts are written in place, so a fenced writer must not write a byte into
        the files its successor now owns (E3 fencing of a second writer), let alone reach the commit point."""
        if self.batch.texts:
            self.session.check_owner()
        for conversation, frozen in self.batch.texts.items():
            log = self.session.log_for(conversation)
            written = self.session.log_written.get(conversation, 0)  # bytes already in the log (synced or not)
            self.session.log_written[conversation] = -1  # unknown until this stage completes
            first = bisect.bisect_left(frozen.ends, written, 0, frozen.count) + 1 if written > 0 else 0
            lines = frozen.lines[: frozen.count]
            if written >= 0 and frozen.dirty_from >= written and (written == 0 or frozen.ends[first - 1] == written):
                for line in lines[first:]:
                    log.append(Message.from_json(json.loads(line)))
            else:
                log.replace_all([Message.from_json(json.loads(line)) for line in lines])
            self.session.log_written[conversation] = frozen.size
        if self.batch.document is not None:
            self.sidecar_bytes = encode_sidecar(self.batch.document)

    def _hash(self) -> None:
        self.digest = digest_bytes(self.sidecar_bytes)

    def _select(self) -> None:
        changed = [CONVERSATION_PREFIX + c for c in self.batch.texts]
        if self.digest != self.session.sidecar_digest:
            changed.append(SIDECAR_ARTIFACT)
        self.changed = tuple(sorted(changed))

    def _commit(self) -> None:
        """The barrier of every written transcript: durable before the sidecar that describes them."""
        for conversation in self.batch.texts:
            self.session.log_for(conversation).write(sync=True)

    def _adopt(self) -> None:
        self.session.check_owner()  # fenced before it can acknowledge (E3: the PID lock's fence)
        self.session.fs.atomic_replace(self.session.path(SIDECAR_ARTIFACT), self.sidecar_bytes, follow=False)
        self.session.sidecar_digest = self.digest
        self.adopted = True
        self.outcome = "adopted"

    def report(self) -> Any:
        from perfsuite.engine._pipeline import thread_times
        from perfsuite.engine._pipeline_values import PublicationReport

        phases = dict(self.phases_ms)
        main, driver = thread_times(phases, self.main_ms, self.batch.freeze_ms)
        return PublicationReport(self.batch.id, self.batch.kind, self.outcome, phases, self.changed,
                                 error=None if self.error is None else str(self.error),
                                 failed_phase=self.failed_phase, main_thread_ms=main, driver=driver)


def _ignore(_: Any) -> None:
    return None


class FileSession(Session):
    """A file-backed session (E3): same API as :class:`Session`, synchronous publication only."""

    profile = "file"

    def __init__(self, root: str, fs: FileSystem, clock: Clock, settings: SessionSettings) -> None:
        super().__init__(root, fs, clock, settings)
        self.logs: dict[str, TranscriptLog] = {}
        self.log_written: dict[str, int] = {}  # bytes written to each transcript log; -1: unknown
        self.sidecar_digest = ""
        self._pid_token = ""
        self._dir_fd: int | None = None  # the session directory, flock-ed while this session owns it
        self._locked = False  # False also where the platform has no flock (Windows)

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    @property
    def epoch(self) -> int:
        return 0

    def _open(self, create: bool) -> None:
        fs = self.fs
        repair = f"run `perfsuite session repair {self.root}`"
        sidecar_path, conversations = self.path(SIDECAR_ARTIFACT), self.path("conversations")
        if fs.exists(self.root) and not fs.isdir(self.root):
            raise SessionError(f"{self.root}: not a directory, so not a file-backed session")
        if not fs.exists(sidecar_path) and not fs.exists(conversations):
            if not create:
                raise SessionError(f"{self.root}: no file-backed session here")
            for directory in fs.makedirs(conversations):
                fs.sync_dir(os.path.dirname(directory))
            fs.makedirs(self.path("logs"))
        self._acquire_pid_lock()
        if not fs.isdir(conversations):
            raise SessionError(f"{conversations}: {'not a directory' if fs.exists(conversations) else 'missing'}; "
                               f"{repair}")
        names = fs.listdir(conversations)
        try:
            sidecar = read_control(fs, sidecar_path, DOCUMENT_BYTES)
        except NotAFile as exc:
            raise NotAFile(f"{exc}; {repair}") from None
        if sidecar is None:
            if any(self._has_content(name) for name in names):
                raise SessionError(f"{sidecar_path}: missing although conversations hold messages: the registry, "
                                   f"mailboxes and committed state are gone; {repair}")
            sidecar = encode_sidecar(Sidecar().detach(None, {}, {}, None))  # creation (or a crash during it)
            fs.atomic_replace(sidecar_path, sidecar, follow=False)
        try:
            if not sidecar:
                raise ValueError("empty")  # the engine never writes an empty sidecar: damage
            self.sidecar = Sidecar.from_bytes(sidecar)
            committed = {str(c): int(m["size"]) for c, m in
                         ((self.sidecar.checkpoint or {}).get("conversations") or {}).items()}
        except DAMAGE as exc:
            what = "empty" if not sidecar else f"corrupt ({describe(exc)})"
            raise SessionError(f"{sidecar_path}: {what} sidecar; {repair}") from None
        self.sidecar_digest = digest_bytes(sidecar)
        missing = sorted(set(committed) - set(names))
        if missing:
            raise SessionError(f"{self.path('conversations', missing[0])}: missing, but the sidecar records "
                               f"{committed[missing[0]]}B of it committed; {repair}")
        for conversation in names:
            try:
                log = self.log_for(conversation, committed.get(conversation, 0))
                buffer = ConversationBuffer(conversation, [m.encode() for m in log.messages()])
            except TranscriptError as exc:
                raise SessionError(f"{exc}; {environmental(exc) or repair}") from None
            self.buffers[conversation] = buffer
            self.log_written[conversation] = buffer.size
            self.problems.extend(f"{t.path}: torn tail recovered into {t.recovery_file}" for t in log.torn)
            self.problems.extend(f"{q.path}: damaged line at byte {q.offset} quarantined into {q.recovery_file}"
                                 for q in log.quarantined)
        if fs.isdir(self.path("attachments")):
            for name in fs.listdir(self.path("attachments")):
                self.attachments[name] = fs.read(self.path("attachments", name))
        self.buffers.setdefault(ROOT, ConversationBuffer(ROOT))

    @classmethod
    def repair(cls, path: str | os.PathLike[str], *, generation: str | int | None = None,
               fs: FileSystem | None = None, owner_alive: Any = None) -> RepairReport:
        """Repair what open refuses (see :mod:`perfsuite.engine._repair`): a directory where the
        PID lock belongs is moved aside, then the tree is repaired while holding the PID lock."""
        if generation is not None:
            raise SessionError(f"{path}: a file-backed session has no generations to choose from")
        fs = fs or OsFileSystem()
        root = os.path.abspath(os.fspath(path))
        lines: list[str] = []
        aside = Aside(fs, root, lines)
        if not fs.isdir(root):
            raise SessionError(f"{root}: no file-backed session here")
        lock = os.path.join(root, PID_LOCK)
        if fs.isdir(lock):
            aside.move(lock, "a directory, not a PID lock")
        owner = cls(root, fs, SystemClock(), SessionSettings())
        if owner_alive is not None:
            owner.owner_alive = owner_alive
        owner._acquire_pid_lock()
        try:
            repair_file_tree(fs, root, lines, aside)
        finally:
            owner._release_owner()
        return RepairReport(root, "file", tuple(lines), bool(aside.moved or any("rewritten" in x for x in lines)))

    def _has_content(self, conversation: str) -> bool:
        main = self.path("conversations", conversation, MAIN_FILE)
        try:
            return self.fs.isdir(self.path("conversations", conversation)) and self.fs.size(main) > 0
        except OSError:
            return self.fs.exists(main)

    def _acquire_pid_lock(self) -> None:
        """The advisory lock on the session directory first (refuses a second flock-respecting writer,
        whatever happened to ``session.pid``), then the PID lock itself (refuses a live owner that does not
        take the lock; a stale, torn or dangling PID lock names no owner and is removed)."""
        if not WINDOWS:  # (no directory descriptors there, and no flock: the token check alone fences)
            fd = self.fs.open_dir(self.root)
            locked = self.fs.lock(fd)
            if locked is False:
                self.fs.close(fd)
                raise OwnerConflict(f"{self.root}: another owner holds the session's lock; refusing a second one")
            self._dir_fd, self._locked = fd, locked is True
        lock = self.path(PID_LOCK)
        token = uuid.uuid4().hex
        for _attempt in range(3):
            try:
                pid_fd = self.fs.open(lock, O_EXCL_CREATE)
            except FileExistsError:
                if self.fs.isdir(lock):
                    raise NotAFile(f"{lock}: is a directory, not a PID lock; run `perfsuite session repair "
                                   f"{self.root}`") from None
                try:
                    pid = int(self.fs.read_regular(lock, CONTROL_BYTES).decode().split()[0])
                except (OSError, ValueError, IndexError, OverflowError):
                    pid = 0  # torn, garbage or a dangling link: names no owner
                if pid > 0 and self.owner_alive(pid):
                    raise OwnerConflict(f"{lock}: session is locked by live pid {pid}") from None
                self.fs.remove(lock)
                self.problems.append(f"{lock}: removed a stale PID lock of pid {pid}")
                continue
            try:
                self.fs.write_all(pid_fd, f"{os.getpid()} {token}\n".encode())
                self.fs.fsync_file(pid_fd, lock)
            finally:
                self.fs.close(pid_fd)
            self._pid_token = token
            return
        raise OwnerConflict(f"{lock}: could not take the PID lock")

    def check_owner(self) -> None:
        """Before the sidecar replace: ``session.pid`` still names this owner's token. Missing under a held
        directory lock: written again (still provably the owner). Anything else: :class:`OwnerConflict`
        (the publication fails before adoption, nothing is acknowledged)."""
        lock = self.path(PID_LOCK)
        try:
            data = read_control(self.fs, lock)
        except SessionError:
            data = b"damaged"
        if data is None and self._locked:
            self.fs.write_new(lock, f"{os.getpid()} {self._pid_token}\n".encode(), exclusive=True, sync=True)
            self.problems.append(f"{lock}: was removed while this session owned it; written again")
            return
        fields = (data or b"").decode(errors="replace").split()
        if fields[1:2] != [self._pid_token] and self.faults is not None and self.faults.steal_pid_lock:
            # A seeded bug (FaultHooks ``steal_pid_lock``): the lock another writer took is taken back, unfenced.
            self.fs.atomic_replace(lock, f"{os.getpid()} {self._pid_token}\n".encode())
            return
        if fields[1:2] != [self._pid_token]:
            raise OwnerConflict(f"{lock}: no longer names this session's owner ({' '.join(fields[:1]) or 'missing'}"
                                "); fenced: nothing more is acknowledged")

    def log_for(self, conversation: str, committed: int = 0) -> TranscriptLog:
        log = self.logs.get(conversation)
        if log is None:
            log = self.logs[conversation] = TranscriptLog.open(self.path("conversations", conversation), fs=self.fs,
                                                               committed=committed)
        return log

    # -- the file pipeline ------------------------------------------------------------------------------
    def publication(self, batch: Batch) -> FilePublication:  # type: ignore[override]
        return FilePublication(batch, self)

    def _finish(self, publication: Any) -> None:
        batch = publication.batch
        self._install(batch, {})
        for name, data in batch.attachments.items():
            self.fs.atomic_replace(self.path("attachments", name[len(ATTACHMENT_PREFIX):]), data)

    def _freeze_sidecar(self, owner: str, receipts: Any, projection: Any, marker: Any) -> tuple[None, dict[str, Any]]:
        """The file-backed profile writes the whole detached sidecar (its commit point), not a delta."""
        return None, self.sidecar.detach(owner, receipts, projection or self.sidecar.root, marker)

    def _freeze_attachments_dir(self) -> None:
        self.fs.makedirs(self.path("attachments"))

    def attach(self, name: str, data: bytes) -> None:
        self._freeze_attachments_dir()
        super().attach(name, data)

    def _roll_back(self, pending: Any) -> None:
        """Abandon's rollback (E4): transcripts are written in place, so the abandoned
        publication's lines may be in the logs (synced or not). Each log is rewritten into a new file
        holding only its committed messages (never truncated in place: a failed fsync leaves its contents
        unknown, fsyncgate). When adoption was reached, the sidecar replace may have landed, so the
        committed sidecar is written back first: it must never name more bytes than its transcripts
        hold. The live buffers keep the text; a later save publishes it with its own acknowledgement."""
        if self.faults is not None and self.faults.abandon_in_memory:  # a seeded bug: defect 3 planted back
            return
        try:
            self.check_owner()
        except OwnerConflict as exc:  # fenced: the files are another owner's now; roll back in memory only
            self.problems.append(f"abandon rolled back in memory only: {exc}")
            return
        if pending.phase == "adopt":
            committed_sidecar = encode_sidecar(self.sidecar.detach(None, {}, self.sidecar.root,
                                                                   self.sidecar.checkpoint))
            self.fs.atomic_replace(self.path(SIDECAR_ARTIFACT), committed_sidecar, follow=False)
            self.sidecar_digest = digest_bytes(committed_sidecar)
        marker = (self.sidecar.checkpoint or {}).get("conversations") or {}
        for conversation in pending.batch.texts:
            buffer = self.buffers.get(conversation)
            if buffer is None:
                continue
            count = int((marker.get(conversation) or {}).get("messages", 0))
            kept = buffer.messages()[:count]
            self.log_written[conversation] = -1  # unknown until the rewrite completes
            self.log_for(conversation).replace_all(kept)
            self.log_written[conversation] = sum(len(m.encode()) for m in kept)

    def retire(self, *, pinned: Any = ()) -> tuple[int, bool]:
        return 0, False

    def restore(self, seq: int) -> Any:
        raise SessionError("restore applies to portable sessions only")

    def _release_owner(self) -> None:
        """Close the transcript logs, remove the PID lock if it is still ours, then drop the directory lock
        (Session.close checks pending first)."""
        for log in self.logs.values():
            log.close()
        lock = self.path(PID_LOCK)
        try:
            data = read_control(self.fs, lock) if self._pid_token else None
        except SessionError:
            data = None
        if data is not None and data.decode(errors="replace").split()[1:2] == [self._pid_token]:
            self.fs.remove(lock)
        self._pid_token = ""
        if self._dir_fd is not None:
            fd, self._dir_fd, self._locked = self._dir_fd, None, False
            self.fs.close(fd)

    def _needs_publish(self, conversation: str, buffer: ConversationBuffer) -> bool:
        return buffer.modified or buffer.dirty_from < buffer.size or conversation not in self.log_written


__all__ = ["FileSession"]
