"""E1: the fault-injecting layer. EIO on a chosen fsync, ENOSPC mid-write, EINVAL on directory fsync,
a crash before or after operation N. Faults are declared as data so tests and the crash campaign
(SPEC section 7) can enumerate them."""

from __future__ import annotations

import errno
import fnmatch
import os
import signal
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from perfsuite.engine._fs import DelegatingFileSystem, FileSystem

OpKind = Literal[
    "open", "write", "pwrite", "fsync", "fdatasync", "fsync_dir", "close", "replace", "mkdir", "remove", "rmdir",
    "truncate", "any"
]


class SimulatedCrash(BaseException):
    """The process "died" here. A BaseException so no ``except Exception`` in the engine swallows it."""


@dataclass(frozen=True, slots=True)
class Fault:
    """Fail the ``nth`` (1-based) operation of kind ``op`` whose path matches ``path`` (fnmatch on the
    absolute path or the basename).

    - ``error``: raise ``OSError(error)`` instead of performing it;
    - ``partial``: for a write or pwrite, write this many bytes first, then raise ``error`` (ENOSPC
      mid-write);
    - ``crash``: "before" or "after" the operation, raise :class:`SimulatedCrash` (or SIGKILL the
      process when the layer's ``on_crash`` is "kill").
    ``repeat`` keeps failing every later match too (a disk that stays full).
    """

    op: OpKind
    nth: int = 1
    path: str | None = None
    error: int | None = errno.EIO
    partial: int | None = None
    crash: Literal["before", "after"] | None = None
    repeat: bool = False


@dataclass
class _Counter:
    seen: int = 0
    fired: int = 0


@dataclass
class FaultLog:
    """What fired, for assertions: (fault index, operation kind, path)."""

    fired: list[tuple[int, str, str]] = field(default_factory=list)


class FaultyFileSystem(DelegatingFileSystem):
    """Wraps ``inner`` and injects the declared faults; everything else passes through."""

    def __init__(
        self,
        inner: FileSystem,
        faults: Iterable[Fault] = (),
        *,
        on_crash: Literal["raise", "kill"] = "raise",
    ) -> None:
        super().__init__(inner)
        self.faults = list(faults)
        self.on_crash = on_crash
        self.log = FaultLog()
        self._counters = [_Counter() for _ in self.faults]
        self._fault_lock = threading.Lock()
        self.operations = 0

    def add(self, fault: Fault) -> None:
        with self._fault_lock:
            self.faults.append(fault)
            self._counters.append(_Counter())

    def _match(self, kind: str, path: str) -> Fault | None:
        with self._fault_lock:
            self.operations += 1
            for index, (fault, counter) in enumerate(zip(self.faults, self._counters)):
                if fault.op not in ("any", kind):
                    continue
                if fault.path is not None and not (
                    fnmatch.fnmatch(path, fault.path) or fnmatch.fnmatch(os.path.basename(path), fault.path)
                ):
                    continue
                counter.seen += 1
                if counter.seen == fault.nth or (fault.repeat and counter.seen > fault.nth):
                    counter.fired += 1
                    self.log.fired.append((index, kind, path))
                    return fault
        return None

    def _crash(self) -> None:
        if self.on_crash == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise SimulatedCrash("simulated crash")

    def _guard(self, kind: str, path: str) -> Fault | None:
        fault = self._match(kind, path)
        if fault is None:
            return None
        if fault.crash == "before":
            self._crash()
        if fault.crash is None and fault.partial is None and fault.error is not None:
            raise OSError(fault.error, os.strerror(fault.error), path)
        return fault

    def _after(self, fault: Fault | None) -> None:
        if fault is not None and fault.crash == "after":
            self._crash()

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        fault = self._guard("open", os.path.abspath(path))
        fd = super().open(path, flags, mode)
        self._after(fault)
        return fd

    def open_at(self, dir_fd: int, name: str, flags: int, mode: int = 0o644) -> int:
        fault = self._guard("open", os.path.join(self.path_of(dir_fd)[0], name))
        fd = super().open_at(dir_fd, name, flags, mode)
        self._after(fault)
        return fd

    def write(self, fd: int, data: bytes) -> int:
        fault = self._guard("write", self.path_of(fd)[0])
        if fault is not None and fault.partial is not None:
            if fault.partial > 0:
                super().write(fd, data[: fault.partial])
            code = fault.error if fault.error is not None else errno.ENOSPC
            raise OSError(code, os.strerror(code), self.path_of(fd)[0])
        n = super().write(fd, data)
        self._after(fault)
        return n

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        fault = self._guard("pwrite", self.path_of(fd)[0])
        if fault is not None and fault.partial is not None:
            if fault.partial > 0:
                super().pwrite(fd, data[: fault.partial], offset)
            code = fault.error if fault.error is not None else errno.ENOSPC
            raise OSError(code, os.strerror(code), self.path_of(fd)[0])
        n = super().pwrite(fd, data, offset)
        self._after(fault)
        return n

    def fsync(self, fd: int) -> None:
        path, is_dir = self.path_of(fd)
        fault = self._guard("fsync_dir" if is_dir else "fsync", path)
        super().fsync(fd)
        self._after(fault)

    def fdatasync(self, fd: int) -> None:
        path = self.path_of(fd)[0]
        fault = self._guard("fdatasync", path)
        super().fdatasync(fd)
        self._after(fault)

    def close(self, fd: int) -> None:
        fault = self._guard("close", self.path_of(fd)[0])
        super().close(fd)
        self._after(fault)

    def replace(self, src: str, dst: str) -> None:
        fault = self._guard("replace", os.path.abspath(dst))
        super().replace(src, dst)
        self._after(fault)

    def mkdir(self, path: str) -> None:
        fault = self._guard("mkdir", os.path.abspath(path))
        super().mkdir(path)
        self._after(fault)

    def remove(self, path: str) -> None:
        fault = self._guard("remove", os.path.abspath(path))
        super().remove(path)
        self._after(fault)

    def rmdir(self, path: str) -> None:
        fault = self._guard("rmdir", os.path.abspath(path))
        super().rmdir(path)
        self._after(fault)

    def truncate(self, fd: int, length: int) -> None:
        fault = self._guard("truncate", self.path_of(fd)[0])
        super().truncate(fd, length)
        self._after(fault)
