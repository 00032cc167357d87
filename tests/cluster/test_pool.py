"""The local pool never waits without end on a task its broken pool lost (hazard: CPython 3.11's executor marks
itself broken without its submit lock, so a task submitted while a worker dies can get a future nobody completes;
a campaign on ``--jobs N`` then hung forever). The state is built directly: a real pool broken by a worker that
exited, and a future that pool never completes (the race itself is not reproducible on demand)."""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

import pytest

from perfsuite.cluster import PoolRunner, Task, WorkerLost, stream

#: how long a guarded call may take before the test calls it a hang (generous: a loaded machine spawns slowly)
GUARD_S = 120.0


def _finishes(call: Callable[[], Any]) -> dict[str, Any]:
    """Run ``call`` in a daemon thread joined for :data:`GUARD_S`; what it returned or raised. Fails the test,
    rather than hanging it, when the call is still running."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = call()
        except BaseException as exc:  # (handed to the test, which asserts on it)
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(GUARD_S)
    assert not thread.is_alive(), "the pool runner waited without end on a task its broken pool lost"
    return out


class DroppingPool(ProcessPoolExecutor):
    """A real spawned pool whose first submit is the 3.11 race: a worker dies (the pool marks itself broken)
    and the future handed back is one the pool never completes."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        self.dropped: list[Future[Any]] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if self.dropped:
            return super().submit(fn, *args, **kwargs)
        killer = super().submit(os._exit, 3)
        killer.exception()  # the hand-over: the pool has marked itself broken and failed what it knew of
        self.dropped.append(Future())
        return self.dropped[0]


def _squares(n: int) -> Iterator[Task]:
    return (Task(i, pow, (i, 2)) for i in range(n))


def test_a_future_its_broken_pool_never_completes_is_reported_lost() -> None:
    with PoolRunner(1, poll_s=0.05) as runner:
        killer = runner.submit(Task(0, os._exit, (3,)))
        assert _finishes(lambda: runner.wait([killer])).get("value") == {killer}
        with pytest.raises(WorkerLost):
            runner.result(killer)
        stray: Future[Any] = Future()  # what the race leaves: the broken pool will never complete it
        assert _finishes(lambda: runner.wait([stray])).get("value") == {stray}
        with pytest.raises(WorkerLost, match="never answered"):
            runner.result(stray)
        assert not stray.done()


def test_a_campaign_stream_resubmits_the_task_whose_future_was_dropped() -> None:
    pool = DroppingPool()
    got: list[int] = []
    try:
        with PoolRunner(1, executor=pool, poll_s=0.05) as runner:
            out = _finishes(lambda: stream(runner, _squares(5), lambda task, value: got.append(value)))
    finally:
        pool.shutdown(cancel_futures=True)
    assert "error" not in out, out.get("error")
    assert pool.dropped and not pool.dropped[0].done()
    assert out["value"] == 5 and got == [i * i for i in range(5)]
