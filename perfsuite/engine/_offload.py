"""E4: where the asynchronous job's blocking steps run: a thread pool (default), a worker process that
avoids GIL contention, or inline. A small abstract base with three implementations; the suite's
``offload`` recipe compares them."""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from perfsuite.engine._fs import OsFileSystem
from perfsuite.engine._generations import GenerationStore
from perfsuite.engine._pipeline import hash_staged, stage_batch
from perfsuite.engine._pipeline_values import StageJob
from perfsuite.engine._recording import FsOp, RecordingFileSystem

#: how much the process offload's warm-up stages and hashes (one default chunk)
WARM_UP_BYTES = 64 * 1024


class Offload(ABC):
    """Runs one blocking step and returns a ``concurrent.futures.Future`` for its result."""

    name = "abstract"

    @abstractmethod
    def submit(self, func: Callable[..., Any], *args: Any) -> cf.Future[Any]: ...

    def submit_local(self, func: Callable[..., Any], *args: Any) -> cf.Future[Any]:
        """A blocking step that needs this process's own state (format 2's commit and adopt use the open,
        flock-ed log): off the loop thread, never in another process."""
        return self.submit(func, *args)

    def chains(self, step: Any, following: Any) -> bool:
        """Whether ``following``, the blocking step after ``step``, may run on the same worker right after
        it, in one hand-off (a hand-off to the worker and back costs more than a small step's
        work). Only where both run in this process: never across a process boundary."""
        return False

    def shutdown(self) -> None:
        return None


class InlineOffload(Offload):
    """Runs the step immediately on the calling thread (the future is already done)."""

    name = "inline"

    def submit(self, func: Callable[..., Any], *args: Any) -> cf.Future[Any]:
        future: cf.Future[Any] = cf.Future()
        try:
            future.set_result(func(*args))
        except BaseException as exc:  # handed to the job, which turns it into a pending publication
            future.set_exception(exc)
        return future


class ThreadOffload(Offload):
    """One worker thread: steps of one session never run concurrently with each other."""

    name = "thread"

    def __init__(self) -> None:
        self._pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="perfsuite-publish")
        self._pool.submit(int, 0)  # start the worker thread now, not inside the first publication

    def submit(self, func: Callable[..., Any], *args: Any) -> cf.Future[Any]:
        return self._pool.submit(func, *args)

    def chains(self, step: Any, following: Any) -> bool:
        return True  # every step runs on this one thread

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)


def _portable(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Arguments a worker process can take: the worker's I/O layer (``fs.for_worker()``: the real one, plus
    any simulated device latency; a recording or fault-injecting wrapper's state cannot cross a process
    boundary, :func:`_recorded_step` puts a recording layer back in the worker) and stage jobs with their
    bytes materialised (the publication prepares them so: ``Publication.process``)."""
    converted: list[Any] = []
    for arg in args:
        if isinstance(arg, GenerationStore):
            arg = GenerationStore(arg.root, arg.fs.for_worker())
        converted.append(arg)
    return tuple(converted)


def _recorded_step(keep_data: bool, func: Callable[..., Any], *args: Any) -> tuple[bool, Any, list[FsOp]]:
    """In the worker: run one step on a recording layer over the real one and return what it did, so the
    caller's recording layer sees the worker's writes and fsyncs too (E1, M3), even when the step fails."""
    base = next((a.fs for a in args if isinstance(a, GenerationStore)), None) or OsFileSystem()
    recorder = RecordingFileSystem(base, keep_data=keep_data)  # over the worker's layer: latency stays (M10)
    args = tuple(GenerationStore(a.root, recorder) if isinstance(a, GenerationStore) else a for a in args)
    try:
        return True, func(*args), recorder.ops
    except BaseException as exc:  # relayed: the caller's future raises it after logging the operations
        return False, exc, recorder.ops


def _recorder_of(args: tuple[Any, ...]) -> RecordingFileSystem | None:
    for arg in args:
        if isinstance(arg, GenerationStore) and isinstance(arg.fs, RecordingFileSystem):
            return arg.fs
    return None


class ProcessOffload(Offload):
    """One worker process (forkserver: no inherited threads or locks) for the CPU-heavy steps (stage, hash:
    pure functions of materialised bytes); the steps that use this process's open log (commit, adopt) run
    on one thread here (:meth:`submit_local`). A worker step given a store runs on the real layer; when the
    caller's store records (E1), the worker records too and its operations are relayed into the caller's log."""

    name = "process"

    def __init__(self) -> None:
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
        self._pool = cf.ProcessPoolExecutor(max_workers=1, mp_context=context)
        self._local = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="perfsuite-publish")

    def submit_local(self, func: Callable[..., Any], *args: Any) -> cf.Future[Any]:
        return self._local.submit(func, *args)

    def chains(self, step: Any, following: Any) -> bool:
        return bool(getattr(step, "local", False) and getattr(following, "local", False))  # commit, then adopt

    def submit(self, func: Callable[..., Any], *args: Any) -> cf.Future[Any]:
        recorder = _recorder_of(args)
        if recorder is None:
            return self._pool.submit(func, *_portable(args))
        inner = self._pool.submit(_recorded_step, recorder.keep_data, func, *_portable(args))
        outer: cf.Future[Any] = cf.Future()

        def relay(done: cf.Future[Any]) -> None:
            try:
                ok, value, ops = done.result()
            except BaseException as exc:  # the worker itself failed (died, unpicklable result)
                outer.set_exception(exc)
                return
            recorder.absorb(ops, "process")
            if ok:
                outer.set_result(value)
            else:
                outer.set_exception(value)

        inner.add_done_callback(relay)
        return outer

    def warm_up(self, store: Any = None, nbytes: int = WARM_UP_BYTES) -> None:
        """Start the worker and run the real code path once, outside any measured publication: stage and
        hash ``nbytes`` of representative bytes through :meth:`submit`, so the first real publication pays
        neither the worker's start nor its import of the engine (nothing is written: the worker's steps are
        pure). ``nbytes`` 0: only the start."""
        if not nbytes:
            self._pool.submit(int, 0).result()
            return
        size = max(1, nbytes)
        data = (b"warm-up publication bytes " * (size // 26 + 1))[:size]
        jobs = [StageJob(f"warm-up-{os.getpid()}", 0, 0, 0, size, size, None, data=data)]
        staged = self.submit(stage_batch, jobs).result()
        self.submit(hash_staged, jobs, staged).result()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)
        self._local.shutdown(wait=True)


def make_offload(name: str) -> Offload:
    if name == "thread":
        return ThreadOffload()
    if name == "process":
        return ProcessOffload()
    if name == "inline":
        return InlineOffload()
    raise ValueError(f"unknown offload {name!r}: expected thread, process or inline")
