"""The execution layer (the same answer on every back end): the streaming loop delivers in key order whatever order
tasks finish in, keeps memory bounded, re-runs lost tasks without double counting, stops where the fold says; the
checkpoint file refuses what is not its campaign; the back ends give the same results."""

from __future__ import annotations

import json
import operator
import os
from collections.abc import Collection, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

import perfsuite.cluster
from perfsuite.cluster import (
    Checkpoint,
    CheckpointError,
    ClusterError,
    PoolRunner,
    Runner,
    Task,
    WorkerLost,
    make_runner,
    stream,
)


class ScriptedRunner(Runner):
    """Runs tasks at once, but finishes them in the order ``order`` picks (newest first by default), and
    loses the first attempt of the keys in ``lose``: what a cluster does to a campaign, without one."""

    kind = "scripted"

    def __init__(self, slots: int = 2, lose: Collection[int] = (), newest_first: bool = True) -> None:
        self._slots = slots
        self.lose = set(lose)
        self.newest_first = newest_first
        self.submitted: list[int] = []
        self.most_in_flight = 0
        self.in_flight: list[Future[Any]] = []
        self.cancelled = 0

    @property
    def slots(self) -> int:
        return self._slots

    def submit(self, task: Task) -> Future[Any]:
        self.submitted.append(task.key)
        future: Future[Any] = Future()
        if task.key in self.lose:
            self.lose.discard(task.key)
            future.set_exception(WorkerLost("killed"))
        else:
            future.set_result(task.fn(*task.args))
        self.in_flight.append(future)
        self.most_in_flight = max(self.most_in_flight, len(self.in_flight))
        return future

    def wait(self, handles: Collection[Future[Any]]) -> set[Future[Any]]:
        pick = max if self.newest_first else min
        chosen = pick(handles, key=self.in_flight.index)
        self.in_flight.remove(chosen)
        return {chosen}

    def result(self, handle: Future[Any]) -> Any:
        return handle.result()

    def cancel(self, handles: Any) -> None:
        self.cancelled += len(list(handles))

    def close(self) -> None:
        pass


def _squares(n: int, start: int = 0) -> Iterator[Task]:
    for i in range(start, n):
        yield Task(i, operator.mul, (i, i))


def test_the_facade_exports_exactly_its_public_names() -> None:
    public = {n for n in dir(perfsuite.cluster) if not n.startswith("_")
              and not isinstance(getattr(perfsuite.cluster, n), type(os))}
    assert set(perfsuite.cluster.__all__) == public


def test_results_arrive_in_key_order_whatever_order_tasks_finish_in() -> None:
    runner = ScriptedRunner(newest_first=True)
    got: list[tuple[int, int]] = []
    assert stream(runner, _squares(40), lambda task, value: got.append((task.key, value))) == 40
    assert got == [(i, i * i) for i in range(40)]


def test_tasks_are_pulled_lazily_and_memory_stays_bounded() -> None:
    """The newest-first runner keeps the oldest task waiting: the loop stops submitting 2 * window keys
    past it instead of pulling the whole (here endless) iterator."""
    runner = ScriptedRunner(slots=2)
    pulled = 0

    def endless() -> Iterator[Task]:
        nonlocal pulled
        i = 0
        while True:
            pulled += 1
            yield Task(i, operator.mul, (i, i))
            i += 1

    stream(runner, endless(), lambda task, value: task.key >= 500, window=4)
    assert runner.most_in_flight <= 4
    assert pulled <= 500 + 2 * 4 + 1


def test_a_lost_task_is_run_again_and_counted_once() -> None:
    runner = ScriptedRunner(lose={3, 7})
    got: list[int] = []
    stream(runner, _squares(10), lambda task, value: got.append(task.key))
    assert got == list(range(10))
    assert sorted(runner.submitted) == sorted([*range(10), 3, 7])


def test_a_task_lost_on_every_attempt_goes_to_lost_or_raises() -> None:
    class AlwaysLost(ScriptedRunner):
        def submit(self, task: Task) -> Future[Any]:
            self.lose.add(5)
            return super().submit(task)

    got: dict[int, Any] = {}
    stream(AlwaysLost(), _squares(8), lambda task, value: got.update({task.key: value}),
           lost=lambda task, error: f"lost: {error}")
    assert got[5] == "lost: killed" and got[4] == 16 and len(got) == 8
    with pytest.raises(WorkerLost):
        stream(AlwaysLost(), _squares(8), lambda task, value: None)


def test_deliver_returning_true_stops_at_that_key_on_every_order() -> None:
    for newest_first in (True, False):
        runner = ScriptedRunner(newest_first=newest_first)
        got: list[int] = []

        def deliver(task: Task, value: int, got: list[int] = got) -> bool:
            got.append(task.key)
            return task.key == 12

        stream(runner, _squares(100), deliver)
        assert got == list(range(13))


def test_keys_that_skip_are_an_error_not_a_hang() -> None:
    with pytest.raises(ClusterError, match="not consecutive"):
        stream(ScriptedRunner(), iter([Task(0, abs, (1,)), Task(2, abs, (1,))]), lambda task, value: None)


def test_the_local_pool_runs_the_same_stream(tmp_path: Path) -> None:
    got: list[int] = []
    with PoolRunner(2) as runner:
        stream(runner, _squares(30), lambda task, value: got.append(value))
    assert got == [i * i for i in range(30)]


def test_make_runner_refuses_two_clusters_and_unknown_names() -> None:
    with pytest.raises(ClusterError, match="give one"):
        make_runner(2, cluster="local", scheduler="tcp://127.0.0.1:1")
    with pytest.raises(ClusterError, match="expected one of local"):
        make_runner(2, cluster="moon")
    assert isinstance(make_runner(1), PoolRunner)


def test_an_unreachable_scheduler_is_one_line() -> None:
    pytest.importorskip("distributed")
    from perfsuite.cluster import DaskRunner

    with pytest.raises(ClusterError) as info:
        DaskRunner.connect("tcp://127.0.0.1:9", timeout_s=1)
    assert "cannot connect" in str(info.value) and "\n" not in str(info.value)


# -- the checkpoint file ---------------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_checkpoint_is_written_atomically_at_most_once_an_interval(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    clock = Clock()
    cp = Checkpoint(path, {"kind": "crash", "seed": 1}, interval_s=1.0, clock=clock)
    calls = 0

    def state() -> dict[str, int]:
        nonlocal calls
        calls += 1
        return {"batches": calls}

    cp.put("a", state)
    assert not path.exists() and calls == 0  # not due yet: the state is not even built
    clock.now = 1.5
    cp.put("a", state)
    assert json.loads(path.read_text())["units"] == {"a": {"batches": 1}}
    cp.put("a", state, force=True)
    assert json.loads(path.read_text())["units"]["a"] == {"batches": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["c.json"]  # no temp file left behind


def test_a_checkpoint_is_never_overwritten_or_resumed_by_another_campaign(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    Checkpoint(path, {"kind": "crash", "seed": 1}).put("u", lambda: {"batches": 3}, force=True)
    with pytest.raises(CheckpointError, match="--resume"):
        Checkpoint(path, {"kind": "crash", "seed": 1})
    with pytest.raises(CheckpointError, match="differs in seed"):
        Checkpoint(path, {"kind": "crash", "seed": 2}, resume=True)
    resumed = Checkpoint(path, {"kind": "crash", "seed": (1)}, resume=True)
    assert resumed.resumed and resumed.get("u") == {"batches": 3} and resumed.get("v") is None
    path.write_text("{torn")
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        Checkpoint(path, {"kind": "crash", "seed": 1}, resume=True)
    fresh = Checkpoint(tmp_path / "none.json", {"kind": "crash"}, resume=True)
    assert not fresh.resumed

