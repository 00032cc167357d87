"""M10 storage profiles: every built-in is sourced and loads; users' files are validated in one line;
operations (the engine's and the raw fsync floor) pay the profile's delays through the same model."""

from __future__ import annotations

import asyncio
import math
import textwrap

import pytest

from perfsuite.engine.testing import LATENCY_OPS, FixedDelay, QuantileDelay
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import OperationContext
from perfsuite.workloads.basic import fsync_floor
from perfsuite.workloads.storage import (
    list_profiles,
    load_profile,
    load_profile_file,
    resolve_storage,
    storage_model,
)

REQUIRED = {"nvme", "sata-ssd", "hdd", "nfs", "ebs-gp3"}


def test_the_required_profiles_are_built_in():
    assert set(list_profiles()) >= REQUIRED


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_every_distribution_carries_its_source(name):
    profile = load_profile(name)
    assert profile.source.strip() and profile.title.strip()
    assert profile.sources and all(s["url"].startswith("https://") and s["what"].strip() for s in profile.sources)
    assert set(profile.distributions) == set(LATENCY_OPS)
    for kind, table in profile.operations.items():
        assert table["source"].strip(), kind
    record = profile.to_dict()
    assert record["simulated"] is True and record["name"] == name
    assert resolve_storage(record).to_dict() == record  # what the results record reloads identically


def test_profiles_keep_their_published_tables():
    nvme = load_profile("nvme").distributions
    assert isinstance(nvme["fsync"], QuantileDelay)
    assert nvme["fsync"].quantile_ms(50) == 0.963 and nvme["fsync"].quantile_ms(100) == 7.611
    assert nvme["fsync_dir"] == nvme["fsync"]
    assert load_profile("nfs").distributions["replace"] == FixedDelay(2.7)
    assert load_profile("nfs").distributions["fsync_dir"] == FixedDelay(0.0)
    hdd = load_profile("hdd").distributions["fsync"]
    assert (hdd.low_ms, hdd.high_ms) == (9.0, 17.33)


def _write(tmp_path, body: str):
    path = tmp_path / "mine.toml"
    path.write_text(textwrap.dedent(body))
    return path


def test_a_users_profile_file_loads(tmp_path):
    path = _write(tmp_path, """
        name = "mine"
        source = "pg_test_fsync on my laptop's WD SN770, 2026-11-01"
        [operations.fsync]
        kind = "fixed"
        ms = 1.5
        source = "pg_test_fsync fsync 1500 usecs/op"
    """)
    profile = load_profile_file(path)
    assert profile.name == "mine" and profile.origin == str(path)
    assert profile.distributions == {"fsync": FixedDelay(1.5)}


@pytest.mark.parametrize(("body", "message"), [
    ("""
        name = "x"
        source = "s"
        [operations.fsync]
        kind = "fixed"
        ms = 1
     """, "operations.fsync.source: missing"),
    ("""
        name = "x"
        [operations.fsync]
        kind = "fixed"
        ms = 1
        source = "s"
     """, "source: missing"),
    ("""
        source = "s"
        [operations.write]
        kind = "fixed"
        ms = 1
        source = "s"
     """, "operations.write: unknown operation kind"),
    ("""
        source = "s"
        [operations.fsync]
        kind = "gamma"
        source = "s"
     """, "operations.fsync.kind: expected"),
    ("""
        source = "s"
        [operations.fsync]
        kind = "quantiles"
        points = [[0, 2.0], [100, 1.0]]
        source = "s"
     """, "operations.fsync: quantile points"),
    ("""source = [""", "invalid TOML"),
])
def test_a_bad_profile_file_is_one_line(tmp_path, body, message):
    with pytest.raises(PerfsuiteError) as info:
        load_profile_file(_write(tmp_path, body))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_unknown_profile_names_the_built_ins():
    with pytest.raises(PerfsuiteError) as info:
        load_profile("floppy")
    assert "nvme" in str(info.value) and "--storage-file" in str(info.value)


def test_same_seed_same_draws_for_every_mode_of_a_round():
    a = storage_model({"storage": "hdd"}, seed=3)
    b = storage_model({"storage": load_profile("hdd").to_dict()}, seed=3)
    assert a is not None and b is not None
    draws = [[m.delays["fsync"].draw_ms(m.rng) for _ in range(4)] for m in (a, b)]
    assert draws[0] == draws[1]
    assert storage_model({}, seed=3) is None


def _fixed_profile(ms: float) -> dict:
    return {"name": "fixed", "source": "test", "operations": {
        k: {"kind": "fixed", "ms": ms, "source": "test"} for k in LATENCY_OPS}}


def test_the_fsync_floor_pays_the_same_delay_model_in_its_raw_calls(tmp_path):
    ctx = OperationContext(None, {"storage": _fixed_profile(40.0)}, "raw-os", 0, scratch=tmp_path)
    op = fsync_floor(ctx)
    acks = []
    op.submit(acks.append)
    metrics = op.metrics()
    assert acks == [None]
    storage = metrics["storage"]
    # create of the new temp name, fsync, replace, directory fsync: each one settled by the model
    assert storage["ops"] == 4
    assert storage["delayed_ops"] + storage["real_exceeded"] == 4
    assert metrics["storage_profile"] == "fixed"


def test_the_fsync_floor_without_a_profile_reports_no_storage(tmp_path):
    op = fsync_floor(OperationContext(None, {}, "raw-os", 0, scratch=tmp_path))
    op.submit(lambda e: None)
    assert "storage" not in op.metrics()


def test_engine_operations_and_the_floor_declare_the_storage_condition():
    from perfsuite.workloads import basic, engine

    for factory in (engine.mailbox_delivery, engine.checkpoint, engine.transcript_barrier, basic.fsync_floor):
        assert "storage" in factory.conditions
    assert not hasattr(basic.busy, "conditions")


def test_mailbox_delivery_under_a_profile_reports_its_injected_delay(tmp_path):
    from perfsuite.engine import Message, Session
    from perfsuite.workloads.engine import mailbox_delivery

    fixture = tmp_path / "s"
    session = Session.open(fixture, create=True)
    session.add_message("root", Message("user", "hello", 1.0))
    session.full_save()
    session.close()

    async def one(path: str) -> dict:
        ctx = OperationContext(fixture, {"storage": _fixed_profile(3.0), "path": path, "result_chars": 100},
                               path, 0, scratch=tmp_path / f"scratch-{path}")
        op = mailbox_delivery(ctx)
        await op.wait_idle()
        done = asyncio.get_running_loop().create_future()
        op.submit(lambda e: done.done() or done.set_result(e))
        assert await done is None
        metrics = op.metrics()
        op.close()
        return metrics

    for path in ("sync", "async"):
        metrics = asyncio.run(one(path))
        storage = metrics["storage"]
        assert storage["ops"] > 0 and storage["delayed_ops"] + storage["real_exceeded"] >= 1
        assert math.isfinite(storage["injected_ms"]) and metrics["storage_profile"] == "fixed"
