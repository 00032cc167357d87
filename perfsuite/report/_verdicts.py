"""M7 verdicts as the samples say, not as a document claims: a results document is untrusted input.

A document's ``verdict`` is a summary of its own samples against its recipe's ``target_ms``; a document whose
samples hold a max gap of ``1e308`` ms and whose verdict still says "met" (edited, forged, or written by
another tool) must not read as met in any report. :func:`checked_verdicts` recomputes each mode's verdict
with the harness's own rule and keeps the stored one only where it agrees (so a genuine document, and what a
results store keeps of it, is unchanged).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perfsuite.harness import verdict

__all__ = ["checked_verdicts", "mode_reference"]

#: the verdict fields the samples and the target decide (the rest, such as ``reference``, come from the recipe)
_DECIDED = ("met", "samples", "missed", "missed_with_gc")
#: decided too, but absent from older documents' verdicts: compared when present
_DECIDED_IF_PRESENT = ("worst_ms", "target_ms")


def mode_reference(document: Mapping[str, Any], mode: str) -> str | None:
    """Why ``mode`` is a by-design reference (no verdict; shown as "reference: why"), or ``None``.

    Read from the mode's section, its verdict or the recorded recipe; older documents have none."""
    body = (document.get("modes") or {}).get(mode) or {}
    table = ((document.get("recipe") or {}).get("modes") or {}).get(mode) or {}
    for value in (body.get("reference"), (body.get("verdict") or {}).get("reference"), table.get("reference")):
        if isinstance(value, str) and value:
            return value
    return None


def _recomputed(document: Mapping[str, Any], mode: str, body: Mapping[str, Any]) -> dict[str, Any]:
    target = float(document["recipe"]["target_ms"])  # the schema requires a positive number
    return verdict(list(body.get("samples") or []), target, mode_reference(document, mode))


def checked_verdicts(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (schema-valid) with every mode's verdict as its samples and target decide it: the same
    object when every stored verdict agrees, else a copy whose disagreeing verdicts are replaced."""
    fixed: dict[str, Any] = {}
    for mode, body in document["modes"].items():
        stored = body.get("verdict") or {}
        fresh = _recomputed(document, mode, body)
        keys = (*_DECIDED, *(key for key in _DECIDED_IF_PRESENT if key in stored))
        if any(stored.get(key) != fresh.get(key) for key in keys):
            fixed[mode] = {**body, "verdict": {**stored, **fresh}}
    if not fixed:
        return document
    return {**document, "modes": {mode: fixed.get(mode, body) for mode, body in document["modes"].items()}}
