"""The local back end: a pool of spawned processes on this machine (the campaigns' default)."""

from __future__ import annotations

import multiprocessing
from collections.abc import Collection
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from perfsuite.cluster._runner import Runner, Task, WorkerLost

__all__ = ["PoolRunner", "make_pool"]


def make_pool(jobs: int) -> ProcessPoolExecutor:
    """Spawned processes (never forked), so a task shares no memory with the client that recorded the
    workload it checks."""
    return ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=multiprocessing.get_context("spawn"))


class PoolRunner(Runner):
    """``jobs`` spawned worker processes; or an existing :class:`~concurrent.futures.Executor` (tests share
    one across campaigns; it is left running). A pool broken by a dead process is replaced by a new one
    and the tasks it held are reported lost (:func:`~perfsuite.cluster.stream` re-submits them)."""

    kind = "pool"

    def __init__(self, jobs: int, executor: Executor | None = None) -> None:
        self.jobs = max(1, jobs)
        self._shared = executor
        self._pool: Executor = executor if executor is not None else make_pool(self.jobs)

    @property
    def slots(self) -> int:
        return self.jobs

    def submit(self, task: Task) -> Future[Any]:
        try:
            return self._pool.submit(task.fn, *task.args)
        except BrokenProcessPool:
            self._replace()
            return self._pool.submit(task.fn, *task.args)

    def _replace(self) -> None:
        if self._pool is not self._shared:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = make_pool(self.jobs)

    def wait(self, handles: Collection[Future[Any]]) -> set[Future[Any]]:
        done, _ = wait(handles, return_when=FIRST_COMPLETED)
        return done

    def result(self, handle: Future[Any]) -> Any:
        try:
            return handle.result()
        except BrokenProcessPool as exc:
            raise WorkerLost(f"a worker process died: {exc}") from None

    def describe(self) -> str:
        return f"local pool of {self.jobs} spawned processes"

    def close(self) -> None:
        if self._pool is not self._shared:
            self._pool.shutdown(cancel_futures=True)
