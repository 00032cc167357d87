"""Provenance of printed figures: every number the evidence paragraph prints is recorded
with the document it came from, the field it was read from and how it was reduced, so a test can check
each figure against its own field (not merely against "some number somewhere in the files").

A **field** is a tuple of keys from the document's root. ``"[]"`` iterates a list, ``"{}"`` the values of
a mapping, and ``"[key>0]"`` / ``"[key]"`` iterate a list keeping the entries whose (dotted) ``key`` is
positive / true. Resolving a field gives the list of leaf values it reaches (missing keys and nulls are
skipped). The **reduction** (``how``) is one of :data:`REDUCTIONS`; the **format** one of :data:`FORMATS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from perfsuite.report._format import fmt_bytes, fmt_ms, fmt_number, plural

__all__ = ["FORMATS", "REDUCTIONS", "Figure", "Figures", "metric_field", "resolve", "sample_field"]

Field = tuple[str, ...]


def _get(node: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        node = node.get(key) if isinstance(node, Mapping) else None
    return node


def resolve(document: Mapping[str, Any], path: Sequence[str]) -> list[Any]:
    """The leaf values ``path`` reaches in ``document`` (see the module docstring); nulls are skipped."""
    nodes: list[Any] = [document]
    for key in path:
        nxt: list[Any] = []
        for node in nodes:
            if key == "{}" and isinstance(node, Mapping):
                nxt.extend(node.values())
            elif key.startswith("[") and key.endswith("]") and isinstance(node, list):
                cond = key[1:-1]
                for item in node:
                    if not cond:
                        nxt.append(item)
                    elif cond.endswith(">0"):
                        value = _get(item, cond[:-2])
                        if isinstance(value, int | float) and value > 0:
                            nxt.append(item)
                    elif _get(item, cond) is True:
                        nxt.append(item)
            elif isinstance(node, Mapping) and key in node:
                nxt.append(node[key])
        nodes = [n for n in nxt if n is not None]
    return nodes


def _median(values: Sequence[float]) -> float:
    import numpy as np

    return float(np.median(np.asarray(values, dtype=float)))


#: how resolved values become the printed one
REDUCTIONS: dict[str, Callable[[list[Any]], Any]] = {
    "value": lambda v: v[0],
    "min": lambda v: min(float(x) for x in v),
    "max": lambda v: max(float(x) for x in v),
    "median": lambda v: _median([float(x) for x in v]),
    "len": lambda v: len(v[0]),
    "min_len": lambda v: min(len(x) for x in v),
    "count": len,
    "count_nonzero": lambda v: sum(1 for x in v if x),
    "day": lambda v: str(v[0])[:10],
}

#: how the reduced value is printed (the formatters of :mod:`perfsuite.report._format`)
FORMATS: dict[str, Callable[[Any], str]] = {
    "ms": fmt_ms,
    "bytes": fmt_bytes,
    "number": fmt_number,
    "count": lambda n: str(int(n)),
    "day": str,
}


@dataclass(frozen=True, slots=True)
class Figure:
    """One printed number: its text, its source document (``result``, ``floor``, ``baseline``), the field
    it was read from, the reduction and the format."""

    text: str
    source: str
    field: Field
    how: str
    fmt: str

    @property
    def where(self) -> str:
        """``source:modes/async/samples/[]/ack_ms (min)`` for messages."""
        return f"{self.source}:{'/'.join(self.field)} ({self.how})"


@dataclass
class Figures:
    """Collects :class:`Figure` s while a paragraph is written; every number goes through it."""

    docs: Mapping[str, Mapping[str, Any]]
    figures: list[Figure] = field(default_factory=list)

    def values(self, source: str, path: Field) -> list[Any]:
        """The values of a field, for decisions (what to say), not for printing."""
        return resolve(self.docs[source], path)

    def one(self, source: str, path: Field, how: str = "value", fmt: str = "number") -> str:
        """Print one reduction of a field and record where it came from."""
        values = resolve(self.docs[source], path)
        if not values and how not in ("count", "count_nonzero"):
            raise ValueError(f"no value at {source}:{'/'.join(path)}")
        text = FORMATS[fmt](REDUCTIONS[how](values))
        self.figures.append(Figure(text, source, tuple(path), how, fmt))
        return text

    def range(self, source: str, path: Field, fmt: str = "ms") -> str:
        """``lo-hi`` (or ``lo`` when both print the same) of a field's values."""
        lo = self.one(source, path, "min", fmt)
        hi_values = resolve(self.docs[source], path)
        hi = FORMATS[fmt](REDUCTIONS["max"](hi_values))
        if lo == hi:
            return lo
        self.figures.append(Figure(hi, source, tuple(path), "max", fmt))
        return f"{lo}-{hi}"

    def count(self, source: str, path: Field, word: str, words: str | None = None, how: str = "len") -> str:
        """``6 samples``: a count with its noun (``how``: ``len`` of a list, ``count`` of values...)."""
        n = int(REDUCTIONS[how](resolve(self.docs[source], path)))
        self.figures.append(Figure(str(n), source, tuple(path), how, "count"))
        return plural(n, word, words)


def sample_field(mode: str, *keys: str) -> Field:
    """The field of a per-sample value: ``modes/<mode>/samples/[]/<keys>`` (``control/samples/...``)."""
    head: Field = ("control",) if mode == "control" else ("modes", mode)
    return (*head, "samples", "[]", *keys)


def metric_field(mode: str, metric: str) -> Field:
    """The field behind a flattened metric name of :func:`perfsuite.harness.sample_metrics` (and the
    ``allocation.*`` and ``instructions.*`` names of :meth:`~perfsuite.report.Result.values`)."""
    head, _, rest = metric.partition(".")
    if head in ("allocation", "instructions") and rest:
        return ("modes", mode, head, "samples", "[]", rest)
    if rest and head in ("metrics", "phases_ms", "lag_us", "lag_us_uncorrected", "gc", "stalls"):
        return sample_field(mode, head, rest)
    return sample_field(mode, metric)
