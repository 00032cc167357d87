"""Replay targets (U, SPEC section 6): a team's own scheduler replayed in virtual time, counted by perfsuite."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.whatif import (
    KindCost,
    PublicationCosts,
    ReplayContext,
    ReplayTarget,
    Setting,
    TraceEvent,
    make_grid,
    make_trace,
    read_costs,
    replay,
    replay_target,
    resolve_target,
    sweep,
    sweep_target,
    write_costs,
)


def _edits(*times: float, kind: str = "x-edit", session: str = "main") -> list[TraceEvent]:
    return [TraceEvent(t, session, "root", kind, 10) for t in times]


class Trailing:
    """A trailing debouncer as a team writes it: cancel and re-arm ``call_later``; the save is async work."""

    def __init__(self, ctx: ReplayContext) -> None:
        self.ctx = ctx
        self.handle: asyncio.TimerHandle | None = None
        self.saving = 0
        self.tasks: set[asyncio.Task[None]] = set()

    def on_event(self, event: TraceEvent) -> None:
        if self.handle is not None:
            self.handle.cancel()
        self.handle = asyncio.get_running_loop().call_later(self.ctx.setting.debounce_s, self.fire)

    def fire(self) -> None:
        self.handle = None
        publication = self.ctx.begin("save")
        self.saving += 1

        async def save() -> None:
            await asyncio.sleep(0.25)  # the save's own (virtual) duration
            publication.done(bytes_written=100)
            self.saving -= 1

        task = asyncio.ensure_future(save())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def idle(self) -> bool:
        return self.handle is None and not self.saving


def test_publications_losses_and_bytes_are_what_the_users_code_did() -> None:
    trace = make_trace(_edits(0.0, 0.5, 1.0, 10.0), duration_s=12.0)
    run = replay_target(trace, Setting(debounce_s=2.0), Trailing)
    # a burst of three (quiet 2 s after 1.0 s) and a single edit: two saves, each 0.25 s long
    assert [(p.kind, p.frozen_at, p.done_at, p.bytes_written) for p in run.publications] == [
        ("save", 3.0, 3.25, 100), ("save", 12.0, 12.25, 100)]
    assert run.losses == pytest.approx((3.25, 2.75, 2.25, 2.25)) and run.unpublished == 0
    assert isinstance(Trailing(ReplayContext("s", Setting(), Path("."), None)), ReplayTarget)  # type: ignore[arg-type]


def test_a_change_during_a_save_waits_for_the_next_one() -> None:
    """The capture rule: a publication captures the changes delivered before it began (as an engine freeze)."""
    trace = make_trace(_edits(0.0, 1.1), duration_s=2.0)  # the second edit arrives while the first save runs
    run = replay_target(trace, Setting(debounce_s=1.0), Trailing)
    assert [p.done_at for p in run.publications] == [1.25, 2.35]
    assert run.losses == pytest.approx((1.25, 1.25))


def test_the_sweep_gives_the_same_outputs_as_the_engines_with_pareto_marks_and_own_kinds(tmp_path: Path) -> None:
    burst = [0.0, 0.05, 0.1]
    trace = make_trace(_edits(*burst, *(t + 1.0 for t in burst), *(t + 5.0 for t in burst)), duration_s=6.0)
    costs = PublicationCosts({"save": KindCost(4096, 2048, 1000, 10, 1.0)}, {}, "x", "now", "my fixture", "mine")
    report = sweep_target(trace, make_grid(debounce=(0.01, 0.2, 0.5, 2.0, 6.0)), Trailing, costs)
    rows = [r.row(report.kinds) for r in report.results]
    assert report.kinds == ("save",) and report.target.endswith(":Trailing")
    assert [r["publications"] for r in rows] == [9, 3, 3, 2, 1]
    assert [r["publications_save"] for r in rows] == [9, 3, 3, 2, 1]
    assert [r["pareto"] for r in rows] == [True, True, False, True, True]  # 0.5 s: same saves as 0.2 s, longer loss
    assert rows[1]["bytes_written"] == 300 and rows[1]["bytes_allocated"] == 3 * 4096  # reported, then costs
    assert rows[1]["loss_window_s"] == pytest.approx(0.1 + 0.2 + 0.25)
    assert rows[1]["debounce_fired"] is None  # the engine's counters: not measured here, never 0
    doc = report.to_json()
    assert doc["target"] == report.target and doc["trace"]["user_events"] == 9
    # the engine's own replay does not know x- kinds: it replays nothing of them
    assert sweep(trace, make_grid(debounce=(0.2,))).results[0].publications == 0
    assert replay(trace, Setting()).publications == ()


def test_bytes_are_not_measured_when_the_code_reports_none_and_no_costs_are_given() -> None:
    class Quiet:
        def __init__(self, ctx: ReplayContext) -> None:
            self.ctx = ctx

        def on_event(self, event: TraceEvent) -> None:
            self.ctx.publish("flush")

    report = sweep_target(make_trace(_edits(0.0, 1.0)), make_grid(debounce=(1.0,)), Quiet)
    [result] = report.results
    assert result.publications == 2 and result.bytes_written is None and result.bytes_allocated is None
    with pytest.raises(PerfsuiteError, match=r"no costs for publication kind 'flush' \(it has save\)"):
        sweep_target(make_trace(_edits(0.0)), make_grid(debounce=(1.0,)), Quiet,
                     PublicationCosts({"save": KindCost(1, 1, 1, 1, 1.0)}))


def test_a_costs_file_of_your_own_kinds_is_read_only_when_asked(tmp_path: Path) -> None:
    path = write_costs(PublicationCosts({"save": KindCost(1, 1, 1, 1, 1.0)}), tmp_path / "c.json")
    assert set(read_costs(path, required=None).kinds) == {"save"}
    with pytest.raises(PerfsuiteError, match=r"kinds.registry: expected"):
        read_costs(path)  # the engine's sweep needs its three kinds
    (tmp_path / "empty.json").write_text(json.dumps({"schema": 1, "kinds": {}}))
    with pytest.raises(PerfsuiteError, match="no publication kind has costs"):
        read_costs(tmp_path / "empty.json", required=None)


def test_async_handlers_notifications_changes_and_stop() -> None:
    class Notifier:
        changes = frozenset({"x-edit"})  # only edits need publishing; x-ping does not

        def __init__(self, ctx: ReplayContext) -> None:
            self.ctx = ctx
            self.ticks = 0
            self.ticker: asyncio.TimerHandle | None = asyncio.get_running_loop().call_later(1.0, self.tick)

        def tick(self) -> None:  # a periodic timer: stop() ends it, or the replay would run its whole tail
            self.ticks += 1
            self.ticker = asyncio.get_running_loop().call_later(1.0, self.tick)

        async def on_event(self, event: TraceEvent) -> None:
            if event.kind == "notify":
                await asyncio.sleep(0.3)
                self.ctx.notified(event)
            elif event.kind == "x-edit":
                with self.ctx.begin("save"):
                    await asyncio.sleep(0.1)

        def stop(self) -> None:
            assert self.ticker is not None
            self.ticker.cancel()

    events = [TraceEvent(0.0, "main", "root", "notify"), *_edits(0.5), TraceEvent(0.7, "main", "root", "x-ping")]
    run = replay_target(make_trace(events, duration_s=3.0), Setting(), Notifier)
    assert run.notification_waits == pytest.approx((0.3,))
    assert [p.done_at for p in run.publications] == pytest.approx([0.6]) and run.losses == pytest.approx((0.1,))
    assert run.unpublished == 0


def test_one_target_per_trace_session() -> None:
    made: list[str] = []

    class PerSession:
        def __init__(self, ctx: ReplayContext) -> None:
            made.append(ctx.session)
            assert ctx.workdir.is_dir()
            self.ctx = ctx

        def on_event(self, event: TraceEvent) -> None:
            assert event.session == self.ctx.session
            self.ctx.publish()

    trace = make_trace([*_edits(0.0, session="a"), *_edits(0.5, session="b"), *_edits(1.0, session="a")])
    run = replay_target(trace, Setting(), PerSession)
    assert made == ["a", "b"] and [p.session for p in run.publications] == ["a", "b", "a"]


@pytest.mark.parametrize(("target", "message"), [
    ("nope", r'replay target: expected "module:Class", got \'nope\''),
    ("no_such_module_xyz:T", r"replay target no_such_module_xyz:T: no module named 'no_such_module_xyz'"),
    ("json:NoSuch", r"replay target json:NoSuch: module 'json' has no attribute 'NoSuch'"),
    ("json:__name__", r"'__name__' is not callable"),
])
def test_a_bad_target_spec_is_one_line(target: str, message: str) -> None:
    with pytest.raises(PerfsuiteError, match=message):
        resolve_target(target)


def _raising_timer(ctx: ReplayContext) -> Any:
    class T:
        def on_event(self, event: TraceEvent) -> None:
            asyncio.get_running_loop().call_later(0.1, lambda: 1 / 0)

    return T()


@pytest.mark.parametrize(("factory", "message"), [
    (lambda ctx: object(), r"object has no on_event\(event\) method"),
    (lambda ctx: 1 / 0, r"making it for session 'main' failed: ZeroDivisionError"),
    (_raising_timer, r"failed on <trace>: ZeroDivisionError: division by zero"),
])
def test_errors_in_the_users_code_are_one_line(factory: Any, message: str) -> None:
    with pytest.raises(PerfsuiteError, match=message):
        replay_target(make_trace(_edits(0.0)), Setting(), factory)


def test_a_publication_is_finished_once() -> None:
    class Twice:
        def __init__(self, ctx: ReplayContext) -> None:
            self.ctx = ctx

        def on_event(self, event: TraceEvent) -> None:
            p = self.ctx.begin()
            p.done()
            p.done()

    with pytest.raises(PerfsuiteError, match="finished twice"):
        replay_target(make_trace(_edits(0.0)), Setting(), Twice)


def test_a_replay_inside_a_running_loop_runs_in_a_thread() -> None:
    """A notebook's cell runs inside an event loop; the virtual loop still gets a thread of its own."""

    class Once:
        def __init__(self, ctx: ReplayContext) -> None:
            self.ctx = ctx

        def on_event(self, event: TraceEvent) -> None:
            self.ctx.publish()

    async def cell() -> int:
        return len(replay_target(make_trace(_edits(0.0, 1.0)), Setting(), Once).publications)

    assert asyncio.run(cell()) == 2
