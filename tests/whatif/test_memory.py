"""What-if memory follows the trace's events, not its session count (SPEC section 6; a 9 KB trace of 100
sessions ran out of an 8 GiB limit). Peak memory is measured by tracemalloc in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

_PEAK = textwrap.dedent("""
    import sys, tracemalloc
    from perfsuite.whatif import make_grid, make_trace, sweep, TraceEvent
    sessions = int(sys.argv[1])
    events = [TraceEvent(i * 1.0 + s * 0.001, f"s{s}", "agent-1", "activity",
                         extra={"flavour": "running" if i % 2 == 0 else "idle"})
              for s in range(sessions) for i in range(3)]
    trace = make_trace(events)
    tracemalloc.start()
    sweep(trace, make_grid(debounce=(0.5, 2.0, 5.0)), None)
    print(tracemalloc.get_traced_memory()[1])
""")


def _peak(sessions: int) -> int:
    done = subprocess.run([sys.executable, "-c", _PEAK, str(sessions)], capture_output=True, text=True, check=True,
                          timeout=600)
    return int(json.loads(done.stdout.strip().splitlines()[-1]))


def test_sweep_peak_does_not_grow_with_sessions() -> None:
    """Two sessions and 24 sessions (three events each, a grid of three settings): the peak grows by less
    than 1 MiB per extra session (each used to cost 17 MiB of preallocated log, kept across settings)."""
    small, large = _peak(2), _peak(24)
    growth = large - small
    assert growth < 22 * 1024 * 1024, f"peak {small} B for 2 sessions, {large} B for 24 (+{growth} B)"
