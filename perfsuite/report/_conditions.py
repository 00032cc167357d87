"""M10 run conditions as the report states them: simulated storage latency, live heap, gc.freeze().

Every table and paragraph built from a document run under a storage profile says "simulated storage
latency: PROFILE (source)", so it can never be read as a device measurement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from perfsuite.report._load import Result

__all__ = ["Conditions", "conditions_of", "stall_ms"]


@dataclass(frozen=True, slots=True)
class Conditions:
    """What a document was measured under, read from its recipe."""

    storage: str | None  # profile name
    storage_source: str | None  # the profile's short source (None: not recorded)
    heap: int
    freeze: bool

    @property
    def storage_text(self) -> str | None:
        """``simulated storage latency: nvme (source)``, or ``None`` without a profile."""
        if self.storage is None:
            return None
        source = self.storage_source or "source not recorded"
        return f"simulated storage latency: {self.storage} ({source})"

    @property
    def lines(self) -> list[str]:
        """One caption line per condition in force (empty: the machine as it is)."""
        out = []
        if self.storage_text:
            out.append(self.storage_text + "; not a device measurement")
        if self.heap:
            out.append(f"live heap: {self.heap} objects shaped like loaded session state, natural GC")
        if self.freeze:
            out.append("engine setting freeze_loaded: gc.freeze() after each session opened")
        return out


def conditions_of(document: Mapping[str, Any] | Result) -> Conditions:
    """The conditions recorded in a results document (absent keys: none)."""
    doc = document.data if isinstance(document, Result) else document
    recipe = doc.get("recipe") or {}
    storage = recipe.get("storage")
    name = source = None
    if isinstance(storage, Mapping):
        name = str(storage.get("name") or "unnamed profile")
        source = str(storage["source"]) if storage.get("source") else None
    elif isinstance(storage, str) and storage:
        name = storage
    heap = recipe.get("heap") or 0
    modes = [m for m in (recipe.get("modes") or {}).values() if isinstance(m, Mapping)]
    freeze = bool(modes) and all(m.get("freeze_loaded") is True for m in modes)
    return Conditions(name, source, int(heap) if isinstance(heap, int) else 0, freeze)


#: where the loop-stall metric (M9) may sit in a sample: (path of keys); the first present wins
_STALL_PATHS: Sequence[tuple[str, ...]] = (
    ("loop_stall_ms",),
    ("stall_ms",),
    ("loop", "longest_callback_ms"),
    ("loop", "longest_ms"),
    ("loop_stalls", "longest_ms"),
    ("loop_stalls", "longest_callback_ms"),
    ("stalls", "longest_ms"),
    ("metrics", "loop_stall_ms"),
    ("metrics", "loop.longest_callback_ms"),
)


def stall_ms(sample: Mapping[str, Any]) -> float | None:
    """The sample's longest loop stall in ms (M9: longest single callback), or ``None`` when the document
    does not measure it ("not measured", never 0)."""
    for path in _STALL_PATHS:
        node: Any = sample
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        if isinstance(node, int | float) and not isinstance(node, bool):
            return float(node)
    return None
