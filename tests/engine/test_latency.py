"""E1 / M10: the latency layer injects each kind's delay at the right operation, on the issuing thread,
and composes with the recording and fault layers in any order. No timing: a fake sleep records every
pause (and the thread that paid it), a frozen clock makes each pause exactly the drawn delay."""

from __future__ import annotations

import concurrent.futures as cf
import errno
import gc
import math
import os
import pickle
import random
import threading

import pytest

from perfsuite.engine import FsyncFailed, OsFileSystem, Session, SessionSettings
from perfsuite.engine._generations import GenerationStore
from perfsuite.engine._offload import _portable
from perfsuite.engine.testing import (
    LATENCY_OPS,
    DelayModel,
    Fault,
    FaultyFileSystem,
    FixedDelay,
    LatencyFileSystem,
    LogNormalDelay,
    QuantileDelay,
    RecordingFileSystem,
    UniformDelay,
)

#: distinct delays per kind, so each recorded pause names its operation (seconds)
DELAYS_MS = {"fsync": 5.0, "fsync_dir": 7.0, "replace": 11.0, "create": 13.0}
KIND_OF = {ms / 1e3: kind for kind, ms in DELAYS_MS.items()}


class FakeSleep:
    """Records (seconds, thread ident) instead of sleeping."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, int]] = []
        self._lock = threading.Lock()

    def __call__(self, seconds: float) -> None:
        with self._lock:
            self.calls.append((seconds, threading.get_ident()))

    @property
    def kinds(self) -> list[str]:
        return [KIND_OF[round(s, 9)] for s, _ in self.calls]


def model(sleep: FakeSleep, clock=lambda: 0.0, **delays_ms: float) -> DelayModel:
    chosen = delays_ms or DELAYS_MS
    return DelayModel({k: FixedDelay(v) for k, v in chosen.items()}, sleep=sleep, clock=clock, name="test")


def test_atomic_replace_pays_create_fsync_replace_and_directory_fsync_in_order(tmp_path):
    sleep = FakeSleep()
    fs = LatencyFileSystem(OsFileSystem(), model(sleep))
    target = tmp_path / "f.json"
    target.write_bytes(b"old")
    fs.atomic_replace(str(target), b"new")
    assert target.read_bytes() == b"new"
    assert sleep.kinds == ["create", "fsync", "replace", "fsync_dir"]
    assert [round(s, 9) for s, _ in sleep.calls] == [0.013, 0.005, 0.011, 0.007]


def test_only_the_four_kinds_are_delayed(tmp_path):
    sleep = FakeSleep()
    fs = LatencyFileSystem(OsFileSystem(), model(sleep))
    path = str(tmp_path / "log")
    fd = fs.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)  # not exclusive: no create delay
    fs.write_all(fd, b"x" * 100)
    fs.truncate(fd, 10)
    fs.close(fd)
    fs.mkdir(str(tmp_path / "d"))
    fs.listdir(str(tmp_path))
    fs.read(path)
    fs.remove(path)
    assert sleep.calls == []
    fs.write_new(str(tmp_path / "new"), b"y", exclusive=True)  # O_EXCL: create, then fsync
    dir_fd = fs.open_dir(str(tmp_path))
    fs.close(fs.open_at(dir_fd, "rel", os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    fs.fsync(dir_fd)
    fs.close(dir_fd)
    assert sleep.kinds == ["create", "fsync", "create", "fsync_dir"]


def test_delay_is_paid_on_the_thread_that_issued_the_operation(tmp_path):
    sleep = FakeSleep()
    fs = LatencyFileSystem(OsFileSystem(), model(sleep))
    with cf.ThreadPoolExecutor(max_workers=1) as pool:
        worker = pool.submit(threading.get_ident).result()
        pool.submit(fs.write_new, str(tmp_path / "a"), b"a").result()
    fs.write_new(str(tmp_path / "b"), b"b")
    assert worker != threading.get_ident()
    assert [t for _, t in sleep.calls] == [worker, threading.get_ident()]


def test_the_delay_tops_up_the_real_call_and_counts_a_slower_device(tmp_path):
    sleep = FakeSleep()
    ticks = iter([0.0, 0.002, 10.0, 10.020])  # fsync took 2 ms real (3 ms top-up), then 20 ms (none)
    fs = LatencyFileSystem(OsFileSystem(), model(sleep, clock=lambda: next(ticks), fsync=5.0))
    fd = fs.open(str(tmp_path / "f"), os.O_WRONLY | os.O_CREAT)
    fs.fsync(fd)
    fs.fsync(fd)
    fs.close(fd)
    assert [round(s, 9) for s, _ in sleep.calls] == [0.003]
    stats = fs.model.stats()
    assert stats.calls["fsync"] == 2 and stats.delayed["fsync"] == 1 and stats.real_exceeded["fsync"] == 1
    assert math.isclose(stats.injected_ms["fsync"], 3.0)


def test_stats_difference_is_per_sample(tmp_path):
    sleep = FakeSleep()
    fs = LatencyFileSystem(OsFileSystem(), model(sleep))
    fs.write_new(str(tmp_path / "a"), b"a")
    before = fs.model.stats()
    fs.atomic_replace(str(tmp_path / "a"), b"b")
    delta = fs.model.stats().minus(before)
    assert delta.delayed == {"fsync": 1, "fsync_dir": 1, "replace": 1, "create": 1}
    assert math.isclose(delta.total_injected_ms, sum(DELAYS_MS.values()))


@pytest.mark.parametrize("order", ["recording-outside", "recording-inside"])
def test_composes_with_the_recording_layer(tmp_path, order):
    sleep = FakeSleep()
    if order == "recording-outside":
        rec = RecordingFileSystem(LatencyFileSystem(OsFileSystem(), model(sleep)))
        fs = rec
    else:
        rec = RecordingFileSystem(OsFileSystem())
        fs = LatencyFileSystem(rec, model(sleep))
    fs.atomic_replace(str(tmp_path / "f"), b"data")
    assert [op.kind for op in rec.ops] == ["open", "write", "fsync", "close", "replace", "fsync_dir"]
    assert rec.bytes_written == 4
    assert sleep.kinds == ["create", "fsync", "replace", "fsync_dir"]


@pytest.mark.parametrize("order", ["faults-outside", "faults-inside"])
def test_composes_with_the_fault_layer(tmp_path, order):
    sleep = FakeSleep()
    faults = [Fault("fsync", nth=2, error=errno.EIO)]
    if order == "faults-outside":
        fs = FaultyFileSystem(LatencyFileSystem(OsFileSystem(), model(sleep)), faults)
    else:
        fs = LatencyFileSystem(FaultyFileSystem(OsFileSystem(), faults), model(sleep))
    fs.write_new(str(tmp_path / "ok"), b"1", exclusive=True)
    with pytest.raises(FsyncFailed):
        fs.write_new(str(tmp_path / "bad"), b"2", exclusive=True)
    # the failed fsync propagates at once: only the successful operations paid their delay
    assert sleep.kinds == ["create", "fsync", "create"]
    assert (tmp_path / "bad").exists()


def test_every_layer_order_gives_the_same_pauses(tmp_path):
    pauses = []
    for n, build in enumerate([
        lambda m: RecordingFileSystem(FaultyFileSystem(LatencyFileSystem(OsFileSystem(), m))),
        lambda m: FaultyFileSystem(LatencyFileSystem(RecordingFileSystem(OsFileSystem()), m)),
        lambda m: LatencyFileSystem(RecordingFileSystem(FaultyFileSystem(OsFileSystem())), m),
    ]):
        sleep = FakeSleep()
        fs = build(model(sleep))
        directory = tmp_path / str(n)
        fs.makedirs(str(directory))
        fs.atomic_replace(str(directory / "f"), b"x")
        fs.sync_dir(str(directory))
        pauses.append(sleep.kinds)
    assert pauses[0] == pauses[1] == pauses[2] == ["create", "fsync", "replace", "fsync_dir", "fsync_dir"]


def test_draws_are_seeded_and_reproducible():
    def draws(seed: int) -> list[float]:
        sleep = FakeSleep()
        m = DelayModel({"fsync": UniformDelay(1.0, 9.0)}, seed=seed, sleep=sleep, clock=lambda: 0.0)
        for _ in range(5):
            m.settle("fsync", 0.0)
        return [s for s, _ in sleep.calls]

    assert draws(3) == draws(3)
    assert draws(3) != draws(4)
    assert all(0.001 <= s <= 0.009 for s in draws(3))


def test_an_injected_rng_is_used():
    class Half(random.Random):
        def random(self) -> float:
            return 0.5

    sleep = FakeSleep()
    q = QuantileDelay(((0, 1.0), (50, 2.0), (100, 10.0)))
    DelayModel({"replace": q}, rng=Half(), sleep=sleep, clock=lambda: 0.0).settle("replace", 0.0)
    assert [round(s, 9) for s, _ in sleep.calls] == [0.002]


def test_quantile_table_interpolates_and_rejects_bad_tables():
    q = QuantileDelay(((0, 1.0), (50, 2.0), (99, 4.0), (100, 10.0)))
    assert q.quantile_ms(0) == 1.0
    assert q.quantile_ms(25) == 1.5
    assert q.quantile_ms(99.5) == 7.0
    assert q.quantile_ms(100) == 10.0
    with pytest.raises(ValueError):
        QuantileDelay(((1, 1.0), (100, 2.0)))
    with pytest.raises(ValueError):
        QuantileDelay(((0, 3.0), (50, 2.0), (100, 4.0)))


def test_lognormal_fit_keeps_the_published_mean_and_p99():
    d = LogNormalDelay.from_mean_p99(1.68, 4.05)
    mu = math.log(d.median_ms)
    assert math.isclose(math.exp(mu + d.sigma**2 / 2), 1.68)
    assert math.isclose(math.exp(mu + 2.326347874 * d.sigma), 4.05)
    with pytest.raises(ValueError):
        LogNormalDelay.from_mean_p99(4.0, 2.0)


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError):
        DelayModel({"write": FixedDelay(1.0)})
    assert set(LATENCY_OPS) == {"fsync", "fsync_dir", "replace", "create"}


def test_a_worker_process_keeps_the_simulated_device_but_not_recording(tmp_path):
    m = DelayModel({"fsync": FixedDelay(2.0)}, seed=9, name="dev")
    layered = RecordingFileSystem(LatencyFileSystem(RecordingFileSystem(OsFileSystem()), m))
    worker = layered.for_worker()
    assert isinstance(worker, LatencyFileSystem) and type(worker.inner) is OsFileSystem
    assert type(RecordingFileSystem(OsFileSystem()).for_worker()) is OsFileSystem
    (store,) = _portable((GenerationStore(str(tmp_path), layered),))
    assert isinstance(store.fs, LatencyFileSystem)
    copy = pickle.loads(pickle.dumps(store.fs))
    assert copy.model.to_dict() == m.to_dict()
    copy.model.settle("fsync", copy.model.start())  # the rebuilt lock works


@pytest.fixture
def unfrozen():
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_freeze_loaded_setting_freezes_after_open(tmp_path, unfrozen):
    Session.open(tmp_path / "plain", create=True).close()
    assert gc.get_freeze_count() == 0
    session = Session.open(tmp_path / "frozen", create=True, settings=SessionSettings(freeze_loaded=True))
    try:
        # the count reported right after the freeze (frozen objects freed since then leave the count)
        assert session.frozen_objects is not None and session.frozen_objects > 0
        assert gc.get_freeze_count() > 0
    finally:
        session.close()


def test_sessions_open_without_freezing_by_default(tmp_path, unfrozen):
    session = Session.open(tmp_path / "s", create=True)
    session.close()
    assert session.frozen_objects is None and gc.get_freeze_count() == 0
