"""What damaged bytes or a damaged tree can raise, and how it becomes one line (issue 14 case 5).

Reading a corrupted session can raise almost anything: a JSON record of the wrong shape (``KeyError``,
``TypeError``, ``AttributeError``), bytes that are not UTF-8 (``ValueError``), a directory where a file
should be (``IsADirectoryError``), a dangling symbolic link (``FileNotFoundError`` for a name that
exists), nesting deep enough to exhaust the parser (``RecursionError``). The engine's readers catch
:data:`DAMAGE` and raise their own one-line errors, naming the file, instead of a traceback.
"""

from __future__ import annotations

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
