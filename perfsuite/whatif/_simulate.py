"""Virtual-time replay of a trace through the engine's own sessions (SPEC section 6).

Each trace session is a real :class:`~perfsuite.engine.Session` (not a subclass: one scheduling core) on
a :class:`~perfsuite.engine.testing.VirtualClock` and a :class:`~perfsuite.engine.testing.MemoryFileSystem`: its gate,
schedulers, job acceptance, finish order and every publication phase are the engine's code. Only time
is modelled: a :class:`~perfsuite.engine.testing.VirtualRunner` keeps each accepted job (and the gate) for its
kind's measured duration before its phases run; the synchronous writer takes no virtual time.
Publications and what each captured are read from the engine's events.
"""

from __future__ import annotations

import collections
import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from perfsuite.engine import Message, Observations, Session, SessionError, SessionSettings
from perfsuite.engine.events import Event, PublicationAcknowledged, PublicationFailed, PublicationSubmitted
from perfsuite.engine.testing import MemoryFileSystem, VirtualClock, VirtualRunner
from perfsuite.errors import PerfsuiteError
from perfsuite.workloads.traces import OBSERVATIONAL, Trace, TraceEvent, is_user_kind

#: publication durations (s) used when no measured costs are given
DEFAULT_DURATIONS_S: Mapping[str, float] = {"registry": 0.005, "checkpoint": 0.02, "mail": 0.005}
#: how long after the trace end pending timers may still run (a debounce, a deferral chain)
_TAIL_LIMIT_S = 3600.0
#: each simulated session's log capacity: the engine preallocates its logs with real zeros (16 MiB by default),
#: which in memory cost every trace session 16 MiB and more, so a small trace of many sessions ran out of
#: memory. A small log only rolls over sooner; roll-overs take no virtual time, so the figures are the same
#: and memory follows the trace's events and their bytes, not its session count.
SIMULATED_LOG_CAPACITY = 256 * 1024


def cost_kind(batch_kind: str) -> str:
    """Publication kind -> cost kind: registry (sidecar only), checkpoint (a transcript with its sidecar:
    checkpoints, spawns, settlements, full saves) or mail (a mailbox append of any mail kind)."""
    if batch_kind in ("registry", "control"):
        return "registry"
    if batch_kind in ("checkpoint", "spawn", "settle", "full"):
        return "checkpoint"
    return "mail"


@dataclass(frozen=True, slots=True)
class Setting:
    """One point of the grid: the session tunables a what-if run varies (E6, E7)."""

    debounce_s: float = 2.0
    checkpoint_interval_s: float = 30.0
    notify_max_s: float = 0.5
    notify_first_s: float = 0.05

    def __post_init__(self) -> None:
        if not (math.isfinite(self.debounce_s) and self.debounce_s >= 0):
            raise PerfsuiteError(f"debounce interval must be >= 0 s, got {self.debounce_s:g}")
        if not (math.isfinite(self.checkpoint_interval_s) and self.checkpoint_interval_s > 0):
            raise PerfsuiteError(f"checkpoint interval must be > 0 s, got {self.checkpoint_interval_s:g}")
        if not (math.isfinite(self.notify_first_s) and self.notify_first_s > 0):
            raise PerfsuiteError(f"notification first delay must be > 0 s, got {self.notify_first_s:g}")
        if not (math.isfinite(self.notify_max_s) and self.notify_max_s >= self.notify_first_s):
            raise PerfsuiteError(f"notification backoff limit must be >= the first delay "
                                 f"({self.notify_first_s:g} s), got {self.notify_max_s:g}")

    @property
    def label(self) -> str:
        return f"debounce {self.debounce_s:g} s, checkpoint {self.checkpoint_interval_s:g} s, " \
               f"notify max {self.notify_max_s:g} s"

    def scaled(self, factor: float) -> Setting:
        """Every interval divided by ``factor`` (``--speed``)."""
        return Setting(self.debounce_s / factor, self.checkpoint_interval_s / factor,
                       self.notify_max_s / factor, self.notify_first_s / factor)

    def session_settings(self) -> SessionSettings:
        """The engine settings this point stands for (a warm local portable session)."""
        return SessionSettings(registry_debounce_s=self.debounce_s, checkpoint_interval_s=self.checkpoint_interval_s,
                               notify_first_s=self.notify_first_s, notify_max_s=self.notify_max_s,
                               asynchronous=True)


@dataclass(frozen=True, slots=True)
class Publication:
    """One simulated publication: when it froze and completed, its kind and outcome (adopted | noop |
    failed); a replay target's own code may say the bytes it wrote and allocated."""

    session: str
    kind: str
    outcome: str
    frozen_at: float
    done_at: float
    bytes_written: int | None = None
    bytes_allocated: int | None = None


@dataclass(frozen=True, slots=True)
class Replay:
    """What one replay produced: publications, loss windows and notification waits. The scheduler
    counters are the engine's; None (not measured) for a replay through a team's own target."""

    setting: Setting
    duration_s: float
    publications: tuple[Publication, ...]
    observational_losses: tuple[float, ...]  # change -> publication, one per observational change
    text_losses: tuple[float, ...]  # streamed message -> checkpoint, one per message
    notification_waits: tuple[float, ...]
    unpublished: int  # changes or messages still unpublished when the replay ended
    notifications_pending: int | None
    debounce_fired: int | None
    debounce_absorbed: int | None
    debounce_deferred: int | None
    checkpoint_ticks: int | None
    recorded_publications: int  # ``publication`` events in the trace (a recorded run's real count)


class TraceDriver:
    """The side of a replay that tracks what the trace changed (SPEC section 6): it prepares the session
    the trace assumes, streams messages, delivers woken mail, and keeps each unpublished change with its
    time until a publication captures it. The virtual-time model and the real-time validation both use
    it, on the same engine ``Session``; only ``now`` (virtual or wall seconds) differs."""

    def __init__(self, session: Session, now: Callable[[], float]) -> None:
        self.session = session
        self.now = now
        self.version = 0  # Session._observe's count: one per activity change and per successful discard
        self.changes: list[tuple[int, float]] = []
        self.texts: dict[str, collections.deque[tuple[int, float]]] = {}
        self.discardable: dict[str, list[str]] = {}

    def prepare(self, events: Iterable[TraceEvent]) -> None:
        """Before the trace starts, the state it assumes: the root transcript committed, every agent that
        appears before (or without) a spawn event spawned (idle, committed), the mail it discards posted."""
        session = self.session
        session.checkpoint("root")
        first: dict[str, str] = {}
        for event in events:
            first.setdefault(event.conversation, event.kind)
        for agent in sorted(c for c, kind in first.items() if c != "root" and kind != "spawn"):
            session.spawn_agent(agent)
        for event in events:
            if event.kind == "discard" and event.conversation in session.buffers:
                record = session.append_mail(event.conversation, "to be discarded", sender="whatif")
                self.discardable.setdefault(event.conversation, []).append(record.id)

    def _text(self, conversation: str) -> None:
        buffer = self.session.conversation(conversation)
        self.texts.setdefault(conversation, collections.deque()).append((buffer.tick, self.now()))

    # EventSink
    def observed(self) -> None:
        self.version += 1
        self.changes.append((self.version, self.now()))

    def discard_id(self, conversation: str) -> str:
        posted = self.discardable.get(conversation)
        return posted.pop(0) if posted else "none"  # nothing posted: the discard finds nothing

    def discarded(self) -> None:
        self.observed()

    def message(self, conversation: str, size: int) -> None:
        self.session.add_message(conversation, Message("assistant", "x" * size, self.session.clock.wall()))
        self._text(conversation)

    def wake(self, conversation: str) -> Callable[[Observations], None]:
        def wake(_obs: Observations) -> None:  # the woken waiter delivers the mail into its transcript
            if self.session.deliver_mail(conversation):
                self._text(conversation)

        return wake

    def unpublished(self) -> int:
        return len(self.changes) + sum(len(q) for q in self.texts.values())


class _Model:
    """One trace session in virtual time: the engine's own ``Session`` on a ``VirtualClock`` and an
    in-memory file system, its jobs held for the kind's modelled duration (``VirtualRunner``). Its
    publications are read from the engine's events, so nothing here mirrors the engine."""

    def __init__(self, name: str, clock: VirtualClock, fs: MemoryFileSystem, setting: Setting,
                 durations: Mapping[str, float], events: Sequence[TraceEvent], sink: list[Publication]) -> None:
        ids = itertools.count(1)
        settings = replace(setting.session_settings(), offload="inline", log_capacity=SIMULATED_LOG_CAPACITY)
        runner = VirtualRunner(clock, lambda kind: durations.get(cost_kind(kind), DEFAULT_DURATIONS_S[cost_kind(kind)]))
        self.name = name
        self.sink = sink
        self.session = Session.open(f"/whatif/{len(fs.dirs)}", create=True, fs=fs, clock=clock, settings=settings,
                                    id_source=lambda: f"{next(ids):06d}", runner=runner)
        self.driver = TraceDriver(self.session, clock.monotonic)
        try:
            self.driver.prepare(events)
        except (SessionError, ValueError, KeyError) as exc:
            raise PerfsuiteError(f"the trace's session {name!r} cannot be prepared: {exc}") from None
        self.obs_losses: list[float] = []
        self.text_losses: list[float] = []
        self._submitted: dict[str, PublicationSubmitted] = {}
        self.session.observers.subscribe(self._on_event)

    def _on_event(self, event: Event) -> None:
        if isinstance(event, PublicationSubmitted):
            self._submitted[event.publication] = event
        elif isinstance(event, PublicationAcknowledged | PublicationFailed):
            submitted = self._submitted.pop(event.publication)
            outcome = event.outcome if isinstance(event, PublicationAcknowledged) else "failed"
            if outcome != "failed":
                self._captured(submitted, event.at)
            self.sink.append(Publication(self.name, event.kind, outcome, submitted.at, event.at))

    def _captured(self, submitted: PublicationSubmitted, now: float) -> None:
        """What the finished publication captured at freeze is published: its losses end now (E4, E7)."""
        changes = self.driver.changes
        while changes and changes[0][0] <= submitted.observed:
            self.obs_losses.append(now - changes.pop(0)[1])
        for conversation, tick in submitted.ticks.items():
            pending = self.driver.texts.get(conversation)
            while pending and pending[0][0] <= tick:
                self.text_losses.append(now - pending.popleft()[1])


class EventSink(Protocol):
    """What :func:`drive` tells the side that tracks changes (the model, or the validating replayer)."""

    def observed(self) -> None: ...  # an observational change was applied (E7)

    def discard_id(self, conversation: str) -> str: ...  # a committed mail record to discard

    def discarded(self) -> None: ...  # the discard removed it (an observational change)

    def message(self, conversation: str, size: int) -> None: ...  # stream a message (not gated)

    def wake(self, conversation: str) -> Callable[[Observations], None]: ...  # the waiter a delivery wakes


def drive(session: Session, event: TraceEvent, sink: EventSink) -> None:
    """Apply one trace event through the Session's own entry points (SPEC E5-E7); shared by the
    virtual-time model and the real-time validation so both replay exactly the same calls."""
    kind, conversation = event.kind, event.conversation
    if kind == "activity":
        session.set_activity(conversation, event.flavour)
        sink.observed()
    elif kind == "discard":
        if session.discard_mail(conversation, sink.discard_id(conversation)):
            sink.discarded()
    elif kind == "message":
        sink.message(conversation, event.size)
    elif kind == "mail":
        body, wake = "m" * event.size, sink.wake(conversation)

        def notify(_error: BaseException | None, wake: Callable[[Observations], None] = wake) -> None:
            session.notify(wake)

        if event.extra.get("path") == "sync":
            session.append_mail(conversation, body, sender="background", ack=notify)
        else:
            session.deliver_background(conversation, body, sender="background", ack=notify)
    elif kind == "spawn":
        session.spawn_agent(conversation)
    elif kind == "settle":
        session.settle(conversation, str(event.extra.get("status", "done")), "r" * event.size if event.size else None)
    elif kind == "notify":
        session.notify(_noop_notification)
    elif kind == "checkpoint":
        session.request_checkpoint(conversation)
    elif kind == "request-start":
        session.request_started(conversation)
    elif kind == "request-end":
        session.request_finished(conversation)
    elif kind == "save":
        what = event.extra.get("what", "checkpoint")
        if what == "registry":
            session.save_registry()
        elif what == "full":
            session.full_save()
        else:
            session.checkpoint(conversation)
    elif kind == "transport-start":
        session.transport_busy = True
    elif kind == "transport-end":
        session.transport_busy = False


def _noop_notification(_obs: Observations) -> None:
    return None


def engine_events(trace: Trace) -> tuple[TraceEvent, ...]:
    """The events the engine's sessions replay: neither recorded ``publication`` outputs nor a user's own
    ``x-`` kinds (those only a replay target of the user's understands)."""
    return tuple(e for e in trace.events if e.kind != "publication" and not is_user_kind(e.kind))


def replay(trace: Trace, setting: Setting, durations: Mapping[str, float] | None = None) -> Replay:
    """Replay ``trace`` in virtual time for one setting through the engine's own sessions (``_Model``).
    Timers due at an event's time fire before it. After the trace's end the in-flight checkpoint timers
    stop and pending saves run out."""
    durations = dict(durations or DEFAULT_DURATIONS_S)
    clock = VirtualClock()
    fs = MemoryFileSystem()
    sink: list[Publication] = []
    by_session: dict[str, list[TraceEvent]] = {}
    for event in engine_events(trace):
        by_session.setdefault(event.session, []).append(event)
    models = {name: _Model(name, clock, fs, setting, durations, events, sink) for name, events in by_session.items()}
    recorded = trace.count("publication")
    for event in engine_events(trace):
        clock.run_until(event.time)
        model = models[event.session]
        try:
            drive(model.session, event, model.driver)
        except (SessionError, ValueError, KeyError, RuntimeError) as exc:
            raise PerfsuiteError(f"{trace.source}: {event.kind} of {event.conversation!r} at {event.time:g} s "
                                 f"cannot be replayed: {exc}") from None
    clock.run_until(trace.duration_s)
    for model in models.values():
        model.session.stop_checkpoints()
    limit = trace.duration_s + _TAIL_LIMIT_S
    while not all(m.session.activity().quiet for m in models.values()):
        due = clock.next_due()
        if due is None or due > limit:
            break
        clock.run_until(due)
    sessions = [m.session for m in models.values()]
    stats = [s.scheduler_stats() for s in sessions]
    result = Replay(
        setting=setting,
        duration_s=trace.duration_s,
        publications=tuple(sorted(sink, key=lambda p: p.done_at)),
        observational_losses=tuple(x for m in models.values() for x in m.obs_losses),
        text_losses=tuple(x for m in models.values() for x in m.text_losses),
        notification_waits=tuple(x for s in stats for x in s.notification_waits),
        unpublished=sum(m.driver.unpublished() for m in models.values()),
        notifications_pending=sum(s.activity().notifications for s in sessions),
        debounce_fired=sum(s.debounce_fired for s in stats),
        debounce_absorbed=sum(s.debounce_absorbed for s in stats),
        debounce_deferred=sum(s.debounce_deferred for s in stats),
        checkpoint_ticks=sum(s.checkpoint_ticks for s in stats),
        recorded_publications=recorded,
    )
    _release(models.values(), fs)
    return result


def _release(models: Iterable[_Model], fs: MemoryFileSystem) -> None:
    """Close the replay's sessions and drop its in-memory files once the figures are taken: a session's
    machinery holds reference cycles, so a sweep's earlier replays (their bytes) would otherwise stay until
    the cyclic collector ran, and a grid's peak grew with every setting."""
    for model in models:
        try:
            model.session.close()
        except SessionError:
            pass  # a publication still pending at the tail limit: its bytes go with the file system below
    fs.files.clear()


def per_minute(times: Sequence[float], duration_s: float) -> tuple[float, int]:
    """(mean per minute over the trace's duration, peak count in one fixed minute [60k, 60k+60))."""
    if not times:
        return 0.0, 0
    counts = collections.Counter(int(t // 60.0) for t in times)
    minutes = max(duration_s, 1e-9) / 60.0
    return len(times) / minutes, max(counts.values())


@dataclass(frozen=True, slots=True)
class TraceSummary:
    """What the trace holds, and the every-transition baseline (one publication per observational change)."""

    source: str
    duration_s: float
    sessions: int
    events: int
    observational: int
    messages: int
    mail: int
    requests: int
    recorded_publications: int  # a recorded run's real publications (``publication`` events)
    every_transition_per_minute: float
    every_transition_peak: int
    meta: Mapping[str, Any] = field(default_factory=dict)
    user_events: int = 0  # events of the user's own ``x-`` kinds
    kinds: Mapping[str, int] = field(default_factory=dict)  # events per kind


def summarize_trace(trace: Trace) -> TraceSummary:
    observational = [e.time for e in trace.events if e.kind in OBSERVATIONAL]
    mean, peak = per_minute(observational, trace.duration_s)
    return TraceSummary(trace.source, trace.duration_s, len(trace.sessions), len(trace.events), len(observational),
                        trace.count("message"), trace.count("mail"), trace.count("request-start"),
                        trace.count("publication"), mean, peak, dict(trace.meta),
                        sum(1 for e in trace.events if is_user_kind(e.kind)),
                        dict(collections.Counter(e.kind for e in trace.events)))
