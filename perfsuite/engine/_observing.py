"""Engine events from a session: the emission points' helpers. A part of
:class:`~perfsuite.engine._session.Session`; every helper returns at once when nobody listens
(``if self.observers``, two empty tuples), so an unobserved session builds no event."""

from __future__ import annotations

import functools
from collections.abc import Callable

from perfsuite.engine._events import (
    GateAdmitted,
    PhaseFinished,
    PhaseStarted,
    PublicationAcknowledged,
    PublicationFailed,
    PublicationSubmitted,
    SchedulerDeferred,
    SchedulerFired,
)
from perfsuite.engine._pipeline import Publication
from perfsuite.engine._sessionstate import SessionState


class Observing(SessionState):
    """Publication, gate and scheduler events (mixed into ``Session``; inputs are in ``Session._input``)."""

    def _watch(self, publication: Publication, driver: str) -> None:
        """A publication enters a driver: report it and, while someone listens, its phases (E4)."""
        if not self.observers:
            return
        batch = publication.batch
        publication.on_phase = functools.partial(self._phase, batch.id)
        self.observers.emit(PublicationSubmitted(
            self.root, batch.id, batch.kind, driver, self.clock.monotonic(), batch.freeze_ms,
            int(batch.candidate.get("observed", -1)), {c: t.tick for c, t in batch.texts.items()}))

    def _phase(self, publication: str, phase: str, done: bool, main_ms: float, wall_ms: float,
               error: str | None) -> None:
        if done:
            self.observers.emit(PhaseFinished(self.root, publication, phase, main_ms, wall_ms, error))
        else:
            self.observers.emit(PhaseStarted(self.root, publication, phase))

    def _settled(self, publication: Publication) -> None:
        """The publication left its driver: acknowledged (adopted, noop, or failed after adoption) or
        failed before adoption (now pending)."""
        if not self.observers:
            return
        batch, error = publication.batch, publication.error
        text = None if error is None else f"{type(error).__name__}: {error}"
        if publication.outcome == "failed":
            self.observers.emit(PublicationFailed(self.root, batch.id, batch.kind, publication.failed_phase or "?",
                                                  text or "failed", self.clock.monotonic()))
        else:
            self.observers.emit(PublicationAcknowledged(self.root, batch.id, batch.kind, publication.outcome,
                                                        self.clock.monotonic(), text))

    def _admitted(self, label: str, queued: bool) -> None:
        if self.observers:
            self.observers.emit(GateAdmitted(self.root, label, queued))

    def _scheduler_observer(self, scheduler: str) -> Callable[[str, float], None]:
        def observe(what: str, delay_s: float) -> None:
            if not self.observers:
                return
            if what == "deferred":
                self.observers.emit(SchedulerDeferred(self.root, scheduler, delay_s, self.clock.monotonic()))
            else:
                self.observers.emit(SchedulerFired(self.root, scheduler, self.clock.monotonic()))

        return observe
