"""Engine events: what a session reports to its listeners, and nothing built without one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfsuite.engine import Session, SessionSettings
from perfsuite.engine.events import (
    GateAdmitted,
    GateDrained,
    PhaseFinished,
    PhaseStarted,
    PublicationAcknowledged,
    PublicationSubmitted,
    SchedulerDeferred,
    SchedulerFired,
    SessionInput,
    listen,
)
from perfsuite.engine.testing import VirtualClock, VirtualRunner


def test_a_synchronous_publication_reports_its_phases_and_acknowledgement(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "s", create=True, clock=VirtualClock())
    seen: list[Any] = []
    session.observers.subscribe(seen.append)
    session.spawn_agent("a1")
    kinds = [type(e).__name__ for e in seen]
    assert kinds[0] == "PublicationSubmitted" and seen[0].driver == "sync" and seen[0].kind == "spawn"
    phases = [e.phase for e in seen if isinstance(e, PhaseStarted)]
    assert phases == ["stage", "hash", "select", "commit", "adopt", "finish"]
    assert [e.phase for e in seen if isinstance(e, PhaseFinished)] == phases
    ack = next(e for e in seen if isinstance(e, PublicationAcknowledged))
    assert ack.outcome == "adopted" and ack.publication == seen[0].publication
    assert seen[-1] == SessionInput(session.root, "spawn_agent", "a1")  # the input, after it returned
    session.close()


def test_a_job_the_gate_and_the_debounce_report_in_virtual_time(tmp_path: Path) -> None:
    clock = VirtualClock()
    settings = SessionSettings(registry_debounce_s=0.1, offload="inline")
    session = Session.open(tmp_path / "s", create=True, clock=clock, settings=settings,
                           runner=VirtualRunner(clock, lambda kind: 0.3))
    session.spawn_agent("a1")
    seen: list[Any] = []
    unsubscribe = session.observers.subscribe(seen.append)
    session.set_activity("a1", "running")  # the debounce is due at 0.1, while the job below holds the gate
    session.deliver_background("root", "done", sender="bg")
    assert [type(e) for e in seen[:3]] == [SessionInput, GateAdmitted, PublicationSubmitted]
    assert seen[2].driver == "job" and seen[2].kind == "completion"
    assert not session.activity().quiet and session.activity().job == seen[2].publication
    clock.run_until(0.2)
    assert [e.delay_s for e in seen if isinstance(e, SchedulerDeferred)] == [0.05, 0.05, 0.05]  # 0.1, 0.15, 0.2
    clock.run_until(1.0)  # the job ends at 0.3 and its commit absorbs the observational change (E7)
    assert not any(isinstance(e, SchedulerFired) for e in seen) and session.activity().quiet
    acks = [e for e in seen if isinstance(e, PublicationAcknowledged)]
    assert len(acks) == 1 and acks[0].at == 0.3
    session.deliver_background("root", "again", sender="bg")
    session.checkpoint()  # a synchronous caller drains the accepted job first (E5)
    assert any(isinstance(e, GateDrained) for e in seen)
    unsubscribe()
    count = len(seen)
    session.set_activity("a1", "idle")
    assert len(seen) == count
    session.close()


def test_process_listeners_see_every_session_and_nothing_is_built_without_one(tmp_path: Path,
                                                                              monkeypatch: Any) -> None:
    built: list[str] = []
    original = SessionInput.__init__

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:
        built.append("input")
        original(self, *args, **kwargs)

    monkeypatch.setattr(SessionInput, "__init__", counting)
    session = Session.open(tmp_path / "s", create=True, clock=VirtualClock())
    session.spawn_agent("a1")
    session.set_activity("a1", "running")
    assert built == [] and not session.observers  # no listener: no event object
    seen: list[Any] = []
    unsubscribe = listen(seen.append)
    try:
        session.set_activity("a1", "idle")
    finally:
        unsubscribe()
    assert built == ["input"] and [e.operation for e in seen] == ["set_activity"]
    session.set_activity("a1", "running")
    assert built == ["input"]  # unsubscribed: nothing built again
    session.close()


def test_reports_say_the_driver_and_the_loop_thread_time_without_a_listener(tmp_path: Path) -> None:
    """What the suite reads instead of listening (a listener makes every phase build events in
    the measured window)."""
    clock = VirtualClock()
    session = Session.open(tmp_path / "s", create=True, clock=clock, settings=SessionSettings(offload="inline"),
                           runner=VirtualRunner(clock, lambda kind: 0.3))
    session.spawn_agent("a1")
    sync = session.reports[-1]
    assert sync.driver == "sync" and sync.main_thread_ms == sync.phases_ms and "freeze" in sync.main_thread_ms
    session.deliver_background("root", "done", sender="bg")
    clock.run_until(1.0)
    job = session.reports[-1]
    assert job.driver == "job" and job.kind == "completion" and job.outcome == "adopted"
    assert {"freeze", "stage", "hash", "commit", "adopt"} <= set(job.main_thread_ms)
    assert job.main_thread_ms["freeze"] == job.phases_ms["freeze"]
    session.close()


class _Body(str):
    """A message body that notices being encoded."""

    encoded = 0

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        type(self).encoded += 1
        return str.encode(self, *args, **kwargs)


def test_an_unobserved_input_never_encodes_its_body(tmp_path: Path) -> None:
    """The input event's size is computed only for a listener: an unobserved mailbox append of a 4000-
    character result allocated its encoding inside the acknowledgement (M3)."""
    session = Session.open(tmp_path / "s", create=True, clock=VirtualClock())
    _Body.encoded = 0
    session.append_mail("root", _Body("x" * 4000))
    session.deliver_background("root", _Body("y" * 4000), sender="bg")
    assert _Body.encoded == 0
    seen: list[Any] = []
    unsubscribe = session.observers.subscribe(seen.append)
    session.append_mail("root", _Body("z" * 10))
    unsubscribe()
    assert _Body.encoded == 1 and [e.size for e in seen if isinstance(e, SessionInput)] == [10]
    session.close()
