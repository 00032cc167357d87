"""M10: live-heap profiles. N live objects shaped like an application's loaded session state.

A sample with ``heap = N`` runs while the process holds about N extra live objects, built before the
operation's factory (so before a session opens) and released after its metrics: the collector has to
live with them, as it does in an application with loaded conversations. GC stays natural.

**Shape.** The heap is a list of conversation records as an agent runtime holds them after parsing its
transcripts (the engine's own record, ``role``, ``content``, ``timestamp``, plus an id and the usual
model metadata)::

    {"id": "msg-00000042", "role": "assistant", "timestamp": 1.8e9 + i,
     "content": "<16-256 chars>", "meta": {"model": "model-a", "tokens": 300-5000,
                                              "tool_calls": [{"name": "bash", "arguments": "<24-200 chars>"}]}}

``tool_calls`` holds one call on every fourth record and is empty otherwise; role and model strings
are shared. Per record that is 7.5 new objects on average: 2.25 dicts and 1 list (43% GC-tracked
containers), 2.25 strings (30%), one float and one int (27%). Strings are kept short on purpose: a
collection's cost grows with the number of tracked containers, not with bytes. The exact counts of
each sample are recorded in its ``heap`` entry.

**Where collections land.** CPython (3.11) runs a full collection only when the objects promoted to
the oldest generation since the last one exceed a quarter of those it holds, so where the next one
falls depends on the application's recent history. To place each sample at a seeded random point of
that cycle, the last ``phase * N/5`` objects (``phase`` uniform in [0, 1)) are built after an explicit
full collection: the next natural one is that much nearer. Outside the window, after the metrics, a
probe times one full ``gc.collect()`` (``full_gc_ms``): what a collection costs with this heap in this
state (e.g. after the engine's ``gc.freeze()``), whether or not one landed in the window.
"""

from __future__ import annotations

import gc
import random
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["HEAP_ROLES", "LiveHeap", "build_heap", "probe_full_collection"]

HEAP_ROLES = ("user", "assistant", "tool")
_MODEL = "model-a"
_TOOL = "bash"


@dataclass(slots=True)
class LiveHeap:
    """The live objects of one sample (held in ``records``) and how many of each kind were made."""

    records: list[dict[str, Any]]
    objects: int
    dicts: int
    lists: int
    strings: int
    numbers: int
    phase: float
    build_ms: float

    @property
    def containers(self) -> int:
        """GC-tracked objects among them (dicts and lists)."""
        return self.dicts + self.lists

    def to_dict(self) -> dict[str, Any]:
        """The ``heap`` entry of a sample (counts and build cost; the records themselves stay in memory)."""
        return {
            "objects": self.objects,
            "records": len(self.records),
            "dicts": self.dicts,
            "lists": self.lists,
            "strings": self.strings,
            "numbers": self.numbers,
            "containers": self.containers,
            "phase": round(self.phase, 6),
            "build_ms": round(self.build_ms, 3),
        }


def _record(i: int, rng: random.Random) -> tuple[dict[str, Any], int, int, int, int]:
    calls: list[dict[str, str]] = []
    dicts, strings = 2, 2
    if i % 4 == 0:
        calls.append({"name": _TOOL, "arguments": "a" * rng.randint(24, 200)})
        dicts, strings = 3, 3
    record = {
        "id": f"msg-{i:08d}",
        "role": HEAP_ROLES[i % 3],
        "timestamp": 1.8e9 + i,
        "content": "c" * rng.randint(16, 256),
        "meta": {"model": _MODEL, "tokens": rng.randint(300, 5000), "tool_calls": calls},
    }
    return record, dicts, 1, strings, 2


def build_heap(objects: int, seed: int) -> LiveHeap:
    """About ``objects`` live objects in session-state records (module docstring), seeded."""
    started = time.perf_counter()
    rng = random.Random(seed)
    phase = rng.random()
    late = int(phase * objects / 5)  # built after a full collection: the next natural one is nearer
    records: list[dict[str, Any]] = []
    totals = [0, 0, 0, 0]  # dicts, lists, strings, numbers
    made = 0
    collected = False
    i = 0
    while made < objects:
        if not collected and made >= objects - late:
            gc.collect()
            collected = True
        record, *counts = _record(i, rng)
        records.append(record)
        for k, n in enumerate(counts):
            totals[k] += n
        made += sum(counts)
        i += 1
    dicts, lists, strings, numbers = totals
    return LiveHeap(records, made, dicts, lists, strings, numbers, phase, (time.perf_counter() - started) * 1e3)


def probe_full_collection() -> float:
    """Milliseconds of one full ``gc.collect()`` now (outside any window: the cost a landing one has)."""
    started = time.perf_counter()
    gc.collect()
    return (time.perf_counter() - started) * 1e3
