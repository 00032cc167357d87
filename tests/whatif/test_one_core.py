"""SPEC section 6: the simulator drives the engine's own scheduling code, so it cannot drift from it.

The reference run drives a real portable session on disk by hand (public API, a ``VirtualClock`` and the
engine's ``VirtualRunner`` for the modelled job durations) and reads its publications from the engine's
events; the simulator must produce the same schedule, also after the engine's scheduling is changed
(here: a finish that no longer absorbs the pending registry save, E7), which a simulator with its own
copy of finish/install would not follow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from perfsuite.engine import Message, Session, SessionSettings
from perfsuite.engine.events import PublicationAcknowledged, PublicationSubmitted
from perfsuite.engine.testing import VirtualClock, VirtualRunner
from perfsuite.whatif import Setting, TraceEvent, make_trace, replay

DURATIONS = {"registry": 0.01, "checkpoint": 0.5, "mail": 0.32}
KIND = {"registry": "registry", "control": "registry", "checkpoint": "checkpoint", "spawn": "checkpoint",
        "settle": "checkpoint", "full": "checkpoint"}


def ev(time: float, kind: str, conversation: str = "agent-1", size: int = 0, **extra: Any) -> TraceEvent:
    return TraceEvent(time, "s", conversation, kind, size, extra)


TRACE = make_trace([
    ev(0.0, "activity", flavour="permission-blocked"),
    ev(0.05, "mail", "root", 100),
    ev(0.2, "request-start", "root"),
    ev(0.5, "message", "root", 300),
    ev(1.0, "activity", flavour="running"),
    ev(1.1, "checkpoint", "root"),
    ev(1.2, "message", "root", 300),
    ev(2.5, "activity", flavour="idle"),
    ev(4.0, "request-end", "root"),
])


def reference(tmp_path: Path) -> list[tuple[str, str, float, float]]:
    """The engine by hand: each event applied at its time, timers due first; (kind, outcome, submitted, done)."""
    clock = VirtualClock()
    settings = SessionSettings(registry_debounce_s=0.4, checkpoint_interval_s=1.5, offload="inline")
    runner = VirtualRunner(clock, lambda kind: DURATIONS[KIND.get(kind, "mail")])
    session = Session.open(tmp_path / "s", create=True, clock=clock, settings=settings, runner=runner)
    session.checkpoint("root")
    session.spawn_agent("agent-1")
    submitted: dict[str, float] = {}
    out: list[tuple[str, str, float, float]] = []

    def on_event(event: Any) -> None:
        if isinstance(event, PublicationSubmitted):
            submitted[event.publication] = event.at
        elif isinstance(event, PublicationAcknowledged):
            out.append((event.kind, event.outcome, submitted[event.publication], event.at))

    session.observers.subscribe(on_event)
    for event in TRACE.events:
        clock.run_until(event.time)
        if event.kind == "activity":
            session.set_activity(event.conversation, event.flavour)
        elif event.kind == "mail":
            session.deliver_background(event.conversation, "m" * event.size, sender="background",
                                       ack=lambda _e, c=event.conversation: session.notify(
                                           lambda _o: session.deliver_mail(c)))
        elif event.kind == "message":
            session.add_message(event.conversation, Message("assistant", "x" * event.size, clock.wall()))
        elif event.kind == "checkpoint":
            session.request_checkpoint(event.conversation)
        elif event.kind == "request-start":
            session.request_started(event.conversation)
        elif event.kind == "request-end":
            session.request_finished(event.conversation)
    clock.run_until(TRACE.duration_s)
    session.checkpoint_timer.stop()
    while not session.activity().quiet and clock.next_due() is not None:
        clock.run_until(clock.next_due() or 0.0)
    session.close()
    return out


def simulated() -> list[tuple[str, str, float, float]]:
    run = replay(TRACE, Setting(debounce_s=0.4, checkpoint_interval_s=1.5), DURATIONS)
    return [(p.kind, p.outcome, p.frozen_at, p.done_at) for p in run.publications]


def _same(a: list[tuple[str, str, float, float]], b: list[tuple[str, str, float, float]]) -> None:
    assert [(k, o) for k, o, _, _ in a] == [(k, o) for k, o, _, _ in b]
    assert [t for *_, s, d in a for t in (s, d)] == pytest.approx([t for *_, s, d in b for t in (s, d)])


def test_the_simulator_publishes_what_the_engine_publishes(tmp_path: Path) -> None:
    expected = reference(tmp_path)
    assert {k for k, *_ in expected} >= {"completion", "registry", "checkpoint"}  # the trace exercises them all
    _same(simulated(), expected)


def test_the_simulator_follows_a_change_of_the_engines_scheduling(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    before = simulated()
    original = Session._install

    def install_without_absorbing(self: Session, batch: Any, memos: Any) -> None:
        self._observed += 1  # the commit looks older than the last observational change: nothing absorbed
        try:
            original(self, batch, memos)
        finally:
            self._observed -= 1

    monkeypatch.setattr(Session, "_install", install_without_absorbing)
    expected = reference(tmp_path)
    after = simulated()
    assert after != before  # the change matters for this trace...
    _same(after, expected)  # ...and the simulator follows the engine
