"""Storage profiles (SPEC M10): named, sourced latency distributions for the engine's latency layer.

A profile is data (TOML): a name, a title, a short ``source`` (quoted in every report: "simulated
storage latency: PROFILE (source)"), a list of ``[[sources]]`` (URL and what was read there) and one
``[operations.<kind>]`` table per delayed operation kind (``fsync``, ``fsync_dir``, ``replace``,
``create``), each with its own ``source``. Distribution kinds::

    kind = "fixed"      ms = 2.7
    kind = "uniform"    low_ms = 9.0   high_ms = 17.33
    kind = "quantiles"  points = [[0, 0.81], [50, 0.96], ..., [100, 7.61]]   # (percentile, ms)
    kind = "lognormal"  mean_ms = 1.68  p99_ms = 4.05                         # or median_ms + sigma
    same_as = "fsync"                                                           # reuse another kind

Built-in profiles live beside this module (``storage_profiles/*.toml``, shipped as package data); a
user's own file is loaded with :func:`load_profile_file` (``perfsuite run --storage-file FILE``). An
operation receives the resolved profile through its recipe params (``params["storage"]``, a profile
name or the table :meth:`StorageProfile.to_dict` returns) and builds its layer with
:func:`storage_model`. This is simulated latency, never a device measurement.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from perfsuite._limits import LIMITS, check_limit
from perfsuite.engine.testing import (
    LATENCY_OPS,
    DelayModel,
    Distribution,
    FixedDelay,
    LogNormalDelay,
    QuantileDelay,
    UniformDelay,
)
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import parse_toml, read_text

__all__ = [
    "StorageProfile",
    "list_profiles",
    "load_profile",
    "load_profile_file",
    "resolve_storage",
    "storage_metrics",
    "storage_model",
]

_PACKAGE_DIR = "storage_profiles"


@dataclass(frozen=True, slots=True)
class StorageProfile:
    """One validated profile: its distributions (engine objects) and every source string."""

    name: str
    title: str
    source: str
    sources: tuple[Mapping[str, str], ...]
    operations: Mapping[str, Mapping[str, Any]]  # kind -> the table as written (resolved same_as)
    origin: str = "built-in"
    distributions: Mapping[str, Distribution] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able table recorded in results (``recipe.storage``) and passed to operations."""
        return {
            "name": self.name,
            "title": self.title,
            "source": self.source,
            "sources": [dict(s) for s in self.sources],
            "origin": self.origin,
            "operations": {k: dict(v) for k, v in self.operations.items()},
            "simulated": True,
        }

    def model(self, *, seed: int, sleep: Callable[[float], None] = time.sleep) -> DelayModel:
        """A fresh :class:`~perfsuite.engine.testing.DelayModel` of this profile (seeded: reproducible draws)."""
        return DelayModel(self.distributions, seed=seed, sleep=sleep, name=self.name)


def _fail(label: str, key: str, expected: str, value: object) -> PerfsuiteError:
    return PerfsuiteError(f"{label}: {key}: expected {expected}, got {value!r}")


def _number(label: str, key: str, table: Mapping[str, Any], name: str) -> float:
    value = table.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise _fail(label, f"{key}.{name}", "a non-negative number (ms)", value)
    limit = "sigma" if name == "sigma" else "delay_ms"
    problem = check_limit(limit, value)  # `ms = inf` would sleep forever
    if problem:
        raise PerfsuiteError(f"{label}: {key}.{name}: {problem}")
    return float(value)


def _distribution(label: str, key: str, table: Mapping[str, Any]) -> Distribution:
    kind = table.get("kind")
    try:
        if kind == "fixed":
            return FixedDelay(_number(label, key, table, "ms"))
        if kind == "uniform":
            low, high = _number(label, key, table, "low_ms"), _number(label, key, table, "high_ms")
            if high < low:
                raise _fail(label, f"{key}.high_ms", f"at least low_ms ({low:g})", high)
            return UniformDelay(low, high)
        if kind == "quantiles":
            points = table.get("points")
            if not isinstance(points, list) or not all(
                    isinstance(p, list) and len(p) == 2 and all(isinstance(x, int | float) and not isinstance(x, bool)
                                                                for x in p) for p in points):
                raise _fail(label, f"{key}.points", "a list of [percentile, ms] pairs", points)
            for percentile, ms in points:
                if check_limit("percentile", percentile) or check_limit("delay_ms", ms):
                    raise _fail(label, f"{key}.points", "[percentile, ms] pairs with percentiles from 0 to 100 and "
                                f"delays from 0 to {LIMITS['delay_ms'].high:g} ms", [percentile, ms])
            return QuantileDelay(tuple((float(p), float(v)) for p, v in points))
        if kind == "lognormal":
            if "mean_ms" in table or "p99_ms" in table:
                return LogNormalDelay.from_mean_p99(_number(label, key, table, "mean_ms"),
                                                    _number(label, key, table, "p99_ms"))
            return LogNormalDelay(_number(label, key, table, "median_ms"), _number(label, key, table, "sigma"))
    except ValueError as exc:
        raise PerfsuiteError(f"{label}: {key}: {exc}") from None
    raise _fail(label, f"{key}.kind", '"fixed", "uniform", "quantiles" or "lognormal"', kind)


def _source(label: str, key: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise PerfsuiteError(f"{label}: {key}: missing (every distribution needs its source: a published "
                             "measurement with its URL, or a measurement on a named device)")
    return value


def parse_profile(data: Mapping[str, Any], label: str, *, default_name: str, origin: str) -> StorageProfile:
    """Validate a profile table (as ``tomllib`` returns it, or as :meth:`StorageProfile.to_dict` wrote it)."""
    known = {"name", "title", "source", "sources", "operations", "origin", "simulated"}
    for key in data:
        if key not in known:
            raise PerfsuiteError(f"{label}: {key}: unknown key (expected one of {', '.join(sorted(known))})")
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name.strip():
        raise _fail(label, "name", "a non-empty string", name)
    source = _source(label, "source", data.get("source"))
    title = data.get("title", name)
    if not isinstance(title, str):
        raise _fail(label, "title", "a string", title)
    sources = data.get("sources", [])
    if not isinstance(sources, list) or not all(isinstance(s, Mapping) for s in sources):
        raise _fail(label, "sources", "an array of [[sources]] tables (url, what)", sources)
    operations = data.get("operations")
    if not isinstance(operations, Mapping) or not operations:
        raise PerfsuiteError(f"{label}: operations: missing (expected [operations.<kind>] tables for "
                             f"{', '.join(LATENCY_OPS)})")
    tables: dict[str, Mapping[str, Any]] = {}
    for kind, table in operations.items():
        key = f"operations.{kind}"
        if kind not in LATENCY_OPS:
            raise PerfsuiteError(f"{label}: {key}: unknown operation kind (expected {', '.join(LATENCY_OPS)})")
        if not isinstance(table, Mapping):
            raise _fail(label, key, "a table", table)
        _source(label, f"{key}.source", table.get("source"))
        tables[kind] = table
    distributions: dict[str, Distribution] = {}
    resolved: dict[str, Mapping[str, Any]] = {}
    for kind, table in tables.items():
        key = f"operations.{kind}"
        body = table
        if "same_as" in table:
            other = table["same_as"]
            if other not in tables or "same_as" in tables[other]:
                raise _fail(label, f"{key}.same_as", "another operation kind of this profile that has its own "
                            "distribution", other)
            body = {**tables[other], "source": table["source"], "same_as": other}
        distributions[kind] = _distribution(label, key, body)
        resolved[kind] = dict(body)
    return StorageProfile(
        name=name, title=title, source=source, sources=tuple(dict(s) for s in sources),
        operations=resolved, origin=str(data.get("origin", origin)), distributions=distributions)


def _builtin_dir() -> Any:
    return resources.files("perfsuite.workloads").joinpath(_PACKAGE_DIR)


def list_profiles() -> list[str]:
    """Names of the built-in profiles."""
    return sorted(p.name[: -len(".toml")] for p in _builtin_dir().iterdir() if p.name.endswith(".toml"))


def _load_toml(text: str, label: str) -> dict[str, Any]:
    return parse_toml(text, label)


def load_profile(name: str) -> StorageProfile:
    """A built-in profile by name; one-line error listing the names otherwise."""
    entry = _builtin_dir().joinpath(f"{name}.toml")
    if not name or "/" in name or not entry.is_file():
        raise PerfsuiteError(f"unknown storage profile {name!r} (built-in: {', '.join(list_profiles())}; "
                             "or give your own with --storage-file FILE.toml)")
    return parse_profile(_load_toml(entry.read_text("utf-8"), f"storage profile {name}"), f"storage profile {name}",
                         default_name=name, origin="built-in")


def load_profile_file(path: str | os.PathLike[str]) -> StorageProfile:
    """A user's own profile file (same format as the built-in ones; every distribution needs a source)."""
    path = Path(path)
    text = read_text(path, "storage profile")  # not UTF-8 is one line too
    return parse_profile(_load_toml(text, str(path)), str(path), default_name=path.stem, origin=str(path))


def resolve_storage(spec: str | Mapping[str, Any]) -> StorageProfile:
    """A profile from a built-in name or a resolved table (what operations find in ``params["storage"]``)."""
    if isinstance(spec, str):
        return load_profile(spec)
    if isinstance(spec, Mapping):
        return parse_profile(spec, f"storage profile {spec.get('name', '?')}", default_name="storage",
                             origin=str(spec.get("origin", "recorded")))
    raise PerfsuiteError(f"storage: expected a profile name or table, got {spec!r}")


def storage_model(params: Mapping[str, Any], seed: int) -> DelayModel | None:
    """The delay model an operation must use for ``params["storage"]``, or ``None`` when none is set.

    Seeded by ``seed`` (the sample index): every mode of one round draws the same delays."""
    spec = params.get("storage")
    if spec is None:
        return None
    return resolve_storage(spec).model(seed=seed)


def storage_metrics(model: DelayModel | None, before: Any) -> dict[str, Any]:
    """Per-sample metrics of a model since the ``before`` snapshot: ``storage.injected_ms`` etc."""
    if model is None:
        return {}
    delta = model.stats().minus(before)
    return {
        "storage": {
            "injected_ms": delta.total_injected_ms,
            "delayed_ops": sum(delta.delayed.values()),
            "ops": delta.total_calls,
            "real_exceeded": sum(delta.real_exceeded.values()),
        },
        "storage_profile": model.name,
    }
