"""Virtual-time replay of a trace through the engine's real schedulers (SPEC section 6).

Each trace session becomes a :class:`_SimSession`: a real :class:`~perfsuite.engine.Session` subclass on
a :class:`~perfsuite.engine.VirtualClock`, so the real ``Debouncer``, ``NotificationQueue``,
``CheckpointTimer`` and ``MutationGate`` run with the wiring ``Session.__init__`` gives them, and the
real ``set_activity``, ``discard_mail``, ``deliver_background``, ``request_checkpoint``,
``_registry_due``, ``_checkpoint_tick`` and ``notify`` drive them. Only the publication itself is
modelled: freeze returns a lightweight batch and the job completes after the kind's measured duration.
"""

from __future__ import annotations

import collections
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from perfsuite.engine import ConversationBuffer, OsFileSystem, Session, SessionError, SessionSettings, VirtualClock
from perfsuite.engine._clock import TimerHandle
from perfsuite.engine._gate import DrainRefused, Token
from perfsuite.engine._generations import Lease
from perfsuite.engine._job import Admission, PublicationJob
from perfsuite.engine._schedulers import Observations
from perfsuite.engine._sidecar import MailRecord
from perfsuite.errors import PerfsuiteError
from perfsuite.workloads.traces import OBSERVATIONAL, Trace, TraceEvent

#: publication durations (s) used when no measured costs are given
DEFAULT_DURATIONS_S: Mapping[str, float] = {"registry": 0.005, "checkpoint": 0.02, "mail": 0.005}
#: how long after the trace end pending timers may still run (a debounce, a deferral chain)
_TAIL_LIMIT_S = 3600.0


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
    """One simulated publication: when it froze and completed, its kind and outcome (adopted | noop)."""

    session: str
    kind: str
    outcome: str
    frozen_at: float
    done_at: float


@dataclass(frozen=True, slots=True)
class Replay:
    """What one replay produced: publications, loss windows and notification waits."""

    setting: Setting
    duration_s: float
    publications: tuple[Publication, ...]
    observational_losses: tuple[float, ...]  # change -> publication, one per observational change
    text_losses: tuple[float, ...]  # streamed message -> checkpoint, one per message
    notification_waits: tuple[float, ...]
    unpublished: int  # changes or messages still unpublished when the replay ended
    notifications_pending: int
    debounce_fired: int
    debounce_absorbed: int
    debounce_deferred: int
    checkpoint_ticks: int
    recorded_publications: int  # ``publication`` events in the trace (a recorded run's real count)


@dataclass
class _SimBatch:
    """What a modelled freeze captured: enough for select (changed?) and install (E4 phases 1, 4, 7)."""

    id: str
    kind: str
    texts: dict[str, int]  # conversation -> message tick frozen
    observed: int  # observational version frozen (``candidate["observed"]`` in Session._freeze_batch)
    owner: str
    activity: dict[str, Any]
    mailbox_version: int
    changed: bool
    frozen_at: float


@dataclass
class _SimPublication:
    batch: _SimBatch


@dataclass
class _SimJob:
    """A virtual publication job: completes after its duration, or at once when a sync caller drains it."""

    publication: _SimPublication
    acks: list[Callable[[BaseException | None], None]]
    session: _SimSession
    timer: TimerHandle | None = None

    def drain(self, limit_s: float | None = None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.session._job_finished(self)


class _SimSession(Session):
    """A real Session whose publications are virtual. Its schedulers, gate and scheduling methods are
    the engine's own; the overrides below replace only freeze, the job and the sync driver."""

    def __init__(self, name: str, clock: VirtualClock, setting: Setting, durations: Mapping[str, float],
                 sink: list[Publication]) -> None:
        super().__init__(os.path.join(os.sep, "whatif", name), OsFileSystem(), clock, setting.session_settings())
        self.name = name
        self.vclock = clock
        self.lease = Lease(1, "whatif", 0, "whatif")  # ids and mail records name the epoch
        self.durations = durations
        self.sink = sink
        self.text_tick: dict[str, int] = {}
        self.committed_text: dict[str, int] = {}
        self.text_pending: dict[str, collections.deque[tuple[int, float]]] = {}
        self.obs_pending: collections.deque[tuple[int, float]] = collections.deque()
        self.obs_losses: list[float] = []
        self.text_losses: list[float] = []
        self.committed_activity: dict[str, Any] = {}
        self.mailbox_version = 0
        self.committed_mailbox_version = 0
        self._discardable = 0
        self._ids = 0

    # -- the trace side -------------------------------------------------------------------------------
    def ensure(self, conversation: str) -> None:
        """A conversation seen for the first time exists (agents as if spawned: activity idle, committed)."""
        if conversation in self.buffers:
            return
        self.buffers[conversation] = ConversationBuffer(conversation)
        if conversation != "root":
            self.sidecar.agents[conversation] = {"name": conversation, "parent": "root", "activity": "idle",
                                                 "status": "active"}
            self.committed_activity[conversation] = "idle"

    # EventSink: how the model tracks what drive() applied
    def observed(self) -> None:
        self.obs_pending.append((self._observed, self.vclock.monotonic()))

    def discard_id(self, conversation: str) -> str:
        self._discardable += 1
        record = MailRecord(f"whatif-{self._discardable}", conversation, "whatif", "message", "", 0.0)
        self.sidecar.add_mail(record, None)  # a committed record to discard
        return record.id

    def discarded(self) -> None:
        self.mailbox_version += 1
        self.observed()

    def message(self, conversation: str, size: int) -> None:
        self._dirty(conversation, self.vclock.monotonic())  # the text itself is not needed: only its tick

    def wake(self, conversation: str) -> Callable[[Observations], None]:
        def wake(_obs: Observations) -> None:  # the woken waiter delivers the mail into its transcript
            self._dirty(conversation, self.vclock.monotonic())

        return wake

    def _dirty(self, conversation: str, now: float) -> None:
        tick = self.text_tick.get(conversation, 0) + 1
        self.text_tick[conversation] = tick
        self.text_pending.setdefault(conversation, collections.deque()).append((tick, now))

    # -- the modelled publication (E4) -------------------------------------------------------------------
    def _needs_publish(self, conversation: str, buffer: object) -> bool:
        return self.text_tick.get(conversation, 0) > self.committed_text.get(conversation, 0)

    def freeze(self, kind: str, conversations: Iterable[str] | None, *, owner: str | None = None,
               sidecar: bool = True) -> Any:
        wanted = self.buffers.keys() if conversations is None else conversations
        texts = {c: self.text_tick.get(c, 0) for c in wanted if self._needs_publish(c, None)}
        activity = {a: r.get("activity") for a, r in self.sidecar.agents.items()}
        # E4 select: a sidecar identical to the committed one and no transcript change is an empty selection.
        changed = bool(texts) or kind not in ("registry", "checkpoint") \
            or activity != self.committed_activity or self.mailbox_version != self.committed_mailbox_version
        self._ids += 1
        return _SimBatch(f"{kind}-{self._ids}", kind, texts, self._observed, owner or f"{kind}-{self._ids}",
                         activity, self.mailbox_version, changed, self.vclock.monotonic())

    def accept_job(self, batch: Any, token: Token, acks: Iterable[Any] = (), *,
                   admission: Admission | None = None) -> Any:
        if not self.gate.holds(token):
            raise DrainRefused("a job can only be accepted by the preparation that holds the gate")
        job = _SimJob(_SimPublication(batch), list(acks), self)
        self.gate.job = cast(PublicationJob, job)
        self.active = cast(Any, job.publication)
        duration = self.durations.get(cost_kind(batch.kind), DEFAULT_DURATIONS_S[cost_kind(batch.kind)])
        job.timer = self.vclock.call_later(duration, lambda: self._job_finished(job))
        return job

    def _job_finished(self, job: _SimJob) -> None:
        """The job's finish step (install), then Session._job_done's order: release, acknowledge, pump."""
        self._install_batch(job.publication.batch)
        self.gate.job = None
        self.active = None
        for ack in job.acks:
            ack(None)
        self._schedule_pump()

    def publish(self, batch: Any, acks: Iterable[Any] = ()) -> Any:
        """The synchronous writer (explicit saves, ``save`` events): every phase inline, no virtual time."""
        self.active = cast(Any, _SimPublication(batch))
        self.gate.sync_depth += 1
        try:
            self._install_batch(batch)
        finally:
            self.gate.sync_depth -= 1
            self.active = None
            self._schedule_pump()
        for ack in acks:
            ack(None)
        return None

    def _install_batch(self, batch: _SimBatch) -> None:
        """Mirrors Session._finish/_install (adopted) or _noop_install (empty selection), and records."""
        now = self.vclock.monotonic()
        for conversation, tick in batch.texts.items():
            self.committed_text[conversation] = max(self.committed_text.get(conversation, 0), tick)
            pending = self.text_pending.get(conversation)
            while pending and pending[0][0] <= tick:
                self.text_losses.append(now - pending.popleft()[1])
        if batch.changed:
            self.committed_activity = batch.activity
            self.committed_mailbox_version = batch.mailbox_version
            if batch.observed >= self._observed:
                self.registry_debounce.absorb()  # this commit captured every observational change (E7)
        self.sidecar.reveal(batch.owner)
        while self.obs_pending and self.obs_pending[0][0] <= batch.observed:
            self.obs_losses.append(now - self.obs_pending.popleft()[1])
        self.sink.append(Publication(self.name, batch.kind, "adopted" if batch.changed else "noop",
                                     batch.frozen_at, now))

    def _schedule_pump(self) -> None:
        # Session defers the pump with loop.call_soon: a zero-delay timer at the same virtual instant.
        if self.gate.queue:
            self.vclock.call_later(0.0, self._pump)

    def idle_now(self) -> bool:
        return (not self.registry_debounce.pending and self.gate.idle and self.active is None
                and not self.notifications.fifo)

    def unpublished(self) -> int:
        return len(self.obs_pending) + sum(len(p) for p in self.text_pending.values())


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
        if event.extra.get("path") == "sync":
            session.append_mail(conversation, body, sender="background", ack=lambda _error: session.notify(wake))
        else:
            session.deliver_background(conversation, body, sender="background",
                                       ack=lambda _error: session.notify(wake))
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


def replay(trace: Trace, setting: Setting, durations: Mapping[str, float] | None = None) -> Replay:
    """Replay ``trace`` in virtual time for one setting. Timers due at an event's time fire before it.
    After the trace's end the in-flight checkpoint timers stop and pending saves run out."""
    durations = dict(durations or DEFAULT_DURATIONS_S)
    clock = VirtualClock()
    sink: list[Publication] = []
    sessions: dict[str, _SimSession] = {}
    recorded = 0
    for event in trace.events:
        if event.kind == "publication":
            recorded += 1
            continue
        clock.run_until(event.time)
        session = sessions.get(event.session)
        if session is None:
            session = sessions[event.session] = _SimSession(event.session, clock, setting, durations, sink)
        if event.kind != "spawn":
            session.ensure(event.conversation)
        try:
            drive(session, event, session)
        except (SessionError, ValueError, KeyError, RuntimeError) as exc:
            raise PerfsuiteError(f"{trace.source}: {event.kind} of {event.conversation!r} at {event.time:g} s "
                                 f"cannot be replayed: {exc}") from None
    clock.run_until(trace.duration_s)
    for session in sessions.values():
        session.checkpoint_timer.stop()
    limit = trace.duration_s + _TAIL_LIMIT_S
    while not all(s.idle_now() for s in sessions.values()):
        due = clock.next_due()
        if due is None or due > limit:
            break
        clock.run_until(due)
    all_sessions = list(sessions.values())
    return Replay(
        setting=setting,
        duration_s=trace.duration_s,
        publications=tuple(sorted(sink, key=lambda p: p.done_at)),
        observational_losses=tuple(x for s in all_sessions for x in s.obs_losses),
        text_losses=tuple(x for s in all_sessions for x in s.text_losses),
        notification_waits=tuple(x for s in all_sessions for x in s.notifications.waits),
        unpublished=sum(s.unpublished() for s in all_sessions),
        notifications_pending=sum(len(s.notifications.fifo) for s in all_sessions),
        debounce_fired=sum(s.registry_debounce.fired for s in all_sessions),
        debounce_absorbed=sum(s.registry_debounce.absorbed for s in all_sessions),
        debounce_deferred=sum(s.registry_debounce.deferred for s in all_sessions),
        checkpoint_ticks=sum(s.checkpoint_timer.ticks for s in all_sessions),
        recorded_publications=recorded,
    )


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


def summarize_trace(trace: Trace) -> TraceSummary:
    observational = [e.time for e in trace.events if e.kind in OBSERVATIONAL]
    mean, peak = per_minute(observational, trace.duration_s)
    return TraceSummary(trace.source, trace.duration_s, len(trace.sessions), len(trace.events), len(observational),
                        trace.count("message"), trace.count("mail"), trace.count("request-start"),
                        trace.count("publication"), mean, peak, dict(trace.meta))
