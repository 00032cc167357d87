"""E1: the recording layer. Every durability operation is logged with its arguments and data.

The crash checker (SPEC section 7) replays this log into crash states; syscall-order tests read it;
the allocation pass (M3) counts bytes written per publication from it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace

from perfsuite.engine._fs import DelegatingFileSystem, FileSystem

#: the recorded kinds that write bytes, and the durability points (what a publication pays per commit, E1)
WRITES = frozenset({"write", "pwrite"})
DURABILITY_POINTS = frozenset({"fsync", "fdatasync", "fsync_dir", "replace"})


@dataclass(frozen=True, slots=True)
class FsOp:
    """One recorded operation. ``kind`` is one of: open, write, pwrite, fsync, fdatasync, fsync_dir, close,
    replace, mkdir, remove, rmdir, truncate. ``path`` is absolute; ``dst`` is set for replace; ``offset`` is
    where a pwrite wrote (-1 for every other kind). fsync, fdatasync and fsync_dir are durability points."""

    seq: int
    kind: str
    path: str
    data: bytes = b""
    flags: int = 0
    dst: str = ""
    length: int = 0
    thread: str = ""
    offset: int = -1

    @property
    def nbytes(self) -> int:
        return len(self.data) if self.kind in WRITES else 0


class RecordingFileSystem(DelegatingFileSystem):
    """Performs every operation on ``inner`` and logs it. ``keep_data=False`` logs sizes only."""

    def __init__(self, inner: FileSystem, *, keep_data: bool = True) -> None:
        super().__init__(inner)
        self.keep_data = keep_data
        self.ops: list[FsOp] = []
        self.bytes_written = 0
        self._record_lock = threading.Lock()

    def _log(self, kind: str, path: str, **fields: object) -> None:
        with self._record_lock:
            self.ops.append(
                FsOp(len(self.ops), kind, path, thread=threading.current_thread().name, **fields)  # type: ignore[arg-type]
            )

    def mark(self) -> int:
        """A position in the log; :meth:`since` returns the operations after it."""
        return len(self.ops)

    def since(self, mark: int) -> list[FsOp]:
        return self.ops[mark:]

    def absorb(self, ops: Iterable[FsOp], origin: str) -> None:
        """Log operations another process performed for this layer's caller (E4 process offload): they
        get this log's sequence numbers, ``thread`` becomes ``origin:thread``, and their writes count."""
        with self._record_lock:
            for op in ops:
                self.ops.append(replace(op, seq=len(self.ops), thread=f"{origin}:{op.thread}",
                                        data=op.data if self.keep_data else b""))
                if op.kind in WRITES:
                    self.bytes_written += op.length

    def clear(self) -> None:
        with self._record_lock:
            self.ops.clear()
            self.bytes_written = 0

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        fd = super().open(path, flags, mode)
        self._log("open", os.path.abspath(path), flags=flags)
        return fd

    def open_at(self, dir_fd: int, name: str, flags: int, mode: int = 0o644) -> int:
        fd = super().open_at(dir_fd, name, flags, mode)
        self._log("open", self.path_of(fd)[0], flags=flags)
        return fd

    def write(self, fd: int, data: bytes) -> int:
        path = self.path_of(fd)[0]
        n = super().write(fd, data)
        written = data[:n] if n < len(data) else data
        with self._record_lock:
            self.bytes_written += n
        self._log("write", path, data=bytes(written) if self.keep_data else b"", length=n)
        return n

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        path = self.path_of(fd)[0]
        n = super().pwrite(fd, data, offset)
        written = data[:n] if n < len(data) else data
        with self._record_lock:
            self.bytes_written += n
        self._log("pwrite", path, data=bytes(written) if self.keep_data else b"", length=n, offset=offset)
        return n

    def fsync(self, fd: int) -> None:
        path, is_dir = self.path_of(fd)
        super().fsync(fd)
        self._log("fsync_dir" if is_dir else "fsync", path)

    def fdatasync(self, fd: int) -> None:
        path = self.path_of(fd)[0]
        super().fdatasync(fd)
        self._log("fdatasync", path)

    def close(self, fd: int) -> None:
        path, is_dir = self.path_of(fd)
        super().close(fd)
        if not is_dir:
            self._log("close", path)

    def replace(self, src: str, dst: str) -> None:
        super().replace(src, dst)
        self._log("replace", os.path.abspath(src), dst=os.path.abspath(dst))

    def mkdir(self, path: str) -> None:
        super().mkdir(path)
        self._log("mkdir", os.path.abspath(path))

    def remove(self, path: str) -> None:
        super().remove(path)
        self._log("remove", os.path.abspath(path))

    def rmdir(self, path: str) -> None:
        super().rmdir(path)
        self._log("rmdir", os.path.abspath(path))

    def truncate(self, fd: int, length: int) -> None:
        super().truncate(fd, length)
        self._log("truncate", self.path_of(fd)[0], length=length)
