"""M8: a results document exported for other tools: a pyperf benchmark suite and HdrHistogram logs beside the
JSON, written from the document alone (``_results`` re-exports these names).
"""

from __future__ import annotations

import datetime as _dt
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfsuite.harness._results import sample_metrics

# -- exports (M8) ---------------------------------------------------------------------------------

_TIME_SCALE = {"_ms": 1e-3, "_us": 1e-6, "_s": 1.0}
#: metrics offered to pyperf (plus every ``phases_ms.*`` and ``metrics.*``); the rest stay in the JSON
_PYPERF_METRICS = (
    "submission_ms",
    "ack_ms",
    "max_gap_ms",
    "stalls.longest_ms",
    "stalls.busy_ms",
    "lag_us.p99",
    "lag_us.max",
    "lag_us_uncorrected.p99",
    "lag_us_uncorrected.max",
    "gc.gc_ms",
    "gc.collections",
    "drain_ms",
)


#: the idle control has no submission, acknowledgement or drain: the heartbeat and GC figures only
_CONTROL_METRICS = tuple(m for m in _PYPERF_METRICS if m not in ("submission_ms", "ack_ms", "drain_ms"))


def _offered(metric: str, mode: str) -> bool:
    if mode == "control":  # the idle control has no submission or acknowledgement worth comparing
        return metric in _CONTROL_METRICS
    return metric in _PYPERF_METRICS or metric.startswith(("phases_ms.", "metrics."))


def _pyperf_unit(metric: str, values: Sequence[float]) -> tuple[str, float] | None:
    """(unit, scale) for a flattened metric name, or ``None`` when pyperf has no unit for it."""
    head, _, leaf = metric.rpartition(".")
    if head in ("lag_us", "lag_us_uncorrected"):
        return "second", 1e-6
    if metric.startswith("phases_ms."):
        return "second", 1e-3
    for suffix, scale in _TIME_SCALE.items():
        if leaf.endswith(suffix):
            return "second", scale
    if "bytes" in leaf:
        return "byte", 1.0
    if all(float(v).is_integer() for v in values):
        return "integer", 1.0
    return None


def _series(document: Mapping[str, Any]) -> list[tuple[str, list[Mapping[str, Any]]]]:
    out = [(mode, list(body.get("samples", []))) for mode, body in document.get("modes", {}).items()]
    control = document.get("control") or {}
    if control.get("samples"):
        out.append(("control", list(control["samples"])))
    return out


def export_pyperf(document: Mapping[str, Any], path: Path) -> Path | None:
    """M8: a pyperf suite, one benchmark per mode and metric, one run per sample.

    pyperf values must be > 0: a metric with any zero (GC time, p50 lag...) is not a benchmark; its
    values ride in each run's metadata instead. Every run carries ``duration`` (the window, seconds),
    so pyperf never adds bytes up as seconds.
    """
    import pyperf

    recipe = document.get("recipe", {}).get("name", "recipe")
    env = document.get("environment", {})
    common = {
        "hostname": env.get("hostname") or "unknown",
        "python_version": (env.get("python") or {}).get("version") or platform.python_version(),
        "platform": (env.get("os") or {}).get("platform") or platform.platform(),
        "cpu_count": (env.get("cpu") or {}).get("cores") or 1,
        "perfsuite_recipe": recipe,
        "perfsuite_isolation": document.get("recipe", {}).get("isolation", "unknown"),
        "perfsuite_gc": document.get("recipe", {}).get("gc", "unknown"),
    }
    model = (env.get("cpu") or {}).get("model")
    if model:
        common["cpu_model_name"] = model
    if document.get("run_id"):  # which run wrote this export (never another run's)
        common["perfsuite_run_id"] = str(document["run_id"])
    benchmarks = []
    for mode, samples in _series(document):
        if not samples:
            continue
        flat = [sample_metrics(s) for s in samples]
        keys = sorted({k for f in flat for k in f if _offered(k, mode) and all(k in g for g in flat)})
        exported: list[tuple[str, str, float]] = []  # (metric, pyperf unit, scale)
        side: list[str] = []
        for key in keys:
            values = [f[key] for f in flat]
            found = _pyperf_unit(key, values)
            if found and all(v > 0 for v in values):
                exported.append((key, *found))
            else:
                side.append(key)
        for key, unit, scale in exported:
            name = f"{recipe}.{mode}.{key}"
            runs = []
            for sample, f in zip(samples, flat):
                meta: dict[str, Any] = dict(common)
                meta.update(
                    {
                        "name": name,
                        "unit": unit,
                        "loops": 1,
                        "duration": max(float(sample.get("window_ms", 0.0)) / 1e3, 0.0),
                        "perfsuite_sample": int(sample.get("index", 0)),
                    }
                )
                started = sample.get("started_at")
                if isinstance(started, int | float):
                    meta["date"] = _dt.datetime.fromtimestamp(started).isoformat(" ", timespec="seconds")
                for extra in side:
                    meta[extra] = int(f[extra]) if f[extra].is_integer() else f[extra]
                value = f[key] * scale
                if unit == "integer":
                    value = round(value)
                runs.append(pyperf.Run([value], metadata=meta, collect_metadata=False))
            benchmarks.append(pyperf.Benchmark(runs))
    if not benchmarks:
        return None
    suite = pyperf.BenchmarkSuite(benchmarks)
    suite.dump(str(path), replace=True)
    return Path(path)


def export_hlogs(document: Mapping[str, Any], stem: Path) -> list[Path]:
    """M8: the lag HDR histograms, one interval per sample: ``<stem>.<mode>.hlog`` (CO-corrected),
    ``<stem>.<mode>.uncorrected.hlog``, and ``<stem>.control[.uncorrected].hlog``.

    Units: the histograms hold integer **microseconds**; the ``Interval_Max`` column is in
    **milliseconds with three decimals** (microsecond resolution). The interval line is written here
    because hdrh's ``output_interval_histogram`` floor-divides the max (it printed 5.503 ms as 5.000)."""
    from hdrh.histogram import HdrHistogram
    from hdrh.log import HistogramLogWriter

    created = document.get("created_epoch") or 0.0
    written = []
    for mode, samples in _series(document):
        if not samples:
            continue
        for variant, suffix in (("corrected", ""), ("uncorrected", ".uncorrected")):
            path = Path(f"{stem}.{mode}{suffix}.hlog")
            with open(path, "w", encoding="utf-8") as fh:
                writer = HistogramLogWriter(fh)
                writer.output_log_format_version()
                writer.output_comment(
                    f"[perfsuite {document.get('recipe', {}).get('name')} {mode}: heartbeat lag in "
                    f"microseconds, {variant}; one interval per sample; max column in milliseconds, 3 decimals]"
                )
                writer.output_base_time(int(created * 1000))
                writer.output_legend()
                for sample in samples:
                    blob = (sample.get("hdr") or {}).get(variant)
                    if not blob:
                        continue
                    hist = HdrHistogram.decode(blob)
                    start = max(float(sample.get("started_at", created)) - created, 1e-6)
                    length = float(sample.get("window_ms", 0.0)) / 1e3
                    # hdrh's writer would print max // 1000: whole milliseconds. Same line format, exact max.
                    payload = hist.encode().decode("ascii")
                    fh.write(f"{start:f},{length:f},{hist.get_max_value() / 1000:.3f},{payload}\n")
            written.append(path)
    return written


def write_exports(document: Mapping[str, Any], results_path: Path) -> list[Path]:
    """Write the pyperf export and the ``.hlog`` files beside ``results_path``; returns their paths."""
    results_path = Path(results_path)
    stem = results_path.with_suffix("")
    paths: list[Path] = []
    pyperf_path = export_pyperf(document, Path(f"{stem}.pyperf.json"))
    if pyperf_path is not None:
        paths.append(pyperf_path)
    paths.extend(export_hlogs(document, stem))
    return paths
