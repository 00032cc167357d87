"""Where an accepted publication job runs and where deferred work is scheduled (one scheduling
core): the session's own scheduling code (gate, job acceptance, finish order, pump) is the same for
both runners; only the passage of time differs.

- :class:`LoopRunner` (default): a running asyncio loop advances the job off the loop thread; without
  one the job is drained inline (E4, E5); queued preparations are pumped with ``call_soon``.
- :class:`VirtualRunner`: virtual time. The job stays accepted (the gate held) for a modelled duration
  of its kind on a :class:`~perfsuite.engine.testing.VirtualClock`, then runs its phases inline; the what-if
  simulator replays traces through the real session this way (SPEC section 6).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from perfsuite.engine._clock import VirtualClock
from perfsuite.engine._job import PublicationJob


class JobRunner(Protocol):
    """Runs accepted jobs and soon-callbacks for one session."""

    def start(self, job: PublicationJob) -> None: ...

    def soon(self, callback: Callable[[], None]) -> None: ...


class LoopRunner:
    """The real runner: the running asyncio loop, or inline without one."""

    def start(self, job: PublicationJob) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            job.drain(limit_s=None)
        else:
            job.start(loop)

    def soon(self, callback: Callable[[], None]) -> None:
        try:
            asyncio.get_running_loop().call_soon(callback)
        except RuntimeError:
            callback()


class VirtualRunner:
    """Virtual time: a job completes ``duration(kind)`` seconds after acceptance (unless a synchronous
    caller drained it first, E5); soon-callbacks are zero-delay timers at the same virtual instant."""

    def __init__(self, clock: VirtualClock, duration: Callable[[str], float]) -> None:
        self.clock = clock
        self.duration = duration

    def start(self, job: PublicationJob) -> None:
        def complete() -> None:
            if not job.done:
                job.drain(limit_s=None)

        self.clock.call_later(self.duration(job.publication.batch.kind), complete)

    def soon(self, callback: Callable[[], None]) -> None:
        self.clock.call_later(0.0, callback)


__all__ = ["JobRunner", "LoopRunner", "VirtualRunner"]
