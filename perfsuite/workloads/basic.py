"""Fixture-less operations: the idle control, the fsync floor, and loop/GC probes for the harness's tests.

Each function is an operation factory for a recipe mode (``operation = "perfsuite.workloads.basic:idle"``);
see :class:`perfsuite.harness.Operation` and :class:`perfsuite.harness.OperationContext` for the protocol.
"""

from __future__ import annotations

import asyncio
import gc
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from perfsuite.engine.testing import DelayModel
from perfsuite.harness import AckCallback, Operation, OperationContext, Param, accepts
from perfsuite.workloads._params import FREEZE, ms, value
from perfsuite.workloads._params import count as bounded
from perfsuite.workloads.storage import storage_metrics, storage_model

__all__ = ["allocate", "busy", "count", "fail", "fsync_floor", "gc_collect", "idle", "never_ack", "yielding"]


# the parameters each operation declares; the idle control and the floors open no session
IDLE = {**FREEZE, "window_ms": ms(50.0, "ms until the acknowledgement")}
FSYNC_FLOOR = {**FREEZE, "bytes": bounded("bytes", 4096, "size of the file written, fsynced and renamed")}
BUSY = {"ms": ms(50.0, "ms the loop is held (busy-wait)"),
        "deferred": Param(bool, False, "hold the loop just after submit instead of inside it")}
YIELDING = {"ms": ms(50.0, "ms of CPU work in slices"), "slice_ms": ms(1.0, "ms per slice, then a yield"),
            "slices": bounded("records", None, "exactly this many slices, whatever the clock says")}
GC_COLLECT = {"garbage": bounded("records", 10_000, "reference cycles made before the collection")}
ALLOCATE = {"bytes": bounded("bytes", 1 << 20, "bytes allocated in all"),
            "chunk": bounded("bytes", 1 << 16, "bytes per allocation, each freed at once", minimum=1)}
COUNT = {"loop": bounded("records", 1000, "additions on the loop thread"),
         "offloaded": bounded("records", 0, "additions in the default executor's thread"),
         "setup": bounded("records", 0, "additions in the factory, before the window")}


def _number(ctx: OperationContext, declared: Mapping[str, Param], key: str) -> float:
    return float(value(ctx, declared, key))


def _spin(ms: float) -> None:
    """Hold the thread (and the loop) for ``ms`` milliseconds."""
    end = time.perf_counter_ns() + int(ms * 1e6)
    while time.perf_counter_ns() < end:
        pass


# -- idle control (M1) ---------------------------------------------------------------------------


class _Idle(Operation):
    def __init__(self, window_ms: float) -> None:
        self._delay = window_ms / 1e3
        self._handle: asyncio.TimerHandle | None = None

    def submit(self, ack: AckCallback) -> None:
        self._handle = asyncio.get_running_loop().call_later(self._delay, ack, None)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()


@accepts(**IDLE)
def idle(ctx: OperationContext) -> Operation:
    """Does nothing for ``params["window_ms"]`` (default 50), then acknowledges: the noise floor (M1)."""
    return _Idle(_number(ctx, IDLE, "window_ms"))


# -- fsync floor (SPEC section 4) -----------------------------------------------------------------


class _FsyncFloor(Operation):
    """Write a small temp file, fsync it, ``os.replace`` it over the target, fsync the directory.

    With a storage profile (M10) each raw call goes through the same delay model the engine's latency
    layer uses (``DelayModel.settle`` right after the call: create of the new temp name, fsync, replace,
    directory fsync), so the floor and the engine's acknowledgements pay the same simulated device.
    """

    def __init__(self, directory: Path, size: int, owned: bool, model: DelayModel | None = None) -> None:
        self.directory = directory
        self.owned = owned
        self.model = model
        self.before = model.stats() if model is not None else None
        self.payload = os.urandom(size)
        self.target = directory / "floor.dat"
        self.phases: dict[str, float] = {}
        self.dir_fsync = "ok"

    def submit(self, ack: AckCallback) -> None:
        clock = time.perf_counter_ns
        settle = self._settle
        tmp = os.path.join(self.directory, "floor.dat.tmp")
        t0 = clock()
        started = self._start()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        settle("create", started)  # a new name, like the engine's exclusive create of its temp file
        try:
            os.write(fd, self.payload)
            t1 = clock()
            started = self._start()
            os.fsync(fd)
            settle("fsync", started)
            t2 = clock()
        finally:
            os.close(fd)
        started = self._start()
        os.replace(tmp, self.target)
        settle("replace", started)
        t3 = clock()
        dfd = os.open(self.directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            started = self._start()
            os.fsync(dfd)
            settle("fsync_dir", started)
        except OSError as exc:  # a filesystem that rejects directory fsync: report, do not fail
            self.dir_fsync = os.strerror(exc.errno or 0)
        finally:
            os.close(dfd)
        t4 = clock()
        ack(None)
        self.phases = {
            "write": (t1 - t0) / 1e6,
            "fsync": (t2 - t1) / 1e6,
            "replace": (t3 - t2) / 1e6,
            "dir_fsync": (t4 - t3) / 1e6,
        }

    def _start(self) -> float:
        return self.model.start() if self.model is not None else 0.0

    def _settle(self, kind: str, started: float) -> None:
        if self.model is not None:
            self.model.settle(kind, started)

    def metrics(self) -> Mapping[str, object]:
        out: dict[str, object] = {"phases_ms": self.phases, "bytes_written": len(self.payload),
                                  "dir_fsync": self.dir_fsync}
        if self.model is not None:
            out.update(storage_metrics(self.model, self.before))
        return out

    def close(self) -> None:
        if self.owned:
            shutil.rmtree(self.directory, ignore_errors=True)


@accepts(**FSYNC_FLOOR)
def fsync_floor(ctx: OperationContext) -> Operation:
    """The physical floor for any acknowledgement: raw ``os`` write, fsync, replace, directory fsync.

    ``params["bytes"]`` (default 4096) is the file size. Works in the sample's scratch directory.
    ``params["storage"]``: a storage profile (M10) whose delays the raw calls pay, as the engine's would.
    """
    size = int(value(ctx, FSYNC_FLOOR, "bytes"))
    model = storage_model(ctx.params, seed=ctx.sample)
    if ctx.scratch is not None:
        return _FsyncFloor(ctx.scratch, size, owned=False, model=model)
    return _FsyncFloor(Path(tempfile.mkdtemp(prefix="perfsuite-fsync-floor-")), size, owned=True, model=model)


# -- probes for the harness's own tests -----------------------------------------------------------


class _Busy(Operation):
    def __init__(self, ms: float, deferred: bool) -> None:
        self.ms = ms
        self.deferred = deferred

    def _run(self, ack: AckCallback) -> None:
        _spin(self.ms)
        ack(None)

    def submit(self, ack: AckCallback) -> None:
        if self.deferred:
            asyncio.get_running_loop().call_soon(self._run, ack)
        else:
            self._run(ack)


@accepts(**BUSY)
def busy(ctx: OperationContext) -> Operation:
    """Blocks the loop for ``params["ms"]`` (busy-wait), inside ``submit`` or, with ``deferred``, just after."""
    return _Busy(_number(ctx, BUSY, "ms"), value(ctx, BUSY, "deferred"))


class _Yielding(Operation):
    def __init__(self, ms: float, slice_ms: float, count: int | None = None) -> None:
        self.ms = ms
        self.slice_ms = slice_ms
        self.count = count
        self.task: asyncio.Task[None] | None = None
        self.slices = 0

    async def _run(self, ack: AckCallback) -> None:
        end = time.perf_counter_ns() + int(self.ms * 1e6)
        while (self.slices < self.count) if self.count is not None else (time.perf_counter_ns() < end):
            _spin(self.slice_ms)
            self.slices += 1
            await asyncio.sleep(0)
        ack(None)

    def submit(self, ack: AckCallback) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run(ack))

    def metrics(self) -> Mapping[str, object]:
        return {"slices": self.slices}


@accepts(**YIELDING)
def yielding(ctx: OperationContext) -> Operation:
    """Keeps the CPU busy for ``params["ms"]`` but yields to the loop every ``slice_ms`` (default 1 ms);
    with ``slices``, exactly that many slices whatever the clock says (deterministic for tests)."""
    return _Yielding(_number(ctx, YIELDING, "ms"), _number(ctx, YIELDING, "slice_ms"), value(ctx, YIELDING, "slices"))


class _GcCollect(Operation):
    def __init__(self, garbage: int) -> None:
        self.garbage = garbage
        self.collected = 0

    def submit(self, ack: AckCallback) -> None:
        for _ in range(self.garbage):  # reference cycles only a collection can free
            a: list[object] = []
            a.append(a)
        self.collected = gc.collect()
        ack(None)

    def metrics(self) -> Mapping[str, object]:
        return {"collected": self.collected}


@accepts(**GC_COLLECT)
def gc_collect(ctx: OperationContext) -> Operation:
    """Makes ``params["garbage"]`` reference cycles (default 10000) then forces a full ``gc.collect()``."""
    return _GcCollect(value(ctx, GC_COLLECT, "garbage"))


class _Allocate(Operation):
    def __init__(self, total: int, chunk: int) -> None:
        self.total = total
        self.chunk = max(1, chunk)

    def submit(self, ack: AckCallback) -> None:
        done = 0
        while done < self.total:
            block = bytearray(self.chunk)  # allocated, then dropped: the sum grows, the peak does not
            done += len(block)
            del block
        ack(None)

    def metrics(self) -> Mapping[str, object]:
        return {"requested_bytes": self.total}


@accepts(**ALLOCATE)
def allocate(ctx: OperationContext) -> Operation:
    """Allocates ``params["bytes"]`` in ``chunk`` pieces, each freed at once (M3: sum vs peak)."""
    return _Allocate(value(ctx, ALLOCATE, "bytes"), value(ctx, ALLOCATE, "chunk"))


class _Count(Operation):
    """Deterministic CPU work: ``loop`` additions on the loop thread, ``offloaded`` in a worker thread."""

    def __init__(self, loop: int, offloaded: int, setup: int) -> None:
        self.loop = loop
        self.offloaded = offloaded
        self.result = self._add(setup)  # work before the window: never counted

    @staticmethod
    def _add(n: int) -> int:
        total = 0
        for i in range(n):
            total += i
        return total

    def submit(self, ack: AckCallback) -> None:
        self.result = self._add(self.loop)
        if not self.offloaded:
            ack(None)
            return
        job = asyncio.get_running_loop().run_in_executor(None, self._add, self.offloaded)
        job.add_done_callback(lambda f: ack(f.exception()))

    def metrics(self) -> Mapping[str, object]:
        return {"additions": self.loop + self.offloaded}


@accepts(**COUNT)
def count(ctx: OperationContext) -> Operation:
    """Adds ``params["loop"]`` integers on the loop thread (default 1000) and ``offloaded`` (default 0)
    in the default executor's thread, then acknowledges: a known amount of work for the instruction pass.
    ``setup`` additions (default 0) run in the factory, before the window."""
    return _Count(value(ctx, COUNT, "loop"), value(ctx, COUNT, "offloaded"), value(ctx, COUNT, "setup"))


class _Fail(Operation):
    def submit(self, ack: AckCallback) -> None:
        asyncio.get_running_loop().call_soon(ack, OSError(5, "simulated I/O error"))


@accepts()
def fail(ctx: OperationContext) -> Operation:
    """Acknowledges with a failure (``OSError(EIO)``), for error-path tests."""
    return _Fail()


class _NeverAck(Operation):
    def submit(self, ack: AckCallback) -> None:
        pass


@accepts()
def never_ack(ctx: OperationContext) -> Operation:
    """Never acknowledges, for the acknowledgement-timeout test."""
    return _NeverAck()


# run conditions (SPEC M10) applied: the floor pays the storage profile's delays in its raw calls; the
# idle control does no I/O, so a storage profile holds for it trivially
fsync_floor.conditions = frozenset({"storage"})  # type: ignore[attr-defined]
idle.conditions = frozenset({"storage"})  # type: ignore[attr-defined]
# what they measure is the machine (its scheduler, its storage), not the code under test: `perfsuite ab` leaves
# them out of its default set, since between two revisions they can only add noise
fsync_floor.measures = "machine"  # type: ignore[attr-defined]
idle.measures = "machine"  # type: ignore[attr-defined]
