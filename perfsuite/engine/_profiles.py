"""The two profiles side by side (E3): tell which one a directory holds, and repair it.

Above both sessions (it imports the portable and the file-backed one), so neither imports the other's
repair back.
"""

from __future__ import annotations

import os

from perfsuite.engine._filesession import PID_LOCK, FileSession
from perfsuite.engine._fs import FileSystem, OsFileSystem
from perfsuite.engine._generations import HEAD, LEASE, OBJECTS, SessionError
from perfsuite.engine._repair import RepairReport
from perfsuite.engine._session import Session
from perfsuite.engine._sidecar import SIDECAR_ARTIFACT


def repair_session(path: str | os.PathLike[str], *, generation: str | int | None = None,
                   fs: FileSystem | None = None) -> RepairReport:
    """Repair the session at ``path``, portable or file-backed (told apart by what is there)."""
    fs = fs or OsFileSystem()
    root = os.path.abspath(os.fspath(path))
    portable = any(fs.exists(os.path.join(root, n)) for n in (HEAD, OBJECTS, LEASE))
    file_backed = any(fs.exists(os.path.join(root, n)) for n in (SIDECAR_ARTIFACT, "conversations", PID_LOCK))
    if portable:
        return Session.repair(root, generation=generation, fs=fs)
    if file_backed:
        if generation is not None:
            raise SessionError(f"{root}: a file-backed session has no generations to choose from")
        return FileSession.repair(root, fs=fs)
    raise SessionError(f"{root}: no portable or file-backed session here")


__all__ = ["repair_session"]
