"""E5: the mutation gate. While a publication job is accepted, its session's gate is held.

Gated mutations queue as *preparation continuations* that hold no snapshot and run before they mutate
or capture anything. Ownership is explicit: a running preparation receives a fresh :class:`Token` as an
argument (also held in the gate's slot only while it runs); only a call that passes that token may
reenter. Nothing is inherited ambiently: no context variable, no global flag.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable
from dataclasses import dataclass

from perfsuite.engine._job import DrainTimeout, PublicationJob

_tokens = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Token:
    """Proof that the holder is the preparation currently running. Compared by identity of ``serial``."""

    serial: int
    label: str


class DrainRefused(RuntimeError):
    """Draining cannot help here: a preparation is running on the stack, or a synchronous publication
    on this stack owns the gate (E5 fail-fast)."""


Preparation = Callable[[Token], None]


@dataclass
class _Queued:
    label: str
    run: Preparation
    key: str | None  # coalescing key (one accepted checkpoint per conversation)


class MutationGate:
    """One per session. The session asks :meth:`busy`; gated work goes through :meth:`submit`."""

    def __init__(self) -> None:
        self.job: PublicationJob | None = None
        self.preparing: Token | None = None
        self.sync_depth = 0  # synchronous publications running on this stack
        self.queue: collections.deque[_Queued] = collections.deque()
        self.drains = 0
        self.queued_total = 0
        self.on_admit: Callable[[str, bool], None] | None = None  # (label, queued first): engine events


    @property
    def busy(self) -> bool:
        """Held: a job accepted, a preparation running, or a synchronous publication on the stack."""
        return self.job is not None or self.preparing is not None or self.sync_depth > 0

    @property
    def idle(self) -> bool:
        return not self.busy and not self.queue

    def holds(self, token: Token | None) -> bool:
        """Only the running preparation's own token reenters the gate."""
        return token is not None and self.preparing is not None and token.serial == self.preparing.serial

    def queued_keys(self) -> set[str]:
        return {q.key for q in self.queue if q.key is not None}

    def submit(self, label: str, run: Preparation, *, key: str | None = None) -> bool:
        """Run the preparation now when the gate is free, else queue it (FIFO). A ``key`` already queued
        coalesces: the earlier entry stands and this one is dropped. Returns whether it ran now."""
        if key is not None and key in self.queued_keys():
            return False
        entry = _Queued(label, run, key)
        if self.busy or self.queue:
            self.queue.append(entry)
            self.queued_total += 1
            return False
        self._run(entry, queued=False)
        self.pump()  # work deferred while it ran goes next, in order
        return True

    def _run(self, entry: _Queued, *, queued: bool = True) -> None:
        if self.on_admit is not None:
            self.on_admit(entry.label, queued)
        token = Token(next(_tokens), entry.label)
        self.preparing = token
        try:
            entry.run(token)
        finally:
            self.preparing = None

    def run_next(self) -> None:
        """Run the next queued preparation now, although the gate is held: only the holder of the accepted
        job calls this, to absorb queued work into its next round (group commit)."""
        if self.queue:
            self._run(self.queue.popleft())

    def pump(self) -> int:
        """Run queued preparations while the gate is free (each may accept a job and hold it again)."""
        ran = 0
        while self.queue and not self.busy:
            self._run(self.queue.popleft())
            ran += 1
        return ran

    def check_drain_allowed(self, token: Token | None) -> None:
        if self.preparing is not None and not self.holds(token):
            raise DrainRefused(f"a preparation ({self.preparing.label}) is running on the stack")
        if self.preparing is not None:
            raise DrainRefused("a preparation cannot drain the gate it holds")
        if self.sync_depth > 0:
            raise DrainRefused("a synchronous publication on this stack owns the gate")


__all__ = ["DrainRefused", "DrainTimeout", "MutationGate", "Preparation", "Token"]  # DrainTimeout: raised by the job
