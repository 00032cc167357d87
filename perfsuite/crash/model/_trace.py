"""Recording a workload: its operation trace and its oracle (what it acknowledged, and when).

A workload runs on a :class:`WorkloadEnv`: ``env.fs`` is the file system the engine gets (recording,
possibly fault-injecting, possibly wrapped by a seeded bug) and ``env.ack(...)`` notes an acknowledgement
at the current trace index. The checker needs nothing else from the workload (SPEC section 7).
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from perfsuite.crash.model._model import FsState
from perfsuite.engine import FileSystem, owner_alive
from perfsuite.engine.testing import FaultHooks, FsOp, RecordingFileSystem


@dataclass(frozen=True, slots=True)
class Ack:
    """An acknowledgement given after trace op ``at - 1`` (a crash at ``at`` or later must keep it).

    ``scope`` is a directory relative to the workload root whose files the acknowledgement covers (for a
    transcript barrier: the whole log directory at its live content); ``kind`` and ``detail`` let other
    workloads (sessions: head adoption, mail) say what they acknowledged."""

    at: int
    label: str
    scope: str = ""
    kind: str = "barrier"
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Note:
    """Something the workload observed or attempted that is not an acknowledgement (a turn that failed,
    a value a mutation was about to publish); ``detail`` as for :class:`Ack`."""

    at: int
    label: str
    kind: str = "failed"
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Oracle:
    """What the workload acknowledged and observed, in trace order."""

    acks: tuple[Ack, ...] = ()
    notes: tuple[Note, ...] = ()

    def acks_before(self, at: int) -> tuple[Ack, ...]:
        """Acknowledgements given before a crash at trace index ``at``."""
        return tuple(a for a in self.acks if a.at <= at)

    def notes_before(self, at: int) -> tuple[Note, ...]:
        """Notes taken before a crash at trace index ``at``."""
        return tuple(n for n in self.notes if n.at <= at)


@dataclass(frozen=True, slots=True)
class OpTrace:
    """One recorded workload run: operations (absolute paths under ``root``), oracle, seeded bug."""

    workload: str
    root: str
    ops: tuple[FsOp, ...]
    oracle: Oracle
    seeded_bug: str | None = None
    initial: FsState | None = None  # the durable tree the trace started from (None: empty)
    pid: int = 0  # the process that ran the workload: a crash state's crash killed it

    def rel(self, path: str) -> str:
        """``path`` relative to the workload root, for messages."""
        return os.path.relpath(path, self.root)

    def summary(self, at: int, *, before: int = 6, after: int = 1) -> list[str]:
        """The operations around a crash at ``at``: a few that happened and the first that did not."""
        lines = []
        for op in self.ops[max(0, at - before): at + after]:
            mark = "   " if op.seq < at else "-x-"
            detail = f" +{len(op.data)}B" if op.kind == "write" else ""
            detail += f" -> {self.rel(op.dst)}" if op.kind == "replace" else ""
            lines.append(f"{mark} #{op.seq} {op.kind} {self.rel(op.path)}{detail}")
        return lines


# -- ownership after a crash -------------------------------------------------------------------------------
CRASHED: set[int] = set()  # pids a crash killed, besides this process (set by the campaign's workers)


def owner_alive_after_crash(pid: int) -> bool:
    """The crash model of ownership, the probe recovery passes to the engine's open (a torn lock names no owner): the
    processes the crash killed (the one that recorded the workload, and this one, whose own recovery may
    be crashed) are dead; every other pid, pid 0 and garbage included, gets the engine's real probe. So
    the engine's real ownership check runs, and a lease or PID lock that would block open for good is a
    "recovery succeeds" violation instead of being stubbed away."""
    return pid != os.getpid() and pid not in CRASHED and owner_alive(pid)


# Errors a file system uses to say it does not support fsync on a directory (E1: warn once and continue).
DIR_FSYNC_REJECTED = frozenset(c for c in (errno.EINVAL, getattr(errno, "ENOTSUP", None),
                                           getattr(errno, "EOPNOTSUPP", None), getattr(errno, "ENOSYS", None))
                               if c is not None)


class OpRecorder(RecordingFileSystem):
    """Records like the engine's recording layer, and also logs failed syncs (``fsync_failed``,
    ``fdatasync_failed`` and ``fsync_dir_failed``) so the model can poison the file's pending data (E1
    fsyncgate, invariant 7), and directory fsyncs the file system rejects (``fsync_dir_rejected``: EINVAL,
    ENOTSUP, ...), which the model treats as a file system that makes its directory entries durable by
    itself (E1: a rejected directory fsync warns once and continues)."""

    def _failed(self, kind: str, path: str) -> None:
        with self._record_lock:
            self.ops.append(FsOp(len(self.ops), kind, path, thread=threading.current_thread().name))

    def fsync(self, fd: int) -> None:
        path, is_dir = self.path_of(fd)
        try:
            super().fsync(fd)
        except OSError as exc:
            kind = "fsync_dir_failed" if is_dir else "fsync_failed"
            if is_dir and exc.errno in DIR_FSYNC_REJECTED:
                kind = "fsync_dir_rejected"
            self._failed(kind, path)
            raise

    def fdatasync(self, fd: int) -> None:
        path = self.path_of(fd)[0]
        try:
            super().fdatasync(fd)
        except OSError:
            self._failed("fdatasync_failed", path)
            raise


class WorkloadEnv:
    """What a workload runs with: the engine's file system, the root directory, and the oracle pen."""

    def __init__(self, fs: FileSystem, recorder: OpRecorder, root: str) -> None:
        self.fs = fs
        self.root = root
        self.faults: FaultHooks | None = None  # a seeded bug's engine fault hooks (a published seam), else None
        # What another actor does to the session's files (a second process, an administrator removing the
        # PID lock): recorded, so the model sees it, but never through a seeded bug's broken layer.
        self.outside: FileSystem = recorder
        self._recorder = recorder
        self._acks: list[Ack] = []
        self._notes: list[Note] = []
        self._lock = threading.Lock()  # acknowledgement callbacks may run on an offload thread

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    def mark(self) -> int:
        """The current trace index (an acknowledgement callback notes it; the ack is written later)."""
        return self._recorder.mark()

    def ack(self, label: str, *, scope: str = "", kind: str = "barrier", at: int | None = None,
            **detail: Any) -> None:
        """Note an acknowledgement given now (or at trace index ``at``, a :meth:`mark` taken when the
        acknowledgement callback ran): everything recorded before it happened before it."""
        with self._lock:
            self._acks.append(Ack(self._recorder.mark() if at is None else at, label, scope, kind, dict(detail)))

    def note(self, label: str, *, kind: str = "failed", **detail: Any) -> None:
        with self._lock:
            self._notes.append(Note(self._recorder.mark(), label, kind, dict(detail)))

    def oracle(self) -> Oracle:
        return Oracle(tuple(sorted(self._acks, key=lambda a: a.at)), tuple(sorted(self._notes, key=lambda n: n.at)))


WorkloadRun = Callable[[WorkloadEnv], None]
