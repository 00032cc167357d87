"""E4: where the asynchronous job's blocking steps run: a thread pool (default), a worker process that
avoids GIL contention, or inline. A small abstract base with three implementations; the suite's
``offload`` recipe compares them."""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from perfsuite.engine._generations import GenerationStore
from perfsuite.engine._pipeline import Batch


class Offload(ABC):
    """Runs one blocking step and returns a ``concurrent.futures.Future`` for its result."""

    name = "abstract"

    @abstractmethod
    def submit(self, func: Callable[..., Any], *args: Any) -> cf.Future[Any]: ...

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

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)


def _portable(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Arguments a worker process can take: the worker's I/O layer (``fs.for_worker()``: the real one,
    plus any simulated device latency; a recording or fault-injecting layer cannot observe another
    process) and batches with their bytes materialised."""
    converted: list[Any] = []
    for arg in args:
        if isinstance(arg, GenerationStore):
            arg = GenerationStore(arg.root, arg.fs.for_worker())
        elif isinstance(arg, Batch):
            arg = arg.for_offload()
        converted.append(arg)
    return tuple(converted)


class ProcessOffload(Offload):
    """One worker process (forkserver: no inherited threads or locks). Steps run on the real layer."""

    name = "process"

    def __init__(self) -> None:
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
        self._pool = cf.ProcessPoolExecutor(max_workers=1, mp_context=context)

    def submit(self, func: Callable[..., Any], *args: Any) -> cf.Future[Any]:
        return self._pool.submit(func, *_portable(args))

    def warm_up(self) -> None:
        """Start the worker now rather than inside the first measured publication."""
        self._pool.submit(int, 0).result()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)


def make_offload(name: str) -> Offload:
    if name == "thread":
        return ThreadOffload()
    if name == "process":
        return ProcessOffload()
    if name == "inline":
        return InlineOffload()
    raise ValueError(f"unknown offload {name!r}: expected thread, process or inline")
