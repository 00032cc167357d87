"""Per-publication costs measured on this machine (SPEC M3), cached by perfsuite version and machine.

An allocation pass (:func:`~perfsuite.harness.measure_allocation`, memray) runs a sidecar-only registry
save, a transcript checkpoint and a mailbox delivery once each on a small session generated with the
engine; bytes written come from the recording I/O layer; an untraced pass times each acknowledgement.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import json
import os
import platform
import random
import shutil
import statistics
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite import __version__
from perfsuite._limits import check_limit
from perfsuite.engine import Message, Session
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import (
    GcRecorder,
    Heartbeat,
    SampleSpec,
    allocation_tracker,
    measure_allocation,
    measure_sample,
    read_json,
)

COSTS_SCHEMA = 1
#: cost kind -> (operation, params): the recipe workloads of SPEC section 4
OPERATIONS: Mapping[str, tuple[str, Mapping[str, Any]]] = {
    "registry": ("perfsuite.workloads.engine:registry_save", {"save": "sidecar-only"}),
    "checkpoint": ("perfsuite.workloads.engine:checkpoint", {"path": "async", "conversation": "root",
                                                            "message_chars": 2000}),
    "mail": ("perfsuite.workloads.engine:mailbox_delivery", {"path": "async", "result_chars": 4000}),
}
ENGINE_COST_KINDS: tuple[str, ...] = tuple(OPERATIONS)
FIXTURE_DESCRIPTION = "small generated session: root 200 messages of 1 KB, 3 agents of 50 messages"


@dataclass(frozen=True, slots=True)
class KindCost:
    """One publication of a kind: total bytes allocated (sum, M3), peak, bytes written when adopted,
    bytes staged (what an empty selection writes before discarding it) and untraced ack time."""

    allocated_bytes: int | None  # None: not measured (the tracemalloc pass cannot sum allocations)
    peak_bytes: int
    bytes_written: int
    staged_bytes: int
    duration_ms: float

    def to_json(self) -> dict[str, Any]:
        return {"allocated_bytes": self.allocated_bytes, "peak_bytes": self.peak_bytes,
                "bytes_written": self.bytes_written, "staged_bytes": self.staged_bytes,
                "duration_ms": round(self.duration_ms, 4)}


@dataclass(frozen=True, slots=True)
class PublicationCosts:
    """Costs per kind (registry, checkpoint, mail) and where they come from."""

    kinds: Mapping[str, KindCost]
    machine: Mapping[str, Any] = field(default_factory=dict)
    perfsuite: str = __version__
    measured_at: str = ""
    fixture: str = FIXTURE_DESCRIPTION
    tracker: str = "memray"
    source: str = ""  # the file they were read from or cached in

    def durations_s(self) -> dict[str, float]:
        return {k: c.duration_ms / 1e3 for k, c in self.kinds.items()}

    def describe(self) -> str:
        """The one line the output prints: whose costs these are."""
        where = f" (cached in {self.source})" if self.source else ""
        return (f"bytes are this machine's measured per-publication costs: {self.tracker} allocation pass on a "
                f"{self.fixture}, perfsuite {self.perfsuite}, measured {self.measured_at}{where}")

    def to_json(self) -> dict[str, Any]:
        return {"schema": COSTS_SCHEMA, "perfsuite": self.perfsuite, "machine": dict(self.machine),
                "measured_at": self.measured_at, "fixture": self.fixture, "tracker": self.tracker,
                "kinds": {k: c.to_json() for k, c in self.kinds.items()}}

    @classmethod
    def from_json(cls, data: Any, source: str, required: Iterable[str] | None = ENGINE_COST_KINDS) -> PublicationCosts:
        """Inverse of :meth:`to_json`; one-line :class:`PerfsuiteError` naming ``source`` otherwise.
        ``required``: the kinds that must be there (the engine's three; None: any, at least one, for a
        replay target's own publication kinds)."""
        if not isinstance(data, dict) or data.get("schema") != COSTS_SCHEMA or not isinstance(data.get("kinds"), dict):
            raise PerfsuiteError(f"{source}: not a perfsuite what-if costs file (schema {COSTS_SCHEMA})")
        names = list(required) if required is not None else list(data["kinds"])
        if not names:
            raise PerfsuiteError(f"{source}: kinds: no publication kind has costs")
        kinds: dict[str, KindCost] = {}
        for kind in names:
            entry = data["kinds"].get(kind)
            if not isinstance(entry, dict) or not all(k in entry for k in KindCost.__slots__):
                raise PerfsuiteError(f"{source}: kinds.{kind}: expected allocated_bytes, peak_bytes, bytes_written, "
                                     "staged_bytes and duration_ms")
            values: list[Any] = []
            for key, limit in (("allocated_bytes", "cost_bytes"), ("peak_bytes", "cost_bytes"),
                               ("bytes_written", "cost_bytes"), ("staged_bytes", "cost_bytes"),
                               ("duration_ms", "delay_ms")):
                value = entry.get(key)
                if key == "allocated_bytes" and value is None:  # not measured by a tracemalloc pass
                    values.append(None)
                    continue
                problem = check_limit(limit, value)  # finite, in range, of the right kind
                if problem:
                    raise PerfsuiteError(f"{source}: kinds.{kind}.{key}: {problem}")
                values.append(value)
            peak, written, staged = (int(v) for v in values[1:4])  # integers: checked above
            allocated = None if values[0] is None else int(values[0])  # None: not measured (tracemalloc)
            kinds[kind] = KindCost(allocated, peak, written, staged, float(values[4]))
        return cls(kinds, dict(data.get("machine") or {}), str(data.get("perfsuite", "?")),
                   str(data.get("measured_at", "?")), str(data.get("fixture", "?")),
                   str(data.get("tracker", "memray")), source)


def machine_identity() -> dict[str, Any]:
    """What makes costs comparable: host, OS, CPU architecture and count, Python."""
    return {"node": platform.node(), "system": platform.system(), "release": platform.release(),
            "machine": platform.machine(), "processor": platform.processor(), "cpus": os.cpu_count(),
            "python": platform.python_version()}


def cache_dir() -> Path:
    """``$PERFSUITE_CACHE/whatif``, else ``${XDG_CACHE_HOME:-~/.cache}/perfsuite/whatif`` (never in git)."""
    env = os.environ.get("PERFSUITE_CACHE")
    if env:
        return Path(env).expanduser() / "whatif"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "perfsuite" / "whatif"


def cache_path() -> Path:
    """The cache file for this perfsuite version on this machine."""
    digest = hashlib.sha256(json.dumps(machine_identity(), sort_keys=True).encode()).hexdigest()[:12]
    return cache_dir() / f"costs-{__version__}-{digest}.json"


def build_small_session(path: Path, seed: int = 0) -> Path:
    """A deterministic small portable session built with the engine (the cost pass's fixture)."""
    rng = random.Random(seed)
    words = ["plan", "tool", "result", "file", "diff", "test", "ok", "error", "path", "line"]

    def text(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n // 5))[:n]

    session = Session.open(path, create=True)
    try:
        for i in range(200):
            session.add_message("root", Message("user" if i % 2 == 0 else "assistant", text(1000), 1.8e9 + i))
        session.checkpoint()
        for number in range(3):
            agent = f"agent-{number + 1}"
            session.spawn_agent(agent, prompt=text(200))
            for i in range(50):
                session.add_message(agent, Message("assistant", text(1000), 1.8e9 + i))
            session.checkpoint(agent)
    finally:
        session.close()
    return path


async def _measure_kind(kind: str, fixture: Path, work: Path, timing_samples: int, tracker: str) -> KindCost:
    operation, params = OPERATIONS[kind]

    def spec(index: int, sample_kind: str) -> SampleSpec:
        return SampleSpec(recipe="whatif-costs", mode=kind, index=index, kind=sample_kind, operation=operation,
                          params=dict(params), fixture=str(fixture), work_root=str(work), sync_after_copy=False)

    record = await measure_allocation(spec(0, "allocation"), tracker=tracker)
    durations: list[float] = []
    with GcRecorder() as recorder:
        async with Heartbeat(5.0) as heartbeat:
            for index in range(timing_samples):
                sample = await measure_sample(spec(index + 1, "sample"), heartbeat, recorder)
                if sample.ack_ms is None:  # a measured sample is acknowledged; never counted as 0
                    raise PerfsuiteError(f"whatif costs: {kind}: sample {index + 1} has no acknowledgement")
                durations.append(sample.ack_ms)
    return KindCost(record.total_bytes, record.peak_bytes, _whole(record.metrics, "bytes_written", kind),
                    _whole(record.metrics, "staged_bytes", kind), round(statistics.median(durations), 4))


def _whole(metrics: Mapping[str, float | bool | None], key: str, kind: str) -> int:
    """A byte count the operation reports (0 when it reports none); an unmeasured one is an error, not 0."""
    value = metrics.get(key, 0)
    if value is None:
        raise PerfsuiteError(f"whatif costs: {kind}: {key} was not measured")
    return int(value)


def measure_costs(*, timing_samples: int = 3, work_root: Path | None = None) -> PublicationCosts:
    """Run the allocation and timing passes now (a few seconds); not cached (see :func:`load_costs`)."""
    tracker = allocation_tracker()
    work = Path(tempfile.mkdtemp(prefix="perfsuite-whatif-costs-", dir=work_root))
    try:
        fixture = build_small_session(work / "fixture")

        async def run() -> dict[str, KindCost]:
            return {kind: await _measure_kind(kind, fixture, work, timing_samples, tracker) for kind in OPERATIONS}

        kinds = asyncio.run(run())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    return PublicationCosts(kinds, machine_identity(), __version__, now, tracker=tracker)


def read_costs(path: str | os.PathLike[str], *,
               required: Iterable[str] | None = ENGINE_COST_KINDS) -> PublicationCosts:
    """A costs file (``--costs FILE``); one-line errors when missing or malformed. ``required``: the
    kinds it must hold (default the engine's three; None for a replay target's own kinds)."""
    source = os.fspath(path)
    # strictly: UTF-8, no NaN, no deep nesting
    return PublicationCosts.from_json(read_json(source, "costs file"), source, required)


def write_costs(costs: PublicationCosts, path: str | os.PathLike[str]) -> Path:
    """Write atomically (temp file + replace) so concurrent runs never see half a file."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=".costs-", dir=target.parent)
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        json.dump(costs.to_json(), out, indent=2, sort_keys=True)
    os.replace(temp, target)
    return target


def load_costs(*, refresh: bool = False) -> PublicationCosts:
    """This machine's cached costs, measured (and cached) on first use or when ``refresh``."""
    path = cache_path()
    if not refresh and path.is_file():
        try:
            costs = read_costs(path)
        except PerfsuiteError:
            costs = None  # an unreadable cache entry is measured again
        if costs is not None and costs.tracker == allocation_tracker():  # never another method's bytes
            return costs
    costs = measure_costs()
    try:
        write_costs(costs, path)
    except OSError:
        return costs  # a read-only cache still gives this run its measured costs
    return PublicationCosts(costs.kinds, costs.machine, costs.perfsuite, costs.measured_at, costs.fixture,
                            costs.tracker, str(path))
