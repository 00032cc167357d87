"""M3: the allocation pass, run separately from latency samples (tracing distorts timing).

Each allocation sample runs the operation once, from ``submit`` to its acknowledgement, under a tracker,
named in every record and section (``tracker``) so a comparison never mixes two methods:

- ``tracemalloc`` (the core's, standard library; the default when memray is not installed): Python's own
  allocators. It keeps live blocks only, so it
  reports the **peak** allocated during the span above its start (``peak_bytes``); the sum of every
  allocation and their count are not measured (``None``), never a difference of live sizes passed off as one.
- ``memray`` (the ``alloc`` extra; the default when installed; ``PERFSUITE_ALLOCATION_TRACKER`` chooses either):
  every allocation, native ones
  included, with Python allocators traced: the **sum** (``total_bytes``, memray's statistics over all
  allocation records), the count and the peak.

Both add whatever ``metrics()`` reports (bytes written come from the workload, e.g. the recording I/O layer).
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import os
import shutil
import time
import tracemalloc
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite._extras import require
from perfsuite.errors import PerfsuiteError
from perfsuite.harness._operation import (
    OperationFactory,
    call_optional,
    resolve_operation,
)
from perfsuite.harness._sample import (
    SampleSpec,
    _Ack,
    _fail,
    check_acks,
    open_operation,
    sample_root,
    sample_workdir,
    split_metrics,
    wait_ack,
)

__all__ = ["ALLOCATION_TRACKERS", "AllocationRecord", "allocation_tracker", "measure_allocation", "memray_totals"]

#: the allocation pass's methods; the first is the core's (the standard library's), used when memray is absent
ALLOCATION_TRACKERS = ("tracemalloc", "memray")
#: the environment variable that selects one (inherited by worker processes, so every pass of a run agrees)
TRACKER_ENV = "PERFSUITE_ALLOCATION_TRACKER"

_DEALLOCATORS = frozenset({"PYMALLOC_FREE", "FREE", "MUNMAP"})


@dataclass(frozen=True, slots=True)
class AllocationRecord:
    """M3 for one operation: total bytes allocated (sum), allocation count, peak bytes, metrics."""

    index: int
    total_bytes: int | None  # None: not measured (tracemalloc cannot sum allocations)
    allocations: int | None
    peak_bytes: int
    ack_ms_traced: float
    tracker: str = "memray"
    phases_ms: Mapping[str, float] = field(default_factory=dict)
    metrics: Mapping[str, float | bool | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The ``allocation.samples[]`` entry of the results document."""
        return {
            "index": self.index,
            "total_bytes": self.total_bytes,
            "allocations": self.allocations,
            "peak_bytes": self.peak_bytes,
            "ack_ms_traced": round(self.ack_ms_traced, 6),
            "tracker": self.tracker,
            "phases_ms": dict(self.phases_ms),
            "metrics": dict(self.metrics),
        }


def allocation_tracker(name: str | None = None) -> str:
    """The tracker to use: ``name``, else ``$PERFSUITE_ALLOCATION_TRACKER``, else memray when the ``alloc`` extra
    is installed (SPEC M3 asks for the sum of allocations, which only memray measures), else ``tracemalloc`` (the
    core: the peak, the sum not measured). Asking for memray without the extra is one line naming it (rule 4)."""
    chosen = name or os.environ.get(TRACKER_ENV) or ("memray" if _memray_installed() else ALLOCATION_TRACKERS[0])
    if chosen not in ALLOCATION_TRACKERS:
        raise PerfsuiteError(f"{TRACKER_ENV}={chosen!r}: expected one of {', '.join(ALLOCATION_TRACKERS)}")
    if chosen == "memray":
        require("alloc", "memray")
    return chosen


def _memray_installed() -> bool:
    """Whether memray can be imported here (found, not imported: the choice costs no import)."""
    import importlib.util
    import sys

    if "memray" in sys.modules:
        return sys.modules["memray"] is not None  # None: import blocked (how tests hide an extra)
    try:
        return importlib.util.find_spec("memray") is not None
    except (ImportError, ValueError):
        return False


def memray_totals(capture: Path) -> tuple[int, int, int]:
    """``(total bytes allocated, allocations, peak bytes)`` of a memray capture (ALL_ALLOCATIONS format).

    Uses memray's own statistics (what ``memray stats`` prints) when available, else sums the
    allocation records through the public :class:`memray.FileReader`.
    """
    compute_statistics: Callable[[str], Any] | None
    try:  # the engine of `memray stats`
        compute_statistics = importlib.import_module("memray._memray").compute_statistics
    except (ImportError, AttributeError):  # pragma: no cover - older/newer memray layouts
        compute_statistics = None
    if compute_statistics is not None:
        stats = compute_statistics(str(capture))
        return (int(stats.total_memory_allocated), int(stats.total_num_allocations), int(stats.peak_memory_allocated))
    import memray  # pragma: no cover

    total = count = 0  # pragma: no cover
    with memray.FileReader(str(capture)) as reader:  # pragma: no cover
        for rec in reader.get_allocation_records():
            if memray.AllocatorType(rec.allocator).name not in _DEALLOCATORS:
                total += rec.size
                count += rec.n_allocations
        peak = reader.metadata.peak_memory
    return total, count, int(peak)  # pragma: no cover


async def measure_allocation(spec: SampleSpec, factory: OperationFactory | None = None,
                             tracker: str | None = None) -> AllocationRecord:
    """M3: run the operation once under ``tracker`` (:func:`allocation_tracker`), from submit to
    acknowledgement, on a private copy."""
    tracker = allocation_tracker(tracker)
    factory = factory or resolve_operation(spec.operation)
    root = sample_root(spec, f"alloc-{spec.index}-")
    try:
        workdir, scratch = sample_workdir(spec, root)
        op = await open_operation(spec, factory, workdir, scratch, "allocation")
        try:
            await call_optional(op, "wait_idle")
            gc.collect()
            ack = _Ack(asyncio.get_running_loop())
            total: int | None
            count: int | None
            if tracker == "memray":
                total, count, peak, ack_ms = await _traced_memray(spec, op, ack, root / "alloc.memray")
            else:
                total, count, peak, ack_ms = await _traced_tracemalloc(spec, op, ack)
            raw = await call_optional(op, "metrics")
            phases, _drain, numbers, _labels = split_metrics(raw if isinstance(raw, Mapping) else None)
            return AllocationRecord(
                index=spec.index,
                total_bytes=total,
                allocations=count,
                peak_bytes=peak,
                ack_ms_traced=ack_ms,
                tracker=tracker,
                phases_ms=phases,
                metrics=numbers,
            )
        finally:
            await call_optional(op, "close")
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _submit_and_wait(spec: SampleSpec, op: Any, ack: _Ack) -> float:
    """Submit, wait for the acknowledgement, check it: the traced span; returns the ack time in ms."""
    t0 = time.perf_counter_ns()
    try:
        op.submit(ack)
    except Exception as exc:
        raise _fail(spec, "submit()", exc) from exc
    await wait_ack(spec, ack, t0)
    return (ack.ns - t0) / 1e6


async def _traced_tracemalloc(spec: SampleSpec, op: Any, ack: _Ack) -> tuple[None, None, int, float]:
    """The span under tracemalloc: the peak above its start (the sum and the count are not measured)."""
    if tracemalloc.is_tracing():  # the program's own tracing: its traces are not ours to stop or clear
        raise PerfsuiteError(f"{spec.label}: tracemalloc is already tracing in this process")
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        ack_ms = await _submit_and_wait(spec, op, ack)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    check_acks(spec, ack)
    return None, None, max(0, peak - start), ack_ms


async def _traced_memray(spec: SampleSpec, op: Any, ack: _Ack, capture: Path) -> tuple[int, int, int, float]:
    """The span under memray: the sum of every allocation, their count and the peak."""
    import memray

    try:
        tracker = memray.Tracker(
            str(capture),
            native_traces=False,
            trace_python_allocators=True,
            file_format=memray.FileFormat.ALL_ALLOCATIONS,
        )
    except Exception as exc:  # pragma: no cover
        raise PerfsuiteError(f"{spec.label}: memray could not start: {exc}") from None
    with tracker:
        ack_ms = await _submit_and_wait(spec, op, ack)
    check_acks(spec, ack)
    total, count, peak = memray_totals(capture)
    return total, count, peak, ack_ms
