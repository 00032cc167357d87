"""Engine events: a small observer API, so the suite watches the engine without patching it.

A session reports what it does as frozen events to its listeners (``session.observers.subscribe``) and
to the process-wide ones (:func:`listen`): a publication submitted, each phase started and finished,
acknowledged or failed (E4); its schedulers fired or deferred (E6, E7); the gate admitting a preparation
and a synchronous caller draining it (E5); and the inputs a caller made (what a trace records, SPEC
section 6). Durable I/O stays observable through the I/O layer (``RecordingFileSystem``, E1).

Nothing is built when nobody listens: every emission point first checks ``if observers:`` (two empty
tuples). Listeners run synchronously where the event happens (the session's own thread; an offloaded
step's PhaseFinished on the loop thread, when its result is accepted), so they must be quick and must
not call back into the session.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class PublicationSubmitted:
    """A frozen batch entered a driver (``sync``: the synchronous writer; ``job``: the asynchronous job).
    ``observed`` is the observational version it captured, ``ticks`` each transcript's message tick."""

    session: str
    publication: str
    kind: str
    driver: str
    at: float  # the session clock's monotonic seconds
    freeze_ms: float
    observed: int
    ticks: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PhaseStarted:
    """A publication step began (E4 phases: stage, hash, select, commit, adopt, finish)."""

    session: str
    publication: str
    phase: str


@dataclass(frozen=True, slots=True)
class PhaseFinished:
    """A publication step ended: ``main_ms`` on the calling (loop) thread, ``wall_ms`` including off-loop
    work. ``error`` names the exception when the step failed."""

    session: str
    publication: str
    phase: str
    main_ms: float
    wall_ms: float
    error: str | None = None


@dataclass(frozen=True, slots=True)
class PublicationAcknowledged:
    """The publication finished without failing before adoption (``outcome`` adopted or noop) and its
    acknowledgements run now (E4). ``error``: a failure after adoption (durable, only logged)."""

    session: str
    publication: str
    kind: str
    outcome: str
    at: float
    error: str | None = None


@dataclass(frozen=True, slots=True)
class PublicationFailed:
    """The publication failed before adoption in ``phase``: it is now the pending publication (E4)."""

    session: str
    publication: str
    kind: str
    phase: str
    error: str
    at: float


@dataclass(frozen=True, slots=True)
class SchedulerFired:
    """A scheduler acted: ``registry-save`` (debounce due, E7), ``checkpoint-timer`` (in-flight tick, E7)
    or ``notifications`` (the FIFO flushed, E6)."""

    session: str
    scheduler: str
    at: float


@dataclass(frozen=True, slots=True)
class SchedulerDeferred:
    """A scheduler put its action off by ``delay_s`` (an active publication, a busy gate or transport)."""

    session: str
    scheduler: str
    delay_s: float
    at: float


@dataclass(frozen=True, slots=True)
class GateAdmitted:
    """The gate ran a preparation (E5): at once, or ``queued`` first behind a held gate."""

    session: str
    label: str
    queued: bool


@dataclass(frozen=True, slots=True)
class GateDrained:
    """A synchronous caller drained the accepted job to its end inline (E5)."""

    session: str
    publication: str
    waited_ms: float


@dataclass(frozen=True, slots=True)
class SessionInput:
    """A caller's input at a public entry point (``operation`` is the method's name), after it returned.
    Calls the engine makes itself (timer checkpoints, shutdown's flush) are not inputs."""

    session: str
    operation: str
    conversation: str
    size: int = 0
    detail: Mapping[str, Any] = field(default_factory=dict)


Event = (PublicationSubmitted | PhaseStarted | PhaseFinished | PublicationAcknowledged | PublicationFailed
         | SchedulerFired | SchedulerDeferred | GateAdmitted | GateDrained | SessionInput)
Listener = Callable[[Event], None]


class Observers:
    """Listeners of one source. ``if observers:`` is the hot-path check (true when this source or the
    process has a listener); :meth:`emit` calls this source's listeners, then the process-wide ones."""

    __slots__ = ("listeners",)

    def __init__(self) -> None:
        self.listeners: tuple[Listener, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.listeners or PROCESS.listeners)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Add ``listener``; returns the function that removes it again."""
        with _lock:
            self.listeners = (*self.listeners, listener)

        def unsubscribe() -> None:
            with _lock:
                self.listeners = tuple(x for x in self.listeners if x is not listener)

        return unsubscribe

    def emit(self, event: Event) -> None:
        for listener in self.listeners:
            listener(event)
        if self is not PROCESS:
            for listener in PROCESS.listeners:
                listener(event)


_lock = threading.Lock()
PROCESS = Observers()


def listen(listener: Listener) -> Callable[[], None]:
    """Listen to every session of this process (the trace recorder's way in); returns the unsubscribe."""
    return PROCESS.subscribe(listener)


__all__ = [
    "Event",
    "GateAdmitted",
    "GateDrained",
    "Listener",
    "Observers",
    "PhaseFinished",
    "PhaseStarted",
    "PublicationAcknowledged",
    "PublicationFailed",
    "PublicationSubmitted",
    "SchedulerDeferred",
    "SchedulerFired",
    "SessionInput",
    "listen",
]
