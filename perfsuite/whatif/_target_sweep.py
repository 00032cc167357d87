"""The sweep and ``--validate`` through a team's own replay target (SPEC section 6).

The same figures as the engine's sweep (:mod:`perfsuite.whatif._sweep`): publications per minute (mean,
peak), bytes (what the target's code reported, else the ``--costs`` file's figure for its kind; never this
machine's engine costs), the crash-loss window, the notification delay when the target reports deliveries,
and the Pareto marking. ``validate_target`` replays a short (compressed) prefix of the trace through the
same code on a real event loop in real time and compares it with the virtual-time replay.
"""

from __future__ import annotations

import collections
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from perfsuite.cluster import Runner, Task, stream
from perfsuite.errors import PerfsuiteError
from perfsuite.whatif._costs import PublicationCosts
from perfsuite.whatif._simulate import Setting, summarize_trace
from perfsuite.whatif._sweep import WhatIf, mark_pareto, result_of
from perfsuite.whatif._target import (
    TargetFactory,
    TargetRun,
    publication_kinds,
    real_replay_target,
    replay_target,
    resolve_target,
    target_name,
)
from perfsuite.whatif._validate import LOSS_TOLERANCE_REL, LOSS_TOLERANCE_S, PUBLICATIONS_TOLERANCE, Validation
from perfsuite.workloads.traces import Trace

__all__ = ["replay_target_setting", "sweep_target", "validate_target"]


def _own_kind(kind: str) -> str:
    return kind


def sweep_target(trace: Trace, settings: Sequence[Setting], target: str | TargetFactory,
                 costs: PublicationCosts | None = None, *, work_root: Path | None = None,
                 runner: Runner | None = None) -> WhatIf:
    """Replay ``trace`` through ``target`` in virtual time once per setting; mark the Pareto-optimal ones. With a
    ``runner`` (a local pool or a Dask cluster) each setting is one task, replayed where the runner puts it, and
    the results come back in grid order: virtual time makes the replay deterministic, so the table is the same.
    There the target is imported by its name (``module:Class``, from the worker's path and this directory)."""
    if not settings:
        raise PerfsuiteError("the settings grid is empty")
    factory = resolve_target(target) if isinstance(target, str) else target
    started = time.perf_counter()
    if runner is None:
        runs = [replay_target(trace, s, factory, work_root=work_root) for s in settings]
    else:
        runs = []
        here = (os.getcwd(),)
        tasks = (Task(k, replay_target_setting, (trace, s, target, here)) for k, s in enumerate(settings))
        stream(runner, tasks, lambda task, run: runs.append(run))
    elapsed = time.perf_counter() - started
    results = [result_of(run.as_replay(), costs, _own_kind) for run in runs]
    return WhatIf(summarize_trace(trace), mark_pareto(results), costs, elapsed, {},
                  publication_kinds(runs), target_name(target))


def replay_target_setting(trace: Trace, setting: Setting, target: str | TargetFactory,
                          search: Sequence[str]) -> TargetRun:
    """Worker task: one setting of a target's grid. The target's module is imported as the client imported it:
    the client's directory (``search``) goes on the path when the worker has it (a LocalCluster, a pool)."""
    for directory in search:
        if directory not in sys.path and os.path.isdir(directory):
            sys.path.insert(0, directory)
    return replay_target(trace, setting, target)


def _loss(run: TargetRun) -> float:
    return max(run.losses, default=0.0)


def _durations(run: TargetRun) -> dict[str, list[float]]:
    spans: dict[str, list[float]] = {}
    for p in run.publications:
        spans.setdefault(p.kind, []).append(p.done_at - p.frozen_at)
    return spans


def validate_target(trace: Trace, setting: Setting, target: str | TargetFactory, *, speed: float = 10.0,
                    seconds: float | None = 120.0, work_root: Path | None = None) -> Validation:
    """Replay the first ``seconds`` of ``trace`` (all of it when None), compressed by ``speed`` with the
    setting's intervals scaled alike, through ``target`` twice: in virtual time and on a real event loop in
    real time; compare publication counts (within max(1, 5%)) and the crash-loss window (within 30 ms + 10%
    plus the real run's slowest publication: work in executor threads takes no virtual time)."""
    if not speed > 0:
        raise PerfsuiteError(f"--speed must be > 0, got {speed:g}")
    window = trace.window(0.0, seconds) if seconds is not None else trace
    if not window.events:
        raise PerfsuiteError(f"validate: {trace.source} has no events in its first {seconds:g} s")
    factory = resolve_target(target) if isinstance(target, str) else target
    fast, fast_setting = window.compressed(speed), setting.scaled(speed)
    simulated = replay_target(fast, fast_setting, factory, work_root=work_root)
    # the real replay may run out its pending work for as long as the virtual one needed, and then some;
    # when the virtual one never settled (changes left unpublished), briefly
    needed = simulated.settled_after_s if simulated.settled_after_s is not None else 2.0 * fast_setting.debounce_s
    real = real_replay_target(fast, fast_setting, factory, tail_s=1.5 * needed + 0.5, work_root=work_root)
    sim_by_kind = collections.Counter(p.kind for p in simulated.publications)
    real_by_kind = collections.Counter(p.kind for p in real.publications)
    spans = _durations(real)
    slowest = max((max(v) for v in spans.values()), default=0.0)
    sim_loss, real_loss = _loss(simulated), _loss(real)
    count_tol = max(1, round(PUBLICATIONS_TOLERANCE * len(simulated.publications)))
    loss_tol = LOSS_TOLERANCE_S + LOSS_TOLERANCE_REL * sim_loss + slowest
    problems = []
    if abs(len(simulated.publications) - len(real.publications)) > count_tol:
        problems.append(f"publications: simulated {len(simulated.publications)}, real {len(real.publications)} "
                        f"(tolerance {count_tol})")
    if abs(sim_loss - real_loss) > loss_tol:
        problems.append(f"crash-loss window: simulated {sim_loss * speed:.3f} s, real {real_loss * speed:.3f} s "
                        f"(tolerance {loss_tol * speed:.3f} s)")
    if real.unpublished and not simulated.unpublished:
        problems.append(f"the real replay left {real.unpublished} change(s) unpublished, the simulation none")

    def adopted(run: TargetRun) -> int:
        return sum(1 for p in run.publications if p.outcome == "adopted")

    return Validation(setting, speed, window.duration_s, len(simulated.publications), len(real.publications),
                      dict(sim_by_kind), dict(real_by_kind), adopted(simulated), adopted(real),
                      sim_loss * speed, real_loss * speed, count_tol, loss_tol * speed, real.wall_s,
                      {k: statistics.median(v) * 1e3 for k, v in _durations(simulated).items()},
                      {k: statistics.median(v) * 1e3 for k, v in spans.items()}, tuple(problems),
                      target_name(target))
