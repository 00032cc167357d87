"""M3: the allocation pass, run separately from latency samples (tracing distorts timing).

Each allocation sample runs the operation once, from ``submit`` to its acknowledgement, under a
``memray.Tracker`` with Python allocators traced, and reports the **sum** of every allocation in that
span (memray's statistics over all allocation records, not a difference of live sizes), the number
of allocations and the peak of memory allocated during it, plus whatever ``metrics()`` reports
(bytes written come from the workload, e.g. the recording I/O layer).
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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

__all__ = ["AllocationRecord", "measure_allocation", "memray_totals"]

_DEALLOCATORS = frozenset({"PYMALLOC_FREE", "FREE", "MUNMAP"})


@dataclass(frozen=True, slots=True)
class AllocationRecord:
    """M3 for one operation: total bytes allocated (sum), allocation count, peak bytes, metrics."""

    index: int
    total_bytes: int
    allocations: int
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


async def measure_allocation(spec: SampleSpec, factory: OperationFactory | None = None) -> AllocationRecord:
    """M3: run the operation once under memray, from submit to acknowledgement, on a private copy."""
    try:
        import memray
    except ImportError as exc:  # pragma: no cover - memray is a declared dependency
        raise PerfsuiteError(f"{spec.label}: the allocation pass needs memray ({exc})") from None
    factory = factory or resolve_operation(spec.operation)
    root = sample_root(spec, f"alloc-{spec.index}-")
    try:
        workdir, scratch = sample_workdir(spec, root)
        op = await open_operation(spec, factory, workdir, scratch, "allocation")
        try:
            await call_optional(op, "wait_idle")
            gc.collect()
            capture = root / "alloc.memray"
            ack = _Ack(asyncio.get_running_loop())
            try:
                tracker = memray.Tracker(
                    str(capture),
                    native_traces=False,
                    trace_python_allocators=True,
                    file_format=memray.FileFormat.ALL_ALLOCATIONS,
                )
            except Exception as exc:  # pragma: no cover
                raise PerfsuiteError(f"{spec.label}: memray could not start: {exc}") from None
            t0 = time.perf_counter_ns()
            with tracker:
                try:
                    op.submit(ack)
                except Exception as exc:
                    raise _fail(spec, "submit()", exc) from exc
                await wait_ack(spec, ack, t0)
            check_acks(spec, ack)
            ack_ms = (ack.ns - t0) / 1e6
            total, count, peak = memray_totals(capture)
            raw = await call_optional(op, "metrics")
            phases, _drain, numbers, _labels = split_metrics(raw if isinstance(raw, Mapping) else None)
            return AllocationRecord(
                index=spec.index,
                total_bytes=total,
                allocations=count,
                peak_bytes=peak,
                ack_ms_traced=ack_ms,
                phases_ms=phases,
                metrics=numbers,
            )
        finally:
            await call_optional(op, "close")
    finally:
        shutil.rmtree(root, ignore_errors=True)
