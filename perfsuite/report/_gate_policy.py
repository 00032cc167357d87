"""What the gate may decide on, and its outcome and exit status (SPEC section 5, the CI gate).

**A loaded runner** (the idle control says so: :func:`perfsuite.harness.machine_load`): a loaded machine's
timings cannot tell its load from a regression, even paired (a shared CI runner is loaded most of the time, and
a gate that fails there gets switched off). Its timings are then reported and not gated; the gate decides on
what does not move with the load: the counts (I/O, allocations, instructions when the callgrind pass ran them),
and the first line says which gated and why. ``strict`` keeps the earlier rule: paired timings gate whatever
the load.

**Outcomes and exit statuses** (docs/gates.md, "Exit status"):

* ``passed`` (0): no regression in what gated;
* ``neutral`` (0, or the ``--neutral-exit`` of the command): no regression in what gated, but timings could
  not gate (a loaded machine) or a timing headline stayed inconclusive, which alone fails no job unless
  ``strict``;
* ``regressed`` (1): a gating metric regressed;
* ``inconclusive`` (3): with ``strict``, a timing headline beyond the factor the worse way that the test could
  not confirm; or an incomplete document compared on purpose.

Unusable input is exit 2 (a one-line :class:`perfsuite.errors.PerfsuiteError`).
"""

from __future__ import annotations

from collections.abc import Sequence

from perfsuite.report._change import MetricChange

__all__ = ["EXIT_STATUS", "OUTCOMES", "loaded_policy", "outcome"]

#: the gate's outcomes, as the JSON's ``outcome`` says them
OUTCOMES = ("passed", "neutral", "regressed", "inconclusive")
#: each outcome's exit status (a command's ``--neutral-exit`` may give ``neutral`` another)
EXIT_STATUS = {"passed": 0, "neutral": 0, "regressed": 1, "inconclusive": 3}


def _short(metric: str) -> str:
    return metric.removeprefix("metrics.")


def loaded_policy(loaded: Sequence[str], changes: Sequence[MetricChange]) -> str:
    """``machine loaded (idle control NEW x.json: median 8.86 ms > 6 ms): timings reported, not gated; gated on:
    fsyncs, allocation.total_bytes``: the first words of a loaded comparison's verdict line."""
    gated = list(dict.fromkeys(_short(c.metric) for c in changes if c.kind == "cost" and c.gating))
    on = ", ".join(gated) if gated else ("nothing: no count was measured (allocation = true, the recording I/O "
                                         "layer's counts, or --instructions give the gate something to decide on)")
    return f"machine loaded (idle control {'; '.join(loaded)}): timings reported, not gated; gated on: {on}"


def outcome(*, regressions: bool, inconclusive: bool, incomplete: bool, strict: bool, load_policy: bool) -> str:
    """One of :data:`OUTCOMES`, by the rule of the module docstring."""
    if regressions:
        return "regressed"
    if incomplete or (inconclusive and strict):
        return "inconclusive"
    if inconclusive or load_policy:
        return "neutral"
    return "passed"
