"""M12: the typing recipes' results as the latency a person feels: per recipe and mode, over every key.

A typing sample (:mod:`perfsuite.workloads.typing`) records each key's latency (from the instant it was due to the
driver's write of the frame that shows it) in an HDR histogram (``labels.key_hdr``, integer microseconds); here the
histograms of a mode's samples are added and read once, so p50/p99/max are over all keys of the mode, not medians
of per-sample figures. Beside them: the max heartbeat gap of the same windows (M1), the publication's
acknowledgement, and the slow keys (``labels.slow_keys_detail``) grouped by what held them: a garbage collection
(M2) when collections took at least half the key's latency, else its longest overlapping callback (M9) when that
lasted at least half of it, else "no loop callback" (the loop was not busy: the machine's scheduling, the GIL held
by another thread, the frame timer). The idle editor (``publish = "none"``) is the floor every other mode is read
against.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError

__all__ = ["NO_CALLBACK", "Blame", "KeyLatency", "KeyLatencyRow", "key_latency", "key_latency_json",
           "key_latency_table"]

#: what a slow key is blamed on when no loop callback held it for half its latency
NO_CALLBACK = "no loop callback (machine, GIL or frame timer)"


@dataclass(frozen=True, slots=True)
class Blame:
    """Slow keys held by one callback: how many, and the slowest of them (ms)."""

    name: str
    keys: int
    worst_ms: float


@dataclass(frozen=True, slots=True)
class KeyLatencyRow:
    """One mode of one typing result, over every key of its samples (times in ms)."""

    recipe: str
    mode: str
    publish: str
    samples: int
    keys: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    over_target: int
    target_ms: float
    max_gap_median_ms: float | None
    max_gap_worst_ms: float | None
    publication_ack_ms: float | None
    blame: tuple[Blame, ...]
    path: str | None

    @property
    def met(self) -> bool:
        """Every key within the target (M7's rule: unconditional, every key counts)."""
        return self.over_target == 0

    @property
    def floor(self) -> bool:
        """The idle editor: nothing published while typing."""
        return self.publish == "none"


@dataclass(frozen=True, slots=True)
class KeyLatency:
    rows: tuple[KeyLatencyRow, ...]
    target_ms: float

    def lines(self) -> list[str]:
        """The floor of each recipe, then what held each mode's slow keys."""
        out = []
        for row in self.rows:
            if row.floor:
                out.append(f"floor: {row.recipe} {row.mode} (the idle editor, nothing published): p50 {row.p50_ms:.2f} "
                           f"ms, p99 {row.p99_ms:.2f} ms, max {row.max_ms:.2f} ms over {row.keys} keys")
        for row in self.rows:
            if row.blame:
                held = "; ".join(f"{b.name} {b.keys} (worst {b.worst_ms:.1f} ms)" for b in row.blame[:3])
                out.append(f"{row.recipe} {row.mode}: slow keys held by {held}")
        return out


def _hdr_values(blobs: Sequence[str]) -> tuple[int, float, float, float]:
    from hdrh.histogram import HdrHistogram

    total = HdrHistogram(1, 600_000_000, 3)
    for blob in blobs:
        total.add(HdrHistogram.decode(blob))
    n = int(total.get_total_count())
    if n == 0:
        return 0, float("nan"), float("nan"), float("nan")
    p50, p99 = (total.get_value_at_percentile(p) / 1e3 for p in (50.0, 99.0))
    return n, p50, p99, total.get_max_value() / 1e3


def _blame(samples: Sequence[Mapping[str, Any]]) -> tuple[Blame, ...]:
    counts: dict[str, list[float]] = {}
    for sample in samples:
        for key in json.loads((sample.get("labels") or {}).get("slow_keys_detail") or "[]"):
            callbacks = key.get("callbacks") or []
            top = callbacks[0] if callbacks else None
            ms = float(key["ms"])
            if float(key.get("gc_ms") or 0) >= 0.5 * ms:
                name = f"garbage collection (generation {key.get('gc_generation')})"
            elif top and float(top["ms"]) >= 0.5 * ms:
                name = top["name"]
            else:
                name = NO_CALLBACK
            counts.setdefault(name, []).append(float(key["ms"]))
    ranked = sorted(counts.items(), key=lambda kv: (-len(kv[1]), -max(kv[1]), kv[0]))
    return tuple(Blame(name, len(v), max(v)) for name, v in ranked)


def _median(values: list[float]) -> float | None:
    import numpy as np

    return float(np.median(values)) if values else None


def _rows(result: Any, target_ms: float) -> list[KeyLatencyRow]:
    rows = []
    for mode in result.modes:
        samples = [s for s in result.samples(mode) if (s.get("labels") or {}).get("key_hdr")]
        if not samples:
            continue
        n, p50, p99, worst = _hdr_values([s["labels"]["key_hdr"] for s in samples])
        over = _over(samples, target_ms)
        gaps = [float(s["max_gap_ms"]) for s in samples]
        acks = [float(v) for s in samples if isinstance(v := (s.get("metrics") or {}).get("publication_ack_ms"),
                                                        int | float)]
        rows.append(KeyLatencyRow(
            recipe=result.recipe, mode=mode, publish=str(samples[0]["labels"].get("publish", "?")),
            samples=len(samples), keys=n, p50_ms=p50, p99_ms=p99, max_ms=worst, over_target=over,
            target_ms=target_ms, max_gap_median_ms=_median(gaps), max_gap_worst_ms=max(gaps) if gaps else None,
            publication_ack_ms=_median(acks), blame=_blame(samples),
            path=str(result.path) if result.path is not None else None))
    return rows


def _over(samples: Sequence[Mapping[str, Any]], target_ms: float) -> int:
    """Keys slower than the target, from the histograms (3 significant figures: 0.01 ms around 20 ms): each
    recorded bucket whose lowest equivalent value is over it, read off the counts array (hdrh's recorded
    iterator steps through every sub-bucket below the largest value in Python: seconds per baseline)."""
    import numpy as np
    from hdrh.histogram import HdrHistogram

    count = 0
    for sample in samples:
        hist = HdrHistogram.decode(sample["labels"]["key_hdr"])
        counts = np.ctypeslib.as_array(hist.counts)
        for index in np.flatnonzero(counts).tolist():
            if hist.get_lowest_equivalent_value(hist.get_value_from_index(index)) / 1e3 > target_ms:
                count += int(counts[index])
    return count


def key_latency(paths: Sequence[str | Path], *, target_ms: float = 20.0) -> KeyLatency:
    """Every typing result under ``paths`` (files or directories; the newest document of each recipe)."""
    from perfsuite.report import latest_by_recipe, read_results

    results = []
    for path in paths:
        results += read_results(path)
    typing = [r for r in results if any((s.get("labels") or {}).get("key_hdr") for m in r.modes
                                        for s in r.samples(m))]
    if not typing:
        raise PerfsuiteError("typing: no typing results (documents of the typing-* recipes) in "
                             + ", ".join(str(p) for p in paths))
    rows = [row for result in latest_by_recipe(typing).values() for row in _rows(result, target_ms)]
    return KeyLatency(tuple(rows), target_ms)


def _fmt(value: float | None) -> str:
    return "" if value is None or value != value else f"{value:.2f}"


def key_latency_table(report: KeyLatency) -> Any:
    """A rich table: per recipe and mode, keys, p50/p99/max, keys over the target, the windows' max gap."""
    from rich import box
    from rich.table import Table

    table = Table(title=f"typing latency: key due -> frame written (ms; target {report.target_ms:g} ms)",
                  box=box.SIMPLE_HEAD, title_justify="left", caption_justify="left",
                  caption="max gap: the heartbeat's max gap of the same windows (median / worst); pub ack: the "
                  "publication's acknowledgement (median)")
    for column in ("recipe", "mode", "keys", "p50", "p99", "max", "over", "max gap", "pub ack", "verdict"):
        table.add_column(column, justify="left" if column in ("recipe", "mode", "verdict") else "right")
    for row in report.rows:
        gap = f"{_fmt(row.max_gap_median_ms)} / {_fmt(row.max_gap_worst_ms)}"
        verdict = "floor" if row.floor else (f"met <= {row.target_ms:g}" if row.met else
                                              f"missed {row.over_target}/{row.keys}")
        table.add_row(row.recipe, row.mode, str(row.keys), _fmt(row.p50_ms), _fmt(row.p99_ms), _fmt(row.max_ms),
                      str(row.over_target), gap, _fmt(row.publication_ack_ms), verdict)
    return table


def key_latency_json(report: KeyLatency) -> dict[str, Any]:
    """``--format json``: every row with its numbers (unrounded) and its blamed callbacks."""
    return {"target_ms": report.target_ms, "rows": [
        {"recipe": r.recipe, "mode": r.mode, "publish": r.publish, "samples": r.samples, "keys": r.keys,
         "p50_ms": r.p50_ms, "p99_ms": r.p99_ms, "max_ms": r.max_ms, "over_target": r.over_target, "met": r.met,
         "floor": r.floor, "max_gap_median_ms": r.max_gap_median_ms, "max_gap_worst_ms": r.max_gap_worst_ms,
         "publication_ack_ms": r.publication_ack_ms, "path": r.path,
         "blame": [{"name": b.name, "keys": b.keys, "worst_ms": b.worst_ms} for b in r.blame]}
        for r in report.rows]}
