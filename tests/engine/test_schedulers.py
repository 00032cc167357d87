"""E6/E7 schedulers in virtual time: notification FIFO and backoff, debounce, in-flight checkpoints."""

from __future__ import annotations

import pytest

from perfsuite.engine import Message, Session, SessionSettings
from perfsuite.engine._schedulers import CheckpointTimer, Debouncer, NotificationQueue
from perfsuite.engine.testing import VirtualClock


class Flags:
    def __init__(self) -> None:
        self.gate_idle = True
        self.transport_idle = True
        self.live = True


def queue(clock: VirtualClock, flags: Flags) -> NotificationQueue:
    return NotificationQueue(clock, gate_idle=lambda: flags.gate_idle, transport_idle=lambda: flags.transport_idle,
                             live=lambda: flags.live)


def test_notification_runs_immediately_only_under_the_immediate_run_rule():
    clock, flags = VirtualClock(), Flags()
    q = queue(clock, flags)
    ran: list[str] = []
    assert q.offer(lambda obs: ran.append("a"))
    flags.transport_idle = False
    assert not q.offer(lambda obs: ran.append("b"))  # transport busy: queued
    flags.transport_idle = True
    assert not q.offer(lambda obs: ran.append("c"))  # something already pending: queued behind b
    assert ran == ["a"]
    clock.advance(0.05)
    assert ran == ["a", "b", "c"]


def test_fifo_keeps_order_under_busy_gate_and_backs_off_50_to_500_ms():
    clock, flags = VirtualClock(), Flags()
    q = queue(clock, flags)
    flags.gate_idle = False
    ran: list[int] = []
    for i in range(5):
        q.offer(lambda obs, i=i: ran.append(i))
    clock.advance(0.05 + 0.1 + 0.2 + 0.4 + 0.5 + 0.5 - 1e-9)
    assert ran == []
    assert q.delays == [0.05, 0.1, 0.2, 0.4, 0.5, 0.5]  # the sixth timer is armed, not yet due
    flags.gate_idle = True
    clock.advance(1e-9)
    assert ran == [0, 1, 2, 3, 4]
    assert q.waits[0] == pytest.approx(0.05 + 0.1 + 0.2 + 0.4 + 0.5 + 0.5)


def test_each_callback_gets_fresh_observations():
    clock, flags = VirtualClock(), Flags()
    q = queue(clock, flags)
    seen = []
    q.offer(lambda obs: (seen.append(obs), obs.seen.update(x=1)))
    q.offer(lambda obs: seen.append(obs))
    assert seen[0] is not seen[1] and seen[1].seen == {}


def test_stop_retains_offers_without_timer_and_veto_rearms_the_same_fifo():
    clock, flags = VirtualClock(), Flags()
    q = queue(clock, flags)
    flags.gate_idle = False
    ran: list[str] = []
    q.offer(lambda obs: ran.append("x"))
    q.stop_temporarily()
    assert not q.timer_armed and len(q.fifo) == 1
    clock.advance(10)
    assert ran == []
    flags.gate_idle = True
    q.vetoed_close()
    assert q.timer_armed
    clock.advance(0.05)
    assert ran == ["x"]


def test_proceeding_close_discards_offers_idle_close_schedules_nothing():
    clock, flags = VirtualClock(), Flags()
    q = queue(clock, flags)
    assert q.close(proceed=False) == 0 and not q.timer_armed
    flags.gate_idle = False
    ran: list[str] = []
    q.offer(lambda obs: ran.append("x"))
    assert q.close(proceed=True) == 1
    flags.gate_idle = True
    clock.advance(5)
    assert ran == [] and not q.timer_armed


def test_no_flush_while_root_not_live():
    clock, flags = VirtualClock(), Flags()
    q = queue(clock, flags)
    flags.live = False
    ran: list[str] = []
    q.offer(lambda obs: ran.append("x"))
    clock.advance(1)
    assert ran == [] and len(q.fifo) == 1


def test_debouncer_one_save_per_window_and_deferral():
    clock = VirtualClock()
    saves: list[float] = []
    busy = {"v": False}
    d = Debouncer(clock, 2.0, lambda: saves.append(clock.monotonic()), is_deferred=lambda: busy["v"])
    for t in range(10):
        clock.run_until(t * 0.15)
        d.touch()
    clock.run_until(1.99)
    assert saves == []
    busy["v"] = True
    clock.run_until(2.01)
    assert saves == [] and d.deferred == 1
    busy["v"] = False
    clock.run_until(3.0)
    assert saves == [pytest.approx(2.05)]
    d.touch()
    d.absorb()
    clock.run_until(10)
    assert len(saves) == 1 and d.absorbed == 1


def test_checkpoint_timer_repeats_while_in_flight_and_stops():
    clock = VirtualClock()
    ticks: list[tuple[float, frozenset[str]]] = []
    t = CheckpointTimer(clock, 30.0, lambda convs: ticks.append((clock.monotonic(), convs)))
    t.request_started("root")
    clock.run_until(29)
    t.request_started("a1")
    clock.run_until(61)
    assert ticks == [(30.0, frozenset({"root", "a1"})), (60.0, frozenset({"root", "a1"}))]
    t.request_finished("root")
    t.request_finished("a1")
    assert not t.running
    clock.run_until(200)
    assert len(ticks) == 2


def _session(tmp_path, clock, **settings) -> Session:
    return Session.open(tmp_path / "s", create=True, clock=clock, settings=SessionSettings(chunk_size=1024, **settings))


def test_n_activity_changes_inside_2s_give_one_registry_save(tmp_path):
    clock = VirtualClock()
    session = _session(tmp_path, clock)
    session.spawn_agent("a1")
    before = len(session.reports)
    for i in range(40):
        clock.run_until(i * 0.04)
        session.set_activity("a1", "permission-blocked" if i % 2 == 0 else "running")
    clock.run_until(10)
    saves = [r for r in list(session.reports)[before:] if r.kind == "registry"]
    assert len(saves) == 1 and saves[0].outcome == "adopted"
    assert session.sidecar.agents["a1"]["activity"] == "running"


def test_synchronous_commit_absorbs_pending_registry_save(tmp_path):
    clock = VirtualClock()
    session = _session(tmp_path, clock)
    session.spawn_agent("a1")
    session.set_activity("a1", "permission-blocked")
    assert session.registry_debounce.pending
    session.append_mail("a1", "acknowledged mail")  # its sidecar carries the activity change
    assert not session.registry_debounce.pending
    before = len(session.reports)
    clock.run_until(10)
    assert len(session.reports) == before


def test_in_flight_requests_drive_checkpoints_in_virtual_time(tmp_path):
    clock = VirtualClock()
    session = _session(tmp_path, clock, checkpoint_interval_s=30.0)
    session.request_started("root")
    for i in range(10):
        clock.run_until(i * 10.0)
        session.add_message("root", Message("assistant", f"streamed {i}", float(i)))
    clock.run_until(95)
    checkpoints = [r for r in session.reports if r.kind == "checkpoint"]
    assert len(checkpoints) == 3
    session.request_finished("root")
    session.add_message("root", Message("assistant", "after", 1.0))
    clock.run_until(500)
    assert len([r for r in session.reports if r.kind == "checkpoint"]) == 3
    assert session.buffers["root"].modified


def test_scheduler_stats_is_a_read_only_view_of_the_schedulers(tmp_path):
    """What a simulation reads (debounced saves, checkpoint ticks) without reaching into the
    schedulers; a copy, so later activity does not change a view already taken. ``stop_checkpoints`` ends the
    periodic ticks (E7)."""
    clock = VirtualClock()
    session = _session(tmp_path, clock, checkpoint_interval_s=30.0)
    session.spawn_agent("a1")
    for i in range(10):
        clock.run_until(i * 0.04)
        session.set_activity("a1", "permission-blocked" if i % 2 == 0 else "running")
    clock.run_until(10)
    first = session.scheduler_stats()
    assert first.debounce_fired == session.registry_debounce.fired == 1
    assert first.debounce_absorbed == session.registry_debounce.absorbed
    assert first.checkpoint_ticks == 0
    session.request_started("root")
    session.add_message("root", Message("assistant", "streamed", 1.0))
    clock.run_until(61)
    second = session.scheduler_stats()
    assert second.checkpoint_ticks == session.checkpoint_timer.ticks >= 1
    assert first.checkpoint_ticks == 0  # the earlier view did not move
    session.stop_checkpoints()
    session.add_message("root", Message("assistant", "after stop", 2.0))
    clock.run_until(200)
    assert session.scheduler_stats().checkpoint_ticks == second.checkpoint_ticks
