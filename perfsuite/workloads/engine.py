"""Operations that drive the engine for the recipes of SPEC section 4 (harness protocol: see
:mod:`perfsuite.harness._operation`).

Each factory opens the sample's private session copy on the recording I/O layer (bytes written per
publication, M3) *outside* the measured window, prepares the edit the recipe adds, and returns an
operation whose ``submit`` is exactly the call the recipe compares (synchronous writer or asynchronous
job). Mode parameters come from the recipe; every one has a default documented here. Two are run conditions
(SPEC M10) every operation here accepts: ``storage`` (a storage profile: the layer under the recorder
becomes the engine's latency layer with that profile, seeded by the sample index so every mode of a
round draws the same delays) and ``freeze_loaded`` (``SessionSettings(freeze_loaded=True)``:
``gc.freeze()`` once the session is open).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from perfsuite.engine import (
    Admission,
    DelayModel,
    DiagnosticLog,
    DrainTimeout,
    Event,
    FileSystem,
    FsOp,
    FullRewriteLog,
    LatencyFileSystem,
    Message,
    OsFileSystem,
    PhaseFinished,
    PublicationReport,
    PublicationSubmitted,
    RecordingFileSystem,
    Session,
    SessionSettings,
    TranscriptLog,
)
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import AckCallback, Operation, OperationContext
from perfsuite.workloads.storage import storage_metrics, storage_model
from perfsuite.workloads.tracing import record_from_environment

__all__ = [
    "checkpoint",
    "diagnostic_append",
    "drain_after_submit",
    "io_counts",
    "mailbox_delivery",
    "registry_save",
    "stalled_admission",
    "transcript_barrier",
]


def _param(ctx: OperationContext, key: str, default: Any, kind: type | tuple[type, ...]) -> Any:
    value = ctx.params.get(key, default)
    if isinstance(value, bool) and kind is not bool:
        raise PerfsuiteError(f"mode {ctx.mode}: {key}: expected {getattr(kind, '__name__', kind)}, got {value!r}")
    if not isinstance(value, kind):
        raise PerfsuiteError(f"mode {ctx.mode}: {key}: expected {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def _settings(ctx: OperationContext) -> SessionSettings:
    return SessionSettings(
        chunk_size=_param(ctx, "chunk_size", 64 * 1024, int),
        offload=_param(ctx, "offload", "thread", str),
        asynchronous=_param(ctx, "asynchronous", True, bool),
        drain_limit_s=float(_param(ctx, "drain_limit_s", 30.0, (int, float))),
        freeze_loaded=_param(ctx, "freeze_loaded", False, bool),
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
    """Per-publication costs from the recording I/O layer (E1, issue 15): file fsyncs, directory fsyncs,
    renames (``replace``) and files created (opened with ``O_CREAT`` and ``O_EXCL`` or ``O_TRUNC``: a file
    written from scratch; an append-open of an existing log is not one). Deterministic, so gated exactly."""
    counts = {"fsyncs": 0, "dir_fsyncs": 0, "renames": 0, "files_created": 0}
    for op in ops:
        if op.kind == "fsync":
            counts["fsyncs"] += 1
        elif op.kind == "fsync_dir":
            counts["dir_fsyncs"] += 1
        elif op.kind == "replace":
            counts["renames"] += 1
        elif op.kind == "open" and op.flags & os.O_CREAT and op.flags & _CREATING:
            counts["files_created"] += 1
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
    Main-thread time per phase of asynchronous jobs comes from the engine's events (issue 19)."""

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
        self.job_main_ms: dict[str, dict[str, float]] = {}  # job publication id -> phase -> main-thread ms
        self.admissions: list[Admission] = []  # held admissions this operation made, released at close
        self.session.observers.subscribe(self._on_event)
        if self.session.warm:
            self.session.offload()  # a long-lived session's worker is already running: start it in setup
        self.reports_before = 0
        self.bytes_before = 0
        self.ops_before = 0
        self.objects_before: set[str] = set()
        self.extra: dict[str, Any] = {}

    def mark(self) -> None:
        """Called at the start of submit: everything after this is the sample's publication."""
        self.reports_before = len(self.session.reports)
        self.layers.mark()
        self.bytes_before = self.fs.bytes_written
        self.ops_before = self.fs.mark()
        self.objects_before = set(self.session.store.known_objects)

    def _on_event(self, event: Event) -> None:
        """Engine events: a job's freeze and each phase's main-thread time (what ``main_thread_ms`` sums)."""
        if isinstance(event, PublicationSubmitted):
            if event.driver == "job":
                self.job_main_ms[event.publication] = {"freeze": event.freeze_ms}
        elif isinstance(event, PhaseFinished):
            phases = self.job_main_ms.get(event.publication)
            if phases is not None:
                phases[event.phase] = phases.get(event.phase, 0.0) + event.main_ms

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
            for name, value in report.phases_ms.items():
                phases[name] = phases.get(name, 0.0) + value
        main: dict[str, float] = {}
        freeze = [self.job_main_ms[r.id]["freeze"] for r in reports if r.id in self.job_main_ms]
        for report in reports:
            for name, value in self.job_main_ms.get(report.id, {}).items():
                if name != "freeze":
                    main[name] = main.get(name, 0.0) + value
        if freeze:
            main["freeze"] = sum(freeze)
        stored = sum(self._object_size(d) for d in set(self.session.store.known_objects) - self.objects_before)
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
            **io_counts(ops),  # fsyncs, dir_fsyncs, renames, files_created: costs (issue 15)
        }
        if main:
            out["main_thread_ms"] = main
        if self.session.drain_ms:
            out["drain_ms"] = sum(self.session.drain_ms)
        out.update(self.layers.metrics(measured=self.session.settings.offload != "process"))
        out.update(self.extra)
        return out

    def _object_size(self, digest: str) -> int:
        try:
            return os.path.getsize(self.session.store.object_path(digest))
        except OSError:
            return 0

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


# -- mailbox delivery (seed decision history: warm-local asynchronous mailbox acknowledgement) ---------

class _MailboxDelivery(SessionOperation):
    def __init__(self, ctx: OperationContext) -> None:
        super().__init__(ctx)
        self.asynchronous = _param(ctx, "path", "async", str) == "async"
        self.to = _param(ctx, "to", "root", str)
        self.body = _text(self.rng, _param(ctx, "result_chars", 4000, int), f"execution result {ctx.sample}:")
        self.drain_after = _param(ctx, "drain_after_submit", False, bool)

    def submit(self, ack: AckCallback) -> None:
        if not self.asynchronous:
            self.session.append_mail(self.to, self.body, sender="background", kind="completion", ack=ack)
            return
        self.session.deliver_background(self.to, self.body, sender="background", ack=ack)
        if self.drain_after:
            self.session.drain()


def mailbox_delivery(ctx: OperationContext) -> Operation:
    """One background command's 4000-character result delivered to a mailbox. Params: ``path`` =
    "sync" (the synchronous writer, Session.append_mail) or "async" (Session.deliver_background),
    ``result_chars`` (4000), ``to`` ("root")."""
    return _MailboxDelivery(ctx)


def drain_after_submit(ctx: OperationContext) -> Operation:
    """Asynchronous delivery followed at once by a synchronous drain (E5): drain wait, ack, max gap."""
    params = {**ctx.params, "path": "async", "drain_after_submit": True}
    return _MailboxDelivery(_with_params(ctx, params))


def _with_params(ctx: OperationContext, params: Mapping[str, Any]) -> OperationContext:
    return OperationContext(ctx.workdir, params, ctx.mode, ctx.sample, ctx.scratch, ctx.kind)


class _StalledAdmission(SessionOperation):
    def __init__(self, ctx: OperationContext) -> None:
        super().__init__(ctx)
        self.limit_s = float(_param(ctx, "drain_limit_s", 0.25, (int, float)))
        self.release_after_s = float(_param(ctx, "release_after_ms", 100, (int, float))) / 1e3
        self.body = _text(self.rng, _param(ctx, "result_chars", 4000, int), "stalled result:")
        self.acks = 0

    def submit(self, ack: AckCallback) -> None:
        admission = Admission(released=False)
        self.admissions.append(admission)

        def counted(error: BaseException | None) -> None:
            self.acks += 1
            ack(error)

        self.session.deliver_background("root", self.body, sender="background", ack=counted, admission=admission)
        started = time.perf_counter()
        try:
            self.session.drain(limit_s=self.limit_s)
            signalled = False
        except DrainTimeout:
            signalled = True
        self.extra["time_to_signal_ms"] = (time.perf_counter() - started) * 1e3
        self.extra["signalled"] = int(signalled)
        self.extra["job_retained"] = int(self.session.activity().job is not None and self.acks == 0)
        asyncio.get_running_loop().call_later(self.release_after_s, admission.release)

    def metrics(self) -> Mapping[str, Any]:
        out = dict(super().metrics())
        out["acknowledgements"] = self.acks
        return out


def stalled_admission(ctx: OperationContext) -> Operation:
    """E5: an asynchronous delivery whose admission is held; a synchronous drain with a 0.25 s limit
    signals and leaves the job accepted; the admission is released ``release_after_ms`` later."""
    return _StalledAdmission(ctx)


# -- checkpoints (root, agent, chunking, offload) ------------------------------------------------------

class _Checkpoint(SessionOperation):
    def __init__(self, ctx: OperationContext) -> None:
        super().__init__(ctx)
        self.asynchronous = _param(ctx, "path", "async", str) == "async"
        target = _param(ctx, "conversation", "root", str)
        self.conversation = self._largest_agent() if target == "agent" else target
        self.extra["conversation_bytes"] = self.session.conversation(self.conversation).size
        self.count = _param(ctx, "checkpoints", 1, int)
        self.chars = _param(ctx, "message_chars", 2000, int)
        self._match_layout()
        self._edit(0)

    def _match_layout(self) -> None:
        """A fixture committed with another chunk size would make the first measured checkpoint a
        full re-chunking. Do that conversion here, in setup, outside the window."""
        chunk_size = self.session.settings.chunk_size
        manifest = self.session.manifest
        entry = manifest.artifacts.get(f"conversations/{self.conversation}.jsonl") if manifest else None
        if entry is None:
            return
        whole = len(entry.chunks) <= 1
        aligned = all(c.size == chunk_size for c in entry.chunks[:-1]) and entry.chunks[-1].size <= chunk_size
        if (chunk_size <= 0 and whole) or (chunk_size > 0 and aligned and (entry.size <= chunk_size or not whole)):
            return
        self.session.buffers[self.conversation].dirty_from = 0
        self.session.checkpoint(self.conversation)
        self.extra["layout_converted"] = 1

    def _largest_agent(self) -> str:
        agents = [c for c in self.session.buffers if c != "root"]
        if not agents:
            raise PerfsuiteError(f"mode {self.ctx.mode}: the fixture has no agent conversation")
        return max(agents, key=lambda c: (self.session.buffers[c].size, c))

    def _edit(self, n: int) -> None:
        body = _text(self.rng, self.chars, f"streamed turn {self.ctx.sample}.{n}:")
        self.session.add_message(self.conversation, Message("assistant", body, 1_800_000_000.0 + n))

    def submit(self, ack: AckCallback) -> None:
        if self.count > 1:
            asyncio.get_running_loop().create_task(self._many(ack))
            return
        if self.asynchronous:
            self.session.request_checkpoint(self.conversation, ack=ack)
        else:
            self.session.checkpoint(self.conversation)
            ack(None)

    async def _many(self, ack: AckCallback) -> None:
        try:
            for n in range(self.count):
                if n:
                    self._edit(n)
                if self.asynchronous:
                    done = asyncio.get_running_loop().create_future()
                    self.session.request_checkpoint(self.conversation,
                                                    ack=lambda e, d=done: d.done() or d.set_result(e))
                    await done
                else:
                    self.session.checkpoint(self.conversation)
                    await asyncio.sleep(0)
        except Exception as exc:
            ack(exc)
            return
        ack(None)

    def metrics(self) -> Mapping[str, Any]:
        out = dict(super().metrics())
        if self.count > 1:
            out["bytes_written_per_checkpoint"] = out["bytes_written"] / self.count
            out["bytes_stored_per_checkpoint"] = out["bytes_stored"] / self.count
        out["objects_dir_bytes"] = sum(
            entry.stat().st_size for entry in os.scandir(self.session.store.path("objects")) if entry.is_file())
        return out


def checkpoint(ctx: OperationContext) -> Operation:
    """A transcript checkpoint after one streamed turn. Params: ``path`` "sync" (Session.checkpoint) or
    "async" (Session.request_checkpoint), ``conversation`` "root" or "agent" (the largest agent),
    ``message_chars`` (2000), ``checkpoints`` (1; more run back to back, one turn each),
    ``chunk_size`` (65536; 0 = whole artifact), ``offload`` ("thread" or "process")."""
    return _Checkpoint(ctx)


# -- registry save (sidecar-only vs the seed's full save) ----------------------------------------------

class _RegistrySave(SessionOperation):
    def __init__(self, ctx: OperationContext) -> None:
        super().__init__(ctx)
        self.kind = _param(ctx, "save", "sidecar-only", str)
        if self.kind not in ("sidecar-only", "full"):
            raise PerfsuiteError(f"mode {ctx.mode}: save: expected sidecar-only or full, got {self.kind!r}")
        agents = sorted(a for a in self.session.sidecar.agents)
        if not agents:
            raise PerfsuiteError(f"mode {ctx.mode}: the fixture has no agents to observe")
        self.agent = agents[ctx.sample % len(agents)]

    def submit(self, ack: AckCallback) -> None:
        current = self.session.sidecar.agents[self.agent].get("activity")
        self.session.set_activity(self.agent, "permission-blocked" if current != "permission-blocked" else "running")
        if self.kind == "sidecar-only":
            self.session.save_registry()
        else:
            self.session.full_save(rescan=True)
        ack(None)


def registry_save(ctx: OperationContext) -> Operation:
    """One observational activity change saved. Params: ``save`` = "sidecar-only" (E7) or "full" (the
    seed's rejected full save: every conversation and attachment restaged and rehashed)."""
    return _RegistrySave(ctx)


# -- diagnostic logs (E8) ------------------------------------------------------------------------------

class _DiagnosticAppend(Operation):
    def __init__(self, ctx: OperationContext) -> None:
        workdir = _workdir(ctx)
        name = _param(ctx, "log", "telemetry.jsonl", str)
        directory = _find_log_dir(workdir, name)
        self.layers = _Layers(ctx)
        self.fs = self.layers.fs
        writer = _param(ctx, "writer", "delta", str)
        if writer not in ("delta", "rewrite"):
            raise PerfsuiteError(f"mode {ctx.mode}: writer: expected delta or rewrite, got {writer!r}")
        self.log: DiagnosticLog | FullRewriteLog = (
            DiagnosticLog(directory, fs=self.fs) if writer == "delta" else FullRewriteLog(directory, fs=self.fs))
        self.size_before = os.path.getsize(directory / name)
        rng = random.Random(ctx.sample)
        for i in range(_param(ctx, "records", 20, int)):
            self.log.log(name, {"seq": i, "event": rng.choice(["tool", "render", "publish"]),
                                "ms": round(rng.random() * 50, 3), "detail": "d" * rng.randint(40, 200)})
        self.delta = 0
        self.written = 0
        self.flush_bytes = 0
        self.counts: dict[str, int] = {}
        self.path = directory / name

    def submit(self, ack: AckCallback) -> None:
        mark, ops = self.fs.bytes_written, self.fs.mark()
        self.layers.mark()
        self.written = self.log.flush()
        self.delta = os.path.getsize(self.path) - self.size_before
        self.flush_bytes = self.fs.bytes_written - mark
        self.counts = io_counts(self.fs.since(ops))
        ack(None)

    def metrics(self) -> Mapping[str, Any]:
        return {"bytes_written": self.flush_bytes, "delta_bytes": self.delta, "log_bytes": self.size_before,
                **self.counts, **self.layers.metrics()}

    def close(self) -> None:
        if isinstance(self.log, DiagnosticLog):
            self.log.close()


def _find_log_dir(workdir: Path, name: str) -> Path:
    for candidate in (workdir, workdir / "logs"):
        if (candidate / name).is_file():
            return candidate
    matches = sorted(workdir.rglob(name))
    if not matches:
        raise PerfsuiteError(f"no diagnostic log {name!r} under {workdir}")
    return matches[0].parent


def diagnostic_append(ctx: OperationContext) -> Operation:
    """One flush of ``records`` (20) new telemetry records to the fixture's log. Params: ``writer`` =
    "delta" (E8 pinned append) or "rewrite" (the full-rewrite baseline), ``log`` ("telemetry.jsonl")."""
    return _DiagnosticAppend(ctx)


# -- the transcript log by length (E2) ------------------------------------------------------------------

class _TranscriptBarrier(Operation):
    """Builds a transcript of ``messages`` messages of 1-4 KB in the sample's scratch directory, yielding
    to the loop after every operation, and reports latency by transcript length."""

    def __init__(self, ctx: OperationContext) -> None:
        if ctx.scratch is None:
            raise PerfsuiteError(f"mode {ctx.mode}: needs a scratch directory")
        self.kind = _param(ctx, "operation_kind", "append", str)
        if self.kind not in ("append", "append+barrier", "rewrite"):
            raise PerfsuiteError(f"mode {ctx.mode}: operation_kind: expected append, append+barrier or rewrite")
        self.messages = _param(ctx, "messages", 6000, int)
        self.rewrite_at = [n for n in (100, 1000, 3000, 6000) if n <= self.messages]
        self.dir = ctx.scratch / "transcript"
        self.layers = _Layers(ctx)
        self.rng = random.Random(ctx.sample)
        self.latencies: list[int] = []
        self.barriers: list[int] = []
        self.rewrites: dict[int, float] = {}
        self.sizes: dict[int, int] = {}
        self.final_bytes: int | None = None

    @staticmethod
    def _size(log: TranscriptLog) -> int:
        """Bytes of the transcript's files (the log's directory holds only its own files here)."""
        return sum(entry.stat().st_size for entry in os.scandir(log.logdir) if entry.is_file())

    def submit(self, ack: AckCallback) -> None:
        asyncio.get_running_loop().create_task(self._run(ack))

    async def _run(self, ack: AckCallback) -> None:
        try:
            log = TranscriptLog.open(self.dir, fs=self.layers.fs)
            barrier = self.kind == "append+barrier"
            for i in range(self.messages):
                message = Message("user" if i % 2 else "assistant", "m" * self.rng.randint(1024, 4096), float(i))
                start = time.perf_counter_ns()
                log.append(message)
                if barrier:
                    log.write(sync=True)
                self.latencies.append(time.perf_counter_ns() - start)
                if self.kind == "append" and i % 100 == 99:
                    start = time.perf_counter_ns()
                    log.write(sync=True)
                    self.barriers.append(time.perf_counter_ns() - start)
                if self.kind == "rewrite" and i + 1 in self.rewrite_at:
                    self.sizes[i + 1] = self._size(log)  # what the atomic rewrite rewrites
                    start = time.perf_counter_ns()
                    log.edit(i // 2, Message("user", "edited", 0.0))
                    self.rewrites[i + 1] = (time.perf_counter_ns() - start) / 1e6
                await asyncio.sleep(0)
            self.final_bytes = self._size(log)
            log.close()
        except Exception as exc:
            ack(exc)
            return
        ack(None)

    def metrics(self) -> Mapping[str, Any]:
        lat = np.array(self.latencies, dtype=float) / 1e3
        out: dict[str, Any] = {}
        if len(lat) >= 200:
            first, last = lat[:100], lat[-100:]
            n = self.messages
            out.update({
                "p50_us_at_100": float(np.percentile(first, 50)), "p99_us_at_100": float(np.percentile(first, 99)),
                f"p50_us_at_{n}": float(np.percentile(last, 50)), f"p99_us_at_{n}": float(np.percentile(last, 99)),
            })
            out["p99_ratio_last_to_first"] = out[f"p99_us_at_{n}"] / max(out["p99_us_at_100"], 1e-9)
        if self.barriers:
            out["barrier_p50_us"] = float(np.percentile(np.array(self.barriers) / 1e3, 50))
        for n, ms in self.rewrites.items():
            out[f"rewrite_ms_at_{n}"] = ms
        for n, size in self.sizes.items():
            out[f"rewrite_bytes_at_{n}"] = size  # results/README.md quotes these sizes (issue 17 item 8)
        out["transcript_bytes"] = self.final_bytes
        out["bytes_written"] = self.layers.fs.bytes_written  # the recording layer: costs
        out.update(io_counts(self.layers.fs.ops))
        out.update(self.layers.metrics())
        return out


def transcript_barrier(ctx: OperationContext) -> Operation:
    """E2 latency by transcript length. Params: ``operation_kind`` = "append", "append+barrier" or "rewrite";
    ``messages`` (6000). Bytes written and the I/O counts of the whole run are reported as costs."""
    return _TranscriptBarrier(ctx)


#: run conditions (SPEC M10) these operations apply; the harness refuses a recipe that sets a condition
#: one of its modes' operations would silently ignore
_CONDITIONS = frozenset({"storage"})
for _factory in (checkpoint, diagnostic_append, drain_after_submit, mailbox_delivery, registry_save,
                 stalled_admission, transcript_barrier):
    _factory.conditions = _CONDITIONS  # type: ignore[attr-defined]
