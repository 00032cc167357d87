"""A session's own files are untrusted input (a copied session directory): opened without following a
symbolic link, regular files only, a size bound checked before a byte is read (E1, SPEC section 1: the
engine imports nothing, so its bounds live here, not in ``perfsuite._limits``).

Own files are HEAD, LEASE, the PID lock, format 2's logs, format 1's manifests, temporaries, recovery files
and the sidecar; NOT the transcripts, which E1 writes through a symbolic link by design. A FIFO or a device
is opened with ``O_NONBLOCK`` (no open blocks on a FIFO without a writer) and refused after ``fstat``; a
link is refused by ``O_NOFOLLOW``; a file written in place (a log) that has another hard link is refused,
since the writes would reach the other name too.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from typing import Protocol

#: HEAD, LEASE, a PID lock: a few hundred bytes when the engine writes them
CONTROL_BYTES = 64 << 10
#: a format-1 manifest or staged batch record, a file-backed sidecar
DOCUMENT_BYTES = 256 << 20
#: one format-2 log (its header, BASE and room; the engine reads a log whole, so this bounds its memory)
LOG_BYTES = 4 << 30
#: every artifact of one generation together, checked before any of them is assembled
STATE_BYTES = 2 << 30

O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
#: added to the flags of every open of an own file (on a regular file O_NONBLOCK changes nothing)
O_OWN = O_NOFOLLOW | O_NONBLOCK
_READ_SIZE = 1 << 16


@dataclass(frozen=True, slots=True)
class FileFacts:
    """What ``lstat``/``fstat`` says of a file: ``kind`` is file, directory, symlink, FIFO, socket or device,
    with its size and its number of hard links."""

    kind: str
    size: int
    links: int = 1

    @property
    def what(self) -> str:
        """The kind as a message says it: ``a symbolic link``, ``a FIFO``, ``a regular file``."""
        return {"file": "a regular file", "symlink": "a symbolic link"}.get(self.kind, f"a {self.kind}")


def facts_of(st: os.stat_result) -> FileFacts:
    mode = st.st_mode
    kind = ("file" if stat.S_ISREG(mode) else "directory" if stat.S_ISDIR(mode) else "symlink" if stat.S_ISLNK(mode)
            else "FIFO" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode) else "device")
    return FileFacts(kind, st.st_size, st.st_nlink)


class NotRegular(OSError):
    """An own file is a symbolic link, a FIFO, a device, a socket or a directory: never followed or read."""


class TooLarge(OSError):
    """An own file is larger than anything the engine writes there: refused before it is read."""


class HardLinked(OSError):
    """A file the engine writes in place has another hard link: the writes would reach the other name."""


def not_regular(path: str, what: str) -> NotRegular:
    return NotRegular(errno.EINVAL, f"{what}, not a regular file (a session's own files are never followed)", path)


def too_large(path: str, size: int, limit: int) -> TooLarge:
    return TooLarge(errno.EFBIG, f"{size} bytes, more than the {limit} bytes the engine ever writes there", path)


def check_readable(facts: FileFacts, path: str) -> None:
    """A file read through a link (a transcript, E1) is still a regular file of at most :data:`LOG_BYTES`:
    a link to /dev/zero or a FIFO in a copied session is refused, never read without end."""
    if facts.kind != "file":
        raise NotRegular(errno.EINVAL, f"{facts.what}, not a regular file", path)
    if facts.size > LOG_BYTES:
        raise too_large(path, facts.size, LOG_BYTES)


class _Opener(Protocol):
    """The part of an E1 layer :func:`open_own` uses (``FileSystem`` itself: this module sits below it)."""

    def open(self, path: str, flags: int, mode: int = 0o644) -> int: ...

    def stat_fd(self, fd: int) -> FileFacts: ...

    def close(self, fd: int) -> None: ...


def open_own(fs: _Opener, path: str, flags: int, mode: int = 0o644) -> int:
    """Open an own file through ``fs`` (a log written in place): no link followed, no FIFO blocked on, a
    regular file, with no other hard link when opened for writing (:class:`HardLinked`). Recorded and
    fault-injected like every open: it is one."""
    return open_own_facts(fs, path, flags, mode)[0]


def open_own_facts(fs: _Opener, path: str, flags: int, mode: int = 0o644) -> tuple[int, FileFacts]:
    """:func:`open_own`, with the facts its check read (a reader bounds its read by their size without a
    second ``fstat``: the lease is read twice per publication, E3)."""
    try:
        fd = fs.open(path, flags | O_OWN, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a symbolic link
            raise not_regular(path, "a symbolic link") from None
        raise
    try:
        facts = fs.stat_fd(fd)
        if facts.kind != "file":
            raise not_regular(path, facts.what)
        if flags & (os.O_WRONLY | os.O_RDWR) and facts.links > 1:
            raise HardLinked(errno.EMLINK, f"has {facts.links} hard links and is written in place: the writes would "
                             "reach the other names", path)
    except BaseException:
        fs.close(fd)
        raise
    return fd, facts


def read_bounded(fd: int, size: int, limit: int, path: str) -> bytes:
    """The bytes of an open regular file of ``size`` bytes, at most ``limit``: the size is checked before a
    byte is read, and no more than ``limit`` is ever read (a file growing meanwhile included). The real
    layer's helper: it opens the file itself (``_fs``, the one module that issues ``os`` opens)."""
    if size > limit:
        raise too_large(path, size, limit)
    parts = []
    left = limit + 1  # one byte past the bound says the file grew past it
    got = 0
    while left > 0:
        asked = min(left, max(_READ_SIZE, size + 1))
        part = os.read(fd, asked)
        if not part:
            break
        parts.append(part)
        left -= len(part)
        got += len(part)
        if len(part) < asked and got == size:
            break  # a short read of a regular file that ends at its size is its end: no second read for EOF
    data = parts[0] if len(parts) == 1 else b"".join(parts)
    if len(data) > limit:
        raise too_large(path, len(data), limit)
    return data


__all__ = [
    "CONTROL_BYTES",
    "DOCUMENT_BYTES",
    "LOG_BYTES",
    "O_OWN",
    "STATE_BYTES",
    "FileFacts",
    "HardLinked",
    "NotRegular",
    "TooLarge",
    "check_readable",
    "facts_of",
    "not_regular",
    "open_own",
    "open_own_facts",
    "read_bounded",
    "too_large",
]
