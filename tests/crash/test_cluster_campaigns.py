"""Campaigns on a cluster, accepted on a LocalCluster of 2 workers: a budgeted crash, corruption and kill campaign give
the same answer (byte for byte) as on ``--jobs 2``; a worker killed mid-campaign loses and double-counts
nothing; a campaign whose client was killed resumes from its checkpoint to the same answer."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from perfsuite.cluster import PoolRunner, Runner, WorkerLost
from perfsuite.crash import (
    CorruptConfig,
    CrashConfig,
    Execution,
    KillConfig,
    Progress,
    campaign_document,
    run_campaign,
    run_corrupt_campaign,
    run_kill_campaign,
)

pytest.importorskip("distributed")
from perfsuite.cluster import DaskRunner

ROOT = Path(__file__).resolve().parents[2]
CRASH = CrashConfig(workloads=("transcript", "session-file"), max_states=48, jobs=2)
CORRUPT = CorruptConfig(workloads=("session",), max_cases=18, jobs=2)


@pytest.fixture(scope="module")
def dask() -> Iterator[DaskRunner]:
    runner = DaskRunner.local(2)
    yield runner
    runner.close()


@pytest.fixture(scope="module")
def pool() -> Iterator[PoolRunner]:
    runner = PoolRunner(2)
    yield runner
    runner.close()


def answer(kind: str, report: Any, config: Any) -> str:
    """The compared part of the result document, as the bytes ``--json`` writes."""
    return json.dumps(campaign_document(kind, report, config, "-")["answer"], indent=1, sort_keys=True)


@pytest.fixture(scope="module")
def crash_on_pool(pool: Runner) -> str:
    return answer("crash", run_campaign(CRASH, runner=pool), CRASH)


def test_the_crash_campaign_gives_the_same_answer_on_a_local_cluster(dask, crash_on_pool) -> None:
    assert dask.slots == 2 and dask.kind == "dask-local"
    events: list[Progress] = []
    report = run_campaign(CRASH, runner=dask, on_progress=events.append)
    assert answer("crash", report, CRASH) == crash_on_pool
    assert report.states > 4 * 48  # recovery states too
    # progress from the cluster: states done per unit, never going back, ending at the unit's count
    units = {e.unit for e in events}
    assert units == {f"{w} / {m}" for w in CRASH.workloads for m in ("atomic-rename", "split-rename")}
    for unit in units:
        done = [e.done for e in events if e.unit == unit]
        assert done == sorted(done) and done[-1] == 48


def test_a_seeded_bug_is_caught_the_same_way_on_both(dask, pool, tmp_path) -> None:
    """Violations in batch order, byte for byte, and a stop_after budget counted in batch order stops at the
    same batch. Both runs check one recording (a checkpoint keeps it beside itself, ``FILE.traces/``): the
    engine writes wall-clock times into its event records, so two recordings differ in those bytes."""
    config = CrashConfig(workloads=("transcript",), models=("atomic-rename",), max_states=160,
                         seeded_bug="no-temp-fsync", stop_after=2, jobs=2)
    on_pool = run_campaign(config, runner=pool, execution=Execution(checkpoint=str(tmp_path / "a")))
    shutil.copytree(tmp_path / "a.traces", tmp_path / "b.traces")
    on_dask = run_campaign(config, runner=dask, execution=Execution(checkpoint=str(tmp_path / "b"), resume=True))
    assert on_pool.caught and len(on_pool.violations) >= 2
    assert answer("crash", on_pool, config) == answer("crash", on_dask, config)


def test_the_corruption_campaign_gives_the_same_answer_on_a_local_cluster(dask, pool) -> None:
    on_pool = run_corrupt_campaign(CORRUPT, runner=pool)
    on_dask = run_corrupt_campaign(CORRUPT, runner=dask)
    assert on_pool.cases == 18 and on_pool.violations == ()
    assert answer("corrupt", on_pool, CORRUPT) == answer("corrupt", on_dask, CORRUPT)


def test_the_kill_campaign_gives_the_same_answer_on_a_local_cluster(dask, pool) -> None:
    """The kills, their profiles and the violations (none) are the same; the acknowledgements read depend
    on how far each child got in real time before its SIGKILL, so they are in the document's ``run`` part."""
    config = KillConfig(kills=4, seed=5)
    seen: list[tuple[int, str]] = []
    on_pool = run_kill_campaign(config, runner=pool)
    on_dask = run_kill_campaign(config, runner=dask,
                                on_kill=lambda kill, profile, acks, _: seen.append((kill, profile)))
    assert on_dask.violations == () and on_dask.per_profile == {"portable": 2, "file": 2}
    assert answer("kill", on_pool, config) == answer("kill", on_dask, config)
    assert seen == [(0, "portable"), (1, "file"), (2, "portable"), (3, "file")]  # progress in kill order


def test_a_worker_killed_mid_campaign_loses_and_double_counts_nothing(dask, crash_on_pool) -> None:
    """SIGKILL one of the two workers after the first batch comes back: the scheduler runs its tasks again
    elsewhere (its nanny restarts it), and the answer is the one of an undisturbed run."""
    killed: list[int] = []

    def kill_once(event: Progress) -> None:
        if not killed:
            pid = sorted(dask.worker_pids().values())[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    report = run_campaign(CRASH, runner=dask, on_progress=kill_once)
    assert killed
    assert answer("crash", report, CRASH) == crash_on_pool
    deadline = time.monotonic() + 300
    while dask.client.nthreads().__len__() < 2 and time.monotonic() < deadline:
        time.sleep(0.2)  # (the nanny brings the worker back for the next tests)
    assert killed[0] not in dask.worker_pids().values()


def test_a_pool_worker_killed_mid_campaign_loses_nothing(crash_on_pool) -> None:
    """The same on the local pool: the broken pool is replaced and the batches it held run again."""
    runner = PoolRunner(2)
    killed: list[int] = []

    def kill_once(event: Progress) -> None:
        if not killed:
            pool = runner._pool
            pid = sorted(pool._processes)[0]  # type: ignore[attr-defined]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            # the hand-over: go on once the executor has marked itself broken. Python 3.11's executor marks it
            # without its submit lock, so a batch submitted while it does can land in a pending table already
            # failed and cleared: a future nobody completes, and the campaign waited on it forever
            deadline = time.monotonic() + 300
            while not pool._broken and time.monotonic() < deadline:  # type: ignore[attr-defined]
                time.sleep(0.01)
            assert pool._broken, "the pool never noticed its killed worker"  # type: ignore[attr-defined]

    with runner:
        report = run_campaign(CRASH, runner=runner, on_progress=kill_once)
    assert killed and answer("crash", report, CRASH) == crash_on_pool


def _crashcheck(*args: str, **kwargs: Any) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="100")
    return subprocess.Popen([sys.executable, "-m", "perfsuite", "crashcheck", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, **kwargs)


def _batches(checkpoint: Path) -> int:
    try:
        units = json.loads(checkpoint.read_text())["units"]
    except (OSError, ValueError, KeyError):
        return 0
    return sum(u["counts"]["batches"] for u in units.values())


@pytest.mark.parametrize("campaign", ["crash", "corrupt"])
def test_a_campaign_resumes_after_its_client_was_killed(tmp_path: Path, campaign: str) -> None:
    """The client (and the LocalCluster it embeds: its process group) is SIGKILLed once its checkpoint
    records finished batches; ``--resume`` goes on from there, and the document's answer is that of an
    uninterrupted run on the local pool."""
    if campaign == "crash":
        budget = ["--workload", "transcript", "--workload", "session-file", "--max-states", "96"]
    else:
        budget = ["--corrupt", "--workload", "session", "--workload", "session-file", "--max-cases", "30"]
    whole = _crashcheck(*budget, "--jobs", "2", "--json", str(tmp_path / "whole.json"))
    checkpoint = tmp_path / "campaign.checkpoint"
    args = [*budget, "--jobs", "2", "--cluster", "local", "--checkpoint", str(checkpoint)]
    _whole_out, whole_err = whole.communicate(timeout=600)
    assert whole.returncode == 0, whole_err
    # a loaded machine can let every batch finish before the kill lands, leaving nothing to resume: then
    # the kill is tried again on a fresh checkpoint (the resumed run must do work of its own)
    for _attempt in range(3):
        checkpoint.unlink(missing_ok=True)
        (tmp_path / "resumed.json").unlink(missing_ok=True)
        first = _crashcheck(*args, "--json", str(tmp_path / "first.json"))
        deadline = time.monotonic() + 240
        while _batches(checkpoint) < 2 and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(first.pid, signal.SIGKILL)  # the client and the cluster it started, nothing else
        first.communicate()
        done_before = _batches(checkpoint)
        assert done_before >= 2 and not (tmp_path / "first.json").exists()
        refused = _crashcheck(*args)
        assert refused.wait() == 2 and "--resume" in refused.communicate()[1]
        resumed = _crashcheck(*args, "--resume", "--json", str(tmp_path / "resumed.json"))
        _out, err = resumed.communicate(timeout=600)
        assert resumed.returncode == 0, err
        docs = [json.loads((tmp_path / name).read_text()) for name in ("whole.json", "resumed.json")]
        assert docs[0]["answer"] == docs[1]["answer"]
        assert json.loads(checkpoint.read_text())["units"]
        if _batches(checkpoint) > done_before:
            break
    assert _batches(checkpoint) > done_before, "every batch finished before the kill, three times"


@pytest.fixture
def remote_scheduler(tmp_path: Path) -> Iterator[str]:
    """A running Dask cluster the campaign does not own, as a user would start it (README): ``dask
    scheduler`` and ``dask worker --nworkers 2 --nthreads 1`` on the loopback interface, stopped afterwards."""
    file = tmp_path / "scheduler.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    common = {"env": env, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "start_new_session": True}
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                  "--port", "0", "--no-dashboard", "--scheduler-file", str(file)], **common)
    workers = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file", str(file),
                                "--nworkers", "2", "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1"],
                               cwd=tmp_path, **common)
    try:
        deadline = time.monotonic() + 300  # bounds a failure only (a loaded machine starts Python slowly)
        address = None
        while address is None and time.monotonic() < deadline:
            try:
                address = json.loads(file.read_text())["address"]
            except (OSError, ValueError, KeyError):
                time.sleep(0.1)
        assert address, "the scheduler did not start"
        yield address
    finally:
        for proc in (workers, scheduler):
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_a_remote_scheduler_gives_the_same_document_as_jobs_2(remote_scheduler: str, tmp_path: Path) -> None:
    budget = ["--workload", "transcript", "--max-states", "24"]
    local = _crashcheck(*budget, "--jobs", "2", "--json", str(tmp_path / "local.json"))
    remote = _crashcheck(*budget, "--scheduler", remote_scheduler, "--json", str(tmp_path / "remote.json"))
    for proc in (local, remote):
        _out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
    docs = [json.loads((tmp_path / f"{name}.json").read_text()) for name in ("local", "remote")]
    assert docs[0]["answer"] == docs[1]["answer"] and docs[0]["answer"]["results"][0]["states"] == 24
    assert docs[1]["run"]["runner"] == f"dask {remote_scheduler}"


class LosesFirstSlice(PoolRunner):
    """A pool that reports the first slice of the portable chain lost (what a dead worker looks like to
    the campaign), once: the chain must run again from its first kill, counted once."""

    def __init__(self, jobs: int) -> None:
        super().__init__(jobs)
        self.lost = 0
        self.profiles: dict[Any, str] = {}

    def submit(self, task: Any) -> Any:
        handle = super().submit(task)
        self.profiles[handle] = task.args[1][0].profile
        return handle

    def result(self, handle: Any) -> Any:
        value = super().result(handle)
        if not self.lost and self.profiles[handle] == "portable":
            self.lost += 1
            raise WorkerLost("the worker running this slice died")
        return value


def test_a_kill_chain_whose_worker_died_runs_again_from_its_first_kill(pool) -> None:
    config = KillConfig(kills=4, seed=5)
    undisturbed = run_kill_campaign(config, runner=pool)
    with LosesFirstSlice(2) as losing:
        seen: list[int] = []
        report = run_kill_campaign(config, runner=losing, on_kill=lambda kill, *_: seen.append(kill))
    assert losing.lost == 1 and seen == [0, 1, 2, 3]
    assert report.per_profile == {"portable": 2, "file": 2} and report.violations == ()
    assert answer("kill", report, config) == answer("kill", undisturbed, config)
