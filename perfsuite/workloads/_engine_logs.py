"""Operations on the engine's logs (SPEC section 4): a diagnostic log append (E8) and the transcript log by length
(E2). Re-exported by ``engine``, where recipes name them.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from perfsuite.engine import (
    DiagnosticLog,
    FullRewriteLog,
    Message,
    TranscriptLog,
)
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import AckCallback, Operation, OperationContext, Param, accepts
from perfsuite.workloads._params import FREEZE, LABELS, count, value
from perfsuite.workloads._session_operation import _Layers, _workdir, io_counts

#: the parameters each operation declares; neither opens a session (FREEZE)
DIAGNOSTIC = {**FREEZE, "log": Param(str, "telemetry.jsonl", "the fixture's log the records are flushed to"),
              "writer": Param(str, "delta", "delta: E8's pinned append; rewrite: the full-rewrite baseline",
                              choices=("delta", "rewrite")),
              "records": count("records", 20, "records flushed by the one measured flush")}
TRANSCRIPT = {**FREEZE, **LABELS,
              "operation_kind": Param(str, "append", "append (a barrier every 100), append+barrier or rewrite",
                                      choices=("append", "append+barrier", "rewrite")),
              "messages": count("messages", 6000, "messages appended to the transcript")}

# -- diagnostic logs (E8) ------------------------------------------------------------------------------

class _DiagnosticAppend(Operation):
    def __init__(self, ctx: OperationContext) -> None:
        workdir = _workdir(ctx)
        name = value(ctx, DIAGNOSTIC, "log")
        directory = _find_log_dir(workdir, name)
        self.layers = _Layers(ctx)
        self.fs = self.layers.fs
        writer = value(ctx, DIAGNOSTIC, "writer")
        self.log: DiagnosticLog | FullRewriteLog = (
            DiagnosticLog(directory, fs=self.fs) if writer == "delta" else FullRewriteLog(directory, fs=self.fs))
        self.size_before = os.path.getsize(directory / name)
        rng = random.Random(ctx.sample)
        for i in range(value(ctx, DIAGNOSTIC, "records")):
            self.log.log(name, {"seq": i, "event": rng.choice(["tool", "render", "publish"]),
                                "ms": round(rng.random() * 50, 3), "detail": "d" * rng.randint(40, 200)})
        self.delta = 0
        self.written = 0
        self.flush_bytes = 0
        self.ops_start = self.fs.mark()  # the flush's operations follow it in the recorder's log (see wait_idle)
        self.path = directory / name

    async def wait_idle(self) -> None:
        """Outside the window: where the flush's operations will start (counted in metrics, so the
        window allocates nothing for them, M3)."""
        self.ops_start = self.fs.mark()

    def submit(self, ack: AckCallback) -> None:
        mark = self.fs.bytes_written
        self.layers.mark()
        self.written = self.log.flush()
        self.delta = os.path.getsize(self.path) - self.size_before
        self.flush_bytes = self.fs.bytes_written - mark
        ack(None)

    def metrics(self) -> Mapping[str, Any]:
        return {"bytes_written": self.flush_bytes, "delta_bytes": self.delta, "log_bytes": self.size_before,
                **io_counts(self.fs.since(self.ops_start)),
                **self.layers.metrics()}

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


@accepts(**DIAGNOSTIC)
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
        self.kind = value(ctx, TRANSCRIPT, "operation_kind")
        self.messages = value(ctx, TRANSCRIPT, "messages")
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
            out[f"rewrite_bytes_at_{n}"] = size  # results/README.md quotes these sizes
        out["transcript_bytes"] = self.final_bytes
        out["bytes_written"] = self.layers.fs.bytes_written  # the recording layer: costs
        out.update(io_counts(self.layers.fs.ops))
        out.update(self.layers.metrics())
        return out


@accepts(**TRANSCRIPT)
def transcript_barrier(ctx: OperationContext) -> Operation:
    """E2 latency by transcript length. Params: ``operation_kind`` = "append", "append+barrier" or "rewrite";
    ``messages`` (6000). Bytes written and the I/O counts of the whole run are reported as costs."""
    return _TranscriptBarrier(ctx)
