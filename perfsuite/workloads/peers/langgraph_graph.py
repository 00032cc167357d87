"""A real LangGraph graph on five checkpointers: our engine's savers beside LangGraph's own (E4, seed 002).

:func:`invoke` compiles one ``StateGraph`` (a ``messages`` channel with ``add_messages``, one node that
answers the last message) with the mode's saver and, per sample, invokes it once on a thread that already
holds a long conversation (``history = "seeded"``: ``messages`` seeded user/assistant turns of 200-1200
characters, 6000 by default; ``history = "root"``: every message of the root transcript of the recipe's
fixture, the copied 27 MB session, as user and assistant messages), with ``durability="sync"``: every
superstep's checkpoint is stored before the next one runs, so the invoke returning is the acknowledgement.
The thread is built outside the window (one ``update_state`` carrying the whole conversation), so the
window holds exactly one user turn's supersteps.

``saver`` chooses the checkpointer:

* ``engine`` / ``async-engine``: :class:`~perfsuite.integrations.langgraph.EngineSaver` (``invoke`` on the
  loop thread) / ``AsyncEngineSaver`` (``ainvoke`` as a task), each on a session in the sample's scratch
  directory opened on the recording I/O layer: bytes written and fdatasyncs are counted exactly (M3, E3);
* ``sqlite`` / ``async-sqlite``: langgraph-checkpoint-sqlite's ``SqliteSaver`` / ``AsyncSqliteSaver``,
  journal_mode=WAL (LangGraph's setting) with ``synchronous`` (FULL: the WAL fsynced at every commit), as
  the peer-checkpoint recipe; bytes written are the process's ``write()`` bytes in the window (Linux
  ``/proc/self/io`` ``wchar``), else the growth of the database and its WAL;
* ``memory``: ``InMemorySaver``, the floor: no disk, nothing written, nothing durable.

Supersteps are counted from the thread's stored checkpoints after the window (with ``durability="sync"``
each superstep stores one), so ``bytes_written_per_superstep`` needs no hook inside LangGraph.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
from pathlib import Path
from typing import Annotated, Any, TypedDict

from perfsuite._extras import install_hint
from perfsuite.engine import ROOT, OsFileSystem, Session, SessionError
from perfsuite.engine.testing import RecordingFileSystem
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import AckCallback, OperationContext, Param, accepts
from perfsuite.workloads._params import LABELS, count, value
from perfsuite.workloads._session_operation import _text, io_counts
from perfsuite.workloads.peers._common import missing_reason, peer_version
from perfsuite.workloads.peers.langgraph_sqlite import (
    _SYNCHRONOUS,
    AIOSQLITE,
    LANGGRAPH_SQLITE,
    _file_size,
    _wchar,
    open_sqlite_saver,
)

__all__ = ["GRAPH", "HISTORIES", "SAVERS", "THREAD_ID", "conversation", "invoke", "root_conversation"]

#: the saver keys of a mode, and what each one is recorded as
SAVERS = {"engine": "EngineSaver", "async-engine": "AsyncEngineSaver", "sqlite": "SqliteSaver",
          "async-sqlite": "AsyncSqliteSaver", "memory": "InMemorySaver"}
_ASYNC = frozenset({"async-engine", "async-sqlite"})
#: where the thread's history comes from
HISTORIES = ("seeded", "root")

#: what an invoke mode accepts: every key is read by the operation
GRAPH = {**LABELS,
         "saver": Param(str, None, "the checkpointer: " + ", ".join(SAVERS), choices=tuple(SAVERS)),
         "history": Param(str, "seeded", "the thread's history: seeded (``messages`` generated turns) or root "
                          "(the fixture session's root transcript)", choices=HISTORIES),
         "messages": count("messages", 6000, "messages the thread holds before the measured invoke (seeded)"),
         "message_chars": count("chars", 2000, "characters of the measured user turn", minimum=1),
         "synchronous": Param(str, "FULL", "SQLite's synchronous pragma (sqlite savers; the others ignore it "
                              "but record it): OFF, NORMAL, FULL or EXTRA")}

THREAD_ID = "long-conversation"


def _langgraph_missing() -> str | None:
    """The one-line reason the graph cannot run (LangGraph, its SQLite saver or aiosqlite missing)."""
    for distribution, module in (("langgraph", "langgraph.graph"), ("langchain-core", "langchain_core.messages")):
        if missing_reason((distribution, module)):
            return f"{distribution} is not installed (optional langgraph extra): {install_hint('langgraph')}"
    return missing_reason(LANGGRAPH_SQLITE, AIOSQLITE)


def conversation(messages: int, seed: int = 6000) -> list[Any]:
    """The thread's history: ``messages`` seeded user/assistant turns of 200-1200 characters, fixed ids."""
    from langchain_core.messages import AIMessage, HumanMessage

    rng = random.Random(seed)
    out: list[Any] = []
    for i in range(messages):
        text = _text(rng, rng.randint(200, 1200), f"turn {i}:")
        out.append(HumanMessage(text, id=f"m{i}") if i % 2 == 0 else AIMessage(text, id=f"m{i}"))
    return out


def _builder() -> Any:
    """The graph: START -> respond -> END over a messages channel (LangGraph's chat-agent shape)."""
    from langchain_core.messages import AIMessage, AnyMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages

    # the functional form: real objects, not the strings ``from __future__ import annotations`` would leave
    State = TypedDict("State", {"messages": Annotated[list[AnyMessage], add_messages]})  # noqa: UP013

    def respond(state: Any) -> dict[str, Any]:
        last = state["messages"][-1]
        return {"messages": [AIMessage(f"reply to {len(state['messages'])} messages: {str(last.content)[:80]}")]}

    builder = StateGraph(State)
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    builder.add_edge("respond", END)
    return builder


def root_conversation(workdir: Path) -> list[Any]:
    """The root transcript of the session in ``workdir`` as LangGraph messages: the user's as human
    messages, every other role's as AI messages, fixed ids (the fixture's conversation as an agent stored it)."""
    from langchain_core.messages import AIMessage, HumanMessage

    try:
        with Session.open(workdir) as session:
            entries = list(session.conversation(ROOT).messages())
    except SessionError as exc:
        raise PerfsuiteError(f"history root: cannot read the fixture's session: {exc}") from None
    out: list[Any] = []
    for i, entry in enumerate(entries):
        text = entry.content if isinstance(entry.content, str) else str(entry.content)
        out.append(HumanMessage(text, id=f"r{i}") if entry.role == "user" else AIMessage(text, id=f"r{i}"))
    return out


class _GraphInvoke:
    """One compiled graph on the mode's saver and a thread of ``messages`` turns (prepared by :meth:`setup`)."""

    def __init__(self, ctx: OperationContext) -> None:
        if ctx.scratch is None:
            raise PerfsuiteError(f"mode {ctx.mode}: needs a scratch directory")
        saver = value(ctx, GRAPH, "saver")
        if saver is None:
            raise PerfsuiteError(f"mode {ctx.mode}: saver: expected one of {', '.join(SAVERS)}")
        synchronous = str(value(ctx, GRAPH, "synchronous")).upper()
        if synchronous not in _SYNCHRONOUS:
            raise PerfsuiteError(f"mode {ctx.mode}: synchronous: expected one of {', '.join(_SYNCHRONOUS)}, "
                                 f"got {ctx.params.get('synchronous')!r}")
        reason = _langgraph_missing()
        if reason:
            raise PerfsuiteError(reason)
        self.ctx = ctx
        self.kind: str = saver
        self.asynchronous = saver in _ASYNC
        self.synchronous = synchronous
        self.source: str = value(ctx, GRAPH, "history")
        if self.source == "root" and ctx.workdir is None:
            raise PerfsuiteError(f"mode {ctx.mode}: history root: the recipe names no fixture session")
        self.history: int = value(ctx, GRAPH, "messages")
        self.chars: int = value(ctx, GRAPH, "message_chars")
        self.scratch: Path = ctx.scratch
        self.db_path = ctx.scratch / "checkpoints.sqlite"
        self.fs: RecordingFileSystem | None = None
        self.saver: Any = None
        self.conn: Any = None
        self.graph: Any = None
        self.task: asyncio.Task[Any] | None = None
        self.config: dict[str, Any] = {"configurable": {"thread_id": THREAD_ID}}
        self.turn: Any = None
        self.result: Any = None
        self.labels: dict[str, str] = {}
        self.extra: dict[str, Any] = {}
        self.checkpoints_before = 0
        self.bytes_before = 0
        self.ops_before = 0
        self.disk_before = 0
        self.wchar_before: int | None = None
        self.wchar_after: int | None = None

    # -- set-up, outside the window ----------------------------------------------------------------------

    async def _open(self) -> None:
        if self.kind in ("engine", "async-engine"):
            from perfsuite.integrations.langgraph import AsyncEngineSaver, EngineSaver

            self.fs = RecordingFileSystem(OsFileSystem(), keep_data=False)
            path = self.scratch / "session"
            self.saver = (await AsyncEngineSaver.open(path, fs=self.fs) if self.asynchronous
                          else EngineSaver(path, fs=self.fs))
            self.labels["durability"] = ("each put and put_writes: one record appended to the session log, one "
                                         "fdatasync, before it returns" + (" (through the engine's job)"
                                                                           if self.asynchronous else ""))
        elif self.kind == "memory":
            from langgraph.checkpoint.memory import InMemorySaver

            self.saver = InMemorySaver()
            self.labels["durability"] = "none: checkpoints live in the process's memory (the floor, no disk)"
        else:
            self.conn, self.saver = await open_sqlite_saver(self.db_path, self.synchronous, self.asynchronous)

    async def _sql(self, sql: str) -> Any:
        if self.asynchronous:
            cursor = await self.conn.execute(sql)
            rows = await cursor.fetchall()
            await cursor.close()
            return rows[0][0] if rows else None
        row = self.conn.execute(sql).fetchone()
        return row[0] if row else None

    async def setup(self) -> _GraphInvoke:
        """Open the saver, compile the graph, store the long thread, prepare the turn (outside the window)."""
        from langchain_core.messages import HumanMessage

        await self._open()
        self.graph = _builder().compile(checkpointer=self.saver)
        if self.source == "root":
            assert self.ctx.workdir is not None  # checked in __init__
            history = root_conversation(self.ctx.workdir)
            self.history = len(history)
        else:
            history = conversation(self.history)
        if self.asynchronous:
            await self.graph.aupdate_state(self.config, {"messages": history})
        else:
            self.graph.update_state(self.config, {"messages": history})
        self.checkpoints_before = self._checkpoints()
        rng = random.Random(1000 + self.ctx.sample)
        self.turn = {"messages": [HumanMessage(_text(rng, self.chars, f"turn {self.history}:"),
                                               id=f"m{self.history}")]}
        self.labels.update({"saver": SAVERS[self.kind], "langgraph_version": peer_version("langgraph"),
                            "checkpoint_version": peer_version("langgraph-checkpoint")})
        if self.conn is not None:
            journal = str(await self._sql("PRAGMA journal_mode")).upper()
            level = int(await self._sql("PRAGMA synchronous"))
            await self._sql("PRAGMA wal_checkpoint(TRUNCATE)")  # the window starts with an empty WAL
            self.labels.update({
                "peer_version": peer_version("langgraph-checkpoint-sqlite"), "sqlite_version": sqlite3.sqlite_version,
                "journal_mode": journal, "sqlite_synchronous": _SYNCHRONOUS[level] if 0 <= level < 4 else str(level),
                "durability": f"SQLite journal_mode={journal}, synchronous={_SYNCHRONOUS[level]}: each put is one "
                              "transaction whose WAL frames are fsynced at commit"})
        self.extra["thread_messages"] = self.history
        self.labels["history"] = self.source
        return self

    def _checkpoints(self) -> int:
        """The thread's stored checkpoints, read outside the window (AsyncSqliteSaver's synchronous reads
        refuse the loop thread, so its database is counted through a plain read-only connection)."""
        if self.kind == "async-sqlite":
            with sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True) as side:
                row = side.execute("SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?", (THREAD_ID,)).fetchone()
            return int(row[0])
        return sum(1 for _ in self.saver.list(self.config))

    # -- the measured invoke -------------------------------------------------------------------------------

    def _mark(self) -> None:
        if self.fs is not None:
            self.bytes_before = self.fs.bytes_written
            self.ops_before = self.fs.mark()
        if self.conn is not None:
            self.disk_before = _file_size(self.db_path) + _file_size(Path(f"{self.db_path}-wal"))
        self.wchar_before = _wchar()

    def submit(self, ack: AckCallback) -> None:
        """One invoke of the graph with ``durability="sync"``: inline for a synchronous saver, a task otherwise."""
        self._mark()
        if not self.asynchronous:
            self.result = self.graph.invoke(self.turn, self.config, durability="sync")
            self.wchar_after = _wchar()
            ack(None)
            return
        self.task = asyncio.get_running_loop().create_task(
            self.graph.ainvoke(self.turn, self.config, durability="sync"))

        def done(task: asyncio.Task[Any]) -> None:
            self.wchar_after = _wchar()
            if task.cancelled():
                ack(asyncio.CancelledError("the invoke was cancelled"))
                return
            error = task.exception()
            if error is None:
                self.result = task.result()
            ack(error)

        self.task.add_done_callback(done)

    def metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.extra)
        if self.result is not None:
            out["reply_messages"] = len(self.result["messages"])
        if self.fs is not None:
            out["bytes_written"] = self.fs.bytes_written - self.bytes_before
            out["bytes_written_method"] = "bytes through the recording I/O layer in the window"
            out.update(io_counts(self.fs.since(self.ops_before)))
        elif self.conn is not None:
            out["bytes_written"] = out["file_growth_bytes"] = (
                _file_size(self.db_path) + _file_size(Path(f"{self.db_path}-wal")) - self.disk_before)
            out["bytes_written_method"] = "growth of the database file and WAL"
            if self.wchar_before is not None and self.wchar_after is not None:
                out["bytes_written"] = out["write_syscall_bytes"] = self.wchar_after - self.wchar_before
                out["bytes_written_method"] = "bytes passed to write() in the window (/proc/self/io wchar)"
        else:
            out["bytes_written"] = 0
            out["fdatasyncs"] = out["fsyncs"] = 0
            out["bytes_written_method"] = "InMemorySaver: no storage, nothing written"
        # durability "sync": one checkpoint stored per superstep (the input's and each loop step's)
        out["supersteps"] = supersteps = self._checkpoints() - self.checkpoints_before
        if supersteps > 0:
            out["bytes_written_per_superstep"] = out["bytes_written"] / supersteps
        out.update(self.labels)
        return out

    async def close(self) -> None:
        """Wait for an unfinished invoke, then close the saver (its files stay for inspection)."""
        if self.task is not None and not self.task.done():
            try:
                await asyncio.wait_for(asyncio.shield(self.task), timeout=30)
            except Exception:  # pylint: disable=broad-except  # closing: the sample already failed
                self.task.cancel()
        saver, self.saver = self.saver, None
        conn, self.conn = self.conn, None
        if self.kind == "async-engine" and saver is not None:
            await saver.aclose()
        elif self.kind == "engine" and saver is not None:
            saver.close()
        if conn is not None:
            if self.asynchronous:
                await conn.close()
            else:
                conn.close()


@accepts(**GRAPH)
async def invoke(ctx: OperationContext) -> _GraphInvoke:
    """One ``invoke`` of a messages graph on a thread of ``messages`` turns (6000), ``durability="sync"``.
    Params: ``saver`` (engine, async-engine, sqlite, async-sqlite, memory), ``history`` (seeded, root),
    ``messages``, ``message_chars`` (2000), ``synchronous`` ("FULL", the sqlite savers)."""
    op = _GraphInvoke(ctx)
    try:
        return await op.setup()
    except BaseException:
        await op.close()
        raise


invoke.unavailable = _langgraph_missing  # type: ignore[attr-defined]
