"""The seeded generators: the permission storm of SPEC M6 and the unattended agent run."""

from __future__ import annotations

import collections
import itertools

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.whatif import StormSpec, UnattendedSpec, permission_storm, unattended_run
from perfsuite.workloads.trace_gen import BURST_SPACING_S, BURST_SPAN_S


def test_storm_has_the_profiles_counts_and_shape() -> None:
    trace = permission_storm()
    assert trace.duration_s == 31 * 60
    assert len(trace.events) == 1526 and all(e.kind == "activity" for e in trace.events)
    flavours = collections.Counter(e.flavour for e in trace.events)
    assert flavours == {"permission-blocked": 763, "running": 763}
    bursts: dict[int, list[float]] = collections.defaultdict(list)
    for event in trace.events:
        bursts[event.extra["burst"]].append(event.time)
    assert len(bursts) == 434
    starts = sorted(min(times) for times in bursts.values())
    assert max(max(t) - min(t) for t in bursts.values()) <= BURST_SPAN_S
    assert min(b - a for a, b in itertools.pairwise(starts)) >= BURST_SPACING_S - 0.002
    per_minute = collections.Counter(int(s // 60) for s in starts)
    assert max(per_minute.values()) == 21
    assert min(per_minute[m] for m in range(31)) < 10  # bursty: quiet minutes and full ones


def test_storm_pairs_alternate_per_agent_and_are_deterministic() -> None:
    trace = permission_storm()
    state: dict[str, str] = {}
    for event in trace.events:
        expected = "running" if state.get(event.conversation) == "permission-blocked" else "permission-blocked"
        assert event.flavour == expected, event
        state[event.conversation] = event.flavour
    assert permission_storm() == trace
    assert permission_storm(StormSpec(seed=1)) != trace


def test_storm_spec_is_checked() -> None:
    with pytest.raises(PerfsuiteError, match="do not fit"):
        permission_storm(StormSpec(bursts=1000))
    with pytest.raises(PerfsuiteError, match="peak bursts per minute"):
        permission_storm(StormSpec(peak_bursts_per_minute=40))


def test_unattended_run_is_checkpoints_only() -> None:
    trace = unattended_run(UnattendedSpec(minutes=30))
    kinds = collections.Counter(e.kind for e in trace.events)
    assert kinds["activity"] == kinds["discard"] == 0
    assert kinds["message"] > 100 and kinds["request-start"] == kinds["request-end"] >= 2
    in_flight: collections.Counter[str] = collections.Counter()
    for event in trace.events:  # every streamed message belongs to a request in flight
        if event.kind == "request-start":
            in_flight[event.conversation] += 1
        elif event.kind == "request-end":
            in_flight[event.conversation] -= 1
        elif event.kind == "message":
            assert in_flight[event.conversation] > 0, event
    assert unattended_run(UnattendedSpec(minutes=30)) == trace
