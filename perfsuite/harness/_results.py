"""M7/M8: the results document: summaries, verdicts, the schema and atomic writes (the environment it records
is collected by ``_environment``, its pyperf/HDR exports are written by ``_exports``).

One JSON document per run (schema ``results.schema.json`` beside this module), rewritten atomically
after every sample so an interrupted run keeps what it measured. Beside it: a pyperf export
(``<stem>.pyperf.json``, one benchmark per mode and metric, one run per sample) and the HDR
histograms (``<stem>.<mode>.hlog``, ``<stem>.<mode>.uncorrected.hlog``, ``<stem>.control.hlog``).
"""

from __future__ import annotations

import errno
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

from perfsuite.errors import PerfsuiteError
from perfsuite.harness._documents import read_json

# re-exported: the results document's names, wherever they live (_environment, _exports)
from perfsuite.harness._environment import (
    HOST_LABEL_ENV,
    collect_environment,
    describe_fixture,
    filesystem_of,
    git_state,
    now_iso,
    probe_dir_fsync,
)

__all__ = [
    "HOST_LABEL_ENV",
    "SCHEMA_VERSION",
    "ResultsWriter",
    "bootstrap_median_ci",
    "collect_environment",
    "describe_fixture",
    "filesystem_of",
    "git_state",
    "load_results",
    "now_iso",
    "probe_dir_fsync",
    "results_schema",
    "sample_metrics",
    "summarize",
    "summarize_samples",
    "validate_results",
    "verdict",
    "write_json_atomic",
]

SCHEMA_VERSION = 1
#: M8: seeded bootstrap of the median, so a summary is reproducible from the same samples
BOOTSTRAP_SEED = 20261020
BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95
SUMMARY_METHOD = {
    "statistic": "median",
    # the resamples and percentile interval of scipy.stats.bootstrap(method="percentile") with this seed,
    # computed with numpy alone so the core install needs no scipy; a test checks they agree
    "ci": "percentile bootstrap (numpy; same resamples as scipy.stats.bootstrap, percentile method)",
    "confidence": CONFIDENCE,
    "n_resamples": BOOTSTRAP_RESAMPLES,
    "seed": BOOTSTRAP_SEED,
}
#: M7: the default target, on the max heartbeat gap
DEFAULT_TARGET_MS = 20.0



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
#: fault-injecting stand-in in the tests (ENOSPC while writing results)
ResultsWriter = Callable[[Path, Any], None]


def write_json_atomic(path: Path, data: Any) -> None:
    """Temp file in the same directory, write, fsync, ``os.replace``, fsync the directory.

    The file gets the permissions a plain ``open(path, "w")`` would (``0666 & ~umask``, 0644 usually),
    like the exports beside it; ``mkstemp`` alone would leave it private (0600).
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


def bootstrap_median_ci(values: ArrayLike) -> tuple[float, float]:
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


def _import_jsonschema() -> Any:
    """jsonschema without its IRI format checker. When rfc3987-syntax is installed (the notebooks extra's
    jupyter-events pulls it in), jsonschema imports it, and it builds a Lark grammar at import: 3-4 s of every
    command that reads results on a slow machine. perfsuite never checks formats. The module is kept out for
    this one import only (a ``None`` in ``sys.modules`` is an ImportError, which jsonschema skips), so a
    program that imports it later still gets it."""
    if "jsonschema" in sys.modules:
        return sys.modules["jsonschema"]
    kept_out = "rfc3987_syntax" not in sys.modules
    if kept_out:
        sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]
    try:
        import jsonschema
    finally:
        if kept_out:  # nothing can have imported it over the None
            del sys.modules["rfc3987_syntax"]
    return jsonschema


def validate_results(document: Mapping[str, Any]) -> None:
    """Raise a one-line :class:`PerfsuiteError` when ``document`` does not match the schema: jsonschema's
    verdict with the ``validate`` extra, else the standard library's checker (``_schema``)."""
    try:
        jsonschema = _import_jsonschema()
    except ImportError:
        from perfsuite.harness._schema import first_error

        found = first_error(document, results_schema())
        if found is not None:
            raise PerfsuiteError(f"results do not match the schema at {found[0]}: {found[1]}") from None
        _check_times(document)
        return
    validator = jsonschema.Draft202012Validator(results_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        raise PerfsuiteError(f"results do not match the schema at {where}: {error.message.splitlines()[0]}")
    _check_times(document)


def _check_times(document: Mapping[str, Any]) -> None:
    """The document's dates are ISO 8601 and its epoch a time between 1970 and 2100 (M8: when it was measured):
    ``"yesterday at noon"`` or ``-1e18`` pass the schema's "a string" / "a number" and would order runs."""
    from datetime import datetime

    from perfsuite._limits import check_limit

    dates = [(key, document.get(key)) for key in ("created_at", "updated_at", "finished_at")]
    dates += [(f"resumed_at/{i}", value) for i, value in enumerate(document.get("resumed_at") or [])]
    dates.append(("environment/date", (document.get("environment") or {}).get("date")))
    for where, value in dates:
        if not isinstance(value, str):
            continue
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise PerfsuiteError(f"results do not match the schema at {where}: {json.dumps(value)[:80]} is not "
                                 "an ISO 8601 date and time") from None
    if "created_epoch" in document:
        problem = check_limit("created_epoch", document["created_epoch"])
        if problem:
            raise PerfsuiteError(f"results do not match the schema at created_epoch: {problem}")


def load_results(path: Path, *, parsed: Any = None) -> dict[str, Any]:
    """Read a results document; one-line errors for a missing, unreadable or foreign file (strictly: not
    UTF-8, NaN or Infinity, or nested deeper than a results document ever is). ``parsed``: the
    document a reader has already decoded from ``path`` (``read_json``), checked here and not read again."""
    data = read_json(path, "results file") if parsed is None else parsed
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_VERSION:
        raise PerfsuiteError(f"{path}: not a perfsuite results file (schema {SCHEMA_VERSION})")
    return data


