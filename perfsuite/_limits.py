"""The largest (and smallest) values perfsuite accepts for counts, sizes and durations.

A count a recipe or a flag takes is bounded, so a typo (``samples = 1000000000000``) is one line naming
the value and the allowed range instead of a run that grows to gigabytes with no output. The bounds are
generous for real use (docs/conventions.md lists them; ``tests/test_limits.py`` checks that table
against this module) and live here, in the floor, so the harness, the workloads, the campaigns and the
CLI check the same numbers (one place per concern). The engine does not use this module.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

__all__ = [
    "LIMITS",
    "MAX_JSON_DEPTH",
    "Limit",
    "check_limit",
    "describe_limit",
    "show_number",
    "show_value",
]


@dataclass(frozen=True, slots=True)
class Limit:
    """An allowed closed range ``low..high`` of a count (``integer``) or a finite number, in ``unit``."""

    low: float
    high: float
    integer: bool = True
    unit: str = ""
    what: str = ""

    def allows(self, value: object) -> bool:
        """Whether ``value`` is a number of the right kind inside the range (never a bool, NaN or infinity)."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.integer and not isinstance(value, int):
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        return self.low <= value <= self.high  # exact for integers of any size


def show_number(value: float) -> str:
    """``1000000000000`` as typed for an integer, ``1e+12`` / ``0.5`` / ``inf`` for a float."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return f"{value:g}"


def show_value(value: object) -> str:
    """A value as a recipe or document spells it: ``"six"``, ``true``, ``1e+12``, ``a table``."""
    if isinstance(value, bool | int | float):
        return show_number(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return "nothing" if value is None else repr(value)


def describe_limit(limit: Limit) -> str:
    """``an integer from 1 to 10000`` / ``a number of ms from 0 to 60000``: what the messages say is allowed."""
    kind = "an integer" if limit.integer else "a finite number"
    unit = f" ({limit.unit})" if limit.unit else ""
    return f"{kind} from {show_number(limit.low)} to {show_number(limit.high)}{unit}"


def check_limit(name: str, value: object) -> str | None:
    """Why ``value`` is not allowed for ``LIMITS[name]`` (``expected ..., got ...: at most ...``), or ``None``."""
    limit = LIMITS[name]
    if limit.allows(value):
        return None
    shown = show_value(value)
    why = ""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and not (isinstance(value, float) and not math.isfinite(value)):
        assert isinstance(value, int | float)
        if value > limit.high:
            why = f" (at most {show_number(limit.high)})"
        elif value < limit.low:
            why = f" (at least {show_number(limit.low)})"
    return f"expected {describe_limit(limit)}, got {shown}{why}"


#: how deeply a JSON document perfsuite reads may nest (its results nest about 8 deep); deeper is refused in
#: one line before anything recursive (a schema check, a report) can meet it
MAX_JSON_DEPTH = 64

_SECONDS_PER_YEAR = 366 * 86_400

#: name -> allowed range. Names are the recipe keys and options they bound (``--samples`` is ``samples``).
LIMITS: dict[str, Limit] = {
    # recipe keys and `run`/`sweep`/`ab` overrides (harness); plans are built in memory before a run starts
    "samples": Limit(1, 10_000, what="latency samples per mode (recipe key, --samples)"),
    "warmup": Limit(0, 1_000, what="discarded warm-up rounds (recipe key, --warmup)"),
    "worker_warmup": Limit(0, 100,
                           what="discarded samples in each sample's worker before it (recipe key, --worker-warmup)"),
    "control_windows": Limit(1, 10_000, what="idle-control windows (recipe key)"),
    "allocation_samples": Limit(1, 1_000, what="allocation-pass samples per mode (recipe key, --allocation-samples)"),
    "instructions_samples": Limit(1, 1_000, what="instruction-pass samples per mode (recipe key)"),
    "heap": Limit(0, 100_000_000, what="live objects held through every sample (recipe key, --heap)"),
    "modes": Limit(1, 100, what="modes of one recipe"),
    "plan_entries": Limit(1, 200_000, what="entries of a run's plan: modes x (warm-ups + samples + passes) + controls"),
    "seed": Limit(0, 2**32 - 1, what="seeds of random orders and samples (recipe key, --seed)"),
    "heartbeat_ms": Limit(0.1, 1_000, integer=False, unit="ms", what="the heartbeat period (recipe key)"),
    "target_ms": Limit(0.001, 3_600_000, integer=False, unit="ms", what="the max-gap target (recipe key)"),
    "window_tail_ms": Limit(0, 60_000, integer=False, unit="ms", what="the window after the ack (recipe key)"),
    "settle_ms": Limit(0, 60_000, integer=False, unit="ms", what="the settle before each window (recipe key)"),
    "ack_timeout_s": Limit(0.001, 86_400, integer=False, unit="s", what="the acknowledgement timeout (recipe key)"),
    # `ab`, `compare`, `evidence --baseline`
    "looks": Limit(1, 100, what="sequential looks of `ab` (--looks)"),
    "factor": Limit(1, 100, integer=False, what="the ratio that counts as a change (--factor; more than 1)"),
    # operation parameters of perfsuite.workloads (declared with these bounds)
    "window_ms": Limit(0, 3_600_000, integer=False, unit="ms", what="waits and busy times of the probes"),
    "bytes": Limit(0, 1 << 30, what="bytes an operation writes or allocates (1 GiB)"),
    "messages": Limit(1, 1_000_000, what="messages an operation appends"),
    "records": Limit(0, 1_000_000, what="records, cycles or additions an operation makes"),
    "checkpoints": Limit(1, 10_000, what="checkpoints run back to back in one sample"),
    "chars": Limit(0, 64 << 20, what="characters of one message or result (64 Mi)"),
    # what-if traces (SPEC section 6): event sizes are built in memory by the replay
    "trace_size": Limit(0, 64 << 20, what="bytes of one trace event (64 MiB)"),
    "trace_time_s": Limit(0, _SECONDS_PER_YEAR, integer=False, unit="s", what="trace times and durations (a year)"),
    "timer_firings": Limit(1, 100_000, what="firings of one simulated timer over a trace"),
    "speed": Limit(0.01, 1_000, integer=False, what="time compression of whatif --validate (--speed)"),
    "grid_settings": Limit(1, 10_000, what="settings of a whatif grid or a sweep (the product of its values)"),
    "cost_bytes": Limit(0, 1 << 40, what="bytes of one publication in a what-if costs file (1 TiB)"),
    # storage profiles (SPEC M10): one simulated delay
    "delay_ms": Limit(0, 60_000, integer=False, unit="ms", what="one simulated storage delay"),
    "sigma": Limit(0, 10, integer=False, what="the spread of a log-normal storage delay"),
    "percentile": Limit(0, 100, integer=False, what="a percentile of a storage delay table"),
    # fixture specs: every number a generator takes (counts and bytes; floats: shares, seconds, epoch times)
    "fixture_count": Limit(0, 2**31 - 1, what="integers of a fixture spec's params"),
    "fixture_number": Limit(0, 1e10, integer=False, what="numbers of a fixture spec's params"),
    # campaigns
    "kills": Limit(1, 100_000, what="SIGKILLs of crashcheck --kill"),
    "max_states": Limit(1, 1_000_000, what="crash states per workload and model (crashcheck --max-states)"),
    "max_cases": Limit(1, 1_000_000, what="corruption cases per workload (crashcheck --max-cases)"),
    "jobs": Limit(1, 256, what="worker processes (crashcheck --jobs)"),
    # files perfsuite reads (results, pairings, costs, traces, recipes): the size is checked before reading
    "document_bytes": Limit(0, 256 << 20, what="bytes of one document or trace file perfsuite reads (256 MiB)"),
    "created_epoch": Limit(0, 4_102_444_800, integer=False, unit="s",
                           what="a results document's created_epoch (1970 to 2100)"),
    # profile
    "repeat": Limit(1, 10_000, what="operations per profiled mode (profile --repeat)"),
    "rate": Limit(1, 10_000, unit="Hz", what="sampling rate of py-spy (profile --rate)"),
}
