"""gptme's real ``LogManager`` as a peer of our transcript log (E2, seed 000), driven headlessly.

:func:`transcript_barrier` is the peer twin of :func:`perfsuite.workloads.engine.transcript_barrier`: the
same parameters, the same seeded messages (sizes 1-4 KB, roles alternating, in the same order), the same
timing points and the same metric names (it reuses that operation's bookkeeping), so ``perfsuite report``
and ``compare`` line the two up. Only the calls differ:

* ``append``: ``LogManager.append(msg)``, which writes ``conversation.jsonl`` and appends a
  ``message_append`` event to ``events.jsonl`` through the OS (page cache, no fsync), every 50th event
  also writing and compacting a full checkpoint of the message list (gptme 0.35.1's recovery log);
* the barrier: ``LogManager.write(sync=True)`` (0.35.1 has it): fsync the written transcripts, model
  trace and ``events.jsonl``, then every directory from theirs up to the parent that existed when the
  manager was created, on every barrier;
* ``rewrite``: ``LogManager.edit(messages)`` with one message replaced (our ``edit``), which saves a
  backup branch of the whole log, rewrites ``conversation.jsonl`` by temp file + fsync + replace +
  directory fsync and logs a ``message_edit`` event holding every message. ``rewrite = "undo"`` or
  ``"fork"`` times ``LogManager.undo(1)`` or ``LogManager.fork(name)`` instead (metrics ``undo_ms_at_N``,
  ``fork_ms_at_N``; ours has no such mode).

gptme runs headless: ``GPTME_LOGS_HOME`` and ``XDG_{CONFIG,DATA,STATE,CACHE}_HOME`` point into the
sample's scratch directory *before* gptme is imported and while the operation lives (restored at
``close``), and every message is ``Message(..., quiet=True)`` so nothing is printed.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError
from perfsuite.harness import AckCallback, OperationContext, Param, accepts
from perfsuite.workloads._engine_logs import TRANSCRIPT, _TranscriptBarrier
from perfsuite.workloads._params import value
from perfsuite.workloads.peers._common import missing_reason, peer_version, requires

__all__ = ["DURABILITY", "GPTME", "HeadlessEnv", "load_gptme", "transcript_barrier"]

#: (distribution, module) this peer needs
GPTME = ("gptme", "gptme.logmanager")

#: what each gptme call guarantees in 0.35.1 (recorded with every sample as the ``durability`` label)
DURABILITY = (
    "append: LogManager.append writes conversation.jsonl and events.jsonl to the page cache, no fsync; "
    "barrier: write(sync=True) fsyncs transcripts, model trace and events.jsonl, then every directory up to "
    "the pre-existing parent, on every call; edit/undo/fork: temp file, fsync, os.replace, directory fsync"
)

_XDG = {"XDG_CONFIG_HOME": "config", "XDG_DATA_HOME": "data", "XDG_STATE_HOME": "state", "XDG_CACHE_HOME": "cache"}
_REWRITES = ("edit", "undo", "fork")
#: ours, plus the rewrite gptme is asked for
GPTME_TRANSCRIPT = {**TRANSCRIPT, "rewrite": Param(str, "edit", "how the rewrite is made with gptme",
                                                    choices=_REWRITES)}


class HeadlessEnv:
    """Points ``GPTME_LOGS_HOME`` and ``XDG_*`` at ``home`` until :meth:`restore` (gptme reads them at
    import and at call time, so they must be set before the import and while gptme works)."""

    def __init__(self, home: Path) -> None:
        self.logs_home = home / "logs"
        values = {"GPTME_LOGS_HOME": self.logs_home, **{k: home / "xdg" / v for k, v in _XDG.items()}}
        self._saved: dict[str, str | None] = {}
        for name, path in values.items():
            path.mkdir(parents=True, exist_ok=True)
            self._saved[name] = os.environ.get(name)
            os.environ[name] = str(path)

    def restore(self) -> None:
        """Put the variables back as they were (idempotent)."""
        for name, old in self._saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old
        self._saved = {}


def load_gptme() -> tuple[Any, Any]:
    """``(LogManager, Message)`` from the installed gptme; a one-line :class:`PerfsuiteError` otherwise.

    Call it with a :class:`HeadlessEnv` in place: the first import reads the environment.
    """
    reason = missing_reason(GPTME)
    if reason:
        raise PerfsuiteError(reason)
    try:
        from gptme.logmanager import LogManager
        from gptme.message import Message
    except Exception as exc:  # installed but broken: still one line
        raise PerfsuiteError(f"importing gptme failed: {type(exc).__name__}: {exc}") from None
    return LogManager, Message


class _GptmeTranscript(_TranscriptBarrier):
    """Our transcript-barrier operation with gptme's ``LogManager`` in place of our ``TranscriptLog``."""

    def __init__(self, ctx: OperationContext) -> None:
        super().__init__(ctx)  # validates operation_kind, messages and the scratch directory
        self.rewrite: str = value(ctx, GPTME_TRANSCRIPT, "rewrite")
        assert ctx.scratch is not None  # checked by the base class
        self.env = HeadlessEnv(ctx.scratch / "gptme")
        try:
            self.LogManager, self.Message = load_gptme()
        except BaseException:
            self.env.restore()
            raise
        self.version = peer_version("gptme")
        self.logdir = self.env.logs_home / "perfsuite-transcript"
        self.manager: Any = None
        self.other_rewrites: dict[str, float] = {}

    def _message(self, role: str, content: str, timestamp: float) -> Any:
        return self.Message(role, content, timestamp=datetime.fromtimestamp(timestamp, tz=UTC), quiet=True)

    async def _run(self, ack: AckCallback) -> None:
        try:
            self.manager = manager = self.LogManager(logdir=self.logdir)
            barrier = self.kind == "append+barrier"
            for i in range(self.messages):
                message = self._message("user" if i % 2 else "assistant", "m" * self.rng.randint(1024, 4096), float(i))
                start = time.perf_counter_ns()
                manager.append(message)
                if barrier:
                    manager.write(sync=True)
                self.latencies.append(time.perf_counter_ns() - start)
                if self.kind == "append" and i % 100 == 99:
                    start = time.perf_counter_ns()
                    manager.write(sync=True)
                    self.barriers.append(time.perf_counter_ns() - start)
                if self.kind == "rewrite" and i + 1 in self.rewrite_at:
                    self._rewrite(manager, i)
                await asyncio.sleep(0)  # yield to the loop after every operation, as ours does
        except Exception as exc:
            ack(exc)
            return
        ack(None)

    def _rewrite(self, manager: Any, i: int) -> None:
        n = i + 1
        if self.rewrite == "edit":  # the same edit as ours: message i // 2 replaced
            start = time.perf_counter_ns()
            messages = list(manager.log.messages)
            messages[i // 2] = self._message("user", "edited", 0.0)
            manager.edit(messages)
            self.rewrites[n] = (time.perf_counter_ns() - start) / 1e6
        elif self.rewrite == "undo":
            last = manager.log.messages[-1]
            start = time.perf_counter_ns()
            manager.undo(1, quiet=True)
            self.other_rewrites[f"undo_ms_at_{n}"] = (time.perf_counter_ns() - start) / 1e6
            manager.append(last)  # untimed: the conversation keeps growing to its length
        else:  # fork: gptme copies the conversation folder to a new id and continues there
            start = time.perf_counter_ns()
            manager.fork(f"perfsuite-fork-{n}")
            self.other_rewrites[f"fork_ms_at_{n}"] = (time.perf_counter_ns() - start) / 1e6

    def metrics(self) -> Mapping[str, Any]:
        out = dict(super().metrics())
        out.update(self.other_rewrites)
        logdir = Path(self.manager.logdir) if self.manager is not None else self.logdir
        for name, key in (("conversation.jsonl", "transcript_bytes"), ("events.jsonl", "event_log_bytes")):
            try:
                out[key] = os.path.getsize(logdir / name)
            except OSError:
                pass
        out["messages_written"] = len(self.latencies)
        out.update({"peer": "gptme", "peer_version": self.version, "durability": DURABILITY})
        if self.kind == "rewrite":
            out["rewrite_call"] = f"LogManager.{self.rewrite}"
        return out

    def close(self) -> None:
        manager, self.manager = self.manager, None
        try:
            if manager is not None:
                manager.__exit__(None, None, None)  # release gptme's conversation lock
                # LogManager registers an atexit hook per instance, which would keep the whole log alive
                atexit.unregister(manager._release_lock)
        finally:
            self.env.restore()


@requires(GPTME)
@accepts(**GPTME_TRANSCRIPT)
def transcript_barrier(ctx: OperationContext) -> _GptmeTranscript:
    """gptme's LogManager by transcript length. Params as ours: ``operation_kind`` = "append",
    "append+barrier" or "rewrite"; ``messages`` (6000); plus ``rewrite`` = "edit" (default), "undo", "fork"."""
    return _GptmeTranscript(ctx)
