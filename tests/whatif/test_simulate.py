"""Virtual-time replay through the engine's real schedulers: exact counts and loss windows on small
hand-made traces (SPEC section 6; E5-E7 semantics)."""

from __future__ import annotations

from typing import Any

import pytest

from perfsuite.engine._schedulers import CheckpointTimer, Debouncer, NotificationQueue
from perfsuite.engine.testing import MemoryFileSystem, VirtualClock
from perfsuite.errors import PerfsuiteError
from perfsuite.whatif import Setting, TraceEvent, make_trace, replay
from perfsuite.whatif._simulate import _Model

FAST = {"registry": 0.01, "checkpoint": 0.5, "mail": 0.32}


def ev(time: float, kind: str, conversation: str = "agent-1", size: int = 0, session: str = "s",
       **extra: Any) -> TraceEvent:
    return TraceEvent(time, session, conversation, kind, size, extra)


def act(time: float, flavour: str, conversation: str = "agent-1", session: str = "s") -> TraceEvent:
    return ev(time, "activity", conversation, session=session, flavour=flavour)


def test_one_change_is_published_one_debounce_later() -> None:
    run = replay(make_trace([act(1.0, "permission-blocked")]), Setting(debounce_s=2.0), FAST)
    assert [(p.kind, p.outcome) for p in run.publications] == [("registry", "adopted")]
    assert run.publications[0].frozen_at == pytest.approx(3.0)
    assert run.observational_losses == pytest.approx((2.01,))


def test_the_debounce_is_armed_by_the_first_change_not_extended() -> None:
    trace = make_trace([act(0.0, "permission-blocked"), act(0.5, "running"), act(1.5, "permission-blocked")])
    run = replay(trace, Setting(debounce_s=1.0), FAST)
    assert [p.frozen_at for p in run.publications] == pytest.approx([1.0, 2.5])
    assert sorted(run.observational_losses) == pytest.approx([0.51, 1.01, 1.01])
    assert run.debounce_fired == 2 and all(p.outcome == "adopted" for p in run.publications)


def test_a_pair_that_nets_to_nothing_is_an_empty_selection() -> None:
    trace = make_trace([act(0.0, "permission-blocked"), act(0.3, "idle")])  # agents start idle (as spawned)
    run = replay(trace, Setting(debounce_s=1.0), FAST)
    assert [(p.kind, p.outcome) for p in run.publications] == [("registry", "noop")]
    assert max(run.observational_losses) == pytest.approx(1.01)


def test_an_active_publication_defers_the_save_and_its_commit_absorbs_it() -> None:
    # E7: the debounce is due at 0.1 while the mail job (0.05-0.37) is active: deferred every 50 ms;
    # the mail froze after the change, so its commit publishes it and absorbs the pending save.
    trace = make_trace([act(0.0, "permission-blocked"), ev(0.05, "mail", "root", 100)])
    run = replay(trace, Setting(debounce_s=0.1), FAST)
    assert [(p.kind, p.outcome) for p in run.publications] == [("completion", "adopted")]
    assert run.debounce_fired == 0 and run.debounce_absorbed == 1 and run.debounce_deferred == 6
    assert run.observational_losses == pytest.approx((0.37,))
    assert run.notification_waits == (0.0,)  # the waiter's wake ran at once: gate and transport idle
    assert run.unpublished == 1  # the delivered mail's transcript text: no request in flight to checkpoint it


def test_a_synchronous_save_absorbs_the_pending_registry_save() -> None:
    trace = make_trace([act(0.0, "permission-blocked"), ev(1.0, "save", "root")])
    run = replay(trace, Setting(debounce_s=2.0), FAST)
    assert [(p.kind, p.frozen_at) for p in run.publications] == [("checkpoint", 1.0)]
    assert run.debounce_absorbed == 1 and run.debounce_fired == 0
    assert run.observational_losses == pytest.approx((1.0,))


def test_in_flight_checkpoints_tick_while_a_request_is_in_flight() -> None:
    trace = make_trace([ev(0.0, "request-start", "root"), ev(1.0, "message", "root", 500),
                        ev(5.0, "message", "root", 500), ev(12.0, "message", "root", 500),
                        ev(20.0, "request-end", "root"), ev(25.0, "message", "root", 500)])
    run = replay(trace, Setting(checkpoint_interval_s=10.0), FAST)
    assert [p.frozen_at for p in run.publications] == pytest.approx([10.0, 20.0])
    assert sorted(run.text_losses) == pytest.approx([5.5, 8.5, 9.5])
    assert run.checkpoint_ticks == 2
    assert run.unpublished == 1  # streamed after the request ended: no timer, nothing publishes it


def test_one_accepted_checkpoint_per_conversation_coalesces_requests() -> None:
    trace = make_trace([ev(0.0, "message", "root", 10), ev(1.0, "checkpoint", "root"),
                        ev(1.1, "message", "root", 10), ev(1.2, "checkpoint", "root"), ev(1.3, "checkpoint", "root")])
    run = replay(trace, Setting(), FAST)
    # E7: the first is accepted (1.0-1.5); requests while it runs coalesce into it and the later edit
    # stays dirty for the next opportunity (none comes in this trace)
    assert [p.frozen_at for p in run.publications] == pytest.approx([1.0])
    assert run.unpublished == 1


@pytest.mark.parametrize(("notify_max", "wait", "delays"), [(0.5, 0.35, [0.05, 0.1, 0.2]),
                                                              (0.1, 0.25, [0.05, 0.1, 0.1])])
def test_notifications_back_off_while_the_transport_is_busy(notify_max: float, wait: float,
                                                            delays: list[float]) -> None:
    trace = make_trace([ev(0.0, "transport-start", "root"), ev(1.0, "notify", "root"),
                        ev(1.2, "transport-end", "root")])
    run = replay(trace, Setting(notify_max_s=notify_max), FAST)
    assert run.notification_waits == pytest.approx((wait,))


def test_sessions_have_their_own_schedulers() -> None:
    trace = make_trace([act(0.0, "permission-blocked", session="a"), act(0.5, "permission-blocked", session="b")])
    run = replay(trace, Setting(debounce_s=1.0), FAST)
    assert [(p.session, p.frozen_at) for p in run.publications] == [("a", 1.0), ("b", 1.5)]


def test_the_replay_runs_the_engines_own_scheduler_classes(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: dict[str, int] = {"debounce": 0, "tick": 0, "notify": 0}

    def counting(cls: type, name: str, key: str) -> None:
        original = getattr(cls, name)

        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            calls[key] += 1
            return original(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, wrapper)

    counting(Debouncer, "_due", "debounce")
    counting(CheckpointTimer, "_tick", "tick")
    counting(NotificationQueue, "offer", "notify")
    trace = make_trace([act(0.0, "permission-blocked"), ev(0.0, "request-start", "root"),
                        ev(1.0, "message", "root", 10), ev(2.0, "notify", "root"), ev(31.0, "request-end", "root")])
    replay(trace, Setting(), FAST)
    assert calls == {"debounce": 1, "tick": 1, "notify": 1}
    setting = Setting(debounce_s=3.0, checkpoint_interval_s=7.0, notify_max_s=0.25)
    session = _Model("x", VirtualClock(), MemoryFileSystem(), setting, FAST, (), []).session
    assert type(session.registry_debounce) is Debouncer and session.registry_debounce.delay == 3.0
    assert type(session.checkpoint_timer) is CheckpointTimer and session.checkpoint_timer.interval == 7.0
    assert type(session.notifications) is NotificationQueue and session.notifications.max_delay == 0.25


def test_spawn_settle_and_synchronous_mail_replay() -> None:
    trace = make_trace([ev(0.0, "spawn", "agent-9"), ev(1.0, "mail", "root", 50, path="sync"),
                        ev(2.0, "settle", "agent-9", 40, status="done")])
    run = replay(trace, Setting(), FAST)
    assert [p.kind for p in run.publications] == ["spawn", "message", "settle"]
    assert all(p.outcome == "adopted" for p in run.publications)


def test_an_impossible_event_is_a_one_line_error() -> None:
    trace = make_trace([act(0.0, "running"), ev(1.0, "spawn", "agent-1")], source="t.jsonl")
    with pytest.raises(PerfsuiteError, match=r"t.jsonl: spawn of 'agent-1' at 1 s cannot be replayed"):
        replay(trace, Setting(), FAST)
