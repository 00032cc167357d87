"""SPEC section 8: the bars the finished product meets, read off results documents as verdicts.

Each bar is computed only from values in the files (never from a timed test) and says what was
measured, the target, and whether it was met; a bar whose recipe is absent is reported as not measured.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from perfsuite.report._load import Result, find_floor, find_publication_floor, latest_by_recipe
from perfsuite.report._table import sqlite_reference_for

QUICK_SET = ("idle-control", "fsync-floor", "mailbox-delivery", "root-checkpoint", "diagnostic-append")
ASYNC_RECIPES = ("mailbox-delivery", "root-checkpoint", "agent-checkpoint")
#: the recipes with SQLite reference modes beside the engine's (perfsuite.workloads.sqlite_reference)
SQLITE_RECIPES = ("mailbox-delivery", "root-checkpoint")


@dataclass(frozen=True, slots=True)
class Bar:
    """One bar of SPEC section 8: ``met`` is None when the results hold nothing to judge it by."""

    bar: str
    recipe: str
    measured: str
    target: str
    met: bool | None

    def to_json(self) -> dict[str, Any]:
        """`bars --format json`: the bar, what was measured against its target, and the verdict."""
        return asdict(self)


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _values(result: Result, mode: str, metric: str) -> list[float]:
    return list(result.values(mode).get(metric, []))


def _not_measured(bar: str, recipe: str, target: str) -> Bar:
    return Bar(bar, recipe, "not measured (recipe absent)", target, None)


def _async_under_target(latest: Mapping[str, Result]) -> list[Bar]:
    bars = []
    for recipe in ASYNC_RECIPES:
        target = "every async sample's max gap <= 20 ms, GC included"
        result = latest.get(recipe)
        if result is None or "async" not in result.modes:
            bars.append(_not_measured("async under 20 ms", recipe, target))
            continue
        verdict = result.data["modes"]["async"]["verdict"]
        gaps = _values(result, "async", "max_gap_ms")
        gc = sum(1 for s in result.samples("async") if (s.get("gc") or {}).get("collections"))
        measured = (f"max gap {min(gaps):.2f}-{max(gaps):.2f} ms over {len(gaps)} samples ({gc} with GC); "
                    f"{verdict.get('missed', 0)} missed ({verdict.get('missed_with_gc', 0)} with GC)")
        bars.append(Bar("async under 20 ms", recipe, measured, target, bool(verdict.get("met"))))
    return bars


def _async_five_times(latest: Mapping[str, Result]) -> list[Bar]:
    bars = []
    for recipe in ASYNC_RECIPES:
        target = "median sync max gap / median async max gap >= 5, same run"
        result = latest.get(recipe)
        if result is None or not {"sync", "async"} <= set(result.modes):
            bars.append(_not_measured("async gap 5x smaller", recipe, target))
            continue
        sync = _median(_values(result, "sync", "max_gap_ms"))
        asyn = _median(_values(result, "async", "max_gap_ms"))
        if sync is None or asyn is None or asyn <= 0:
            bars.append(Bar("async gap 5x smaller", recipe, "no samples", target, None))
            continue
        ratio = sync / asyn
        bars.append(Bar("async gap 5x smaller", recipe, f"{sync:.2f} / {asyn:.2f} ms = {ratio:.2f}x", target,
                        ratio >= 5.0))
    return bars


def _ack_within_floor(latest: Mapping[str, Result], everything: Sequence[Result]) -> list[Bar]:
    bars = []
    for recipe in ASYNC_RECIPES:
        target = "median async ack <= 2 x median fsync floor, same run"
        result = latest.get(recipe)
        if result is None or "async" not in result.modes:
            bars.append(_not_measured("ack within 2x fsync floor", recipe, target))
            continue
        floor = find_floor(result, everything, same_run=False)
        ack = _median(_values(result, "async", "ack_ms"))
        if floor is None or ack is None:
            bars.append(Bar("ack within 2x fsync floor", recipe, "no fsync floor in this run", target, None))
            continue
        ratio = ack / floor.ack_ms.median
        bars.append(Bar("ack within 2x fsync floor", recipe,
                        f"{ack:.2f} / {floor.ack_ms.median:.2f} ms (fsync floor) = {ratio:.2f}x", target,
                        ratio <= 2.0))
    return bars


def _ack_within_publication_floor(latest: Mapping[str, Result]) -> list[Bar]:
    """SPEC section 8: acknowledgement within 1.3x of the publication floor measured in the same run."""
    bars = []
    for recipe in ASYNC_RECIPES:
        target = "median async ack <= 1.3 x median publication floor, same run"
        result = latest.get(recipe)
        if result is None or "async" not in result.modes:
            bars.append(_not_measured("ack within 1.3x publication floor", recipe, target))
            continue
        floor = find_publication_floor(result)
        ack = _median(_values(result, "async", "ack_ms"))
        if floor is None or ack is None or floor.ack_ms.median <= 0:
            bars.append(Bar("ack within 1.3x publication floor", recipe,
                            "not measured (no publication floor in this document)", target, None))
            continue
        ratio = ack / floor.ack_ms.median
        bars.append(Bar("ack within 1.3x publication floor", recipe,
                        f"{ack:.2f} / {floor.ack_ms.median:.2f} ms (publication floor) = {ratio:.2f}x", target,
                        ratio <= 1.3))
    return bars


def _ack_within_sqlite(latest: Mapping[str, Result]) -> list[Bar]:
    """SPEC section 8: acknowledgement at most SQLite's for the same bytes, in the same document: ``sync``
    against the synchronous reference, ``async`` against the threaded one (the table's ``ack/sqlite`` pairing)."""
    bars = []
    for recipe in SQLITE_RECIPES:
        for mode, which in (("sync", "synchronous"), ("async", "threaded")):
            name = f"{mode} ack within 1.0x {which} SQLite"
            target = f"median {mode} ack <= 1.0 x median {which} SQLite reference, same run"
            result = latest.get(recipe)
            if result is None or mode not in result.modes:
                bars.append(_not_measured(name, recipe, target))
                continue
            ref = sqlite_reference_for(result, mode)
            ack = _median(_values(result, mode, "ack_ms"))
            if ref is None or ack is None:
                bars.append(Bar(name, recipe, "not measured (no SQLite reference in this document)", target, None))
                continue
            ratio = ack / ref.ack_ms.median
            bars.append(Bar(name, recipe, f"{ack:.2f} / {ref.ack_ms.median:.2f} ms (`{ref.mode}`) = {ratio:.2f}x",
                            target, ratio <= 1.0))
    return bars


def _reference_note(result: Result, mode: str) -> str:
    """`` (`full` is a reference: why)`` when a bar reads a by-design reference mode, else nothing."""
    why = result.reference(mode)
    return f" (`{mode}` is a reference: {why})" if why else ""


def _append_flat(latest: Mapping[str, Result]) -> list[Bar]:
    target = "append p99 at 6000 messages <= 1.5 x p99 at 100"
    result = latest.get("transcript-barrier")
    if result is None or "append" not in result.modes:
        return [_not_measured("append flat in length", "transcript-barrier", target)]
    values = result.values("append")
    last_key = next((k for k in sorted(values) if k.startswith("metrics.p99_us_at_") and not k.endswith("_100")),
                    None)
    first = _median(values.get("metrics.p99_us_at_100", []))
    last = _median(values.get(last_key, [])) if last_key else None
    if first is None or last is None:
        return [Bar("append flat in length", "transcript-barrier", "no append percentiles", target, None)]
    ratio = last / first
    n = last_key.rsplit("_", 1)[-1] if last_key else "?"
    return [Bar("append flat in length", "transcript-barrier",
                f"p99 {first:.1f} us at 100, {last:.1f} us at {n} = {ratio:.2f}x", target, ratio <= 1.5)]


def _delta_append(latest: Mapping[str, Result]) -> list[Bar]:
    result = latest.get("diagnostic-append")
    bars = []
    if result is None:
        return [_not_measured("delta append writes the delta", "diagnostic-append", "bytes per flush = delta"),
                _not_measured("full rewrite is O(size)", "diagnostic-append", "bytes per flush = log + delta")]
    checks: tuple[tuple[str, str, str, Callable[[Mapping[str, Any]], bool]], ...] = (
        ("delta", "delta append writes the delta", "bytes per flush = delta",
         lambda m: m.get("bytes_written") == m.get("delta_bytes")),
        ("rewrite", "full rewrite is O(size)", "bytes per flush = log + delta",
         lambda m: m.get("bytes_written") == (m.get("log_bytes") or 0) + (m.get("delta_bytes") or 0)),
    )
    for mode, bar, target, check in checks:
        if mode not in result.modes:
            bars.append(_not_measured(bar, "diagnostic-append", target))
            continue
        metrics = [s.get("metrics") or {} for s in result.samples(mode)]
        ok = bool(metrics) and all(check(m) for m in metrics)
        written = _median([float(m.get("bytes_written", 0)) for m in metrics]) or 0.0
        delta = _median([float(m.get("delta_bytes", 0)) for m in metrics]) or 0.0
        bars.append(Bar(bar, "diagnostic-append",
                        f"median {written:,.0f} B written for a {delta:,.0f} B delta "
                        f"({sum(check(m) for m in metrics)}/{len(metrics)} samples exact)"
                        + _reference_note(result, mode), target, ok))
    return bars


def _registry_tenth(latest: Mapping[str, Result]) -> list[Bar]:
    target = "sidecar-only allocation <= 1/10 of a full save"
    result = latest.get("registry-save")
    if result is None or not {"sidecar-only", "full"} <= set(result.modes):
        return [_not_measured("registry save allocates a tenth", "registry-save", target)]
    side = _median(_values(result, "sidecar-only", "allocation.total_bytes"))
    full = _median(_values(result, "full", "allocation.total_bytes"))
    if side is None or not full:
        sections = [(result.data["modes"][m].get("allocation") or {}) for m in ("sidecar-only", "full")]
        why = "no allocation pass"
        if any(s.get("samples") for s in sections):  # tracemalloc's pass cannot sum allocations
            why = "bytes allocated not measured (tracemalloc pass; PERFSUITE_ALLOCATION_TRACKER=memray sums them)"
        return [Bar("registry save allocates a tenth", "registry-save", why, target, None)]
    ratio = side / full
    return [Bar("registry save allocates a tenth", "registry-save",
                f"{side:,.0f} / {full:,.0f} B = {ratio:.3f}" + _reference_note(result, "full"), target, ratio <= 0.1)]


def _run_duration(results: Sequence[Result]) -> list[Bar]:
    """Wall time of each invocation (documents sharing a run_id), for the quick set and the catalogue."""
    runs: dict[str, list[Result]] = {}
    for result in results:
        if result.run_id:
            runs.setdefault(result.run_id, []).append(result)
    bars = []
    for run_id, members in sorted(runs.items()):
        names = {r.recipe for r in members}
        if set(QUICK_SET) == names:
            bar, target, limit = "quick set under 2 minutes", "< 120 s on 2 cores", 120.0
        elif len(names) >= 12:
            bar, target, limit = "full catalogue under 15 minutes", "< 900 s on 2 cores", 900.0
        else:
            continue
        starts = [r.created_epoch for r in members if r.created_epoch]
        ends = [_updated_epoch(r.data) for r in members]
        ends_known = [e for e in ends if e]
        if not starts or not ends_known:
            continue
        seconds = max(ends_known) - min(starts)
        bars.append(Bar(bar, f"run {run_id}", f"{seconds:.0f} s for {len(names)} recipes", target, seconds < limit))
    return bars


def _updated_epoch(data: Mapping[str, Any]) -> float | None:
    from datetime import datetime

    stamp = data.get("updated_at")
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def bars(results: Iterable[Result]) -> list[Bar]:
    """Every bar of SPEC section 8 that recipes can judge, from the newest result of each recipe."""
    everything = list(results)
    latest = latest_by_recipe(everything)
    return [
        *_async_under_target(latest),
        *_async_five_times(latest),
        *_ack_within_floor(latest, everything),
        *_ack_within_publication_floor(latest),
        *_ack_within_sqlite(latest),
        *_append_flat(latest),
        *_delta_append(latest),
        *_registry_tenth(latest),
        *_run_duration(everything),
        Bar("crash checker clean, seeded bugs caught", "perfsuite crashcheck",
            "not a recipe: run `perfsuite crashcheck` and `--seeded-bug NAME`", "0 violations; every bug caught",
            None),
    ]
