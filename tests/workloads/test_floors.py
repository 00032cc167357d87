"""The publication floor (SPEC section 4, acknowledgement as a ratio to a floor): the durable operations of one real
generation, recorded from the engine and replayed as raw os calls in the engine's order. Checked by behaviour: the
counts, the bytes and the files the replay leaves match the engine's publication; no timing."""

from __future__ import annotations

import asyncio
import collections
import os
from pathlib import Path

import pytest

from perfsuite.engine import OsFileSystem, Session
from perfsuite.engine.testing import RecordingFileSystem
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import OperationContext
from perfsuite.workloads.floors import publication_floor, record_publication
from tests.workloads.test_engine_ops import HEAD, run

FLOOR = "perfsuite.workloads.floors:publication_floor"


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst, symlinks=True)
    return dst


def _ctx(tmp_path: Path, fixture: Path, name: str, **params: object) -> OperationContext:
    scratch = tmp_path / f"scratch-{name}"
    scratch.mkdir()
    return OperationContext(_copy(fixture, tmp_path / name), {"publication": "mailbox_delivery", **params}, "floor",
                            0, scratch)


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("path", ["async", "sync"])
def test_the_replay_does_the_engines_durable_operations(tmp_path: Path, small_session: Path, path: str) -> None:
    ctx = _ctx(tmp_path, small_session, "a", path=path)

    async def main() -> tuple[object, dict]:
        op = await publication_floor(ctx)
        done = asyncio.get_running_loop().create_future()
        op.submit(lambda exc: done.set_result(exc))
        assert await done is None
        metrics = dict(op.metrics())
        op.close()
        return op, metrics

    op, metrics = asyncio.run(main())
    kinds = collections.Counter(step.kind for step in op.steps)
    # format 2 (the session log): one pwrite of a record-sized buffer at the log's tail and one fdatasync
    assert metrics["fdatasyncs"] == kinds["fdatasync"] == 1 and metrics["pwrites"] == kinds["pwrite"] == 1
    assert "fsyncs" not in metrics and "replaces" not in metrics and "dir_fsyncs" not in metrics
    assert metrics["bytes_written"] == sum(s.length for s in op.steps if s.kind == "pwrite") > 4000
    assert metrics["operations"] == len(op.steps)
    assert metrics["models"] == f"mailbox_delivery(path={path})"
    assert set(metrics["op_ms"]) == {s.kind for s in op.steps} and "phases_ms" not in metrics
    # the file the replay wrote is the session's log, at the offset the engine's record went to
    engine_after = _files(ctx.workdir)
    replay = _files(ctx.scratch / "floor")
    assert replay <= engine_after and len(replay) == 1 and next(iter(replay)).startswith("log/")
    (pwrite,) = [s for s in op.steps if s.kind == "pwrite"]
    assert pwrite.offset > 512 and os.path.getsize(ctx.scratch / "floor" / pwrite.path) == os.path.getsize(
        ctx.workdir / pwrite.path)  # the preallocated size, unchanged by the replay


def test_the_sequence_is_what_the_recording_layer_saw(tmp_path: Path, small_session: Path) -> None:
    """The recorded steps of a second real publication have the same kinds and sizes in the same order."""
    a = _ctx(tmp_path, small_session, "a", path="async")
    b = _ctx(tmp_path, small_session, "b", path="async")
    first, _ = asyncio.run(record_publication(a, "mailbox_delivery", {"path": "async"}))
    second, before = asyncio.run(record_publication(b, "mailbox_delivery", {"path": "async"}))
    assert [s.kind for s in first] == [s.kind for s in second]
    # the same sizes but for the digits of timestamps (a float's repr varies in length)
    assert all(abs(a.length - b.length) <= 8 for a, b in zip(first, second))
    assert "HEAD" in before and all(not os.path.isabs(s.path) for s in first)
    assert [s.kind for s in first] == ["pwrite", "fdatasync"] and first[0].offset == second[0].offset


def test_a_floor_mode_in_a_recipe_is_a_reference(tmp_path: Path, small_session: Path) -> None:
    doc = run(tmp_path, small_session, HEAD + f"""
    [modes.async]
    operation = "perfsuite.workloads.engine:mailbox_delivery"
    path = "async"

    [modes.publication-floor]
    operation = "{FLOOR}"
    reference = "raw os calls of one generation"
    publication = "mailbox_delivery"
    path = "async"
    """)
    body = doc["modes"]["publication-floor"]
    assert body["reference"] == "raw os calls of one generation"
    assert body["verdict"]["met"] is None and body["verdict"]["reference"] == body["reference"]
    floor = body["samples"][0]["metrics"]
    engine = doc["modes"]["async"]["samples"][0]["metrics"]
    assert floor["fdatasyncs"] == engine["fdatasyncs"] == 1 and engine["durability_points"] == 1
    # another real publication with the same parameters: the same bytes but for the digits of a timestamp
    assert abs(floor["bytes_written"] - engine["bytes_written"]) <= 0.01 * engine["bytes_written"]


def test_bad_floor_params_are_one_line(tmp_path: Path, small_session: Path) -> None:
    with pytest.raises(PerfsuiteError, match="publication: expected one of"):
        asyncio.run(publication_floor(_ctx(tmp_path, small_session, "x", publication="nope")))
    with pytest.raises(PerfsuiteError, match="needs a session fixture"):
        asyncio.run(publication_floor(OperationContext(None, {"publication": "checkpoint"}, "f", 0, tmp_path)))


def test_the_recording_layer_is_the_source(tmp_path: Path) -> None:
    """Sanity of the premise: the recording layer logs what the floor replays (kinds and sizes)."""
    fs = RecordingFileSystem(OsFileSystem(), keep_data=False)
    session = Session.open(tmp_path / "s", create=True, fs=fs)
    mark = fs.mark()
    session.checkpoint()
    kinds = {op.kind for op in fs.since(mark)}
    session.close()
    assert kinds == {"pwrite", "fdatasync"}  # format 2's steady path (the session log)


def test_the_replay_pays_a_storage_profile_through_the_same_delay_model(tmp_path: Path, small_session: Path) -> None:
    """M10: the floor's raw calls settle with the profile at the kinds the latency layer delays."""
    from perfsuite.engine.testing import LATENCY_OPS

    profile = {"name": "fixed", "source": "test", "operations": {
        k: {"kind": "fixed", "ms": 2.0, "source": "test"} for k in LATENCY_OPS}}
    ctx = _ctx(tmp_path, small_session, "s", path="async", storage=profile)

    async def main() -> tuple[object, dict]:
        op = await publication_floor(ctx)
        done = asyncio.get_running_loop().create_future()
        op.submit(lambda exc: done.set_result(exc))
        assert await done is None
        metrics = dict(op.metrics())
        op.close()
        return op, metrics

    op, metrics = asyncio.run(main())
    delayed = [s for s in op.steps if s.kind in ("fsync", "fdatasync", "fsync_dir", "replace")
               or (s.kind == "open" and s.flags & os.O_CREAT and s.flags & os.O_EXCL)]
    assert delayed and metrics["storage"]["ops"] == len(delayed)
    assert metrics["storage"]["delayed_ops"] + metrics["storage"]["real_exceeded"] == len(delayed)
    assert metrics["storage_profile"] == "fixed" and metrics["models"] == "mailbox_delivery(path=async)"
