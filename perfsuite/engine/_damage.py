"""What damaged bytes or a damaged tree can raise, and how it becomes one line.

Reading a corrupted session can raise almost anything: a JSON record of the wrong shape (``KeyError``,
``TypeError``, ``AttributeError``), bytes that are not UTF-8 (``ValueError``), a directory where a file
should be (``IsADirectoryError``), a dangling symbolic link (``FileNotFoundError`` for a name that
exists), nesting deep enough to exhaust the parser (``RecursionError``). The engine's readers catch
:data:`DAMAGE` and raise their own one-line errors, naming the file, instead of a traceback.
"""

from __future__ import annotations

import errno

DAMAGE = (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError, OverflowError)


def one_line(text: str) -> str:
    """Error text on one line (every engine error is one line)."""
    return " ".join(str(text).split())


def describe(exc: BaseException) -> str:
    """A short one-line reason for an exception met while reading damaged files."""
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return one_line(f"{where}{exc.strerror or exc}")
    return one_line(f"{type(exc).__name__}: {exc}")


# Errors of the storage's state, not of the session's bytes (a full disk, a read-only file system):
# `session repair` is the wrong advice for them; the session opens as it is once the condition is gone.
_ENVIRONMENT = {
    errno.ENOSPC: "free space on its device, then open it again (nothing is damaged)",
    errno.EDQUOT: "the disk quota is exhausted: free some, then open it again (nothing is damaged)",
    errno.EROFS: "its file system is read-only: open it where it can be written (nothing is damaged)",
    errno.EACCES: "permission denied: open it as a user who may write it (nothing is damaged)",
    errno.EPERM: "operation not permitted: open it as a user who may write it (nothing is damaged)",
}


def environmental(exc: BaseException | None) -> str | None:
    """Advice when ``exc`` (or what caused it) is a condition of the storage rather than damage: a full
    disk, an exhausted quota, a read-only file system, missing permissions. None for anything else."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, OSError) and exc.errno in _ENVIRONMENT:
            return _ENVIRONMENT[exc.errno]
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None
