"""What-if tuning: replay event traces in virtual time through the engine's real schedulers (SPEC section 6).

Typical use::

    from perfsuite.whatif import load_costs, make_grid, permission_storm, sweep
    report = sweep(permission_storm(), make_grid(debounce=(0.5, 2, 5)), load_costs())
    for r in report.results:
        print(r.setting.debounce_s, r.per_minute_mean, r.loss_window_s)

Traces are JSON lines (:func:`read_trace`, :data:`KINDS`); generated (:func:`permission_storm`,
:func:`unattended_run`) or recorded from a run (:func:`recording`; your own code says its events with
:func:`emit`). :func:`validate` checks the simulation against a real session replaying the same trace
in (compressed) real time.

Your own scheduler instead of the engine's: a replay target ``module:Class`` receives the
trace's events and says its publications (:class:`ReplayContext`); :func:`sweep_target` replays it on a
:class:`VirtualTimeLoop` (your ``call_later``/``asyncio.sleep`` code, unchanged, in virtual time) and
:func:`validate_target` against a real-time replay of the same code::

    report = sweep_target(read_trace("t.jsonl"), make_grid(debounce=(0.5, 2)), "mydebounce:Target")
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
from perfsuite.whatif._loop import VirtualTimeLoop, virtual_run
from perfsuite.whatif._record import TraceRecorder, emit, record_from_environment, recording
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
from perfsuite.whatif._target import (
    DEFAULT_CHANGES,
    Publishing,
    ReplayContext,
    ReplayTarget,
    TargetRun,
    replay_target,
    resolve_target,
)
from perfsuite.whatif._target_sweep import sweep_target, validate_target
from perfsuite.whatif._validate import Validation, validate
from perfsuite.workloads.trace_gen import StormSpec, UnattendedSpec, permission_storm, unattended_run
from perfsuite.workloads.traces import (
    KINDS,
    Trace,
    TraceEvent,
    is_user_kind,
    make_trace,
    parse_lines,
    read_trace,
    write_trace,
)

__all__ = [
    "DEFAULT_CHANGES",
    "DEFAULT_CHECKPOINT_S",
    "DEFAULT_DEBOUNCE_S",
    "DEFAULT_NOTIFY_MAX_S",
    "KINDS",
    "KindCost",
    "Publication",
    "PublicationCosts",
    "Publishing",
    "Replay",
    "ReplayContext",
    "ReplayTarget",
    "Setting",
    "SettingResult",
    "StormSpec",
    "TargetRun",
    "Trace",
    "TraceEvent",
    "TraceRecorder",
    "TraceSummary",
    "UnattendedSpec",
    "Validation",
    "VirtualTimeLoop",
    "WhatIf",
    "build_table",
    "cache_path",
    "describe_notes",
    "emit",
    "is_user_kind",
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
    "record_from_environment",
    "recording",
    "replay",
    "replay_target",
    "resolve_target",
    "summarize_trace",
    "sweep",
    "sweep_target",
    "unattended_run",
    "validate",
    "validate_target",
    "virtual_run",
    "write_costs",
    "write_csv",
    "write_json",
    "write_plot",
    "write_trace",
]
