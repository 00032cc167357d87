"""An in-memory file system: the engine's real publication pipeline without a disk, for the
what-if simulator (the real session in virtual time) and tests. Nothing here is durable; fsync is a
no-op. Paths are absolute; files are inodes, so a descriptor follows its file through a replace."""

from __future__ import annotations

import errno
import os
import posixpath

from perfsuite.engine._confined import FileFacts, too_large
from perfsuite.engine._fs import FileSystem


class _Inode:
    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data = bytearray()


class _Open:
    __slots__ = ("append", "inode", "path", "position")

    def __init__(self, path: str, inode: _Inode | None, append: bool) -> None:
        self.path = path
        self.inode = inode  # None: a directory
        self.append = append
        self.position = 0


def _error(code: int, path: str) -> OSError:
    return OSError(code, os.strerror(code), path) if code not in _TYPED else _TYPED[code](code, os.strerror(code), path)


_TYPED: dict[int, type[OSError]] = {errno.ENOENT: FileNotFoundError, errno.EEXIST: FileExistsError,
                                   errno.EISDIR: IsADirectoryError, errno.ENOTDIR: NotADirectoryError}


class MemoryFileSystem(FileSystem):
    """Files and directories in a dict; the same primitives as :class:`OsFileSystem` (E1 policy on top)."""

    def __init__(self) -> None:
        super().__init__()
        self.files: dict[str, _Inode] = {}
        self.dirs: set[str] = {"/"}
        self._fds: dict[int, _Open] = {}
        self._next = 3

    @staticmethod
    def _norm(path: str) -> str:
        return posixpath.normpath(posixpath.join("/", os.fspath(path).replace(os.sep, "/")))

    def _parent_must_exist(self, path: str) -> None:
        if posixpath.dirname(path) not in self.dirs:
            raise _error(errno.ENOENT, path)

    def _fd(self, state: _Open) -> int:
        fd, self._next = self._next, self._next + 1
        self._fds[fd] = state
        return fd

    # -- primitives -------------------------------------------------------------------------------
    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        path = self._norm(path)
        if path in self.dirs:
            raise _error(errno.EISDIR, path)
        inode = self.files.get(path)
        if inode is None:
            if not flags & os.O_CREAT:
                raise _error(errno.ENOENT, path)
            self._parent_must_exist(path)
            inode = self.files[path] = _Inode()
        elif flags & os.O_CREAT and flags & os.O_EXCL:
            raise _error(errno.EEXIST, path)
        if flags & os.O_TRUNC:
            del inode.data[:]
        return self._fd(_Open(path, inode, bool(flags & os.O_APPEND)))

    def open_dir(self, path: str) -> int:
        path = self._norm(path)
        if path not in self.dirs:
            raise _error(errno.ENOENT if path not in self.files else errno.ENOTDIR, path)
        return self._fd(_Open(path, None, False))

    def open_at(self, dir_fd: int, name: str, flags: int, mode: int = 0o644) -> int:
        return self.open(posixpath.join(self._fds[dir_fd].path, name), flags, mode)

    def write(self, fd: int, data: bytes) -> int:
        state = self._fds[fd]
        if state.inode is None:
            raise _error(errno.EISDIR, state.path)
        buffer = state.inode.data
        if state.append:
            state.position = len(buffer)
        end = state.position + len(data)
        if state.position > len(buffer):
            buffer.extend(b"\0" * (state.position - len(buffer)))
        buffer[state.position:end] = data
        state.position = end
        return len(data)

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        state = self._fds[fd]
        if state.inode is None:
            raise _error(errno.EISDIR, state.path)
        buffer = state.inode.data
        if offset > len(buffer):
            buffer.extend(b"\0" * (offset - len(buffer)))
        buffer[offset : offset + len(data)] = data
        return len(data)

    def fsync(self, fd: int) -> None:
        if fd not in self._fds:
            raise _error(errno.EBADF, "?")

    def fdatasync(self, fd: int) -> None:
        self.fsync(fd)

    def close(self, fd: int) -> None:
        del self._fds[fd]

    def replace(self, src: str, dst: str) -> None:
        src, dst = self._norm(src), self._norm(dst)
        inode = self.files.get(src)
        if inode is None:
            raise _error(errno.ENOENT, src)
        if dst in self.dirs:
            raise _error(errno.EISDIR, dst)
        self._parent_must_exist(dst)
        self.files[dst] = self.files.pop(src)

    def mkdir(self, path: str) -> None:
        path = self._norm(path)
        if path in self.dirs or path in self.files:
            raise _error(errno.EEXIST, path)
        self._parent_must_exist(path)
        self.dirs.add(path)

    def remove(self, path: str) -> None:
        path = self._norm(path)
        if path in self.dirs:
            raise _error(errno.EISDIR, path)
        if self.files.pop(path, None) is None:
            raise _error(errno.ENOENT, path)

    def rmdir(self, path: str) -> None:
        path = self._norm(path)
        if path not in self.dirs:
            raise _error(errno.ENOENT, path)
        if self.listdir(path):
            raise _error(errno.ENOTEMPTY, path)
        self.dirs.discard(path)

    def truncate(self, fd: int, length: int) -> None:
        inode = self._fds[fd].inode
        assert inode is not None
        del inode.data[length:]

    def lock(self, fd: int) -> bool | None:
        return True

    def read(self, path: str) -> bytes:
        path = self._norm(path)
        if path in self.dirs:
            raise _error(errno.EISDIR, path)
        inode = self.files.get(path)
        if inode is None:
            raise _error(errno.ENOENT, path)
        return bytes(inode.data)

    def listdir(self, path: str) -> list[str]:
        path = self._norm(path)
        if path not in self.dirs:
            raise _error(errno.ENOENT, path)
        prefix = path.rstrip("/") + "/"
        names = {p[len(prefix):] for p in (*self.files, *self.dirs) if p.startswith(prefix) and p != path}
        return sorted(n for n in names if "/" not in n)

    def exists(self, path: str) -> bool:
        path = self._norm(path)
        return path in self.files or path in self.dirs

    def isdir(self, path: str) -> bool:
        return self._norm(path) in self.dirs

    def realpath(self, path: str) -> str:
        return self._norm(path)

    def size(self, path: str) -> int:
        return len(self.read(path))

    # no links, FIFOs or devices here: an own file is a file or a directory (_confined)
    def read_regular(self, path: str, limit: int) -> bytes:
        inode = self.files.get(self._norm(path))
        if inode is not None and len(inode.data) > limit:
            raise too_large(self._norm(path), len(inode.data), limit)
        return self.read(path)

    def stat_fd(self, fd: int) -> FileFacts:
        inode = self._fds[fd].inode
        return FileFacts("directory", 0) if inode is None else FileFacts("file", len(inode.data))

    def lstat(self, path: str) -> FileFacts | None:
        path = self._norm(path)
        if path in self.dirs:
            return FileFacts("directory", 0)
        inode = self.files.get(path)
        return None if inode is None else FileFacts("file", len(inode.data))


__all__ = ["MemoryFileSystem"]
