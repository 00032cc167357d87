"""E1: the data sync of the real layer on each platform: fdatasync where there is one, F_FULLFSYNC on macOS
and a full fsync on Windows (each one durability point). Split out of ``_fs`` to keep that module small."""

from __future__ import annotations

import os
import sys


def _full_fsync(fd: int) -> None:
    """macOS: fsync does not flush the drive's cache; F_FULLFSYNC does (as LevelDB's SyncFd), still one
    durability point. Falls back to fsync where the file system refuses it."""
    import fcntl

    try:
        fcntl.fcntl(fd, fcntl.F_FULLFSYNC)  # type: ignore[attr-defined]
    except OSError:
        os.fsync(fd)


if hasattr(os, "fdatasync"):
    fdatasync = os.fdatasync
elif sys.platform == "darwin":  # pragma: no cover - exercised on macOS only
    fdatasync = _full_fsync
else:  # pragma: no cover - Windows: no fdatasync, a full fsync is the barrier
    fdatasync = os.fsync


__all__ = ["fdatasync"]
