"""M4/M5: one measured sample: private fixture copy, idle wait, GC policy, window, record.

This is the code path shared by ``inline`` isolation (called in the run's own loop) and ``process``
isolation (called by :mod:`perfsuite.harness._worker` in a fresh interpreter). Its input is a
JSON-able :class:`SampleSpec`; its output a :class:`SampleRecord` whose :meth:`~SampleRecord.to_dict`
is the ``samples[]`` entry of the results document (M8).
"""

from __future__ import annotations

import asyncio
import gc
import math
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError
from perfsuite.harness._gc import GcRecorder, GcWindow, apply_gc_policy
from perfsuite.harness._heap import LiveHeap, build_heap, probe_full_collection
from perfsuite.harness._heartbeat import GapWindow, Heartbeat
from perfsuite.harness._operation import (
    OperationContext,
    OperationFactory,
    SampleKind,
    call_optional,
    create_operation,
    resolve_operation,
)
from perfsuite.harness._params import ReadRecorder, unread_keys
from perfsuite.harness._stalls import StallWindow, stall_monitor_of

__all__ = ["HEAP_SEED", "SampleFailed", "SampleRecord", "SampleSpec", "measure_sample", "prepare_workdir"]

#: M10: the live heap of sample i is built with seed HEAP_SEED + i (every mode of a round gets the same)
HEAP_SEED = 20_000


class SampleFailed(PerfsuiteError):
    """A sample could not be measured (no acknowledgement in time, failure acknowledged, hook raised)."""


@dataclass(frozen=True, slots=True)
class SampleSpec:
    """Everything one sample needs, JSON-able so a worker process can receive it."""

    recipe: str
    mode: str
    index: int
    kind: str
    operation: str
    params: Mapping[str, Any]
    fixture: str | None
    work_root: str | None
    heartbeat_ms: float = 5.0
    gc: str = "collect-before"
    tail_ms: float = 12.0
    ack_timeout_s: float = 30.0
    settle_ms: float = 20.0
    sync_after_copy: bool = True
    heap: int = 0  # M10: live objects held through a latency sample (see perfsuite.harness._heap)
    warmups: int = 0  # M4: discarded samples the worker measures first, each on its own copy (Recipe.worker_warmup)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (for the worker's stdin)."""
        data = asdict(self)
        data["params"] = dict(self.params)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SampleSpec:
        """Inverse of :meth:`to_dict`."""
        return cls(**data)

    @property
    def label(self) -> str:
        """``recipe/mode sample N`` (or ``control window N``) for one-line errors."""
        if self.kind == "control":
            return f"{self.recipe}: control window {self.index}"
        what = "warm-up" if self.kind == "warmup" else "sample"
        return f"{self.recipe}: {self.mode} {what} {self.index}"


def _finite(value: object) -> bool:
    """A number that JSON can hold: not a bool, not NaN, not an infinity (and not too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer beyond a float's range
        return False


def split_metrics(
    raw: Mapping[str, object] | None,
) -> tuple[dict[str, float], float | None, dict[str, float | bool | None], dict[str, str]]:
    """M5: split ``metrics()`` into phases, drain time, numeric metrics and string labels.

    A metric reported as ``None`` is kept as null: the operation says it could not measure it (never 0). So
    is a NaN or an infinity (results hold finite numbers only; a NaN used to fail the results write
    with an "unexpected" error); a phase or drain time that is not finite is left out."""
    phases: dict[str, float] = {}
    drain: float | None = None
    numbers: dict[str, float | bool | None] = {}
    labels: dict[str, str] = {}
    for key, value in (raw or {}).items():
        key = str(key)
        if key == "phases_ms" and isinstance(value, Mapping):
            phases = {str(k): float(v) for k, v in value.items() if _finite(v)}
        elif key == "drain_ms":
            drain = float(value) if _finite(value) else None  # type: ignore[arg-type]
        elif value is None or isinstance(value, bool):
            numbers[key] = value
        elif isinstance(value, int | float):
            numbers[key] = value if _finite(value) else None
        elif isinstance(value, str):
            labels[key] = value
        elif isinstance(value, Mapping):  # nested numbers (e.g. main_thread_ms) flatten to "key.sub"
            for sub, number in value.items():
                if isinstance(number, int | float) and not isinstance(number, bool):
                    numbers[f"{key}.{sub}"] = float(number) if _finite(number) else None
    return phases, drain, numbers, labels


@dataclass(frozen=True, slots=True)
class SampleRecord:
    """M5: what one sample reports. Times in ms from the window start unless named otherwise."""

    index: int
    mode: str
    kind: str
    started_at: float
    setup_ms: float
    submission_ms: float | None  # None: not measured (a live window of `perfsuite watch` submits nothing, M11)
    ack_ms: float | None
    window_ms: float
    heartbeat: GapWindow
    gc: GcWindow
    phases_ms: Mapping[str, float] = field(default_factory=dict)
    drain_ms: float | None = None
    metrics: Mapping[str, float | bool | None] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    stalls: StallWindow | None = None  # M9; None when the loop was not the harness's (not measured)
    frozen_objects: int = 0  # gc.get_freeze_count() after wait_idle, before the settle (engine's gc.freeze())
    heap: Mapping[str, Any] | None = None  # M10 heap profile: counts, phase, full_gc_ms

    @property
    def max_gap_ms(self) -> float:
        """The largest heartbeat gap overlapping the window (M1)."""
        return self.heartbeat.max_gap_ms

    def to_dict(self) -> dict[str, Any]:
        """The ``samples[]`` entry of the results document (M8)."""
        hb = self.heartbeat
        return {
            "index": self.index,
            "kind": self.kind,
            "started_at": self.started_at,
            "setup_ms": round(self.setup_ms, 6),
            "submission_ms": None if self.submission_ms is None else round(self.submission_ms, 6),
            "ack_ms": None if self.ack_ms is None else round(self.ack_ms, 6),
            "window_ms": round(self.window_ms, 6),
            "max_gap_ms": round(hb.max_gap_ms, 6),
            "max_gap_at_ms": round((hb.max_gap_start_ns - hb.start_ns) / 1e6, 6),
            "ticks": hb.ticks,
            "lag_us": hb.lag_us.to_dict(),
            "lag_us_uncorrected": hb.lag_us_uncorrected.to_dict(),
            "gc": {**self.gc.to_dict(hb.start_ns), "frozen_objects": self.frozen_objects},
            "phases_ms": dict(self.phases_ms),
            "drain_ms": self.drain_ms,
            "metrics": dict(self.metrics),
            "labels": dict(self.labels),
            "stalls": self.stalls.to_dict() if self.stalls is not None else None,
            "hdr": {"corrected": hb.hdr_corrected, "uncorrected": hb.hdr_uncorrected},
            **({"heap": dict(self.heap)} if self.heap is not None else {}),
        }


class _CopyStopped(Exception):
    """Carries the first failed file copy out of ``copytree``, which would otherwise go on and collect
    one error per file (a 30 KB ``shutil.Error`` when the disk is full)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error)
        self.error = error


def prepare_workdir(
    fixture: Path | None, root: Path, sync: bool = True, copy_function: Callable[[str, str], object] = shutil.copy2
) -> tuple[Path | None, Path]:
    """M4/M6: a private ``cp -a``-style copy of ``fixture`` under ``root``, plus an empty scratch dir.

    ``shutil.copytree(symlinks=True)`` with ``copy2`` keeps metadata and links; the copy is never the
    original. With ``sync``, dirty pages are flushed so the sample's own fsyncs do not pay for the copy.
    The first failed copy (ENOSPC...) stops it with one line naming that file; ``copy_function`` is
    the per-file copy (a seam for fault injection).
    """
    scratch = root / "scratch"
    scratch.mkdir()
    if fixture is None:
        return None, scratch
    source = fixture.resolve()
    if not source.is_dir():
        raise PerfsuiteError(f"fixture directory not found: {fixture}")
    workdir = root / (source.name or "fixture")

    def copy_or_stop(src: str, dst: str) -> object:
        try:
            return copy_function(src, dst)
        except OSError as exc:
            raise _CopyStopped(exc) from exc

    try:
        shutil.copytree(source, workdir, symlinks=True, copy_function=copy_or_stop)
    except _CopyStopped as stop:
        exc = stop.error
        where = exc.filename or source
        raise PerfsuiteError(f"copying fixture {source}: {where}: {exc.strerror or exc}") from None
    except shutil.Error as exc:  # directory-level errors (copystat, mkdir) collected by copytree
        first = exc.args[0][0] if exc.args and isinstance(exc.args[0], list) and exc.args[0] else exc
        more = len(exc.args[0]) - 1 if exc.args and isinstance(exc.args[0], list) else 0
        text = f"{first[1]}: {first[2]}" if isinstance(first, tuple) and len(first) == 3 else str(first)
        raise PerfsuiteError(f"copying fixture {source}: {text}" + (f" (and {more} more)" if more else "")) from None
    except OSError as exc:
        raise PerfsuiteError(f"copying fixture {source}: {exc.filename or workdir}: {exc.strerror or exc}") from None
    if workdir.resolve() == source:  # cannot happen with a fresh temp root; the invariant is M4's
        raise PerfsuiteError("refusing to measure on the original fixture directory")
    if sync and hasattr(os, "sync"):
        os.sync()
    return workdir, scratch


class _Ack:
    """The acknowledgement callback: records the time first, then wakes the sample (any thread)."""

    __slots__ = ("calls", "exc", "future", "loop", "ns", "thread")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.future: asyncio.Future[None] = loop.create_future()
        self.thread = threading.get_ident()
        self.ns = 0
        self.calls = 0
        self.exc: BaseException | None = None

    def __call__(self, exc: BaseException | None = None) -> None:
        now = time.perf_counter_ns()  # M5: acknowledgement time is the call to ack
        self.calls += 1
        if self.calls > 1:
            return
        self.ns = now
        self.exc = exc
        if threading.get_ident() == self.thread:
            self._wake()
        else:
            self.loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        if not self.future.done():
            self.future.set_result(None)


class _Submit:
    """The loop callback that calls ``submit(ack)``, timed on ``perf_counter_ns`` (the window's start and the
    submission time, M5). ``__wrapped__`` names the operation's own ``submit`` for the stall record (M9)."""

    __slots__ = ("__wrapped__", "ack", "done", "end_ns", "exc", "start_ns")

    def __init__(self, submit: Any, ack: _Ack, loop: asyncio.AbstractEventLoop) -> None:
        self.__wrapped__ = submit
        self.ack = ack
        self.done: asyncio.Future[None] = loop.create_future()
        self.start_ns = self.end_ns = 0
        self.exc: Exception | None = None

    def __call__(self) -> None:
        self.start_ns = time.perf_counter_ns()
        try:
            self.__wrapped__(self.ack)
        except Exception as exc:
            self.exc = exc
        self.end_ns = time.perf_counter_ns()
        if not self.done.done():
            self.done.set_result(None)


async def wait_ack(spec: SampleSpec, ack: _Ack, start_ns: int | None = None) -> None:
    """Wait for the operation's acknowledgement, at most ``ack_timeout_s`` after ``start_ns`` (the window
    start, just before ``submit``; default: now); a failure is one line."""
    timeout = spec.ack_timeout_s
    if start_ns is not None:
        timeout -= (time.perf_counter_ns() - start_ns) / 1e9
    if not ack.future.done():
        try:
            await asyncio.wait_for(ack.future, max(timeout, 0.0))
        except TimeoutError:
            raise SampleFailed(f"{spec.label}: no acknowledgement within {spec.ack_timeout_s:g} s") from None
    if ack.exc is not None:
        raise _fail(spec, "the operation (acknowledged failure)", ack.exc)


def check_submit(spec: SampleSpec, start_ns: int, submitted_ns: int) -> None:
    """A ``submit`` that blocked past ``ack_timeout_s`` is this sample's failure (it used
    to pass, and its long window made the next idle-control window time out instead)."""
    blocked_s = (submitted_ns - start_ns) / 1e9
    if blocked_s > spec.ack_timeout_s:
        raise SampleFailed(
            f"{spec.label}: submit() blocked for {blocked_s:.3g} s, "
            f"longer than ack_timeout_s = {spec.ack_timeout_s:g} s"
        )


def check_acks(spec: SampleSpec, ack: _Ack) -> None:
    """Exactly one acknowledgement, counted until the sample's teardown: a second one is an error even
    when it comes after the window, from ``metrics()`` or ``close()``."""
    if ack.calls > 1:
        raise SampleFailed(f"{spec.label}: the operation acknowledged {ack.calls} times (exactly once is the protocol)")


async def open_operation(spec: SampleSpec, factory: Any, workdir: Path | None, scratch: Path | None,
                         kind: SampleKind, params: Mapping[str, object] | None = None) -> Any:
    """Call the operation factory with this sample's context; a crash in it is a one-line failure."""
    ctx = OperationContext(workdir=workdir, params=dict(spec.params) if params is None else params,
                           mode=spec.mode, sample=spec.index, scratch=scratch, kind=kind)
    try:
        return await create_operation(factory, ctx)
    except PerfsuiteError:
        raise
    except Exception as exc:
        raise _fail(spec, "the operation factory", exc) from exc


def _fail(spec: SampleSpec, where: str, exc: BaseException) -> SampleFailed:
    text = str(exc).strip().splitlines()
    detail = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    return SampleFailed(f"{spec.label}: {where} raised {detail}")


async def measure_sample(
    spec: SampleSpec, heartbeat: Heartbeat, recorder: GcRecorder, factory: OperationFactory | None = None
) -> SampleRecord:
    """M4/M5: measure one sample on a running heartbeat and GC recorder; raises :class:`SampleFailed`."""
    factory = factory or resolve_operation(spec.operation)
    root = sample_root(spec, f"sample-{spec.kind}-{spec.index}-")
    frozen_before = gc.get_freeze_count()
    heap: LiveHeap | None = None
    try:
        t0 = time.perf_counter()
        workdir, scratch = sample_workdir(spec, root)
        setup_ms = (time.perf_counter() - t0) * 1e3
        if spec.heap > 0 and spec.kind == "sample":  # M10: before the operation (and its session) opens
            heap = build_heap(spec.heap, seed=HEAP_SEED + spec.index)
        params = ReadRecorder(spec.params)
        op = await open_operation(spec, factory, workdir, scratch, spec.kind, params)  # type: ignore[arg-type]
        ack = _Ack(asyncio.get_running_loop())
        try:
            record = await _measure(spec, op, heartbeat, recorder, setup_ms, ack, heap)
        finally:
            try:
                await call_optional(op, "close")
            except Exception as exc:
                raise _fail(spec, "close()", exc) from exc
        await asyncio.sleep(0)  # callbacks already scheduled (a late ack) run before the count is read
        check_acks(spec, ack)
        unread = unread_keys(factory, params)
        if unread:  # a misspelt key would otherwise be measured as if it had been applied
            keys = ", ".join(f"modes.{spec.mode}.{k}" for k in unread)
            raise SampleFailed(f"{spec.recipe}: {keys}: not read by operation {spec.operation}, which declares "
                               "no parameters (a misspelt key?); remove it, or declare the operation's parameters")
        return record
    finally:
        heap = None
        if frozen_before == 0 and gc.get_freeze_count() > 0:
            gc.unfreeze()  # M4 inline isolation: a sample that froze the heap leaves no frozen state behind
        shutil.rmtree(root, ignore_errors=True)


def sample_root(spec: SampleSpec, prefix: str) -> Path:
    """The sample's private temp root under ``work_root``; ENOSPC or a bad work root is one line."""
    try:
        return Path(tempfile.mkdtemp(prefix=prefix, dir=spec.work_root))
    except OSError as exc:
        raise SampleFailed(f"{spec.label}: work directory {spec.work_root}: {exc.strerror or exc}") from None


def sample_workdir(spec: SampleSpec, root: Path) -> tuple[Path | None, Path]:
    """:func:`prepare_workdir` for this sample, its one-line errors naming the sample."""
    try:
        return prepare_workdir(Path(spec.fixture) if spec.fixture else None, root, spec.sync_after_copy)
    except PerfsuiteError as exc:
        raise SampleFailed(f"{spec.label}: {exc}") from None
    except OSError as exc:
        raise SampleFailed(f"{spec.label}: {exc.filename or root}: {exc.strerror or exc}") from None


async def _measure(
    spec: SampleSpec, op: Any, heartbeat: Heartbeat, recorder: GcRecorder, setup_ms: float, ack: _Ack,
    heap: LiveHeap | None = None,
) -> SampleRecord:
    try:
        await call_optional(op, "wait_idle")  # M4: the system under test is idle before the window
    except Exception as exc:
        raise _fail(spec, "wait_idle()", exc) from exc
    # gc.get_freeze_count() walks the whole permanent generation (48 ms for a 1e6-object frozen heap here):
    # read it before the settle, never at the window's edge, where its stall would count in the max gap
    frozen = gc.get_freeze_count()
    # M2 policy, then a settle of at least two periods so the window's first gap is an ordinary one
    await apply_gc_policy(spec.gc, max(spec.settle_ms, 2 * spec.heartbeat_ms) / 1e3)
    loop = asyncio.get_running_loop()
    tail_ns = round(spec.tail_ms * 1e6)
    monitor = stall_monitor_of(loop)  # M9: None on a loop the harness does not own
    submitter = _Submit(op.submit, ack, loop)
    started_at = time.time()
    if monitor is not None:
        monitor.arm()
    try:
        # M1/M5: the window starts just before submission; submission time = the call to its return.
        # submit runs in its own loop callback so a synchronous hold is timed under the operation's name (M9).
        loop.call_soon(submitter)
        await submitter.done
        if submitter.exc is not None:
            raise _fail(spec, "submit()", submitter.exc) from submitter.exc
        start_ns, submitted_ns = submitter.start_ns, submitter.end_ns
        check_submit(spec, start_ns, submitted_ns)
        await wait_ack(spec, ack, start_ns)
        # M1: the window ends at acknowledgement + tail; the gap straddling its end is closed by a tick
        end_ns = ack.ns + tail_ns
        remaining = end_ns - time.perf_counter_ns()
        if remaining > 0:
            await asyncio.sleep(remaining / 1e9)
        await heartbeat.wait_past(end_ns, timeout_s=max(1.0, 100 * spec.heartbeat_ms / 1e3))
        window = heartbeat.window(start_ns, end_ns)
        stalls = monitor.window(start_ns, end_ns) if monitor is not None else None
    finally:
        if monitor is not None:
            monitor.disarm()
    gcw = recorder.window(start_ns, end_ns, (window.max_gap_start_ns, window.max_gap_end_ns))
    check_acks(spec, ack)  # a second ack inside the window fails here; a later one at teardown
    try:
        raw = await call_optional(op, "metrics")
    except Exception as exc:
        raise _fail(spec, "metrics()", exc) from exc
    if raw is not None and not isinstance(raw, Mapping):
        raise SampleFailed(f"{spec.label}: metrics() returned {type(raw).__name__}, expected a mapping")
    phases, drain, numbers, labels = split_metrics(raw)
    heap_record = None
    if heap is not None:  # after the window: what one full collection costs with this heap, frozen or not
        heap_record = {**heap.to_dict(), "full_gc_ms": round(probe_full_collection(), 3)}
    return SampleRecord(
        index=spec.index,
        mode=spec.mode,
        kind=spec.kind,
        started_at=started_at,
        setup_ms=setup_ms,
        submission_ms=(submitted_ns - start_ns) / 1e6,
        ack_ms=(ack.ns - start_ns) / 1e6,
        window_ms=(end_ns - start_ns) / 1e6,
        heartbeat=window,
        gc=gcw,
        phases_ms=phases,
        drain_ms=drain,
        metrics=numbers,
        labels=labels,
        stalls=stalls,
        frozen_objects=frozen,
        heap=heap_record,
    )
