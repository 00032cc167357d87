"""E4: the asynchronous publication job: the same phases as the synchronous writer, spread across
event-loop turns, with blocking steps (stage, hash, commit, adopt) run off the loop thread.

Its acknowledgement means what the synchronous one means: it runs once, after adoption (success) or
after a definitive rollback (failure). A synchronous caller may *drain* the job: the remaining steps
run inline on the caller's stack, the limit checked between pumps (E5).
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from perfsuite.engine._offload import Offload
from perfsuite.engine._pipeline import Publication, Round
from perfsuite.engine._steps import Step, driven_steps, mark_failed, step_done


class DrainTimeout(TimeoutError):
    """The drain limit passed between pumps; the accepted job is retained, unacknowledged (E5).
    (Defined here, where it is raised, so the gate, which holds the job, imports the job and not back.)"""


class Admission:
    """The job's admission: released immediately by default. A stalled admission (a producer still
    proving authority, in the recipes a deliberately held one) keeps the job accepted but unstarted."""

    def __init__(self, released: bool = True) -> None:
        self._released = released
        self._waiters: list[Callable[[], None]] = []

    @property
    def released(self) -> bool:
        return self._released

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        waiters, self._waiters = self._waiters, []
        for wake in waiters:
            wake()

    def on_release(self, wake: Callable[[], None]) -> None:
        if self._released:
            wake()
        else:
            self._waiters.append(wake)


@dataclass
class JobTrace:
    """Where the job's time went: per phase, main-thread time and wall time (off-loop work included)."""

    main_ms: dict[str, float] = field(default_factory=dict)
    wall_ms: dict[str, float] = field(default_factory=dict)
    advances: int = 0
    max_advance_ms: float = 0.0
    drained: bool = False

    def add(self, phase: str, main: float, wall: float) -> None:
        self.main_ms[phase] = self.main_ms.get(phase, 0.0) + main
        self.wall_ms[phase] = self.wall_ms.get(phase, 0.0) + wall


Member = tuple[Publication, list[Any]]  # a publication and its acknowledgement callbacks


@dataclass
class _Chained:
    """What a chain of blocking steps did on the worker: the steps done (with their wall ms), the one that
    failed (with its error), and the next step, pulled there, for the loop thread."""

    done: list[tuple[Step, float]]
    failed: Step | None
    failed_ms: float
    error: BaseException | None
    following: Step | None


class PublicationJob:
    """One accepted publication, advanced by an asyncio task or drained inline, and, with group commit,
    the publications it absorbs afterwards (group commit): when a round's commit point returned and its members
    finished, ``absorb(job)`` runs the preparations queued behind the gate meanwhile; each that accepts a
    job joins the next round instead (each its own generation, parents chained; one pwrite and one
    fdatasync for the round). ``on_round(job, members)`` runs on the loop thread after each round (each
    member's outcome: adopted, noop or failed), ``on_done(job)`` once at the end. A drain absorbs nothing."""

    def __init__(
        self,
        publication: Publication,
        offload: Offload,
        on_done: Callable[[PublicationJob], None],
        *,
        admission: Admission | None = None,
        label: str = "",
        acks: list[Any] | None = None,
        on_round: Callable[[PublicationJob, list[Member]], None] | None = None,
        absorb: Callable[[PublicationJob], list[tuple[Publication, list[Any], Admission | None]]] | None = None,
    ) -> None:
        self.publication = publication
        self.offload = offload
        self.on_done = on_done
        self.on_round = on_round
        self.absorb = absorb
        self.absorbing: list[tuple[Publication, list[Any], Admission | None]] | None = None  # while absorbing
        self.admission = admission or Admission()
        self.label = label or publication.batch.kind
        self.trace = JobTrace()
        self.members: list[Member] = [(publication, acks if acks is not None else [])]
        self.rounds = 1
        publication.main_ms = {}  # the report's loop-thread times; its driver is "job"
        self.submitted_ns = time.perf_counter_ns()
        self.done = False
        self._draining = False
        self._failed_round = False
        self._steps: Generator[Step, None, None] = driven_steps(publication)
        self._next: Step | None = None  # a step the worker pulled at the end of a chain, for the loop to run
        self._current: Step | None = None
        self._future: cf.Future[Any] | None = None
        self._started_ns = 0
        self._submit_ms = 0.0  # main-thread time handing the current blocking step to the offload
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._driver = 0  # which task may advance the job; a drain takes over by moving it on

    @property
    def publications(self) -> list[Publication]:
        """The publications of the current round (the first one: ``publication``)."""
        return [p for p, _acks in self.members]

    # -- asynchronous advance ---------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._driver += 1
        self._draining = False
        self._task = loop.create_task(self._run(self._driver), name=f"publication-{self.publication.batch.id}")

    async def _run(self, driver: int) -> None:
        try:
            while not self.done and self._driver == driver:
                if not self.admission.released:  # the round (the first, or an absorbed one) waits
                    released: asyncio.Future[None] = asyncio.get_running_loop().create_future()

                    def wake(f: asyncio.Future[None] = released) -> None:
                        if not f.done():
                            f.set_result(None)

                    self.admission.on_release(wake)
                    await released
                    continue
                started = time.perf_counter_ns()
                self._begin_next()
                if self._future is not None:
                    self._note_advance(started)
                    future = self._future
                    try:
                        await asyncio.wrap_future(future)
                    except BaseException:
                        pass
                    if self._driver != driver or self._future is not future:
                        return  # a drain took over and already accepted this step
                    started = time.perf_counter_ns()
                    self._complete()
                    self._loop_side(driver)
                self._note_advance(started)
                await asyncio.sleep(0)  # let the loop run between phases
        except asyncio.CancelledError:
            # Cancellation is caught at the asynchronous boundary: it must not strand the gate.
            if not self.done and self.admission.released:
                self.drain(limit_s=None)
            raise

    def _loop_side(self, driver: int) -> None:
        """After an off-loop step came back: the loop-thread steps that follow it (a round's finishes: O(change)
        installs) and the round's end (its acknowledgements) run in this loop turn, not one turn each: every
        extra turn is a wake-up between the commit point and the acknowledgement. Stops at the next blocking
        step (handed off from the next turn), at the round's end, or when a drain took the job over."""
        rounds = self.rounds
        while not self.done and self._driver == driver and self._current is None and self._future is None \
                and self.rounds == rounds:
            if self._next is None:
                self._next = next(self._steps, None)
                if self._next is None:
                    self._round_done()  # the members resolved; an absorbed round starts from the next turn
                    return
            if self._next.blocking:
                return
            self._begin_next()

    def _note_advance(self, started_ns: int) -> None:
        elapsed = (time.perf_counter_ns() - started_ns) / 1e6
        self.trace.advances += 1
        self.trace.max_advance_ms = max(self.trace.max_advance_ms, elapsed)

    @staticmethod
    def _for(step: Step) -> tuple[Publication | None, tuple[Publication, ...]]:
        """The publication a step runs for, and every publication it acts on (a round's commit and adopt
        act on all of its members)."""
        owner: Publication | None = getattr(step, "owner", None)
        shared: tuple[Publication, ...] = tuple(getattr(step, "shared", ()))
        return owner, shared or ((owner,) if owner is not None else ())

    def _account(self, step: Step, main: float, wall: float) -> None:
        self.trace.add(step.phase, main, wall)
        for member in self._for(step)[1]:
            if wall:
                member.phases_ms[step.phase] = member.phases_ms.get(step.phase, 0.0) + wall
            if main and member.main_ms is not None:
                member.main_ms[step.phase] = member.main_ms.get(step.phase, 0.0) + main

    def _observe(self, step: Step, done: bool, main: float, wall: float, error: BaseException | None) -> None:
        for member in self._for(step)[1]:
            observe = member.on_phase
            if observe is not None:
                observe(step.phase, done, main, wall, None if error is None else f"{type(error).__name__}: {error}")

    def _begin_next(self, *, inline: bool = False) -> None:
        """Take the next step: run it now if it belongs on the loop (or ``inline``: a drain runs every
        step on the caller's stack), else hand it to the offload."""
        if self._current is not None:
            return
        step, self._next = (self._next, None) if self._next is not None else (next(self._steps, None), None)
        if step is None:
            self._round_done()
            return
        self._current = step
        self._started_ns = time.perf_counter_ns()
        self._observe(step, False, 0.0, 0.0, None)
        if step.blocking and not inline:
            try:
                submit = self.offload.submit_local if step.local else self.offload.submit
                if self._chainable(step):
                    self._future = submit(self._chain, step)
                else:
                    self._future = submit(step.func, *step.args)
            except Exception as exc:  # the offload itself failed (a dead worker, unpicklable state)
                self._future = None
                self._observe(step, True, 0.0, 0.0, exc)
                self._fail(step, exc)
                return
            self._submit_ms = (time.perf_counter_ns() - self._started_ns) / 1e6
            self._account(step, self._submit_ms, 0.0)
        else:
            self._future = None
            self._run_current_inline()

    def _run_current_inline(self) -> None:
        step = self._current
        assert step is not None
        start = time.perf_counter_ns()
        error: Exception | None = None
        try:
            step.accept(step.func(*step.args))
        except Exception as exc:
            error = exc
        elapsed = (time.perf_counter_ns() - start) / 1e6
        self._account(step, elapsed, elapsed)
        self._observe(step, True, elapsed, elapsed, error)
        if error is not None:
            self._fail(step, error)
            return
        self._current = None
        self._done_step(step)

    def _done_step(self, step: Step) -> None:
        for member in self._for(step)[1]:
            step_done(member, step.phase)

    def _chainable(self, step: Step) -> bool:
        """A blocking step whose following blocking steps may run on the worker right after it (one
        hand-off for stage and hash, one for commit and adopt): only while nobody observes the phases
        (their events are emitted on the loop thread, in order) and where the offload can (``chains``)."""
        return not any(m.on_phase is not None for m in self._for(step)[1]) and self.offload.chains(step, step)

    def _chain(self, step: Step) -> _Chained:
        """On the worker: ``step``, then each following blocking step the offload can chain, each accepted
        here (the job owns its publications while a step is in flight: nothing else touches them). Stops at
        the first failure, at a step for the loop thread (returned, to run next) or at the round's end."""
        done: list[tuple[Step, float]] = []
        while True:
            started = time.perf_counter_ns()
            try:
                step.accept(step.func(*step.args))
            except Exception as exc:
                return _Chained(done, step, (time.perf_counter_ns() - started) / 1e6, exc, None)
            done.append((step, (time.perf_counter_ns() - started) / 1e6))
            self._done_step(step)
            following = next(self._steps, None)
            if following is None or not following.blocking or not self.offload.chains(step, following):
                return _Chained(done, None, 0.0, None, following)
            step = following

    def _complete(self) -> None:
        """Accept the offloaded step's result on the loop thread."""
        step, future = self._current, self._future
        assert step is not None and future is not None
        if future.done() and not future.cancelled() and future.exception() is None and isinstance(
                future.result(), _Chained):
            self._complete_chain(future.result())
            return
        self._future = None
        wall = (time.perf_counter_ns() - self._started_ns) / 1e6
        self._account(step, 0.0, wall)
        start = time.perf_counter_ns()
        error: Exception | None = None
        try:
            step.accept(future.result())
        except Exception as exc:
            error = exc
        accepted = (time.perf_counter_ns() - start) / 1e6
        self._account(step, accepted, 0.0)
        if any(m.on_phase is not None for m in self._for(step)[1]):  # the sum is a float: built when observed
            self._observe(step, True, self._submit_ms + accepted, wall, error)
        if error is not None:
            self._fail(step, error)
            return
        self._current = None
        self._done_step(step)

    def _complete_chain(self, chained: _Chained) -> None:
        """The chained steps' results, on the loop thread: each step's wall time and phase done (they were
        accepted on the worker), the failed one failed, the step the worker pulled for the loop next."""
        self._future = None
        self._current = None
        for step, wall in chained.done:
            self._account(step, 0.0, wall)
        if chained.failed is not None:
            self._account(chained.failed, 0.0, chained.failed_ms)
            assert chained.error is not None
            self._fail(chained.failed, chained.error)
            return
        self._next = chained.following
        if chained.following is None:
            self._round_done()

    def _fail(self, step: Step, exc: BaseException) -> None:
        """A step failed: the publications it acts on are failed (a round's commit or adopt fails all of
        its members; a member's own stage, hash or select only that one, the others carry on)."""
        members = self._for(step)[1] or (self.publication,)
        for member in members:
            mark_failed(member, step.phase, exc)
        self._current = None
        if any(m.adopted for m in members):
            return  # failure after adoption: durable, only logged; carry on to finish
        if step.phase in ("commit", "adopt") or len(self.members) == 1:
            self._failed_round = True
            self._steps.close()  # nothing more of this round runs: no adopt after a failed commit
            self._round_done()

    def _round_done(self) -> None:
        """A round ended: its members are resolved (``on_round``), then the queued preparations are absorbed
        into the next round, unless this is a drain, the round failed, or nothing was queued."""
        if self.done:
            return
        members, self.members = self.members, []
        nxt: list[tuple[Publication, list[Any], Admission | None]] = []
        failed = self._failed_round or any(p.outcome == "failed" for p, _acks in members)
        if self.absorb is not None and not self._draining and not failed:  # (a failure is retained first)
            nxt = self.absorb(self)  # the members finished (installed): the absorbed freeze after them
        self._failed_round = False
        if not nxt:
            # The last round: the gate is released first (``on_done``), then the members are resolved, as
            # without group commit (an acknowledgement's callback finds the gate free: a notification it
            # schedules wakes at once, E7).
            self._finish()
            if self.on_round is not None:
                self.on_round(self, members)
            return
        if self.on_round is not None:
            self.on_round(self, members)
        self.members = [(publication, acks) for publication, acks, _admission in nxt]
        for publication, _acks, admission in nxt:
            publication.main_ms = {}
            if admission is not None and not admission.released:
                self.admission = admission  # the next round waits for it, like a first one
        self.publication = self.members[0][0]
        self.rounds += 1
        self._steps = Round(self.publications, self.publication.store, self.publication.lease).steps()

    def _finish(self) -> None:
        if self.done:
            return
        self.done = True
        self.on_done(self)

    # -- synchronous drain (E5) ----------------------------------------------------------------------
    def drain(self, *, limit_s: float | None, poll_s: float = 0.01) -> None:
        """Advance the job to its end inline on the caller's stack. The limit is checked between pumps
        (one pump: wait for the current off-loop step, or run the next step), so it bounds the number
        of pumps, not one blocking step. A stalled admission raises :class:`DrainTimeout` at the
        limit and the job stays accepted, unacknowledged."""
        self._driver += 1  # any task still advancing the job stops at its next resume
        self._draining = True  # a drain absorbs nothing more (E5: queued work stays queued)
        self.trace.drained = True
        deadline = None if limit_s is None else time.monotonic() + limit_s
        while not self.done:
            if deadline is not None and time.monotonic() > deadline:
                if self._loop is not None:
                    self.start(self._loop)  # the job stays accepted and resumes asynchronously
                raise DrainTimeout(f"drain limit {limit_s:.3f} s passed with {self.label} still accepted")
            if not self.admission.released:
                time.sleep(poll_s)
                continue
            if self._future is not None:
                try:
                    self._future.result()
                except BaseException:
                    pass
                self._complete()
                continue
            self._begin_next(inline=True)

    @property
    def phase(self) -> str | None:
        return self._current.phase if self._current is not None else None
