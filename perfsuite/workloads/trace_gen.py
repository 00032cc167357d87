"""Seeded, deterministic trace generators: the permission storm of SPEC M6 and an unattended agent run.

The storm follows the seed's 2026-08-25 profile: 763 permission decisions over 31 minutes, each a
permission-blocked/running pair of observational changes, grouped into 434 short bursts whose busiest
minute holds 21 of them (one publication per burst reproduces the profile's 434 generations peaking at
21 a minute; publishing every transition would be 1526 publications, 49 a minute on average).
"""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass

from perfsuite.errors import PerfsuiteError
from perfsuite.workloads.traces import Trace, TraceEvent, make_trace

#: a burst's transitions all fall within this span (s); burst starts are at least BURST_SPACING_S apart
BURST_SPAN_S = 1.2
BURST_SPACING_S = 2.6
BLOCKED, RUNNING = "permission-blocked", "running"


@dataclass(frozen=True, slots=True)
class StormSpec:
    """Parameters of :func:`permission_storm` (defaults: the seed's 2026-08-25 profile, SPEC M6)."""

    decisions: int = 763
    minutes: int = 31
    bursts: int = 434
    peak_bursts_per_minute: int = 21
    agents: int = 8
    max_decisions_per_burst: int = 4
    slow_fraction: float = 0.1  # approvals that wait 4-25 s (a human), so blocked is published alone
    seed: int = 20260825
    session: str = "storm"


def _check_storm(spec: StormSpec) -> None:
    limit = int(60 // BURST_SPACING_S)
    if spec.minutes < 1 or spec.decisions < 1 or spec.bursts < 1:
        raise PerfsuiteError("storm: minutes, decisions and bursts must be >= 1")
    if not 1 <= spec.peak_bursts_per_minute <= limit:
        raise PerfsuiteError(f"storm: peak bursts per minute must be 1..{limit} (bursts are {BURST_SPACING_S} s "
                             "apart)")
    if spec.bursts > spec.minutes * spec.peak_bursts_per_minute:
        raise PerfsuiteError(f"storm: {spec.bursts} bursts do not fit in {spec.minutes} minutes at a peak of "
                             f"{spec.peak_bursts_per_minute} a minute")
    if spec.decisions < spec.bursts or spec.decisions > spec.bursts * spec.max_decisions_per_burst:
        raise PerfsuiteError(f"storm: {spec.decisions} decisions cannot fill {spec.bursts} bursts of 1.."
                             f"{spec.max_decisions_per_burst}")
    if spec.agents < spec.max_decisions_per_burst + 2:
        raise PerfsuiteError("storm: need at least two more agents than decisions per burst")
    if not 0 <= spec.slow_fraction < 1:
        raise PerfsuiteError("storm: slow_fraction must be in [0, 1)")


def _per_minute(spec: StormSpec, rng: random.Random) -> list[int]:
    """Bursty per-minute burst counts summing to ``bursts``, none above the peak, one minute at it."""
    weights = [rng.gammavariate(2.0, 1.0) + 0.05 for _ in range(spec.minutes)]
    total = sum(weights)
    raw = [w / total * spec.bursts for w in weights]
    counts = [int(r) for r in raw]
    for index in sorted(range(spec.minutes), key=lambda i: raw[i] - counts[i], reverse=True):
        if sum(counts) >= spec.bursts:
            break
        counts[index] += 1
    peak = spec.peak_bursts_per_minute
    busiest = max(range(spec.minutes), key=lambda i: (weights[i], -i))
    excess = sum(max(0, c - peak) for c in counts)
    counts = [min(c, peak) for c in counts]
    excess += peak - counts[busiest]  # the busiest minute reaches the peak exactly
    counts[busiest] = peak
    order = sorted(range(spec.minutes), key=lambda i: weights[i], reverse=True)
    while excess > 0:  # move bursts into minutes that still have room, busier ones likelier ...
        room = [i for i in order if i != busiest and counts[i] < peak]
        counts[rng.choices(room, weights=[weights[i] for i in room])[0]] += 1
        excess -= 1
    while sum(counts) > spec.bursts:  # ... or out of the quietest ones
        donor = next(i for i in reversed(order) if i != busiest and counts[i] > 0)
        counts[donor] -= 1
    return counts


def permission_storm(spec: StormSpec | None = None) -> Trace:
    """SPEC M6 permission storm: ``decisions`` blocked/running pairs in ``bursts`` bursts of at most
    ``BURST_SPAN_S`` each, burst starts at least ``BURST_SPACING_S`` apart, bursty per minute."""
    spec = spec or StormSpec()
    _check_storm(spec)
    rng = random.Random(spec.seed)
    counts = _per_minute(spec, rng)
    starts: list[float] = []
    density: list[int] = []
    for minute, count in enumerate(counts):
        if not count:
            continue
        free = 60.0 - BURST_SPACING_S * count  # spacing trick: sorted offsets + i * spacing
        offsets = sorted(rng.uniform(0.0, free) for _ in range(count))
        starts.extend(round(60.0 * minute + off + i * BURST_SPACING_S, 3) for i, off in enumerate(offsets))
        density.extend([count] * count)
    sizes = [1] * len(starts)
    for _ in range(spec.decisions - len(starts)):  # bigger bursts in busier minutes
        open_bursts = [i for i, s in enumerate(sizes) if s < spec.max_decisions_per_burst]
        index = rng.choices(open_bursts, weights=[density[i] for i in open_bursts])[0]
        sizes[index] += 1
    agents = [f"agent-{n + 1}" for n in range(spec.agents)]
    free_at = dict.fromkeys(agents, 0.0)
    late: dict[int, list[tuple[str, int]]] = {}  # burst -> slow approvals landing in it
    events: list[TraceEvent] = []

    def emit(time: float, agent: str, flavour: str, burst: int, decision: int) -> None:
        events.append(TraceEvent(time, spec.session, agent, "activity", 0,
                                 {"flavour": flavour, "burst": burst, "decision": decision}))

    decision = 0
    carry = 0
    for burst, start in enumerate(starts):
        offset = 0.0
        for agent, number in late.pop(burst, []):
            emit(round(start + rng.uniform(0.0, BURST_SPAN_S - 0.1), 3), agent, RUNNING, burst, number)
        wanted = sizes[burst] + carry
        ready = [a for a in agents if free_at[a] <= start]
        rng.shuffle(ready)
        chosen = ready[: min(wanted, spec.max_decisions_per_burst)]
        carry = wanted - len(chosen)
        for agent in chosen:
            blocked = round(start + offset, 3)
            emit(blocked, agent, BLOCKED, burst, decision)
            later = bisect.bisect_left(starts, blocked + rng.uniform(4.0, 25.0))
            if rng.random() < spec.slow_fraction and later < len(starts):
                late.setdefault(later, []).append((agent, decision))
                free_at[agent] = starts[later] + BURST_SPAN_S
            else:
                running = round(blocked + rng.uniform(0.05, 0.45), 3)
                emit(running, agent, RUNNING, burst, decision)
                free_at[agent] = running + 0.01
            decision += 1
            offset = min(offset + rng.uniform(0.03, 0.2), 0.7)
    if carry or late or decision != spec.decisions:  # pragma: no cover - guarded by the spec checks
        raise PerfsuiteError(f"storm: could not place every decision (seed {spec.seed}); try more agents")
    meta = {"generator": "permission-storm", "seed": spec.seed, "decisions": spec.decisions,
            "transitions": 2 * spec.decisions, "bursts": len(starts), "minutes": spec.minutes,
            "peak_bursts_per_minute": max(counts), "agents": spec.agents, "slow_fraction": spec.slow_fraction,
            "burst_span_s": BURST_SPAN_S, "burst_spacing_s": BURST_SPACING_S}
    return make_trace(events, duration_s=60.0 * spec.minutes, meta=meta, source=f"storm(seed={spec.seed})")


@dataclass(frozen=True, slots=True)
class UnattendedSpec:
    """Parameters of :func:`unattended_run`: requests in flight for long stretches, streamed messages."""

    minutes: int = 60
    agents: int = 3
    request_minutes: tuple[float, float] = (3.0, 15.0)
    message_every_s: tuple[float, float] = (2.0, 8.0)
    message_bytes: tuple[int, int] = (200, 4000)
    results_to_root: bool = True  # each agent request ends with its RESULT delivered to the root's mailbox
    seed: int = 7
    session: str = "unattended"


def unattended_run(spec: UnattendedSpec | None = None) -> Trace:
    """An unattended Goal/agent run (the seed's in-flight checkpoint entry): no observational changes.
    Publications are in-flight checkpoints, each request's closing save and agents' results to the root."""
    spec = spec or UnattendedSpec()
    if spec.minutes < 1 or spec.agents < 0:
        raise PerfsuiteError("unattended: minutes must be >= 1 and agents >= 0")
    rng = random.Random(spec.seed)
    end = 60.0 * spec.minutes
    session = spec.session
    events: list[TraceEvent] = []

    def add(time: float, conversation: str, kind: str, size: int = 0) -> None:
        events.append(TraceEvent(round(time, 3), session, conversation, kind, size))

    def stream(conversation: str, start: float, stop: float, every: tuple[float, float]) -> None:
        t = start + rng.uniform(*every)
        while t < stop:
            add(t, conversation, "message", rng.randint(*spec.message_bytes))
            t += rng.uniform(*every)

    add(1.0, "root", "request-start")
    stream("root", 1.0, end - 2.0, (20.0, 90.0))
    add(end - 1.0, "root", "save")  # the turn returns after its commit (E2 barrier)
    add(end - 1.0, "root", "request-end")
    for number in range(spec.agents):
        agent = f"agent-{number + 1}"
        t = rng.uniform(5.0, 60.0)
        while True:
            stop = t + 60.0 * rng.uniform(*spec.request_minutes)
            if stop > end - 5.0:
                break
            add(t, agent, "request-start")
            stream(agent, t, stop, spec.message_every_s)
            add(stop, agent, "save")  # settlement commits the agent's transcript (E7)
            add(stop, agent, "request-end")
            if spec.results_to_root:
                add(stop + 0.01, "root", "mail", rng.randint(500, 4000))
            t = stop + rng.uniform(10.0, 120.0)
    meta = {"generator": "unattended-run", "seed": spec.seed, "minutes": spec.minutes, "agents": spec.agents}
    return make_trace(events, duration_s=end, meta=meta, source=f"unattended(seed={spec.seed})")
