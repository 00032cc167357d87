"""The local back end: a pool of spawned processes on this machine (the campaigns' default)."""

from __future__ import annotations

import multiprocessing
import weakref
from collections.abc import Collection
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from perfsuite.cluster._runner import Runner, Task, WorkerLost

__all__ = ["PoolRunner", "make_pool"]

#: seconds between two looks at the pool's health while no task finishes (a bound on noticing a lost task)
POLL_S = 1.0


def make_pool(jobs: int) -> ProcessPoolExecutor:
    """Spawned processes (never forked), so a task shares no memory with the client that recorded the
    workload it checks."""
    return ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=multiprocessing.get_context("spawn"))


def pool_is_broken(pool: Executor) -> bool:
    """Whether ``pool`` lost a worker: it marked itself broken, or one of its worker processes is dead.

    Hazard: CPython 3.11's executor marks itself broken without its submit lock, so a task submitted while a
    worker dies can land in a pending table already failed and cleared; its future is never completed. Only
    the pool's own state says such a future is lost (an executor that is not a process pool never is)."""
    if not isinstance(pool, ProcessPoolExecutor):
        return False
    if getattr(pool, "_broken", False):
        return True
    processes = getattr(pool, "_processes", None) or {}
    return any(process.exitcode is not None for process in list(processes.values()))


class PoolRunner(Runner):
    """``jobs`` spawned worker processes; or an existing :class:`~concurrent.futures.Executor` (tests share
    one across campaigns; it is left running). A pool broken by a dead process is replaced by a new one
    and the tasks it held are reported lost (:func:`~perfsuite.cluster.stream` re-submits them), also a task
    whose future the broken pool never completes: :meth:`wait` looks at the pool every ``poll_s`` seconds."""

    kind = "pool"

    def __init__(self, jobs: int, executor: Executor | None = None, *, poll_s: float = POLL_S) -> None:
        self.jobs = max(1, jobs)
        self.poll_s = poll_s
        self._shared = executor
        self._pool: Executor = executor if executor is not None else make_pool(self.jobs)
        # the pool each pending handle was given to, and the handles found lost (their pool broke under them)
        self._origin: weakref.WeakKeyDictionary[Future[Any], Executor] = weakref.WeakKeyDictionary()
        self._lost: weakref.WeakSet[Future[Any]] = weakref.WeakSet()

    @property
    def slots(self) -> int:
        return self.jobs

    def submit(self, task: Task) -> Future[Any]:
        try:
            handle = self._pool.submit(task.fn, *task.args)
        except BrokenProcessPool:
            self._replace()
            handle = self._pool.submit(task.fn, *task.args)
        self._origin[handle] = self._pool
        return handle

    def _replace(self) -> None:
        if self._pool is not self._shared:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = make_pool(self.jobs)

    def wait(self, handles: Collection[Future[Any]]) -> set[Future[Any]]:
        """The done handles, or those whose pool broke and that nothing will ever complete (then
        :meth:`result` raises :class:`WorkerLost` for them): never a wait without end."""
        while True:
            done, pending = wait(handles, timeout=self.poll_s, return_when=FIRST_COMPLETED)
            if done:
                return done
            lost = {handle for handle in pending if pool_is_broken(self._origin.get(handle, self._pool))}
            if lost:
                self._lost.update(lost)
                return lost

    def result(self, handle: Future[Any]) -> Any:
        if handle in self._lost and not handle.done():
            self._lost.discard(handle)
            raise WorkerLost("a worker process died and its pool never answered for this task")
        try:
            return handle.result()
        except BrokenProcessPool as exc:
            raise WorkerLost(f"a worker process died: {exc}") from None

    def describe(self) -> str:
        return f"local pool of {self.jobs} spawned processes"

    def close(self) -> None:
        if self._pool is not self._shared:
            self._pool.shutdown(cancel_futures=True)
