"""Seeded bugs: deliberately broken engines the checker must catch (SPEC section 7, issue 10).

A bug either wraps the file system the engine is given (``wrap``), overriding E1 *policy* only, or
patches one engine method for the duration of the recorded workload run (``patch``, a context
manager); the engine's source is never edited. The primitives still go through the recorder, so the
trace shows exactly what the broken engine did. A bug is caught when the campaign reports at least one
violation with it and none without it. File-system bugs also apply to recovery (a broken engine recovers
brokenly too); patches apply to the workload run only.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from perfsuite.crash._model import CrashCheckError
from perfsuite.crash._open_bugs import head_lost_fallback, lease_pid_zero, mid_transcript_cut
from perfsuite.engine import FileSystem, FsyncFailed
from perfsuite.engine._fs import DelegatingFileSystem

TEMP_MARK = ".tmp-"  # E1 atomic replace names its temp file ".<name>.tmp-<pid>-<serial>"


class SkipDirFsync(DelegatingFileSystem):
    """Directory fsync silently skipped: names (new transcripts, renamed rewrites) never become durable."""

    def sync_dir(self, path: str) -> bool:
        return True


class SkipHeadDirFsync(DelegatingFileSystem):
    """The directory fsync after the HEAD replace is skipped (E3 head adoption is not durable): the new
    HEAD may vanish after a crash although the publication was acknowledged."""

    def atomic_replace(self, path: str, data: bytes, *, sync_dir: bool = True) -> str:
        return super().atomic_replace(path, data, sync_dir=sync_dir and os.path.basename(path) != "HEAD")


class FsyncRetryAck(DelegatingFileSystem):
    """A failed fsync is retried on the same descriptor and, when the retry succeeds, acknowledged
    (the fsyncgate mistake E1 forbids)."""

    def fsync_file(self, fd: int, path: str = "?") -> None:
        try:
            super().fsync_file(fd, path)
        except FsyncFailed:
            super().fsync_file(fd, path)


class NoTempFsync(DelegatingFileSystem):
    """Atomic replace without fsyncing the temp file before the rename: the new name may be durable
    while its contents are not."""

    def write_new(self, path: str, data: bytes, *, exclusive: bool = False, sync: bool = True) -> None:
        super().write_new(path, data, exclusive=exclusive, sync=sync and TEMP_MARK not in os.path.basename(path))


@contextlib.contextmanager
def _patched(target: Any, name: str, replacement: Any) -> Iterator[None]:
    original = getattr(target, name)
    setattr(target, name, replacement)
    try:
        yield
    finally:
        setattr(target, name, original)


@contextlib.contextmanager
def sidecar_before_transcript() -> Iterator[None]:
    """File-backed sessions replace the sidecar (their commit point) *before* the barrier of the
    transcripts it describes: a crash in between leaves a sidecar whose removals and checkpoint marker
    outrun the transcript text (E3, E7)."""
    from perfsuite.engine._filesession import FilePublication

    original = FilePublication.steps

    def steps(self: FilePublication) -> Iterator[Any]:
        held = None
        for step in original(self):
            if step.phase == "commit":
                held = step  # the barrier waits until the sidecar is replaced
                continue
            yield step
            if step.phase == "adopt" and held is not None:
                yield held
                held = None

    with _patched(FilePublication, "steps", steps):
        yield


@contextlib.contextmanager
def ack_before_adoption() -> Iterator[None]:
    """Acknowledgement callbacks run as soon as the generation is committed (chunks and manifest
    durable), *before* HEAD is adopted, in both drivers (the synchronous writer and the job)."""
    from perfsuite.engine import _pipeline
    from perfsuite.engine._session import Session

    early: dict[str, list[Callable[[BaseException | None], None]]] = {}
    lock = threading.Lock()

    def fire(batch_id: str) -> None:
        with lock:
            callbacks = early.pop(batch_id, [])
        for callback in callbacks:
            callback(None)

    original_commit = _pipeline.commit_selection

    def commit_selection(store: Any, selection: Any) -> Any:
        head = original_commit(store, selection)
        fire(str(selection.manifest.meta.get("publication")))
        return head

    original_publish = Session.publish
    original_accept = Session.accept_job

    def publish(self: Session, batch: Any, acks: Any = ()) -> Any:
        with lock:
            early[batch.id] = list(acks)
        try:
            report = original_publish(self, batch, ())
        except BaseException:
            with lock:
                left = early.pop(batch.id, [])
            if self.pending is not None:
                self.pending.acks.extend(left)
            raise
        fire(batch.id)  # a no-op selection never committed: acknowledge now
        return report

    def accept_job(self: Session, batch: Any, token: Any, acks: Any = (), **kwargs: Any) -> Any:
        with lock:
            early[batch.id] = list(acks)
        job = original_accept(self, batch, token, (), **kwargs)
        if job.done and job.publication.outcome != "failed":
            fire(batch.id)
        return job

    with _patched(_pipeline, "commit_selection", commit_selection), _patched(Session, "publish", publish), \
            _patched(Session, "accept_job", accept_job):
        yield


@dataclass(frozen=True, slots=True)
class SeededBug:
    """A named broken engine: ``wrap`` turns the recording file system into the one the engine gets;
    ``patch`` (optional) is held while the workload runs, and also during recovery when ``in_recovery``
    (a bug in the open path); ``shows_in`` names the standard workloads expected to expose it in the
    crash campaign, ``corrupt`` whether the corruption campaign (``crashcheck --corrupt``) must catch it."""

    name: str
    description: str
    wrap: Callable[[FileSystem], FileSystem]
    shows_in: tuple[str, ...]
    patch: Callable[[], contextlib.AbstractContextManager[None]] | None = None
    in_recovery: bool = False
    corrupt: bool = False


def _same(fs: FileSystem) -> FileSystem:
    return fs


SEEDED_BUGS: Mapping[str, SeededBug] = {
    bug.name: bug
    for bug in (
        SeededBug("skip-dir-fsync", "directory fsync silently skipped", SkipDirFsync,
                  ("transcript", "transcript-fsync-eio", "session-file")),
        SeededBug("head-dir-fsync-skipped", "directory fsync skipped after the HEAD replace", SkipHeadDirFsync,
                  ("session", "session-fault")),
        SeededBug("sidecar-before-transcript", "file-backed session replaces the sidecar before its transcripts' "
                  "barrier", _same, ("session-file",), patch=sidecar_before_transcript),
        SeededBug("ack-before-adoption", "acknowledgement callbacks run before HEAD adoption", _same,
                  ("session",), patch=ack_before_adoption),
        SeededBug("fsync-retry-ack", "a failed fsync retried, then acknowledged", FsyncRetryAck,
                  ("transcript-fsync-eio", "session-fault", "session-file-fault")),
        SeededBug("no-temp-fsync", "rewrite without fsyncing the temp file before replace", NoTempFsync,
                  ("transcript", "transcript-fsync-eio")),
        # Issue 14: bugs of the open path, so they also hold during recovery.
        SeededBug("lease-pid-zero", "a torn LEASE is read as pid 0, which os.kill(0, 0) finds alive: the session "
                  "is unopenable for good", _same, ("session-create",), patch=lease_pid_zero, in_recovery=True,
                  corrupt=True),
        SeededBug("head-lost-fallback", "a lost HEAD falls back to the newest generation named as a parent (or to "
                  "an empty session), a damaged one to an older generation, and retire deletes newer ones", _same,
                  (), patch=head_lost_fallback, in_recovery=True, corrupt=True),
        SeededBug("mid-transcript-cut", "a damaged line in the middle of a transcript is taken for a torn tail: "
                  "every later message is cut off", _same, (), patch=mid_transcript_cut, in_recovery=True,
                  corrupt=True),
    )
}


def seeded_bug(name: str) -> SeededBug:
    """The seeded bug called ``name``; bad input raises :class:`CrashCheckError`."""
    try:
        return SEEDED_BUGS[name]
    except KeyError:
        raise CrashCheckError(f"unknown seeded bug {name!r} (choose from {', '.join(SEEDED_BUGS)})") from None
