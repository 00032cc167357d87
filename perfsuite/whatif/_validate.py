"""``--validate``: replay a short trace in real time through a real Session and compare (SPEC section 6).

The real side is a portable session in a temporary directory on the system clock, every trace event
applied by the same Session method the simulator calls. Publications are observed through the engine's
published events: ``PublicationSubmitted`` names each one's kind, the observational version and
the transcript ticks it froze; ``PublicationAcknowledged`` (adopted or a no-op) or ``PublicationFailed``
ends it. (Format 1 was observed through its staging directories; format 2 stages nothing.)

``--speed F`` divides every trace time and the debounce, checkpoint and notification intervals by F, so
two minutes of storm validate in twelve seconds at F = 10. The Debouncer's 50 ms deferral step (an engine
constant) and the publications' own durations are real work and are not scaled, so they weigh F times
more than in the uncompressed run; the simulator is given the same compressed trace, the same scaled
settings and the real run's median publication durations, so the comparison stays like for like. Loss
windows are reported in trace seconds (compressed seconds times F); tolerances apply to compressed time.
"""

from __future__ import annotations

import asyncio
import collections
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from perfsuite._limits import check_limit
from perfsuite.engine import OsFileSystem, Session, SystemClock
from perfsuite.engine.events import PublicationAcknowledged, PublicationFailed, PublicationSubmitted
from perfsuite.errors import PerfsuiteError
from perfsuite.whatif._simulate import (
    DEFAULT_DURATIONS_S,
    Setting,
    TraceDriver,
    cost_kind,
    drive,
    engine_events,
    replay,
)
from perfsuite.whatif._sweep import check_settings
from perfsuite.workloads.traces import Trace, TraceEvent

#: allowed differences: publications (count) and crash-loss window (seconds of compressed, real time);
#: the loss tolerance also adds the slowest real publication's excess over its median (the simulator
#: models each kind by its median duration)
PUBLICATIONS_TOLERANCE = 0.05  # 5% of the simulated count, at least 1
LOSS_TOLERANCE_S = 0.03  # timer and loop lateness
LOSS_TOLERANCE_REL = 0.10


class _Observer:
    """A listener of the session's events, noting when each publication starts and ends (any thread)."""

    def __init__(self) -> None:
        self.t0: float | None = None
        self.lock = threading.Lock()
        self.log: list[tuple[float, str, str, Mapping[str, Any]]] = []  # (time, what, publication id, info)

    def _note(self, what: str, pub: str, info: Mapping[str, Any] | None = None) -> None:
        if self.t0 is None:
            return
        with self.lock:
            self.log.append((time.monotonic() - self.t0, what, pub, dict(info or {})))

    def __call__(self, event: object) -> None:
        if isinstance(event, PublicationSubmitted):
            self._note("start", event.publication)
            self._note("batch", event.publication, {"kind": event.kind, "observed": event.observed,
                                                    "ticks": dict(event.ticks)})
        elif isinstance(event, PublicationAcknowledged):
            if event.outcome == "adopted":
                self._note("adopt", event.publication)
            self._note("end", event.publication)
        elif isinstance(event, PublicationFailed):
            self._note("end", event.publication)


@dataclass(frozen=True, slots=True)
class Observed:
    """The real run, reduced like a simulated one (times in compressed seconds)."""

    publications: int
    by_kind: Mapping[str, int]
    generations: int
    observational_loss_max_s: float | None
    text_loss_max_s: float | None
    wall_s: float
    durations_s: Mapping[str, float]  # median start-to-finish per kind
    spread_s: float  # the slowest publication's excess over its kind's median (what medians cannot model)


@dataclass(frozen=True, slots=True)
class Validation:
    """Simulated vs real for one trace and setting; ``passed`` when both figures are within tolerance.
    Loss windows are reported in trace seconds (compressed seconds times ``speed``)."""

    setting: Setting
    speed: float
    trace_s: float
    simulated_publications: int
    real_publications: int
    simulated_by_kind: Mapping[str, int]
    real_by_kind: Mapping[str, int]
    simulated_generations: int
    real_generations: int
    simulated_loss_s: float
    real_loss_s: float
    publications_tolerance: int
    loss_tolerance_s: float
    wall_s: float
    model_durations_ms: Mapping[str, float] = field(default_factory=dict)
    real_durations_ms: Mapping[str, float] = field(default_factory=dict)
    problems: tuple[str, ...] = field(default_factory=tuple)
    target: str | None = None  # a team's own replay target; None: the engine's Session

    @property
    def passed(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        s = self.setting
        return {"target": self.target, "debounce_s": s.debounce_s, "checkpoint_interval_s": s.checkpoint_interval_s,
                "notify_max_s": s.notify_max_s, "speed": self.speed, "trace_s": self.trace_s,
                "simulated_publications": self.simulated_publications, "real_publications": self.real_publications,
                "simulated_by_kind": dict(self.simulated_by_kind), "real_by_kind": dict(self.real_by_kind),
                "simulated_generations": self.simulated_generations, "real_generations": self.real_generations,
                "simulated_loss_s": round(self.simulated_loss_s, 6), "real_loss_s": round(self.real_loss_s, 6),
                "publications_tolerance": self.publications_tolerance,
                "loss_tolerance_s": round(self.loss_tolerance_s, 6), "wall_s": round(self.wall_s, 3),
                "model_durations_ms": {k: round(v, 3) for k, v in self.model_durations_ms.items()},
                "real_durations_ms": {k: round(v, 3) for k, v in self.real_durations_ms.items()},
                "passed": self.passed, "problems": list(self.problems)}


class _Replayer(TraceDriver):
    """The simulator's trace driver on the wall clock (times since ``t0``), errors kept for after the run."""

    def __init__(self, session: Session) -> None:
        super().__init__(session, lambda: time.monotonic() - self.t0)
        self.t0 = 0.0
        self.error: BaseException | None = None

    def apply(self, event: TraceEvent) -> None:
        try:
            drive(self.session, event, self)
        except BaseException as exc:  # surfaced after the replay, not swallowed by the loop
            self.error = self.error or exc

    def idle(self) -> bool:
        return self.session.activity().quiet


def _reduce(fs: _Observer, replayer: _Replayer, wall: float) -> Observed:
    pubs: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    for at, what, pub, info in sorted(fs.log, key=lambda x: x[0]):
        entry = pubs.setdefault(pub, {})
        if what == "start":
            order.append(pub)
        elif what == "batch":
            entry.update(info)
        elif what == "adopt":
            entry["adopted"] = True
        elif what == "end":
            entry["end"] = at
    finished = sorted((p for p in order if "end" in pubs[p]), key=lambda p: pubs[p]["end"])
    changes = collections.deque(replayer.changes)
    texts = {c: collections.deque(q) for c, q in replayer.texts.items()}
    obs_losses: list[float] = []
    text_losses: list[float] = []
    for pub in finished:
        entry = pubs[pub]
        while changes and changes[0][0] <= int(entry.get("observed", -1)):
            obs_losses.append(entry["end"] - changes.popleft()[1])
        for conversation, tick in (entry.get("ticks") or {}).items():
            pending = texts.get(conversation)
            while pending and tick is not None and pending[0][0] <= tick:
                text_losses.append(entry["end"] - pending.popleft()[1])
    by_kind = collections.Counter(cost_kind(str(pubs[p].get("kind"))) for p in finished)
    spans: dict[str, list[float]] = {}
    for at, what, pub, _info in fs.log:
        if what == "start" and "end" in pubs[pub]:
            spans.setdefault(cost_kind(str(pubs[pub].get("kind"))), []).append(pubs[pub]["end"] - at)
    medians = {k: statistics.median(v) for k, v in spans.items()}
    spread = max((max(v) - medians[k] for k, v in spans.items()), default=0.0)
    return Observed(len(finished), dict(by_kind), sum(1 for p in finished if pubs[p].get("adopted")),
                    max(obs_losses) if obs_losses else None, max(text_losses) if text_losses else None, wall,
                    medians, spread)


async def _real_run(trace: Trace, setting: Setting, directory: Path) -> Observed:
    loop = asyncio.get_running_loop()
    fs = _Observer()
    settings = replace(setting.session_settings(), offload="thread")
    session = Session.open(directory, create=True, fs=OsFileSystem(), clock=SystemClock(loop), settings=settings)
    session.observers.subscribe(fs)
    replayer = _Replayer(session)
    try:
        replayer.prepare(engine_events(trace))
        await asyncio.sleep(0.05)
        started = time.monotonic()
        replayer.t0 = fs.t0 = started
        for event in engine_events(trace):
            loop.call_at(started + event.time, replayer.apply, event)
        await asyncio.sleep(max(0.0, started + trace.duration_s - time.monotonic()))
        session.stop_checkpoints()
        deadline = time.monotonic() + setting.debounce_s + 30.0
        while not replayer.idle():
            if time.monotonic() > deadline:
                raise PerfsuiteError("validate: the real session did not become idle within 30 s of the trace end")
            await asyncio.sleep(0.002)
        await asyncio.sleep(0.01)
        wall = time.monotonic() - started
    finally:
        if session.pending is not None:
            session.abandon_pending()
        session.close()
    if replayer.error is not None:
        raise PerfsuiteError(f"validate: replaying the trace on a real session failed: "
                             f"{type(replayer.error).__name__}: {replayer.error}")
    return _reduce(fs, replayer, wall)


RealRun = Callable[[Trace, Setting, Path], Coroutine[Any, Any, Observed]]


def validate(trace: Trace, setting: Setting, *, speed: float = 10.0, seconds: float | None = 120.0,
             durations: Mapping[str, float] | None = None, work_root: Path | None = None,
             real_run: RealRun | None = None) -> Validation:
    """Simulate and really run the first ``seconds`` of ``trace`` (all of it when None) at ``speed``,
    and compare publication counts and the crash-loss window. Takes about ``seconds / speed`` seconds.

    ``real_run`` replaces the real session run (default: a real Session in real time); tests give the
    comparison a fixed observation with it, so nothing they assert depends on this machine's speed."""
    problem = check_limit("speed", speed)
    if problem:
        raise PerfsuiteError(f"--speed: {problem}")
    window = trace.window(0.0, seconds) if seconds is not None else trace
    if not window.events:
        raise PerfsuiteError(f"validate: {trace.source} has no events in its first {seconds:g} s")
    check_settings(window, [setting])
    fast, fast_setting = window.compressed(speed), setting.scaled(speed)
    directory = Path(tempfile.mkdtemp(prefix="perfsuite-whatif-validate-", dir=work_root))
    try:
        real = asyncio.run((real_run or _real_run)(fast, fast_setting, directory / "session"))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    # The check is of scheduling: the simulator gets the real run's median publication durations (never
    # compressed: a publication takes what it takes), falling back to the given model for unseen kinds.
    model = {**dict(durations or DEFAULT_DURATIONS_S), **real.durations_s}
    simulated = replay(fast, fast_setting, model)
    sim_by_kind = collections.Counter(cost_kind(p.kind) for p in simulated.publications)
    sim_loss = max([*simulated.observational_losses, *simulated.text_losses], default=0.0)
    real_loss = max(real.observational_loss_max_s or 0.0, real.text_loss_max_s or 0.0)
    count_tol = max(1, round(PUBLICATIONS_TOLERANCE * len(simulated.publications)))
    loss_tol = LOSS_TOLERANCE_S + LOSS_TOLERANCE_REL * sim_loss + real.spread_s
    problems = []
    if abs(len(simulated.publications) - real.publications) > count_tol:
        problems.append(f"publications: simulated {len(simulated.publications)}, real {real.publications} "
                        f"(tolerance {count_tol})")
    if abs(sim_loss - real_loss) > loss_tol:
        problems.append(f"crash-loss window: simulated {sim_loss * speed:.3f} s, real {real_loss * speed:.3f} s "
                        f"(tolerance {loss_tol * speed:.3f} s)")
    return Validation(setting, speed, window.duration_s, len(simulated.publications), real.publications,
                      dict(sim_by_kind), dict(real.by_kind),
                      sum(1 for p in simulated.publications if p.outcome == "adopted"), real.generations,
                      sim_loss * speed, real_loss * speed, count_tol, loss_tol * speed, real.wall_s,
                      {k: v * 1e3 for k, v in model.items()}, {k: v * 1e3 for k, v in real.durations_s.items()},
                      tuple(problems))
