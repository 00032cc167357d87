"""E1: the one durable I/O layer every engine byte goes through.

``FileSystem`` is a small abstract base of primitives (think SQLite's VFS) plus concrete durability
policy built only from those primitives: warn-once directory fsync, atomic replace, makedirs that
reports what it created, exclusive create. Wrappers (recording, fault-injecting) override primitives
only, so the policy they observe is exactly the policy that runs on the real disk.
"""

from __future__ import annotations

import errno
import os
import sys
import threading
import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

from perfsuite.engine._confined import O_NONBLOCK, FileFacts, check_readable, facts_of, open_own_facts, read_bounded
from perfsuite.engine._datasync import fdatasync as _fdatasync

# Errors a filesystem uses to say "I do not support fsync on a directory" (E1). Anything else is real.
DIR_FSYNC_REJECTED = frozenset(
    code
    for code in (
        errno.EINVAL,
        getattr(errno, "ENOTSUP", None),
        getattr(errno, "EOPNOTSUPP", None),
        getattr(errno, "ENOSYS", None),
    )
    if code is not None
)

WINDOWS = sys.platform == "win32"

O_APPEND_CREATE = os.O_WRONLY | os.O_APPEND | os.O_CREAT
O_TRUNC_CREATE = os.O_WRONLY | os.O_TRUNC | os.O_CREAT
O_EXCL_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation
_READ_SIZE = 1 << 16
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


class DirectoryFsyncUnsupported(UserWarning):
    """The filesystem rejected fsync on a directory: namespace durability is weaker here (E1)."""


class FsyncFailed(OSError):
    """An fsync failed. The file's contents are unknown from now on; it is never retried (fsyncgate)."""


class FileSystem(ABC):
    """Primitives (abstract) and durability policy (concrete, built from the primitives)."""

    #: documented fault hooks (``FaultHooks``) a checker attaches with ``with_fault_hooks``: the
    #: open path of every session and log on this layer (lease, HEAD recovery, transcript load, retirement)
    #: consults them. ``None`` in production.
    fault_hooks: Any = None

    def __init__(self) -> None:
        self._warned_dirs: set[str] = set()
        self._warn_lock = threading.Lock()

    def __getstate__(self) -> dict[str, object]:
        # Picklable for a worker process (E4 process offload): locks are rebuilt, not copied.
        return {k: v for k, v in self.__dict__.items() if not k.endswith("_lock")}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._warn_lock = threading.Lock()

    # -- primitives -------------------------------------------------------------------------------
    @abstractmethod
    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        """Open ``path`` with ``os.open`` flags; return a descriptor."""

    @abstractmethod
    def open_dir(self, path: str) -> int:
        """Open a directory for use as a pinned ``dir_fd`` (E8) or for fsync."""

    @abstractmethod
    def open_at(self, dir_fd: int, name: str, flags: int, mode: int = 0o644) -> int:
        """Open ``name`` relative to a pinned directory descriptor."""

    @abstractmethod
    def write(self, fd: int, data: bytes) -> int:
        """One ``write`` call; may be short. Use :meth:`write_all` to write everything."""

    @abstractmethod
    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        """One ``pwrite`` call at ``offset`` (the descriptor's position is unchanged); may be short. Use
        :meth:`pwrite_all` to write everything. An overwrite inside a file's durable size needs no
        metadata change, so one :meth:`fdatasync` makes it durable (format 2's session log)."""

    @abstractmethod
    def fsync(self, fd: int) -> None:
        """fsync a file descriptor (file or directory); errors propagate unchanged."""

    @abstractmethod
    def fdatasync(self, fd: int) -> None:
        """fdatasync a file: its data, and the metadata needed to read it back (a size change), not its
        timestamps; a durability point like fsync (E1). Errors propagate unchanged."""

    @abstractmethod
    def close(self, fd: int) -> None: ...

    @abstractmethod
    def replace(self, src: str, dst: str) -> None:
        """``os.replace``: atomic, but not durable until the directory is synced."""

    @abstractmethod
    def mkdir(self, path: str) -> None: ...

    @abstractmethod
    def remove(self, path: str) -> None: ...

    @abstractmethod
    def rmdir(self, path: str) -> None: ...

    @abstractmethod
    def truncate(self, fd: int, length: int) -> None: ...

    @abstractmethod
    def lock(self, fd: int) -> bool | None:
        """Take an advisory exclusive lock (``flock``) on ``fd`` without blocking: True when taken, False
        when another open file description holds it, None where there is no ``flock`` (Windows: nothing
        is locked). Released when ``fd`` is closed or its process dies (E3 file-backed fencing)."""

    # Read-only primitives: not durability operations, but routed here so a test can see every access.
    @abstractmethod
    def read(self, path: str) -> bytes: ...

    @abstractmethod
    def listdir(self, path: str) -> list[str]: ...

    @abstractmethod
    def exists(self, path: str) -> bool: ...

    @abstractmethod
    def isdir(self, path: str) -> bool: ...

    @abstractmethod
    def realpath(self, path: str) -> str: ...

    @abstractmethod
    def size(self, path: str) -> int: ...

    # A session's own files (``_confined``): never through a link, regular files only, bounded before read.
    @abstractmethod
    def read_regular(self, path: str, limit: int) -> bytes:
        """A regular file's bytes, never through a link nor blocking, at most ``limit`` (checked first)."""

    @abstractmethod
    def stat_fd(self, fd: int) -> FileFacts: ...

    @abstractmethod
    def lstat(self, path: str) -> FileFacts | None: ...  # what is at ``path`` itself (None: nothing)

    # -- policy -----------------------------------------------------------------------------------
    def write_all(self, fd: int, data: bytes) -> None:
        """Write every byte, looping over short writes; an error mid-way leaves a partial write."""
        written = self.write(fd, data)
        while written < len(data):
            n = self.write(fd, data[written:])
            if n <= 0:
                raise OSError(errno.EIO, "write made no progress")
            written += n

    def pwrite_all(self, fd: int, data: bytes | memoryview, offset: int) -> None:
        """Write every byte at ``offset``, looping over short writes; an error mid-way leaves a partial write."""
        whole = data if isinstance(data, bytes) else bytes(data)
        written = self.pwrite(fd, whole, offset) if whole else 0
        while written < len(whole):
            n = self.pwrite(fd, whole[written:], offset + written)
            if n <= 0:
                raise OSError(errno.EIO, "pwrite made no progress")
            written += n

    def fdatasync_file(self, fd: int, path: str = "?") -> None:
        """fdatasync a file. A failure raises :class:`FsyncFailed`: the file's unsynced contents are unknown
        from now on and it is never synced again (fsyncgate, E1)."""
        try:
            self.fdatasync(fd)
        except FsyncFailed:
            raise
        except OSError as exc:
            raise FsyncFailed(exc.errno, f"fdatasync failed: {exc.strerror}", path) from exc

    def fsync_file(self, fd: int, path: str = "?") -> None:
        """fsync a file. A failure raises :class:`FsyncFailed`; callers must not retry it (fsyncgate)."""
        try:
            self.fsync(fd)
        except FsyncFailed:
            raise
        except OSError as exc:
            raise FsyncFailed(exc.errno, f"fsync failed: {exc.strerror}", path) from exc

    def sync_dir(self, path: str) -> bool:
        """fsync a directory. A rejection (EINVAL, ENOTSUP, ...) warns once per directory and returns
        False; every other error propagates. Skipped on Windows (E1)."""
        if WINDOWS:
            return False
        fd = self.open_dir(path)
        try:
            self.fsync(fd)
        except OSError as exc:
            if exc.errno not in DIR_FSYNC_REJECTED:
                raise FsyncFailed(exc.errno, f"directory fsync failed: {exc.strerror}", path) from exc
            self._warn_dir_once(path, exc)
            return False
        finally:
            self.close(fd)
        return True

    def _warn_dir_once(self, path: str, exc: OSError) -> None:
        with self._warn_lock:
            if path in self._warned_dirs:
                return
            self._warned_dirs.add(path)
        warnings.warn(
            f"directory fsync rejected for {path} ({errno.errorcode.get(exc.errno or 0, exc.errno)}); "
            "continuing with weaker namespace durability",
            DirectoryFsyncUnsupported,
            stacklevel=3,
        )

    def makedirs(self, path: str) -> list[str]:
        """Create ``path`` and missing ancestors; return the directories created, outermost first."""
        missing: list[str] = []
        probe = os.path.abspath(path)
        while not self.exists(probe):
            missing.append(probe)
            parent = os.path.dirname(probe)
            if parent == probe:
                break
            probe = parent
        created: list[str] = []
        for directory in reversed(missing):
            try:
                self.mkdir(directory)
            except FileExistsError:
                continue
            created.append(directory)
        return created

    def write_new(self, path: str, data: bytes, *, exclusive: bool = False, sync: bool = True) -> None:
        """Write a whole file (truncating, or ``O_EXCL`` when ``exclusive``); fsync it when ``sync``."""
        fd = self.open(path, O_EXCL_CREATE if exclusive else O_TRUNC_CREATE)
        try:
            self.write_all(fd, data)
            if sync:
                self.fsync_file(fd, path)
        finally:
            self.close(fd)

    def atomic_replace(self, path: str, data: bytes, *, sync_dir: bool = True, follow: bool = True) -> str:
        """Temp file in the same directory, write, fsync, replace, fsync the directory (E1, E2).

        A symlinked ``path`` is replaced through the link: the link stays, its target is replaced; with
        ``follow=False`` (a session's own file: HEAD, LEASE, a sidecar) the link itself is replaced.
        A crash at any point leaves either the old complete file or the new one. Returns the real path.
        """
        target = self.realpath(path) if follow else os.path.abspath(path)
        directory = os.path.dirname(target)
        temp = os.path.join(directory, f".{os.path.basename(target)}.tmp-{os.getpid()}-{_next_serial()}")
        try:
            self.write_new(temp, data, exclusive=True, sync=True)
            self.replace(temp, target)
        except BaseException:
            try:
                if self.exists(temp):
                    self.remove(temp)
            except OSError:
                pass
            raise
        if sync_dir:
            self.sync_dir(directory)
        return target

    def for_worker(self) -> FileSystem:
        """The layer a worker process should use (E4 process offload): the real one. A recording or
        fault-injecting layer cannot observe another process; a simulated device (latency) stays."""
        return OsFileSystem()

    def sync_dirs(self, paths: Iterable[str]) -> None:
        """fsync several directories, innermost first so a child's entry is durable before its parent's."""
        for directory in sorted(set(paths), key=lambda p: (-p.count(os.sep), p)):
            self.sync_dir(directory)


_serial_lock = threading.Lock()
_serial = 0


def _next_serial() -> int:
    global _serial
    with _serial_lock:
        _serial += 1
        return _serial


class OsFileSystem(FileSystem):
    """The real layer: POSIX ``os`` calls, nothing else."""

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        return os.open(path, flags | _O_CLOEXEC, mode)

    def open_dir(self, path: str) -> int:
        return os.open(path, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)

    def open_at(self, dir_fd: int, name: str, flags: int, mode: int = 0o644) -> int:
        return os.open(name, flags | _O_CLOEXEC, mode, dir_fd=dir_fd)

    def write(self, fd: int, data: bytes) -> int:
        return os.write(fd, data)

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        return os.pwrite(fd, data, offset)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def fdatasync(self, fd: int) -> None:
        _fdatasync(fd)

    def close(self, fd: int) -> None:
        os.close(fd)

    def replace(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def mkdir(self, path: str) -> None:
        os.mkdir(path)

    def remove(self, path: str) -> None:
        os.remove(path)

    def rmdir(self, path: str) -> None:
        os.rmdir(path)

    def truncate(self, fd: int, length: int) -> None:
        os.ftruncate(fd, length)

    def lock(self, fd: int) -> bool | None:
        try:
            import fcntl
        except ImportError:  # Windows: no advisory lock; the PID-lock token fences writers instead
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def read(self, path: str) -> bytes:
        # raw descriptor reads: a control file (LEASE) is read before every log write and every acknowledgement
        # (E3 fencing); a buffered file object costs more system calls and allocations
        fd = os.open(path, os.O_RDONLY | _O_BINARY | _O_CLOEXEC | O_NONBLOCK)  # a FIFO never blocks the open
        try:
            check_readable(facts_of(os.fstat(fd)), path)  # followed (E1 transcripts) but regular and bounded
            parts = [os.read(fd, _READ_SIZE)]
            total = len(parts[0])
            while parts[-1]:  # until end of file; a large file's rest in one read of its remaining size
                want = _READ_SIZE if total < _READ_SIZE else max(_READ_SIZE, os.fstat(fd).st_size - total)
                parts.append(os.read(fd, want))
                total += len(parts[-1])
        finally:
            os.close(fd)
        return parts[0] if len(parts) <= 2 else b"".join(parts)

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def exists(self, path: str) -> bool:
        return os.path.lexists(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def realpath(self, path: str) -> str:
        return os.path.realpath(path)

    def size(self, path: str) -> int:
        return os.stat(path).st_size

    def read_regular(self, path: str, limit: int) -> bytes:
        # an own file: no link followed, no FIFO (_confined); its size from open's own check (one fstat)
        fd, facts = open_own_facts(self, path, os.O_RDONLY | _O_BINARY)
        try:
            return read_bounded(fd, facts.size, limit, path)
        finally:
            os.close(fd)

    def stat_fd(self, fd: int) -> FileFacts:
        return facts_of(os.fstat(fd))

    def lstat(self, path: str) -> FileFacts | None:
        return facts_of(os.lstat(path)) if os.path.lexists(path) else None


class DelegatingFileSystem(FileSystem):
    """Base for wrappers: every primitive forwards to ``inner``; the fd-to-path map names operations."""

    def __init__(self, inner: FileSystem) -> None:
        super().__init__()
        self.inner = inner
        self._paths: dict[int, tuple[str, bool]] = {}  # fd -> (path, is_directory)
        self._lock = threading.Lock()

    def for_worker(self) -> FileSystem:
        return self.inner.for_worker()

    @property
    def fault_hooks(self) -> Any:
        """A wrapper carries the hooks of the layer it wraps."""
        return self.inner.fault_hooks

    def path_of(self, fd: int) -> tuple[str, bool]:
        return self._paths.get(fd, (f"<fd {fd}>", False))

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        fd = self.inner.open(path, flags, mode)
        self._paths[fd] = (os.path.abspath(path), False)
        return fd

    def open_dir(self, path: str) -> int:
        fd = self.inner.open_dir(path)
        self._paths[fd] = (os.path.abspath(path), True)
        return fd

    def open_at(self, dir_fd: int, name: str, flags: int, mode: int = 0o644) -> int:
        fd = self.inner.open_at(dir_fd, name, flags, mode)
        self._paths[fd] = (os.path.join(self.path_of(dir_fd)[0], name), False)
        return fd

    def write(self, fd: int, data: bytes) -> int:
        return self.inner.write(fd, data)

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        return self.inner.pwrite(fd, data, offset)

    def fsync(self, fd: int) -> None:
        self.inner.fsync(fd)

    def fdatasync(self, fd: int) -> None:
        self.inner.fdatasync(fd)

    def close(self, fd: int) -> None:
        self.inner.close(fd)
        self._paths.pop(fd, None)

    def replace(self, src: str, dst: str) -> None:
        self.inner.replace(src, dst)

    def mkdir(self, path: str) -> None:
        self.inner.mkdir(path)

    def remove(self, path: str) -> None:
        self.inner.remove(path)

    def rmdir(self, path: str) -> None:
        self.inner.rmdir(path)

    def truncate(self, fd: int, length: int) -> None:
        self.inner.truncate(fd, length)

    def lock(self, fd: int) -> bool | None:
        return self.inner.lock(fd)

    def read(self, path: str) -> bytes:
        return self.inner.read(path)

    def listdir(self, path: str) -> list[str]:
        return self.inner.listdir(path)

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)

    def isdir(self, path: str) -> bool:
        return self.inner.isdir(path)

    def realpath(self, path: str) -> str:
        return self.inner.realpath(path)

    def size(self, path: str) -> int:
        return self.inner.size(path)

    def read_regular(self, path: str, limit: int) -> bytes:
        return self.inner.read_regular(path, limit)

    def stat_fd(self, fd: int) -> FileFacts:
        return self.inner.stat_fd(fd)

    def lstat(self, path: str) -> FileFacts | None:
        return self.inner.lstat(path)
