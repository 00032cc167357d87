"""Synthetic results documents of the engine recipes' shape (seeded, schema-valid), for the report tests.

``make_doc`` builds what an engine recipe such as ``mailbox-delivery`` writes: modes such as ``sync``
and ``async``, samples with ``submission_ms``, ``ack_ms``, ``max_gap_ms``, lag percentiles backed by real
encoded HDR histograms, GC records, ``phases_ms``, ``metrics`` (``bytes_written``), an optional
allocation pass, the idle control, summaries and M7 verdicts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram

from perfsuite.harness import summarize, verdict

HEARTBEAT_MS = 5.0
TAIL_MS = 12.0

#: default mode shapes: medians in ms; ``inline`` means acknowledged inside the call (synchronous)
SYNC_ASYNC: dict[str, dict[str, Any]] = {
    "sync": {"submission_ms": 66.0, "ack_ms": 65.9, "max_gap_ms": 66.3, "inline": True, "bytes_written": 9321},
    "async": {"submission_ms": 0.31, "ack_ms": 110.0, "max_gap_ms": 6.9, "bytes_written": 9321},
}
PHASES = {"freeze": 0.9, "stage": 18.0, "hash": 6.0, "select": 0.2, "commit": 22.0, "adopt": 3.5, "finish": 0.4}


def _fast_summary(values: list[float]) -> dict[str, float | int]:
    arr = np.asarray(values, dtype=float)
    return {
        "n": int(arr.size),
        "min": float(arr.min()),
        "median": float(np.median(arr)),
        "max": float(arr.max()),
        "ci_low": float(arr.min()),
        "ci_high": float(arr.max()),
    }


def _summaries(samples: list[Mapping[str, Any]], bootstrap: bool) -> dict[str, Any]:
    from perfsuite.harness import sample_metrics

    columns: dict[str, list[float]] = {}
    for s in samples:
        for k, v in sample_metrics(s).items():
            columns.setdefault(k, []).append(v)
    fn = summarize if bootstrap else _fast_summary
    return {k: fn(v) for k, v in columns.items()}


def _lag(rng: np.random.Generator, window_ms: float, max_gap_ms: float) -> tuple[dict[str, int], dict[str, int], dict]:
    corrected = HdrHistogram(1, 60_000_000, 3)
    raw = HdrHistogram(1, 60_000_000, 3)
    ticks = max(int(window_ms / HEARTBEAT_MS), 2)
    lags = [*rng.exponential(150.0, size=ticks - 1).astype(int), int(max(max_gap_ms - HEARTBEAT_MS, 0) * 1000)]
    for lag in lags:
        corrected.record_corrected_value(int(lag), int(HEARTBEAT_MS * 1000))
        raw.record_value(int(lag))

    def pct(h: HdrHistogram) -> dict[str, int]:
        out = {p: int(h.get_value_at_percentile(q)) for p, q in (("p50", 50), ("p90", 90), ("p99", 99), ("p999", 99.9))}
        out["max"] = int(h.get_max_value())
        out["count"] = int(h.get_total_count())
        return out

    hdr = {"corrected": corrected.encode().decode("ascii"), "uncorrected": raw.encode().decode("ascii")}
    return pct(corrected), pct(raw), hdr


def _sample(
    rng: np.random.Generator, index: int, shape: Mapping[str, Any], noise: float, gc_p: float, t0: float
) -> dict[str, Any]:
    def draw(key: str) -> float:
        return float(shape[key]) * float(rng.lognormal(0.0, noise))

    submission = draw("submission_ms")
    ack = min(draw("ack_ms"), submission) if shape.get("inline") else draw("ack_ms")
    gap = draw("max_gap_ms")
    gc_rec: dict[str, Any] = {
        "collections": 0,
        "gc_ms": 0.0,
        "in_max_gap": False,
        "by_generation": {"0": 0, "1": 0, "2": 0},
        "events": [],
    }
    if rng.random() < gc_p:
        pause = float(rng.uniform(20.0, 45.0))
        gap += pause
        start = float(rng.uniform(0.0, max(ack, 1.0)))
        gc_rec = {
            "collections": 1,
            "gc_ms": round(pause, 6),
            "in_max_gap": True,
            "by_generation": {"0": 0, "1": 0, "2": 1},
            "events": [{"generation": 2, "start_ms": round(start, 6), "duration_ms": round(pause, 6)}],
        }
    window = ack + TAIL_MS
    lag, lag_raw, hdr = _lag(rng, window, gap)
    phases = {k: round(v * float(rng.lognormal(0.0, noise)), 6) for k, v in shape.get("phases", {}).items()}
    metrics: dict[str, Any] = {"bytes_written": int(shape["bytes_written"])} if "bytes_written" in shape else {}
    metrics.update(shape.get("metrics", {}))  # extra metrics as given (None: not measured)
    return {
        "index": index,
        "kind": "sample",
        "started_at": t0 + index,
        "setup_ms": 0.5,
        "submission_ms": round(submission, 6),
        "ack_ms": round(ack, 6),
        "window_ms": round(window, 6),
        "max_gap_ms": round(gap, 6),
        "max_gap_at_ms": round(float(rng.uniform(0, max(submission, 1.0))), 6),
        "ticks": int(window / HEARTBEAT_MS),
        "lag_us": lag,
        "lag_us_uncorrected": lag_raw,
        "gc": gc_rec,
        "phases_ms": phases,
        "drain_ms": round(draw("drain_ms"), 6) if "drain_ms" in shape else None,
        "metrics": metrics,
        "labels": dict(shape.get("labels", {})),
        **({"stalls": _stalls(draw("stall_ms"), ack)} if "stall_ms" in shape else {}),
        "hdr": hdr,
    }


def _stalls(longest: float, ack: float) -> dict[str, Any]:
    """An M9 stall record: the longest callback, a busy total above it and two named top callbacks."""
    longest = round(longest, 3)
    return {
        "longest_ms": longest,
        "busy_ms": round(longest * 1.5, 3),
        "callbacks": 40,
        "top": [{"name": "perfsuite.workloads.engine._MailboxDelivery.submit", "ms": longest, "at_ms": 0.0},
                {"name": "perfsuite.harness._heartbeat.Heartbeat._tick", "ms": 0.02, "at_ms": round(ack / 2, 3)}],
    }


def make_doc(
    recipe: str = "mailbox-delivery",
    modes: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    n: int = 6,
    seed: int = 1,
    noise: float = 0.04,
    gc: str = "collect-before",
    gc_p: float = 0.0,
    isolation: str = "process",
    commit: str = "0123456789abcdef0123456789abcdef01234567",
    date: str = "2026-11-20T10:00:00+00:00",
    epoch: float = 1_795_000_000.0,
    control_gap_ms: float = 5.6,
    allocation: bool = False,
    fixture: Mapping[str, Any] | None = None,
    bootstrap: bool = False,
    hostname: str = "ci-runner",
    dir_fsync: str = "ok",
    mode_order: str | None = None,
) -> dict[str, Any]:
    """A complete, schema-valid results document with seeded samples.

    A mode's shape may also give ``operation``, ``reference`` (a by-design reference), ``stall_ms`` (M9
    stall records), ``metrics`` and ``labels`` (extra entries as given; ``None`` = not measured); ``mode_order``
    records a random (seeded) or fixed mode order as newer documents do."""
    rng = np.random.default_rng(seed)
    modes = modes if modes is not None else {k: {**v, "phases": PHASES} for k, v in SYNC_ASYNC.items()}
    fixture = (
        dict(fixture)
        if fixture is not None
        else {
            "name": "synthetic-6000",
            "digest": "sha256:5d41402abc4b2a76b9719d911017c592",
            "files": 14,
            "bytes": 2_345_678,
        }
    )
    order, body = [], {}
    for m in modes:
        order.append({"kind": "warmup", "mode": m, "index": 0})
    samples: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    control: list[dict[str, Any]] = []
    for i in range(n):
        for m, shape in modes.items():
            order.append({"kind": "sample", "mode": m, "index": i})
            samples[m].append(_sample(rng, i, shape, noise, gc_p if gc == "natural" else 0.0, epoch))
        order.append({"kind": "control", "mode": None, "index": i})
        idle = {"submission_ms": 0.004, "ack_ms": 100.0, "max_gap_ms": control_gap_ms}
        c = _sample(rng, i, idle, noise, 0.0, epoch)
        c["kind"] = "control"
        control.append(c)
    for m, shape in modes.items():
        alloc = None
        if allocation:
            alloc_samples = []
            for i in range(3):
                order.append({"kind": "allocation", "mode": m, "index": i})
                # memray's totals are deterministic to a few bytes between samples (a cost gated exactly), not noisy
                total = int(shape.get("alloc_bytes", 4_000_000)) + int(rng.integers(0, 16))
                alloc_samples.append(
                    {
                        "index": i,
                        "total_bytes": total,
                        "allocations": total // 64,
                        "peak_bytes": total // 3,
                        "ack_ms_traced": 120.0,
                    }
                )
            alloc = {"tracker": "memray", "samples": alloc_samples}
            for key in ("total_bytes", "peak_bytes", "allocations"):
                alloc[key] = _fast_summary([s[key] for s in alloc_samples])
        body[m] = {
            "operation": shape.get("operation", f"perfsuite.workloads.engine:{recipe.replace('-', '_')}"),
            "params": {},
            "warmups": 1,
            "samples": samples[m],
            "allocation": alloc,
            "summary": _summaries(samples[m], bootstrap),
            "verdict": verdict(samples[m], 20.0, shape.get("reference")),
            **({"reference": shape["reference"]} if shape.get("reference") else {}),
        }
    doc = {
        "schema": 1,
        "perfsuite": "0.1.0",
        "status": "complete",
        "created_at": date,
        "created_epoch": epoch,
        "updated_at": date,
        "finished_at": date,
        "recipe": {
            "name": recipe,
            "description": "synthetic",
            "fixture": fixture["name"],
            "samples": n,
            "warmup": 1,
            "heartbeat_ms": HEARTBEAT_MS,
            "gc": gc,
            "isolation": isolation,
            "target_ms": 20.0,
            "allocation": allocation,
            "allocation_samples": 3,
            "window_tail_ms": TAIL_MS,
            "ack_timeout_s": 30.0,
            "settle_ms": 20.0,
            "control_windows": n,
            "sync_after_copy": True,
            "path": None,
            "modes": {m: {"operation": body[m]["operation"],
                          **({"reference": body[m]["reference"]} if "reference" in body[m] else {})} for m in modes},
            **({"order": mode_order, "seed": 1234} if mode_order else {}),
        },
        "environment": {
            "python": {
                "version": "3.11.7",
                "implementation": "CPython",
                "executable": "/usr/bin/python3",
                "build": "x",
            },
            "os": {"system": "Linux", "release": "6.1.0", "platform": "Linux-6.1.0-x86_64"},
            "cpu": {"model": "Synthetic CPU", "cores": 2, "affinity": 2, "machine": "x86_64"},
            "work_dir": {
                "path": "/tmp/w",
                "filesystem": "ext4",
                "mount_point": "/",
                "device": "/dev/vda",
                "dir_fsync": dir_fsync,
            },
            "git": {"commit": commit, "dirty": False},
            "perfsuite": "0.1.0",
            "hostname": hostname,
            "date": date,
            "load_avg": [0.5, 0.4, 0.3],
        },
        "fixture": fixture,
        "summary_method": {"statistic": "median"},
        "order": order,
        "progress": {"done": len(order), "total": len(order)},
        "modes": body,
        "control": {
            "operation": "perfsuite.harness:idle",
            "samples": control,
            "summary": _summaries(control, bootstrap),
        },
    }
    return doc


#: a newer mailbox-delivery: loop stalls, a publication floor (a reference mode) and a null metric
NEW_MODES: dict[str, dict[str, Any]] = {
    "sync": {**SYNC_ASYNC["sync"], "phases": PHASES, "stall_ms": 65.0, "metrics": {"fsyncs": 5, "dir_fsyncs": 2}},
    "async": {**SYNC_ASYNC["async"], "phases": PHASES, "stall_ms": 1.2,
              "metrics": {"fsyncs": 5, "dir_fsyncs": 2, "offload_bytes": None}},
    "publication-floor": {
        "submission_ms": 3.1, "ack_ms": 3.0, "max_gap_ms": 8.0, "inline": True, "bytes_written": 9321,
        "stall_ms": 3.0, "operation": "perfsuite.workloads.floors:publication_floor",
        "reference": "the publication floor: raw os calls of one generation",
        "metrics": {"writes": 7, "fsyncs": 5, "replaces": 3, "mkdirs": 1, "dir_fsyncs": 2, "removes": 3},
        "labels": {"models": "mailbox_delivery(path=async)"},
        "phases": {"write": 0.05, "fsync": 2.0, "fsync_dir": 0.8, "replace": 0.05},
    },
}


def make_floor_doc(**kwargs: Any) -> dict[str, Any]:
    """An fsync-floor document (mode ``raw-os``, acknowledged inside the call) of the same run."""
    shape = {
        "submission_ms": 1.45,
        "ack_ms": 1.44,
        "max_gap_ms": 5.5,
        "inline": True,
        "bytes_written": 4096,
        "phases": {"write": 0.05, "fsync": 0.9, "replace": 0.03, "dir_fsync": 0.43},
    }
    kwargs.setdefault("fixture", {"name": None, "digest": None, "files": 0, "bytes": 0})
    doc = make_doc("fsync-floor", {"raw-os": shape}, **kwargs)
    doc["modes"]["raw-os"]["operation"] = "perfsuite.workloads.basic:fsync_floor"
    doc["recipe"]["modes"]["raw-os"] = {"operation": "perfsuite.workloads.basic:fsync_floor", "bytes": 4096}
    doc["recipe"]["fixture"] = None
    return doc


def write_doc(path: Path, doc: Mapping[str, Any]) -> Path:
    """Write ``doc`` as JSON at ``path`` (parents created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1))
    return path


@pytest.fixture
def docs() -> Any:
    """The generators: ``docs.make``, ``docs.floor``, ``docs.write``."""

    class _Docs:
        make: Callable[..., dict[str, Any]] = staticmethod(make_doc)
        floor: Callable[..., dict[str, Any]] = staticmethod(make_floor_doc)
        write: Callable[[Path, Mapping[str, Any]], Path] = staticmethod(write_doc)
        new_modes = NEW_MODES

    return _Docs


def perfsuite_cli(*args: str, cwd: Path | None = None, timeout: float = 120) -> Any:
    """``python -m perfsuite ARGS`` as a subprocess (the real command line: exit status, stdout, stderr)."""
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "perfsuite", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="session")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding a real ``perfsuite run idle-control fsync-floor`` (3 samples, inline): one run."""
    out = tmp_path_factory.mktemp("real-run")
    proc = perfsuite_cli(
        "run", "idle-control", "fsync-floor", "--samples", "3", "--isolation", "inline", "--output-dir", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    return out
