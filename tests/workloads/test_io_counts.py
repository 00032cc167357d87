"""M3 and the CI gate's costs: per-publication costs from the recording I/O layer (fsyncs, directory fsyncs, renames,
files created), reported by the engine operations so the gate can compare them exactly."""

from __future__ import annotations

import os
import textwrap

from perfsuite.engine import Message, OsFileSystem, TranscriptLog
from perfsuite.engine.testing import FsOp, RecordingFileSystem
from perfsuite.harness import load_recipe, run_recipe
from perfsuite.workloads.engine import io_counts

from .test_engine_ops import HEAD, run  # small_session: the fixture of conftest.py


def test_io_counts_reads_the_recording_log(tmp_path) -> None:
    fs = RecordingFileSystem(OsFileSystem(), keep_data=False)
    fs.atomic_replace(str(tmp_path / "a.json"), b"{}")  # temp created, fsync, replace, directory fsync
    fs.write_new(str(tmp_path / "b.bin"), b"x", exclusive=True, sync=False)  # created, never synced
    assert io_counts(fs.ops) == {"fsyncs": 1, "fdatasyncs": 0, "dir_fsyncs": 1, "renames": 1, "files_created": 2,
                                 "durability_points": 3}
    log = TranscriptLog.open(tmp_path / "log", fs=fs)
    log.append(Message("user", "hi", 0.0))
    mark = fs.mark()
    log.write(sync=True)  # the barrier: the transcript's fsync
    log.close()
    assert io_counts(fs.since(mark))["fsyncs"] == 1 and io_counts(fs.since(mark))["renames"] == 0
    synthetic = [FsOp(0, "open", "/x", flags=os.O_WRONLY | os.O_APPEND | os.O_CREAT),  # append-open: not created
                 FsOp(1, "open", "/y", flags=os.O_WRONLY | os.O_CREAT | os.O_EXCL),
                 FsOp(2, "fsync", "/y"), FsOp(3, "fsync_dir", "/"), FsOp(4, "replace", "/y", dst="/z"),
                 FsOp(5, "pwrite", "/x", data=b"r", length=1, offset=0), FsOp(6, "fdatasync", "/x")]
    assert io_counts(synthetic) == {"fsyncs": 1, "fdatasyncs": 1, "dir_fsyncs": 1, "renames": 1, "files_created": 1,
                                    "durability_points": 4}  # format 2: an fdatasync is a durability point


def test_publications_report_deterministic_io_counts(tmp_path, small_session) -> None:
    doc = run(tmp_path, small_session, HEAD.replace("samples = 2", "samples = 3") + """
    [modes.sync]
    operation = "perfsuite.workloads.engine:mailbox_delivery"
    path = "sync"
    [modes.async]
    operation = "perfsuite.workloads.engine:mailbox_delivery"
    path = "async"
    [modes.delta]
    operation = "perfsuite.workloads.engine:diagnostic_append"
    writer = "delta"
    [modes.rewrite]
    operation = "perfsuite.workloads.engine:diagnostic_append"
    writer = "rewrite"
    """)
    keys = ("fsyncs", "fdatasyncs", "dir_fsyncs", "renames", "files_created", "durability_points")
    for mode in ("sync", "async", "delta"):
        counts = [tuple(s["metrics"][k] for k in keys) for s in doc["modes"][mode]["samples"]]
        assert len(counts) == 3 and len(set(counts)) == 1, (mode, counts)  # deterministic per publication
    sync = doc["modes"]["sync"]["samples"][0]["metrics"]
    # format 2 (the session log): one fdatasync of the log, nothing created, renamed or directory-synced
    assert (sync["fdatasyncs"], sync["fsyncs"], sync["dir_fsyncs"], sync["renames"], sync["files_created"]) == (
        1, 0, 0, 0, 0)
    assert {k: sync[k] for k in keys} == {k: doc["modes"]["async"]["samples"][0]["metrics"][k] for k in keys}
    delta = doc["modes"]["delta"]["samples"][0]["metrics"]
    assert (delta["fsyncs"], delta["dir_fsyncs"], delta["renames"], delta["files_created"]) == (0, 0, 0, 0)
    assert delta["durability_points"] == 0
    rewrite = doc["modes"]["rewrite"]["samples"][0]["metrics"]  # an atomic replace per flush (E1)
    assert (rewrite["fsyncs"], rewrite["dir_fsyncs"], rewrite["renames"], rewrite["files_created"]) == (1, 1, 1, 1)


def test_transcript_barrier_reports_its_io_costs(tmp_path) -> None:
    body = """
    name = "tb"
    samples = 1
    warmup = 0
    isolation = "inline"
    [modes.barrier]
    operation = "perfsuite.workloads.engine:transcript_barrier"
    operation_kind = "append+barrier"
    messages = 5
    """
    file = tmp_path / "tb.toml"
    file.write_text(textwrap.dedent(body))
    doc = run_recipe(load_recipe(str(file)), output_dir=tmp_path / "out").document
    counted = doc["modes"]["barrier"]["samples"][0]["metrics"]
    assert counted["fsyncs"] == 5 and counted["bytes_written"] > 5 * 1024  # one barrier per message
