"""Where a campaign's tasks run: a small abstract back end, and the one loop every campaign uses.

A :class:`Runner` submits a :class:`Task` (a module-level function and its arguments) and hands back a
handle; :func:`stream` feeds it tasks lazily from an iterator (never the whole list in memory), keeps at
most ``window`` in flight, re-submits a task whose process died (:class:`WorkerLost`), and delivers results
**in key order**, whatever order they finished in. That order is what makes a campaign's answer the same on
``--jobs 2``, a LocalCluster or a remote scheduler: every piece of client-side state (violations in order,
the first N kept, where a budget stops) is folded in the same sequence everywhere.
"""

from __future__ import annotations

import socket
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from perfsuite.errors import PerfsuiteError

__all__ = ["ClusterError", "Runner", "Task", "WorkerLost", "stream"]

#: attempts per task before a lost task is given to ``lost`` (a task that kills its process every time)
ATTEMPTS = 3


class ClusterError(PerfsuiteError):
    """A cluster that cannot be used (unreachable scheduler, no workers, another perfsuite on a worker)."""


class WorkerLost(PerfsuiteError):
    """The process running a task died before it answered (killed worker, crashed task process)."""


@dataclass(frozen=True, slots=True)
class Task:
    """``fn(*args)`` somewhere; ``key`` orders delivery (consecutive integers), ``host`` pins the task to one
    machine (timing work never mixes machines), ``context`` stays on the client (never sent)."""

    key: int
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    host: str | None = None
    context: Any = field(default=None, compare=False)


class Runner(ABC):
    """A pool of workers. Implementations: :class:`~perfsuite.cluster.PoolRunner` (spawned processes on this
    machine) and :class:`~perfsuite.cluster.DaskRunner` (a Dask distributed cluster, local or remote)."""

    #: ``pool``, ``dask-local`` or ``dask``: recorded in run metadata, never in a compared result
    kind: str = "runner"

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    @abstractmethod
    def slots(self) -> int:
        """Tasks that run at once right now (worker processes or threads)."""

    @abstractmethod
    def submit(self, task: Task) -> Any:
        """Start ``task``; a handle for :meth:`wait` and :meth:`result`."""

    @abstractmethod
    def wait(self, handles: Collection[Any]) -> set[Any]:
        """Block until at least one of ``handles`` is done; the done ones."""

    @abstractmethod
    def result(self, handle: Any) -> Any:
        """The task's return value; its exception re-raised; :class:`WorkerLost` when its process died."""

    def cancel(self, handles: Iterable[Any]) -> None:
        """Drop tasks whose results are no longer wanted (best effort)."""
        for handle in handles:
            handle.cancel()

    def hosts(self) -> dict[str, int]:
        """Machine (host name or address) -> slots on it."""
        return {socket.gethostname(): self.slots}

    def describe(self) -> str:
        """One line for people: what runs the tasks."""
        return f"{self.kind} ({self.slots} slots)"

    @abstractmethod
    def close(self) -> None:
        """Stop what this runner started (a runner given an existing pool or cluster leaves it running)."""


def stream(runner: Runner, tasks: Iterable[Task], deliver: Callable[[Task, Any], bool | None], *,
           window: int | None = None, attempts: int = ATTEMPTS,
           lost: Callable[[Task, WorkerLost], Any] | None = None) -> int:
    """Run ``tasks`` (pulled lazily) on ``runner`` and call ``deliver(task, result)`` in key order.

    At most ``window`` tasks are in flight (default three per slot) and at most ``2 * window`` keys lie
    between the oldest undelivered task and the newest submitted one, so memory stays bounded whatever the
    campaign's size. A task whose process died is submitted again, up to ``attempts`` times; then its result
    is ``lost(task, error)`` (or the error is raised). ``deliver`` returning true stops the stream: nothing
    after that key is delivered and what is still in flight is cancelled. Returns the tasks delivered.
    """
    size = window or max(2, runner.slots * 3)
    source = iter(tasks)
    waiting = next(source, None)
    if waiting is None:
        return 0
    next_key = waiting.key
    in_flight: dict[Any, tuple[Task, int]] = {}
    ready: dict[int, tuple[Task, Any]] = {}
    delivered = 0
    try:
        while True:
            while waiting is not None and len(in_flight) < size and waiting.key < next_key + 2 * size:
                in_flight[runner.submit(waiting)] = (waiting, 1)
                waiting = next(source, None)
            if not in_flight and not ready:
                return delivered
            for handle in runner.wait(list(in_flight)) if in_flight else ():
                task, attempt = in_flight.pop(handle)
                try:
                    value = runner.result(handle)
                except WorkerLost as exc:
                    if attempt < attempts:
                        in_flight[runner.submit(task)] = (task, attempt + 1)
                        continue
                    if lost is None:
                        raise
                    value = lost(task, exc)
                ready[task.key] = (task, value)
            while next_key in ready:
                task, value = ready.pop(next_key)
                next_key += 1
                delivered += 1
                if deliver(task, value):
                    return delivered
            if not in_flight and waiting is None and ready:
                raise ClusterError(f"task keys are not consecutive: waiting for {next_key}, have {sorted(ready)}")
    finally:
        if in_flight:
            runner.cancel(in_flight)
