"""The profiled process: one recipe mode's operation, repeated, with the profiler on only around the work.

Run as a *script* (scalene needs a file: ``scalene run ... _driver.py --- REQUEST.json``; py-spy
attaches to it by pid). The request (JSON file) names the operation, its params, the fixture, the
iteration count and how the profiler is controlled:

``control = "scalene"``
    the driver runs under ``scalene run --off`` and calls ``scalene_profiler.start()`` just before
    each ``submit`` and ``stop()`` once the acknowledgement arrived: setup (private fixture copies,
    opening the session), idle waits, GC policy and cleanup are not in the profile.
``control = "handshake"``
    for a profiler that attaches from outside (py-spy): per batch, the parent sends ``batch N``, the
    driver prepares N operations (copies, factories, idle waits) and answers ``ready``; the parent
    attaches the profiler and sends ``go``; the driver runs the N operations back to back and answers
    ``done``; the parent stops the profiler; ``exit`` ends the driver.
``control = "none"``
    one batch, no profiler (tests, and the phase table without profiler distortion).

Protocol lines go to the real stdout (one JSON object per line); anything the operation prints goes
to stderr. Each iteration records what a harness sample records that matters here: submission and
acknowledgement time, the max heartbeat gap over submit..ack+tail, GC in the window and the operation's
``metrics()`` **including** ``main_thread_ms`` (loop-thread time per phase of asynchronous jobs).
The final result (iterations, errors) is written to ``request["result"]``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_OUT = sys.stdout


def _say(**message: Any) -> None:
    _OUT.write(json.dumps(message) + "\n")
    _OUT.flush()


def _listen() -> str:
    line = sys.stdin.readline()
    if not line:
        raise SystemExit(3)  # the parent went away
    return line.strip()


class _Scalene:
    """scalene's in-process switch (the driver runs under ``scalene run --off``)."""

    def __init__(self) -> None:
        from scalene import scalene_profiler

        self.profiler = scalene_profiler

    def on(self) -> None:
        self.profiler.start()

    def off(self) -> None:
        self.profiler.stop()


class _Nothing:
    def on(self) -> None:
        pass

    def off(self) -> None:
        pass


def _numbers(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """``metrics()`` made JSON-safe: numbers, strings and one level of nested number mappings."""
    out: dict[str, Any] = {}
    for key, value in (raw or {}).items():
        if isinstance(value, Mapping):
            out[str(key)] = {
                str(k): float(v) for k, v in value.items() if isinstance(v, int | float) and not isinstance(v, bool)
            }
        elif isinstance(value, bool | int | float | str):
            out[str(key)] = value
    return out


class _Prepared:
    __slots__ = ("op", "root", "setup_ms")

    def __init__(self, op: Any, root: Path, setup_ms: float) -> None:
        self.op = op
        self.root = root
        self.setup_ms = setup_ms


async def _prepare(request: Mapping[str, Any], factory: Any, index: int) -> _Prepared:
    from perfsuite.harness import OperationContext, call_optional, create_operation, prepare_workdir

    root = Path(tempfile.mkdtemp(prefix=f"profile-{index}-", dir=request.get("work_root")))
    started = time.perf_counter()
    fixture = Path(request["fixture"]) if request.get("fixture") else None
    workdir, scratch = prepare_workdir(fixture, root, bool(request.get("sync_after_copy", True)))
    ctx = OperationContext(
        workdir=workdir,
        params=dict(request.get("params") or {}),
        mode=str(request["mode"]),
        sample=index,
        scratch=scratch,
        kind="sample",
    )
    op = await create_operation(factory, ctx)
    await call_optional(op, "wait_idle")
    return _Prepared(op, root, (time.perf_counter() - started) * 1e3)


def _resolve(done: asyncio.Future[None]) -> None:
    """Resolve ``done`` unless it already is (the acknowledgement may arrive after a timeout settled it)."""
    if not done.done():
        done.set_result(None)


async def _iteration(request: Mapping[str, Any], prepared: _Prepared, switch: Any) -> tuple[int, int, int]:
    """Submit, wait for the acknowledgement and the window tail: (start, submitted, acknowledged) ns.
    Nothing else happens here, so a profiler attached from outside sees the operation, not the driver."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    acked: dict[str, Any] = {"ns": 0, "exc": None}

    def ack(exc: BaseException | None = None) -> None:
        if acked["ns"]:
            return
        acked["ns"] = time.perf_counter_ns()
        acked["exc"] = exc
        loop.call_soon_threadsafe(_resolve, done)

    switch.on()
    start_ns = time.perf_counter_ns()
    try:
        prepared.op.submit(ack)
        submitted_ns = time.perf_counter_ns()
        await asyncio.wait_for(done, float(request.get("ack_timeout_s", 30.0)))
    finally:
        switch.off()
    if acked["exc"] is not None:
        exc = acked["exc"]
        raise RuntimeError(f"the operation acknowledged a failure: {type(exc).__name__}: {exc}")
    end_ns = int(acked["ns"]) + round(float(request.get("tail_ms", 12.0)) * 1e6)
    remaining = end_ns - time.perf_counter_ns()
    if remaining > 0:
        await asyncio.sleep(remaining / 1e9)
    return start_ns, submitted_ns, int(acked["ns"])


async def _record(
    request: Mapping[str, Any],
    prepared: _Prepared,
    index: int,
    times: tuple[int, int, int],
    heartbeat: Any,
    recorder: Any,
) -> dict[str, Any]:
    """One iteration's record, computed after the batch (max gap, GC, ``metrics()``)."""
    from perfsuite.harness import call_optional

    start_ns, submitted_ns, ack_ns = times
    end_ns = ack_ns + round(float(request.get("tail_ms", 12.0)) * 1e6)
    await heartbeat.wait_past(end_ns, timeout_s=5.0)
    window = heartbeat.window(start_ns, end_ns)
    gc = recorder.window(start_ns, end_ns, (window.max_gap_start_ns, window.max_gap_end_ns)).to_dict(start_ns)
    metrics = _numbers(await call_optional(prepared.op, "metrics"))
    return {
        "index": index,
        "setup_ms": round(prepared.setup_ms, 3),
        "submission_ms": round((submitted_ns - start_ns) / 1e6, 6),
        "ack_ms": round((ack_ns - start_ns) / 1e6, 6),
        "max_gap_ms": round(window.max_gap_ms, 6),
        "gc": gc,
        "phases_ms": metrics.pop("phases_ms", {}),
        "main_thread_ms": metrics.pop("main_thread_ms", None),
        "metrics": metrics,
    }


async def _close(prepared: list[_Prepared]) -> None:
    from perfsuite.harness import call_optional

    for item in prepared:
        try:
            await call_optional(item.op, "close")
        finally:
            shutil.rmtree(item.root, ignore_errors=True)


async def _batch(
    request: Mapping[str, Any], factory: Any, count: int, first: int, switch: Any, handshake: bool
) -> list[dict[str, Any]]:
    from perfsuite.harness import GcRecorder, Heartbeat, apply_gc_policy

    prepared: list[_Prepared] = []
    try:
        for i in range(count):
            prepared.append(await _prepare(request, factory, first + i))
        records = []
        with GcRecorder() as recorder:
            async with Heartbeat(float(request.get("heartbeat_ms", 5.0))) as heartbeat:
                await asyncio.sleep(0.02)  # a few ticks before the first window
                if handshake:
                    _say(event="ready", pid=os.getpid(), iterations=count)
                    if _listen() != "go":
                        raise SystemExit(3)
                settle = float(request.get("settle_ms", 20.0)) / 1e3
                times = []
                for item in prepared:
                    await apply_gc_policy(str(request.get("gc", "natural")), settle)
                    times.append(await _iteration(request, item, switch))
                if handshake:  # the profiler stops before anything else runs (records, closing, cleanup)
                    _say(event="done", iterations=count)
                    if _listen() != "close":
                        raise SystemExit(3)
                for i, (item, t) in enumerate(zip(prepared, times)):
                    records.append(await _record(request, item, first + i, t, heartbeat, recorder))
        return records
    finally:
        await _close(prepared)


async def _serve(request: Mapping[str, Any]) -> dict[str, Any]:
    from perfsuite.harness import resolve_operation

    factory = resolve_operation(str(request["operation"]))
    control = request.get("control", "none")
    if control == "scalene":
        return {"iterations": await _batch(request, factory, int(request["iterations"]), 0, _Scalene(), False)}
    if control == "none":
        return {"iterations": await _batch(request, factory, int(request["iterations"]), 0, _Nothing(), False)}
    records: list[dict[str, Any]] = []
    batches = 0
    while True:
        command = _listen()
        if command == "exit":
            return {"iterations": records, "batches": batches}
        word, _, number = command.partition(" ")
        if word != "batch" or not number.isdigit():
            raise SystemExit(3)
        batch = await _batch(request, factory, int(number), len(records), _Nothing(), True)
        records.extend(batch)
        batches += 1
        _say(event="closed")


def main(argv: list[str]) -> int:
    """``_driver.py REQUEST.json``; see the module docstring."""
    global _OUT
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]  # never import siblings as top-level
    request = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    for entry in reversed(request.get("sys_path", [])):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    _OUT = sys.stdout
    sys.stdout = sys.stderr  # the operation's prints must not corrupt the protocol
    result: dict[str, Any]
    status = 0
    try:
        result = asyncio.run(_serve(request))
    except SystemExit:
        raise
    except BaseException as exc:  # reported in one line by the parent
        text = str(exc).strip().splitlines()
        result = {"error": f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__}
        status = 2
    Path(request["result"]).write_text(json.dumps(result, allow_nan=False), encoding="utf-8")
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
