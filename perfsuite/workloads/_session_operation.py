"""What every engine operation shares (SPEC section 4): mode parameters, the layers under the session (recorder,
storage latency), the I/O counts of a publication, and :class:`SessionOperation`, a session opened outside the
measured window whose ``metrics()`` report what it published. ``engine``'s operations and ``_engine_logs``
build on it.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfsuite.engine import Admission, FileSystem, OsFileSystem, PublicationReport, Session, SessionSettings
from perfsuite.engine.testing import DelayModel, FsOp, LatencyFileSystem, RecordingFileSystem
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import Operation, OperationContext
from perfsuite.workloads._params import SESSION, value
from perfsuite.workloads.storage import storage_metrics, storage_model
from perfsuite.workloads.tracing import record_from_environment


def _settings(ctx: OperationContext) -> SessionSettings:
    """The session's settings from the mode's parameters (declared in :data:`SESSION`)."""
    return SessionSettings(
        chunk_size=value(ctx, SESSION, "chunk_size"),
        offload=value(ctx, SESSION, "offload"),
        asynchronous=value(ctx, SESSION, "asynchronous"),
        drain_limit_s=float(value(ctx, SESSION, "drain_limit_s")),
        freeze_loaded=value(ctx, SESSION, "freeze_loaded"),
    )


class _Layers:
    """The sample's I/O stack: the recorder (bytes written, M3) over the real layer, or over the latency
    layer when the recipe simulates a storage profile (M10). Per-sample injected delay from snapshots."""

    def __init__(self, ctx: OperationContext) -> None:
        self.model: DelayModel | None = storage_model(ctx.params, seed=ctx.sample)
        base: FileSystem = OsFileSystem() if self.model is None else LatencyFileSystem(OsFileSystem(), self.model)
        self.fs = RecordingFileSystem(base, keep_data=False)
        self.before = self.model.stats() if self.model is not None else None

    def mark(self) -> None:
        if self.model is not None:
            self.before = self.model.stats()

    def metrics(self, *, measured: bool = True) -> dict[str, Any]:
        """``storage.*`` since :meth:`mark`; with ``measured=False`` (the delays are paid in another
        process) only the profile's name: the counters are not measured, never 0."""
        if self.model is None:
            return {}
        if not measured:
            return {"storage_profile": self.model.name, "storage_counters": "not measured: process offload"}
        return storage_metrics(self.model, self.before)


def _workdir(ctx: OperationContext) -> Path:
    if ctx.workdir is None:
        raise PerfsuiteError(f"mode {ctx.mode}: this operation needs a session fixture")
    return ctx.workdir


_CREATING = os.O_EXCL | os.O_TRUNC


def io_counts(ops: Sequence[FsOp]) -> dict[str, int]:
    """Per-publication costs from the recording I/O layer (E1): file fsyncs, fdatasyncs,
    directory fsyncs, renames (``replace``), their sum (the ordered durability points of the commit), and
    files created (opened with ``O_CREAT`` and ``O_EXCL`` or ``O_TRUNC``: a file written from scratch; an
    append-open of an existing log is not one). Deterministic, so gated exactly."""
    counts = {"fsyncs": 0, "fdatasyncs": 0, "dir_fsyncs": 0, "renames": 0, "files_created": 0}
    for op in ops:
        if op.kind == "fsync":
            counts["fsyncs"] += 1
        elif op.kind == "fdatasync":
            counts["fdatasyncs"] += 1
        elif op.kind == "fsync_dir":
            counts["dir_fsyncs"] += 1
        elif op.kind == "replace":
            counts["renames"] += 1
        elif op.kind == "open" and op.flags & os.O_CREAT and op.flags & _CREATING:
            counts["files_created"] += 1
    counts["durability_points"] = counts["fsyncs"] + counts["fdatasyncs"] + counts["dir_fsyncs"] + counts["renames"]
    return counts


def _text(rng: random.Random, chars: int, label: str) -> str:
    words = ["result", "exit", "status", "stdout", "line", "ok", "error", "path", "file", "test"]
    out: list[str] = [label]
    length = len(label)
    while length < chars:
        word = rng.choice(words)
        out.append(word)
        length += len(word) + 1
    return " ".join(out)[:chars]


class SessionOperation(Operation):
    """Common part: a session opened on the recording layer, idle waits and per-publication metrics.
    Main-thread time per phase of asynchronous jobs comes from the engine's events."""

    def __init__(self, ctx: OperationContext) -> None:
        self.ctx = ctx
        self.rng = random.Random(1000 + ctx.sample)
        self.layers = _Layers(ctx)
        self.fs = self.layers.fs
        record_from_environment()  # --record-trace reaches worker processes this way (no sitecustomize)
        try:
            self.session = Session.open(_workdir(ctx), fs=self.fs, settings=_settings(ctx))
        except Exception as exc:  # a bad fixture is bad input, reported in one line
            raise PerfsuiteError(f"mode {ctx.mode}: cannot open session {ctx.workdir}: {exc}") from None
        self.session.problems.clear()
        self.admissions: list[Admission] = []  # held admissions this operation made, released at close
        if self.session.warm:
            self.session.offload()  # a long-lived session's worker is already running: start it in setup
        self.reports_before = 0
        self.bytes_before = 0
        self.ops_before = 0
        self.appended_before = 0
        self.extra: dict[str, Any] = {}

    def mark(self) -> None:
        """Called at the start of submit: everything after this is the sample's publication."""
        self.reports_before = len(self.session.reports)
        self.layers.mark()
        self.bytes_before = self.fs.bytes_written
        self.ops_before = self.fs.mark()
        self.appended_before = self.session.storage().appended if self.session.profile == "portable" else 0

    async def wait_idle(self) -> None:
        """No pending job, preparation, notification or debounce; then mark (outside the window)."""
        session = self.session
        deadline = time.monotonic() + 60
        while not session.activity().quiet:
            if time.monotonic() > deadline:
                raise PerfsuiteError("the engine did not become idle within 60 s")
            await asyncio.sleep(0.001)
        self.mark()

    def _reports(self) -> list[PublicationReport]:
        return list(self.session.reports)[self.reports_before:]

    def metrics(self) -> Mapping[str, Any]:
        reports = self._reports()
        phases: dict[str, float] = {}
        for report in reports:
            for name, ms in report.phases_ms.items():
                phases[name] = phases.get(name, 0.0) + ms
        main: dict[str, float] = {}  # the asynchronous job's loop-thread time per phase, from its reports
        for report in reports:
            if report.driver == "job":
                for name, ms in report.main_thread_ms.items():
                    main[name] = main.get(name, 0.0) + ms
        # format 2: what the publications appended to the session's logs (records, roll-overs)
        stored = (self.session.storage().appended - self.appended_before) if self.session.profile == "portable" else 0
        ops = self.fs.since(self.ops_before)  # a process offload's worker relays its operations here (E4)
        out: dict[str, Any] = {
            "phases_ms": phases,
            "bytes_written": self.fs.bytes_written - self.bytes_before,
            "publications": len(reports),
            "generations": sum(r.outcome == "adopted" for r in reports),
            "new_chunks": sum(r.new_chunks for r in reports),
            "bytes_stored": stored,
            "staged_bytes": sum(r.staged_bytes for r in reports),
            "hashed_bytes": sum(r.hashed_bytes for r in reports),
            **io_counts(ops),  # fsyncs, dir_fsyncs, renames, files_created: costs
        }
        if main:
            out["main_thread_ms"] = main
        if self.session.drain_ms:
            out["drain_ms"] = sum(self.session.drain_ms)
        out.update(self.layers.metrics(measured=self.session.settings.offload != "process"))
        out.update(self.extra)
        return out

    def close(self) -> None:
        session = self.session
        if session.closed:
            return
        if session.activity().job is not None:
            for admission in self.admissions:
                admission.release()
            session.drain(limit_s=30)
        if session.pending is not None:
            session.abandon_pending()
        session.close()
