"""What-if tuning: replay event traces in virtual time through the engine's real schedulers (SPEC section 6).

Typical use::

    from perfsuite.whatif import load_costs, make_grid, permission_storm, sweep
    report = sweep(permission_storm(), make_grid(debounce=(0.5, 2, 5)), load_costs())
    for r in report.results:
        print(r.setting.debounce_s, r.per_minute_mean, r.loss_window_s)

Traces are JSON lines (:func:`read_trace`, :data:`KINDS`); generated (:func:`permission_storm`,
:func:`unattended_run`) or recorded from a run (:func:`recording`). :func:`validate` checks the
simulation against a real session replaying the same trace in (compressed) real time.
"""

from perfsuite.whatif._costs import (
    KindCost,
    PublicationCosts,
    cache_path,
    load_costs,
    measure_costs,
    read_costs,
    write_costs,
)
from perfsuite.whatif._export import build_table, describe_notes, write_csv, write_json, write_plot
from perfsuite.whatif._record import TraceRecorder, recording
from perfsuite.whatif._simulate import Publication, Replay, Setting, TraceSummary, replay, summarize_trace
from perfsuite.whatif._sweep import (
    DEFAULT_CHECKPOINT_S,
    DEFAULT_DEBOUNCE_S,
    DEFAULT_NOTIFY_MAX_S,
    SettingResult,
    WhatIf,
    make_grid,
    pareto_front,
    parse_intervals,
    sweep,
)
from perfsuite.whatif._validate import Validation, validate
from perfsuite.workloads.trace_gen import StormSpec, UnattendedSpec, permission_storm, unattended_run
from perfsuite.workloads.traces import KINDS, Trace, TraceEvent, make_trace, parse_lines, read_trace, write_trace

__all__ = [
    "DEFAULT_CHECKPOINT_S",
    "DEFAULT_DEBOUNCE_S",
    "DEFAULT_NOTIFY_MAX_S",
    "KINDS",
    "KindCost",
    "Publication",
    "PublicationCosts",
    "Replay",
    "Setting",
    "SettingResult",
    "StormSpec",
    "Trace",
    "TraceEvent",
    "TraceRecorder",
    "TraceSummary",
    "UnattendedSpec",
    "Validation",
    "WhatIf",
    "build_table",
    "cache_path",
    "describe_notes",
    "load_costs",
    "make_grid",
    "make_trace",
    "measure_costs",
    "pareto_front",
    "parse_intervals",
    "parse_lines",
    "permission_storm",
    "read_costs",
    "read_trace",
    "recording",
    "replay",
    "summarize_trace",
    "sweep",
    "unattended_run",
    "validate",
    "write_costs",
    "write_csv",
    "write_json",
    "write_plot",
    "write_trace",
]
