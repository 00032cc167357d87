"""E3 file-backed profile: a PID lock, transcripts as E2 logs written in place, and a sidecar atomically
replaced only *after* its transcripts are durable. Always synchronous.

Layout::

    session.pid                   PID lock, created exclusively
    conversations/<id>/           one E2 transcript log per conversation
    sidecar.json                  atomically replaced after the transcripts' barrier (the commit point)
    attachments/<name>            file snapshots, atomically written
    logs/                         diagnostic logs (E8)
"""

from __future__ import annotations

import bisect
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from perfsuite.engine._buffer import ConversationBuffer
from perfsuite.engine._clock import Clock
from perfsuite.engine._fs import O_EXCL_CREATE, FileSystem
from perfsuite.engine._generations import OwnerConflict, SessionError, _pid_alive
from perfsuite.engine._objects import digest_bytes
from perfsuite.engine._pipeline import Batch, Step
from perfsuite.engine._session import (
    ATTACHMENT_PREFIX,
    CONVERSATION_PREFIX,
    Session,
    SessionSettings,
)
from perfsuite.engine._sidecar import ROOT, SIDECAR_ARTIFACT, Sidecar
from perfsuite.engine._transcript import Message, TranscriptLog

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
        append-only change appends only the new lines; anything else is an atomic rewrite (E2)."""
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
        for item in self.batch.inputs:
            if item.document is not None:
                self.sidecar_bytes = item.payload()

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
        self.session.fs.atomic_replace(self.session.path(SIDECAR_ARTIFACT), self.sidecar_bytes)
        self.session.sidecar_digest = self.digest
        self.adopted = True
        self.outcome = "adopted"

    def report(self) -> Any:
        from perfsuite.engine._pipeline import PublicationReport

        return PublicationReport(self.batch.id, self.batch.kind, self.outcome, dict(self.phases_ms), self.changed,
                                 error=None if self.error is None else str(self.error),
                                 failed_phase=self.failed_phase)


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

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    @property
    def epoch(self) -> int:
        return 0

    def _open(self, create: bool) -> None:
        if not self.fs.exists(self.path(SIDECAR_ARTIFACT)) and not self.fs.isdir(self.path("conversations")):
            if not create:
                raise SessionError(f"{self.root}: no file-backed session here")
            for directory in self.fs.makedirs(self.path("conversations")):
                self.fs.sync_dir(os.path.dirname(directory))
            self.fs.makedirs(self.path("logs"))
        self._acquire_pid_lock()
        sidecar = self.fs.read(self.path(SIDECAR_ARTIFACT)) if self.fs.exists(self.path(SIDECAR_ARTIFACT)) else b""
        self.sidecar_digest = digest_bytes(sidecar) if sidecar else ""
        try:
            self.sidecar = Sidecar.from_bytes(sidecar)
        except ValueError:
            raise SessionError(f"{self.path(SIDECAR_ARTIFACT)}: corrupt sidecar") from None
        for conversation in self.fs.listdir(self.path("conversations")):
            log = self.log_for(conversation)
            buffer = ConversationBuffer(conversation, [m.encode() for m in log.messages()])
            self.buffers[conversation] = buffer
            self.log_written[conversation] = buffer.size
            self.problems.extend(f"{t.path}: torn tail recovered into {t.recovery_file}" for t in log.torn)
        if self.fs.isdir(self.path("attachments")):
            for name in self.fs.listdir(self.path("attachments")):
                self.attachments[name] = self.fs.read(self.path("attachments", name))
        self.buffers.setdefault(ROOT, ConversationBuffer(ROOT))

    def _acquire_pid_lock(self) -> None:
        lock = self.path(PID_LOCK)
        for _attempt in range(3):
            try:
                fd = self.fs.open(lock, O_EXCL_CREATE)
            except FileExistsError:
                try:
                    pid = int(self.fs.read(lock).decode().split()[0])
                except (OSError, ValueError, IndexError):
                    pid = 0
                if pid and _pid_alive(pid):
                    raise OwnerConflict(f"{lock}: session is locked by live pid {pid}") from None
                self.fs.remove(lock)
                self.problems.append(f"{lock}: removed a stale PID lock of pid {pid}")
                continue
            try:
                self.fs.write_all(fd, f"{os.getpid()}\n".encode())
                self.fs.fsync_file(fd, lock)
            finally:
                self.fs.close(fd)
            return
        raise OwnerConflict(f"{lock}: could not take the PID lock")

    def log_for(self, conversation: str) -> TranscriptLog:
        log = self.logs.get(conversation)
        if log is None:
            log = self.logs[conversation] = TranscriptLog.open(self.path("conversations", conversation), fs=self.fs)
        return log

    # -- the file pipeline ------------------------------------------------------------------------------
    def publication(self, batch: Batch) -> FilePublication:  # type: ignore[override]
        return FilePublication(batch, self)

    def _finish(self, publication: Any) -> None:  # type: ignore[override]
        batch = publication.batch
        self._install(batch, {})
        for item in batch.inputs:
            if item.artifact.startswith(ATTACHMENT_PREFIX) and item.data is not None:
                self.fs.atomic_replace(self.path("attachments", item.artifact[len(ATTACHMENT_PREFIX):]), item.data)

    def _freeze_attachments_dir(self) -> None:
        self.fs.makedirs(self.path("attachments"))

    def attach(self, name: str, data: bytes) -> None:
        self._freeze_attachments_dir()
        super().attach(name, data)

    def _recover_staging(self) -> None:  # no staging area: transcripts are written in place
        return None

    def _discard_unadopted(self, batch: Batch) -> None:  # no staging, no manifests
        return None

    def retire(self, *, pinned: Any = ()) -> tuple[int, bool]:
        return 0, False

    def restore(self, seq: int) -> Any:
        raise SessionError("restore applies to portable sessions only")

    def _release_owner(self) -> None:
        """Close the transcript logs and remove the PID lock (Session.close checks pending first)."""
        for log in self.logs.values():
            log.close()
        lock = self.path(PID_LOCK)
        if self.fs.exists(lock):
            self.fs.remove(lock)

    def _needs_publish(self, conversation: str, buffer: ConversationBuffer) -> bool:
        return buffer.modified or buffer.dirty_from < buffer.size or conversation not in self.log_written


__all__ = ["FileSession"]
