"""The engine's events: what a session reports to its listeners, and how to listen.

A session emits frozen events to ``session.observers`` (an :class:`Observers`: ``subscribe`` returns the
unsubscribe) and to the process-wide listeners (:func:`listen`): a publication submitted, each phase
started and finished, acknowledged or failed (E4); its schedulers fired or deferred (E6, E7); the gate
admitting a preparation and a synchronous caller draining it (E5); a caller's input (SPEC section 6).
Nothing is built while nobody listens. Observation goes through this seam, never by patching a class.
"""

from perfsuite.engine._events import (
    Event,
    GateAdmitted,
    GateDrained,
    Listener,
    Observers,
    PhaseFinished,
    PhaseStarted,
    PublicationAcknowledged,
    PublicationFailed,
    PublicationSubmitted,
    SchedulerDeferred,
    SchedulerFired,
    SessionInput,
    listen,
)

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
