"""Evidence of one A/B pair: when the result and its baseline are the two sides of one recipe of a pairing
(``perfsuite ab``'s output: ``base/X.json``, ``head/X.json`` and ``ab.json``), the paragraph compares them as
``ab`` did, rounds paired, Holm over the gating headlines, each at ``alpha / looks``, the load policy and the
pairing's own thresholds unless given, so it states the verdicts and gated metrics ``ab`` reported, never a
separate-run reading of the same files (which drops every timing ``ab`` gated on)."""

from __future__ import annotations

from pathlib import Path

from perfsuite.errors import PerfsuiteError
from perfsuite.report._compare import Comparison, compare
from perfsuite.report._load import Result
from perfsuite.report._pairing import find_pairing, read_pairing

__all__ = ["paired_comparison", "pairing_of"]


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def pairing_of(result: Result, baseline: Result) -> Path | None:
    """The pairing file whose one recipe entry has ``baseline`` as its base and ``result`` as its head."""
    if result.path is None or baseline.path is None:
        return None
    for directory in dict.fromkeys((result.path.parent.parent, baseline.path.parent.parent)):
        found = find_pairing(directory)
        if found is None:
            continue
        try:
            pairs = read_pairing(found).pairs
        except PerfsuiteError:
            return None  # a malformed pairing: the two files are compared as separate runs, as before
        if any(_same(b, baseline.path) and _same(h, result.path) for _, b, h in pairs):
            return found
    return None


def paired_comparison(result: Result, baseline: Result, *, alpha: float | None,
                      factor: float | None) -> Comparison | None:
    """``compare(pairing)`` (what ``ab`` and ``compare DIR`` say) when the two are one pair, else ``None``."""
    found = pairing_of(result, baseline)
    return None if found is None else compare(found, alpha=alpha, factor=factor)
