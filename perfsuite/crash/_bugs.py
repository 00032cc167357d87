"""Seeded bugs: deliberately broken engines the checker must catch (SPEC section 7, issue 10).

Each bug wraps the file system the engine is given, overriding E1 *policy* only (never the engine's
code): the primitives still go through the recorder, so the trace shows exactly what the broken engine
did. A bug is caught when the campaign reports at least one violation with it and none without it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from perfsuite.crash._model import CrashCheckError
from perfsuite.engine import FileSystem, FsyncFailed
from perfsuite.engine._fs import DelegatingFileSystem

TEMP_MARK = ".tmp-"  # E1 atomic replace names its temp file ".<name>.tmp-<pid>-<serial>"


class SkipDirFsync(DelegatingFileSystem):
    """Directory fsync silently skipped: names (new transcripts, renamed rewrites) never become durable."""

    def sync_dir(self, path: str) -> bool:
        return True


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


@dataclass(frozen=True, slots=True)
class SeededBug:
    """A named broken engine: ``wrap`` turns the recording file system into the one the engine gets;
    ``shows_in`` names the standard workloads expected to expose it."""

    name: str
    description: str
    wrap: Callable[[FileSystem], FileSystem]
    shows_in: tuple[str, ...]


SEEDED_BUGS: Mapping[str, SeededBug] = {
    bug.name: bug
    for bug in (
        SeededBug("skip-dir-fsync", "directory fsync silently skipped", SkipDirFsync,
                  ("transcript", "transcript-fsync-eio")),
        SeededBug("fsync-retry-ack", "a failed fsync retried, then acknowledged", FsyncRetryAck,
                  ("transcript-fsync-eio",)),
        SeededBug("no-temp-fsync", "rewrite without fsyncing the temp file before replace", NoTempFsync,
                  ("transcript", "transcript-fsync-eio")),
    )
}


def seeded_bug(name: str) -> SeededBug:
    """The seeded bug called ``name``; bad input raises :class:`CrashCheckError`."""
    try:
        return SEEDED_BUGS[name]
    except KeyError:
        raise CrashCheckError(f"unknown seeded bug {name!r} (choose from {', '.join(SEEDED_BUGS)})") from None
