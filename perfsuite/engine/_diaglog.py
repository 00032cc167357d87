"""E8: diagnostic logs. Append only the new delta through one pinned target: a directory descriptor
opened once, files opened relative to it with ``O_APPEND``; never read-modify-rewrite.

A crash may tear the trailing line; :func:`read_log` skips a torn tail. Logs are observational and
never resume state. :class:`FullRewriteLog` exists only as the baseline the suite compares against
(the seed's rejected design: 10-14 MB of traffic per flush of a 5.2 MB log).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from perfsuite.engine._damage import describe
from perfsuite.engine._fs import O_APPEND_CREATE, FileSystem, OsFileSystem
from perfsuite.engine._transcript import TranscriptError, scan_lines


def _line(record: Mapping[str, Any]) -> bytes:
    return json.dumps(record, separators=(",", ":"), sort_keys=True).encode() + b"\n"


class DiagnosticLog:
    """Buffered records, flushed as one delta append per file through a pinned directory descriptor."""

    def __init__(self, directory: str | os.PathLike[str], *, fs: FileSystem | None = None) -> None:
        self.fs = fs or OsFileSystem()
        self.directory = os.path.abspath(os.fspath(directory))
        self.fs.makedirs(self.directory)
        self._dir_fd = self.fs.open_dir(self.directory)  # the pinned target, opened once
        self._files: dict[str, int] = {}
        self._pending: dict[str, list[bytes]] = {}

    def log(self, name: str, record: Mapping[str, Any]) -> None:
        """Buffer one record for ``name``; nothing touches the disk until :meth:`flush`."""
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"invalid log name {name!r}")
        self._pending.setdefault(name, []).append(_line(record))

    def flush(self) -> int:
        """Append each file's delta in one write; return the bytes written (exactly the delta)."""
        written = 0
        pending, self._pending = self._pending, {}
        for name, lines in pending.items():
            fd = self._files.get(name)
            if fd is None:
                fd = self._files[name] = self.fs.open_at(self._dir_fd, name, O_APPEND_CREATE)
            delta = b"".join(lines)
            self.fs.write_all(fd, delta)
            written += len(delta)
        return written

    def close(self) -> None:
        self.flush()
        for fd in self._files.values():
            self.fs.close(fd)
        self._files.clear()
        self.fs.close(self._dir_fd)

    def __enter__(self) -> DiagnosticLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FullRewriteLog:
    """Baseline only: every flush reads the whole file and atomically replaces it with file + delta."""

    def __init__(self, directory: str | os.PathLike[str], *, fs: FileSystem | None = None) -> None:
        self.fs = fs or OsFileSystem()
        self.directory = os.path.abspath(os.fspath(directory))
        self.fs.makedirs(self.directory)
        self._pending: dict[str, list[bytes]] = {}

    def log(self, name: str, record: Mapping[str, Any]) -> None:
        self._pending.setdefault(name, []).append(_line(record))

    def flush(self) -> int:
        written = 0
        pending, self._pending = self._pending, {}
        for name, lines in pending.items():
            path = os.path.join(self.directory, name)
            old = self.fs.read(path) if self.fs.exists(path) else b""
            data = old + b"".join(lines)
            self.fs.atomic_replace(path, data)
            written += len(data)
        return written

    def close(self) -> None:
        self.flush()


def read_log(path: str | os.PathLike[str], *, fs: FileSystem | None = None) -> list[dict[str, Any]]:
    """Every complete record: a torn trailing line (a crash mid-append) ends the log, a damaged line in
    the middle is skipped and the records after it are kept (the E2 rule, :func:`scan_lines`). Logs are
    observational, so nothing is rewritten or quarantined here."""
    fs = fs or OsFileSystem()
    try:
        data = fs.read(os.fspath(path))
    except OSError as exc:  # a directory, a dangling link, unreadable: one line, not a traceback
        raise TranscriptError(f"{os.fspath(path)}: cannot read the log ({describe(exc)})") from None
    records, _bad, _tail = scan_lines(data, _record)
    return records


def _record(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("not a log record")
    return value
