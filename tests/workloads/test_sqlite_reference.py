"""The SQLite reference (SPEC section 8): the record bytes of one real publication, recorded from the engine,
committed through sqlite3 (WAL, synchronous=FULL) inline or through one worker thread with the ack on the
loop. Checked by behaviour: the row holds exactly the bytes the engine pwrote, the pragmas are in force, the
threaded commit runs off the loop thread and acknowledges on it; no timing."""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.harness import OperationContext
from perfsuite.workloads.floors import record_publication
from perfsuite.workloads.sqlite_reference import record_bytes, sqlite_commit
from tests.workloads.test_engine_ops import HEAD, run

SQLITE = "perfsuite.workloads.sqlite_reference:sqlite_commit"


def _ctx(tmp_path: Path, fixture: Path, name: str, **params: object) -> OperationContext:
    scratch = tmp_path / f"scratch-{name}"
    scratch.mkdir()
    workdir = tmp_path / name
    shutil.copytree(fixture, workdir, symlinks=True)
    return OperationContext(workdir, {"publication": "mailbox_delivery", **params}, "sqlite", 0, scratch)


def _one_sample(ctx: OperationContext) -> tuple[Any, dict[str, Any], list[str]]:
    """Set up, submit once, wait for the ack; the operation, its metrics and the thread names seen."""
    seen: list[str] = []

    async def main() -> tuple[Any, dict[str, Any]]:
        op = await sqlite_commit(ctx)
        done: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()

        def ack(exc: BaseException | None) -> None:
            seen.append(threading.current_thread().name)
            done.set_result(exc)

        op.submit(ack)
        assert await done is None
        metrics = dict(op.metrics())
        op.close()
        return op, metrics

    op, metrics = asyncio.run(main())
    return op, metrics, seen


def _rows(database: Path) -> list[bytes]:
    conn = sqlite3.connect(database)
    try:
        return [bytes(row[0]) for row in conn.execute("SELECT body FROM records ORDER BY id")]
    finally:
        conn.close()


@pytest.mark.parametrize("handoff", ["inline", "thread"])
def test_one_commit_of_the_engines_record_bytes(tmp_path: Path, small_session: Path, handoff: str) -> None:
    path = "sync" if handoff == "inline" else "async"
    ctx = _ctx(tmp_path, small_session, "a", path=path, handoff=handoff)
    op, metrics, acked_on = _one_sample(ctx)
    # the warm-up commit (setup) and the measured one: both rows are the record, byte for byte
    rows = _rows(ctx.scratch / "sqlite" / "reference.db")
    assert rows == [op.payload, op.payload] and metrics["commits"] == 1
    assert metrics["record_bytes"] == len(op.payload) > 4000 and metrics["records"] == 1
    assert b"execution result 0:" in op.payload  # the delivered result is inside the record the engine wrote
    assert metrics["models"] == f"mailbox_delivery(path={path})"
    assert metrics["journal_mode"] == "wal" and metrics["handoff"] == handoff and metrics["wal_bytes"] > 0
    assert acked_on == [threading.main_thread().name]  # acknowledged on the loop thread either way


def test_the_bytes_are_what_the_recorded_pwrite_wrote(tmp_path: Path, small_session: Path) -> None:
    """record_bytes reads back exactly the recorded pwrite's range from the copy's log."""
    ctx = _ctx(tmp_path, small_session, "b", path="async")
    steps, _before = asyncio.run(record_publication(ctx, "mailbox_delivery", {"path": "async"}))
    (pwrite,) = [s for s in steps if s.kind == "pwrite"]
    with open(ctx.workdir / pwrite.path, "rb") as fh:
        fh.seek(pwrite.offset)
        expected = fh.read(pwrite.length)
    assert record_bytes(ctx.workdir, steps) == expected and len(expected) == pwrite.length
    assert expected.strip(b"\0")  # a written record, not the log's preallocated zeros


def test_the_threaded_commit_runs_on_one_worker_thread(tmp_path: Path, small_session: Path) -> None:
    """E4's hand-off: the submission returns before the commit, which runs on the worker; the ack on the loop."""
    ctx = _ctx(tmp_path, small_session, "c", path="async", handoff="thread")

    async def main() -> tuple[bool, dict[str, Any]]:
        op = await sqlite_commit(ctx)
        done: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
        op.submit(done.set_result)
        handed_off = not done.done()
        assert await done is None
        metrics = dict(op.metrics())
        op.close()
        return handed_off, metrics

    handed_off, metrics = asyncio.run(main())
    assert handed_off and metrics["commit_thread"].startswith("sqlite-reference")
    inline, _metrics, _seen = _one_sample(_ctx(tmp_path, small_session, "e", path="sync"))
    assert inline.commit_thread == threading.main_thread().name  # the synchronous reference: on the loop thread


def test_the_pragmas_are_in_force(tmp_path: Path, small_session: Path) -> None:
    ctx = _ctx(tmp_path, small_session, "d", path="sync")

    async def main() -> tuple[str, int, bool]:
        op = await sqlite_commit(ctx)
        try:  # the warm-up commit made the WAL before the window (closing checkpoints and removes it)
            return (op.conn.execute("PRAGMA journal_mode").fetchone()[0],
                    op.conn.execute("PRAGMA synchronous").fetchone()[0],
                    os.path.getsize(ctx.scratch / "sqlite" / "reference.db-wal") > 0)
        finally:
            op.close()

    assert asyncio.run(main()) == ("wal", 2, True)  # 2: FULL


def test_sqlite_modes_in_a_recipe_are_references(tmp_path: Path, small_session: Path) -> None:
    doc = run(tmp_path, small_session, HEAD + f"""
    [modes.sync]
    operation = "perfsuite.workloads.engine:mailbox_delivery"
    path = "sync"

    [modes.sqlite]
    operation = "{SQLITE}"
    reference = "sqlite3 inline"
    publication = "mailbox_delivery"
    path = "sync"

    [modes.sqlite-threaded]
    operation = "{SQLITE}"
    reference = "sqlite3 on one worker thread"
    publication = "mailbox_delivery"
    path = "async"
    handoff = "thread"
    """)
    for mode in ("sqlite", "sqlite-threaded"):
        body = doc["modes"][mode]
        assert body["verdict"]["met"] is None and body["verdict"]["reference"] == body["reference"]
        for sample in body["samples"]:
            assert sample["ack_ms"] is not None and sample["metrics"]["commits"] == 1
            assert sample["metrics"]["record_bytes"] > 4000
    # the engine's sync record and the reference's: the same size but for the digits of a timestamp
    engine = doc["modes"]["sync"]["samples"][0]["metrics"]["bytes_written"]
    assert abs(doc["modes"]["sqlite"]["samples"][0]["metrics"]["record_bytes"] - engine) <= 0.01 * engine


def test_bad_params_are_one_line(tmp_path: Path, small_session: Path) -> None:
    with pytest.raises(PerfsuiteError, match="publication: expected one of"):
        asyncio.run(sqlite_commit(_ctx(tmp_path, small_session, "x", publication="nope")))
    with pytest.raises(PerfsuiteError, match="handoff: expected one of"):
        asyncio.run(sqlite_commit(_ctx(tmp_path, small_session, "y", handoff="pool")))
    with pytest.raises(PerfsuiteError, match="needs a session fixture"):
        asyncio.run(sqlite_commit(OperationContext(None, {"publication": "checkpoint"}, "s", 0, tmp_path)))


def test_a_storage_profile_tops_up_the_one_commit(tmp_path: Path, small_session: Path) -> None:
    """M10: the COMMIT, a WAL commit's one durability point, pays one draw of the profile's fsync delay."""
    from perfsuite.engine.testing import LATENCY_OPS

    profile = {"name": "fixed", "source": "test", "operations": {
        k: {"kind": "fixed", "ms": 2.0, "source": "test"} for k in LATENCY_OPS}}
    _op, metrics, _seen = _one_sample(_ctx(tmp_path, small_session, "s", path="sync", storage=profile))
    assert metrics["storage"]["ops"] == 1 and metrics["storage_profile"] == "fixed"
    assert metrics["storage"]["delayed_ops"] + metrics["storage"]["real_exceeded"] == 1
