"""M7/M8: the results document: environment, summaries, verdicts, atomic writes and exports.

One JSON document per run (schema ``results.schema.json`` beside this module), rewritten atomically
after every sample so an interrupted run keeps what it measured. Beside it: a pyperf export
(``<stem>.pyperf.json``, one benchmark per mode and metric, one run per sample) and the HDR
histograms (``<stem>.<mode>.hlog``, ``<stem>.<mode>.uncorrected.hlog``, ``<stem>.control.hlog``).
"""

from __future__ import annotations

import datetime as _dt
import errno
import hashlib
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from perfsuite import __version__
from perfsuite._paths import portable_path
from perfsuite.errors import PerfsuiteError

__all__ = [
    "SCHEMA_VERSION",
    "ResultsWriter",
    "bootstrap_median_ci",
    "collect_environment",
    "describe_fixture",
    "export_hlogs",
    "export_pyperf",
    "load_results",
    "results_schema",
    "sample_metrics",
    "summarize",
    "summarize_samples",
    "validate_results",
    "verdict",
    "write_exports",
    "write_json_atomic",
]

SCHEMA_VERSION = 1
#: when set, recorded as ``environment.host_label``: the machine's name in history and the results store
#: (CI runners get a new host name per job, so a workflow names its runner class here)
HOST_LABEL_ENV = "PERFSUITE_HOST_LABEL"
#: M8: seeded bootstrap of the median, so a summary is reproducible from the same samples
BOOTSTRAP_SEED = 20261020
BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95
SUMMARY_METHOD = {
    "statistic": "median",
    # the resamples and percentile interval of scipy.stats.bootstrap(method="percentile") with this seed,
    # computed with numpy alone so the core install needs no scipy (issue 18); a test checks they agree
    "ci": "percentile bootstrap (numpy; same resamples as scipy.stats.bootstrap, percentile method)",
    "confidence": CONFIDENCE,
    "n_resamples": BOOTSTRAP_RESAMPLES,
    "seed": BOOTSTRAP_SEED,
}
#: M7: the default target, on the max heartbeat gap
DEFAULT_TARGET_MS = 20.0


def now_iso() -> str:
    """UTC time as ISO 8601 with seconds."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


# -- atomic writes (M4, M8) ----------------------------------------------------------------------


def _fsync_dir(directory: Path) -> None:
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(directory, flags)
    except OSError:
        return  # Windows and friends: directories cannot be opened; nothing to sync
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EBADF):
            raise
    finally:
        os.close(fd)


def current_umask() -> int:
    """The process umask, read without changing it where Linux says it (``/proc/self/status``)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: the classic set-and-restore
    os.umask(mask)
    return mask


#: how a results document reaches the disk, ``(path, document) -> None``: :func:`write_json_atomic`, or a
#: fault-injecting stand-in in the tests (issue 14 case 6: ENOSPC while writing results)
ResultsWriter = Callable[[Path, Any], None]


def write_json_atomic(path: Path, data: Any) -> None:
    """Temp file in the same directory, write, fsync, ``os.replace``, fsync the directory.

    The file gets the permissions a plain ``open(path, "w")`` would (``0666 & ~umask``, 0644 usually),
    like the exports beside it; ``mkstemp`` alone would leave it private (0600; issue 14 case 9).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, allow_nan=False)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(path.parent)


# -- environment (M8) ------------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _unescape_mount(field: str) -> str:
    # /proc/mounts escapes space, tab, newline and backslash as octal
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def filesystem_of(path: Path) -> dict[str, str | None]:
    """Filesystem type, mount point and device of ``path`` from ``/proc/mounts`` (longest prefix)."""
    real = os.path.realpath(path)
    best: tuple[str, str, str] | None = None
    try:
        with open("/proc/mounts", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) < 3:
                    continue
                device, mount, fstype = _unescape_mount(parts[0]), _unescape_mount(parts[1]), parts[2]
                inside = real == mount or real.startswith(mount.rstrip("/") + "/")
                if inside and (best is None or len(mount) >= len(best[1])):
                    best = (device, mount, fstype)
    except OSError:
        pass
    if best is None:
        return {"type": None, "mount_point": None, "device": None}
    return {"type": best[2], "mount_point": best[1], "device": best[0]}


def probe_dir_fsync(directory: Path) -> str:
    """Whether ``fsync`` of a directory works in ``directory``: ``"ok"`` or the errno name it fails with."""
    try:
        probe = tempfile.mkdtemp(prefix=".perfsuite-probe-", dir=directory)
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, "error")
    try:
        fd = os.open(probe, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as exc:
        os.rmdir(probe)
        return "unsupported:" + errno.errorcode.get(exc.errno or 0, "error")
    try:
        os.fsync(fd)
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, "error")
    finally:
        os.close(fd)
        os.rmdir(probe)


def _git(args: Sequence[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


@cache
def git_state() -> dict[str, Any] | None:
    """Commit of the perfsuite source tree (if it is a git checkout with commits) and whether it is dirty."""
    source = Path(__file__).resolve().parent.parent.parent
    commit = _git(["rev-parse", "HEAD"], source)
    if not commit:
        return None
    status = _git(["status", "--porcelain", "--untracked-files=no"], source)
    return {"commit": commit, "dirty": bool(status)}


def collect_environment(work_dir: Path) -> dict[str, Any]:
    """M8: Python, OS, CPU, cores, work-dir filesystem and dir-fsync probe, git, host (and its label), date."""
    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    try:
        load = list(os.getloadavg())
    except (AttributeError, OSError):
        load = None
    fs = filesystem_of(work_dir)
    label = os.environ.get(HOST_LABEL_ENV, "").strip()
    env: dict[str, Any] = {
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": portable_path(sys.executable),
            "build": " ".join(platform.python_build()),
        },
        "os": {"system": platform.system(), "release": platform.release(), "platform": platform.platform()},
        "cpu": {"model": _cpu_model(), "cores": os.cpu_count(), "affinity": affinity, "machine": platform.machine()},
        "work_dir": {
            "path": portable_path(work_dir),
            "filesystem": fs["type"],
            "mount_point": fs["mount_point"],
            "device": fs["device"],
            "dir_fsync": probe_dir_fsync(work_dir),
        },
        "git": git_state(),
        "perfsuite": __version__,
        "hostname": socket.gethostname(),
        "date": now_iso(),
        "load_avg": load,
    }
    if label:
        env["host_label"] = label
    return env


# -- fixture description (M6, M8) ----------------------------------------------------------------


def describe_fixture(path: Path | None, info: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``{"name", "digest", "files", "bytes"}`` for an opaque fixture directory (harness never looks inside).

    ``info`` (from whoever resolved the fixture) wins; missing counts are walked, and a missing digest
    is a SHA-256 over relative paths, link targets and file contents.
    """
    data: dict[str, Any] = dict(info or {})
    data.setdefault("name", None)
    if path is None:
        data.setdefault("digest", None)
        data.setdefault("files", 0)
        data.setdefault("bytes", 0)
        return data
    data["path"] = portable_path(path)  # M8 without this machine's absolute paths (issue 18)
    need_digest = not data.get("digest")
    files = total = 0
    h = hashlib.sha256()
    for root, dirs, names in os.walk(path):
        dirs.sort()
        for name in sorted(names):
            full = os.path.join(root, name)
            rel = os.path.relpath(full, path)
            st = os.lstat(full)
            files += 1
            if os.path.islink(full):
                target = os.readlink(full)
                total += len(os.fsencode(target))
                if need_digest:
                    h.update(b"L" + os.fsencode(rel) + b"\0" + os.fsencode(target) + b"\0")
                continue
            total += st.st_size
            if need_digest:
                h.update(b"F" + os.fsencode(rel) + b"\0" + str(st.st_size).encode() + b"\0")
                with open(full, "rb") as fh:
                    for chunk in iter(lambda fh=fh: fh.read(1 << 20), b""):
                        h.update(chunk)
    data.setdefault("files", files)
    data.setdefault("bytes", total)
    if need_digest:
        data["digest"] = "sha256:" + h.hexdigest()
    return data


# -- summaries and verdicts (M7, M8) -------------------------------------------------------------


def summarize(values: Sequence[float]) -> dict[str, float | int]:
    """min, median, max and the seeded percentile-bootstrap CI of the median (M8), with numpy only."""
    import numpy as np

    arr = np.asarray([float(v) for v in values], dtype=float)
    if arr.size == 0:
        raise ValueError("no values to summarize")
    median = float(np.median(arr))
    low = high = median
    if arr.size >= 2 and float(np.ptp(arr)) > 0:
        low, high = bootstrap_median_ci(arr)
    return {
        "n": int(arr.size),
        "min": float(arr.min()),
        "median": median,
        "max": float(arr.max()),
        "ci_low": low,
        "ci_high": high,
    }


def bootstrap_median_ci(values: Sequence[float]) -> tuple[float, float]:
    """The percentile bootstrap CI of the median: what ``scipy.stats.bootstrap(method="percentile")`` does.

    Same draws (``rng.integers(0, n, (resamples, n))`` from the seeded generator) and the same linear
    quantiles, so summaries match scipy's to rounding while the core install stays without scipy.
    """
    import numpy as np

    arr = np.asarray(values, dtype=float)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    medians = np.median(arr[rng.integers(0, arr.size, (BOOTSTRAP_RESAMPLES, arr.size))], axis=-1)
    alpha = (1 - CONFIDENCE) / 2
    low, high = np.quantile(medians, [alpha, 1 - alpha])
    if np.isfinite(low) and np.isfinite(high):
        return float(low), float(high)
    median = float(np.median(arr))
    return median, median


def sample_metrics(sample: Mapping[str, Any]) -> dict[str, float]:
    """The numeric metrics of one sample, flattened (``lag_us.p99``, ``phases_ms.commit``, ``metrics.x``)."""
    out: dict[str, float] = {}
    for key in ("submission_ms", "ack_ms", "max_gap_ms", "window_ms"):
        if isinstance(sample.get(key), int | float):
            out[key] = float(sample[key])
    for group in ("lag_us", "lag_us_uncorrected"):
        for p in ("p50", "p90", "p99", "p999", "max"):
            value = (sample.get(group) or {}).get(p)
            if isinstance(value, int | float):
                out[f"{group}.{p}"] = float(value)
    stalls = sample.get("stalls") or {}  # M9; absent in older documents and null when not measured
    for key in ("longest_ms", "busy_ms", "callbacks"):
        if isinstance(stalls.get(key), int | float):
            out[f"stalls.{key}"] = float(stalls[key])
    gc_rec = sample.get("gc") or {}
    if isinstance(gc_rec.get("collections"), int):
        out["gc.collections"] = float(gc_rec["collections"])
    if isinstance(gc_rec.get("gc_ms"), int | float):
        out["gc.gc_ms"] = float(gc_rec["gc_ms"])
    for name, value in (sample.get("phases_ms") or {}).items():
        out[f"phases_ms.{name}"] = float(value)
    if isinstance(sample.get("drain_ms"), int | float):
        out["drain_ms"] = float(sample["drain_ms"])
    for name, value in (sample.get("metrics") or {}).items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[f"metrics.{name}"] = float(value)
    return out


def summarize_samples(samples: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, float | int]]:
    """M8: a summary per metric over the samples that report it."""
    columns: dict[str, list[float]] = {}
    for sample in samples:
        for key, value in sample_metrics(sample).items():
            columns.setdefault(key, []).append(value)
    return {key: summarize(values) for key, values in columns.items()}


def verdict(
    samples: Sequence[Mapping[str, Any]], target_ms: float = DEFAULT_TARGET_MS, reference: str | None = None
) -> dict[str, Any]:
    """M7: "met" only if every sample's max gap is <= target, GC samples included; else who missed.

    A by-design ``reference`` mode (the rejected design a recipe compares against) gets no verdict:
    ``met`` is ``None`` and ``reference`` says why; the counts are kept for whoever wants them."""
    missed = [s for s in samples if float(s["max_gap_ms"]) > target_ms]
    with_gc = [s for s in missed if int((s.get("gc") or {}).get("collections", 0)) > 0]
    out: dict[str, Any] = {
        "metric": "max_gap_ms",
        "target_ms": target_ms,
        "samples": len(samples),
        "met": (not missed) if samples and reference is None else None,
        "missed": len(missed),
        "missed_with_gc": len(with_gc),
        "worst_ms": max((float(s["max_gap_ms"]) for s in samples), default=None),
    }
    if reference is not None:
        out["reference"] = reference
    return out


# -- schema ---------------------------------------------------------------------------------------


@cache
def results_schema() -> dict[str, Any]:
    """The JSON Schema of the results document (``results.schema.json``)."""
    from importlib import resources

    text = resources.files("perfsuite.harness").joinpath("results.schema.json").read_text("utf-8")
    return json.loads(text)


def validate_results(document: Mapping[str, Any]) -> None:
    """Raise a one-line :class:`PerfsuiteError` when ``document`` does not match the schema."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(results_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        raise PerfsuiteError(f"results do not match the schema at {where}: {error.message.splitlines()[0]}")


def load_results(path: Path) -> dict[str, Any]:
    """Read a results document; one-line errors for a missing, unreadable or foreign file."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise PerfsuiteError(f"{path}: no such results file") from None
    except (OSError, ValueError) as exc:
        raise PerfsuiteError(f"{path}: not a readable results file: {exc}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_VERSION:
        raise PerfsuiteError(f"{path}: not a perfsuite results file (schema {SCHEMA_VERSION})")
    return data


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
    if document.get("run_id"):  # which run wrote this export (issue 14 case 7: never another run's)
        common["perfsuite_run_id"] = str(document["run_id"])
    benchmarks = []
    for mode, samples in _series(document):
        if not samples:
            continue
        flat = [sample_metrics(s) for s in samples]
        keys = sorted({k for f in flat for k in f if _offered(k, mode) and all(k in g for g in flat)})
        exported, side = [], []
        for key in keys:
            values = [f[key] for f in flat]
            unit = _pyperf_unit(key, values)
            (exported if unit and all(v > 0 for v in values) else side).append(key)
        for key in exported:
            values = [f[key] for f in flat]
            unit, scale = _pyperf_unit(key, values)  # type: ignore[misc]
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
