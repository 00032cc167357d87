"""LangGraph's SQLite checkpointers as a peer of our root-checkpoint publication (E4, seed 002).

:func:`checkpoint` stores the same state our ``root-checkpoint`` recipe publishes: the root transcript of
the sample's private session copy (``conversations/root.jsonl`` of ``copied-27mb``, read through
:meth:`perfsuite.engine.Session.open`), after the same streamed turn (the same 2000-character assistant
message our :func:`perfsuite.workloads.engine.checkpoint` adds, byte for byte). Without a fixture it
uses a generated transcript of the same size (1,069,346 bytes).

Outside the window the factory opens the saver on a database in the sample's scratch directory, sets
``PRAGMA synchronous`` (``FULL`` by default: the WAL is fsynced at every commit, the like-for-like
setting for our fsynced chunks, manifest, directory and HEAD), stores the previous checkpoint of the
thread (the transcript before the turn, so the measured ``put`` lands in a thread with history, as ours
lands in a session with generations), then truncates the WAL. ``submit`` is exactly one save:

* ``saver = "sync"``: ``SqliteSaver.put`` on the loop thread; acknowledged when it returns;
* ``saver = "async"``: ``AsyncSqliteSaver.aput`` as a task (aiosqlite runs SQLite on its own thread;
  serialization runs on the loop); acknowledged when the task completes.

``checkpoints = N`` (as ours) saves N checkpoints back to back, one streamed turn each (the same turns as
ours), yielding to the loop between them: the steady state, where SQLite's WAL auto-checkpoints (copying
pages into the database file) happen inside the window.

Bytes written are, on Linux, the bytes this process passed to ``write()``/``pwrite()`` during the window
(``/proc/self/io`` ``wchar``: WAL frames and checkpoint copies alike); elsewhere the growth of the database
file plus its WAL. Both are reported.
"""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfsuite.engine import Message, Session
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import AckCallback, OperationContext, Param, accepts
from perfsuite.workloads._params import LABELS, count, value
from perfsuite.workloads._session_operation import _text
from perfsuite.workloads.peers._common import missing_reason, peer_version, requires

__all__ = [
    "DURABILITY",
    "LANGGRAPH_SQLITE",
    "ROOT_TRANSCRIPT_BYTES",
    "checkpoint",
    "generated_transcript",
    "open_sqlite_saver",
    "root_transcript",
    "streamed_turn",
    "streamed_turns",
]

LANGGRAPH_SQLITE = ("langgraph-checkpoint-sqlite", "langgraph.checkpoint.sqlite")
AIOSQLITE = ("aiosqlite", "aiosqlite")

#: the root transcript of copied-27mb (SPEC M6), the size of the generated stand-in
ROOT_TRANSCRIPT_BYTES = 1_069_346

#: the thread every sample writes (one conversation, like our root)
THREAD_ID = "root"

_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
#: what a LangGraph checkpoint mode accepts
SQLITE = {**LABELS,
          "saver": Param(str, "async", "sync: SqliteSaver.put; async: AsyncSqliteSaver.aput",
                         choices=("sync", "async")),
          "synchronous": Param(str, "FULL", "SQLite's synchronous pragma: OFF, NORMAL, FULL or EXTRA (any case)"),
          "message_chars": count("chars", 2000, "characters of the streamed turn", minimum=1),
          "checkpoints": count("checkpoints", 1, "checkpoints back to back, one streamed turn each")}

DURABILITY = (
    "SQLite journal_mode={journal}, synchronous={synchronous} (value read back from the connection): "
    "each put is one transaction whose WAL frames are fsynced at commit; the database file is updated "
    "later by WAL checkpoints (every {autocheckpoint} pages)"
)


def generated_transcript(size: int = ROOT_TRANSCRIPT_BYTES, seed: int = ROOT_TRANSCRIPT_BYTES) -> bytes:
    """A seeded JSONL transcript in our engine's encoding, exactly ``size`` bytes (the no-fixture stand-in)."""
    rng = random.Random(seed)
    lines: list[bytes] = []
    total = 0
    i = 0
    while True:
        role = "user" if i % 2 else "assistant"
        timestamp = 1_790_000_000.0 + i
        overhead = len(Message(role, "", timestamp).encode())
        remaining = size - total
        if remaining - overhead <= 4000:
            if remaining < overhead:
                raise PerfsuiteError(f"cannot generate a {size}-byte transcript")
            lines.append(Message(role, _text(rng, remaining - overhead, "final:").ljust(remaining - overhead, "."),
                                 timestamp).encode())
            break
        line = Message(role, _text(rng, rng.randint(300, 2000), f"message {i}:"), timestamp).encode()
        lines.append(line)
        total += len(line)
        i += 1
    data = b"".join(lines)
    if len(data) != size:  # ASCII content: one byte per character, so this is exact by construction
        raise PerfsuiteError(f"generated transcript is {len(data)} bytes, expected {size}")
    return data


def root_transcript(workdir: Path | None, conversation: str = "root") -> tuple[bytes, str]:
    """(transcript bytes, where they came from): the session copy's conversation, or the generated one."""
    if workdir is None:
        return generated_transcript(), f"generated {ROOT_TRANSCRIPT_BYTES}-byte transcript"
    try:
        session = Session.open(workdir)
    except Exception as exc:
        raise PerfsuiteError(f"cannot open session {workdir}: {exc}") from None
    try:
        data = session.conversation(conversation).data()
    finally:
        session.close()
    return data, f"fixture {conversation} transcript"


def streamed_turns(sample: int, count: int = 1, chars: int = 2000) -> list[bytes]:
    """The encoded messages our ``checkpoint`` operation adds, one before each checkpoint (same seed, bytes)."""
    rng = random.Random(1000 + sample)
    return [Message("assistant", _text(rng, chars, f"streamed turn {sample}.{n}:"), 1_800_000_000.0 + n).encode()
            for n in range(count)]


def streamed_turn(sample: int, chars: int = 2000) -> bytes:
    """The first streamed turn (the only one of a single-checkpoint sample)."""
    return streamed_turns(sample, 1, chars)[0]


def _wchar() -> int | None:
    try:
        with open("/proc/self/io", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _file_size(path: Path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


async def open_sqlite_saver(db_path: Path, synchronous: str, asynchronous: bool) -> tuple[Any, Any]:
    """LangGraph's SqliteSaver (or AsyncSqliteSaver on aiosqlite) on ``db_path``, set up, with ``PRAGMA
    synchronous`` as given: the connection and the saver (both peer recipes open it the same way)."""
    if asynchronous:
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        conn: Any = await aiosqlite.connect(str(db_path))
        saver: Any = AsyncSqliteSaver(conn)
        await saver.setup()
        await conn.execute(f"PRAGMA synchronous={synchronous}")
        return conn, saver
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(str(db_path), check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    conn.execute(f"PRAGMA synchronous={synchronous}")
    return conn, saver


class _SqliteCheckpoint:
    """LangGraph checkpoints of the root transcript, one per streamed turn (prepared by :meth:`setup`)."""

    def __init__(self, ctx: OperationContext) -> None:
        if ctx.scratch is None:
            raise PerfsuiteError(f"mode {ctx.mode}: needs a scratch directory")
        saver = value(ctx, SQLITE, "saver")
        synchronous = str(value(ctx, SQLITE, "synchronous")).upper()
        if synchronous not in _SYNCHRONOUS:
            raise PerfsuiteError(f"mode {ctx.mode}: synchronous: expected one of {', '.join(_SYNCHRONOUS)}, "
                                 f"got {ctx.params.get('synchronous')!r}")
        chars, checkpoints = value(ctx, SQLITE, "message_chars"), value(ctx, SQLITE, "checkpoints")
        reason = missing_reason(LANGGRAPH_SQLITE, *([AIOSQLITE] if saver == "async" else []))
        if reason:
            raise PerfsuiteError(reason)
        self.ctx = ctx
        self.asynchronous = saver == "async"
        self.synchronous = synchronous
        self.chars: int = chars
        self.count: int = checkpoints
        self.db_path = ctx.scratch / "checkpoints.sqlite"
        self.saver: Any = None
        self.conn: Any = None
        self.task: asyncio.Task[Any] | None = None
        self.config: dict[str, Any] = {"configurable": {"thread_id": THREAD_ID, "checkpoint_ns": ""}}
        self.stored: list[dict[str, Any]] = []
        self.pending: list[dict[str, Any]] = []
        self.expected = b""
        self.extra: dict[str, Any] = {}
        self.labels: dict[str, str] = {}
        self.before = 0
        self.wchar_before: int | None = None
        self.wchar_after: int | None = None

    # -- set-up, outside the window ----------------------------------------------------------------------

    def _checkpoint(self, data: bytes, step: int, previous: Mapping[str, Any] | None) -> dict[str, Any]:
        from langgraph.checkpoint.base import empty_checkpoint

        checkpoint: dict[str, Any] = dict(empty_checkpoint())
        version = self.saver.get_next_version(
            previous["channel_versions"]["transcript"] if previous else None, None)
        checkpoint["channel_values"] = {"transcript": data}
        checkpoint["channel_versions"] = {"transcript": version}
        checkpoint["versions_seen"] = {"checkpoint": {"transcript": version}}
        checkpoint["_step"] = step  # not part of the checkpoint: removed before storing
        return checkpoint

    async def setup(self) -> _SqliteCheckpoint:
        """Open the saver, store the previous checkpoint, prepare the next one (all outside the window)."""
        base, source = root_transcript(self.ctx.workdir)
        turns = streamed_turns(self.ctx.sample, self.count, self.chars)
        self.expected = base + b"".join(turns)
        self.extra["conversation_bytes"] = len(base)
        self.conn, self.saver = await open_sqlite_saver(self.db_path, self.synchronous, self.asynchronous)
        previous = self._checkpoint(base, 1, None)
        self.config = await self._put(self.config, previous)
        data = base
        for n, turn in enumerate(turns):  # built here, outside the window: the saves are what is measured
            data += turn
            previous = self._checkpoint(data, n + 2, previous)
            self.pending.append(previous)
        pragmas = await self._pragmas("journal_mode", "synchronous", "wal_autocheckpoint", "page_size")
        await self._execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the window starts with an empty WAL
        journal, sync_level = str(pragmas["journal_mode"]).upper(), int(pragmas["synchronous"])
        self.labels = {
            "peer": "langgraph-checkpoint-sqlite",
            "peer_version": peer_version("langgraph-checkpoint-sqlite"),
            "saver": "AsyncSqliteSaver" if self.asynchronous else "SqliteSaver",
            "sqlite_version": sqlite3.sqlite_version,
            "journal_mode": journal,
            "sqlite_synchronous": _SYNCHRONOUS[sync_level] if 0 <= sync_level < 4 else str(sync_level),
            "transcript_source": source,
            "durability": DURABILITY.format(journal=journal, synchronous=_SYNCHRONOUS[sync_level],
                                            autocheckpoint=pragmas["wal_autocheckpoint"]),
        }
        if self.asynchronous:
            self.labels["aiosqlite_version"] = peer_version("aiosqlite")
        self.extra["page_size"] = int(pragmas["page_size"])
        _, blob = self.saver.serde.dumps_typed(self._clean(self.pending[0]))
        self.extra["checkpoint_bytes"] = len(blob)
        return self

    @staticmethod
    def _clean(checkpoint: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in checkpoint.items() if k != "_step"}

    def _metadata(self, checkpoint: Mapping[str, Any]) -> dict[str, Any]:
        return {"source": "loop", "step": checkpoint["_step"], "parents": {}}

    async def _put(self, config: dict[str, Any], checkpoint: Mapping[str, Any]) -> dict[str, Any]:
        clean, metadata = self._clean(checkpoint), self._metadata(checkpoint)
        versions = dict(clean["channel_versions"])
        if self.asynchronous:
            return await self.saver.aput(config, clean, metadata, versions)
        return self.saver.put(config, clean, metadata, versions)

    async def _execute(self, sql: str) -> list[tuple[Any, ...]]:
        if self.asynchronous:
            cursor = await self.conn.execute(sql)
            rows = await cursor.fetchall()
            await cursor.close()
            return list(rows)
        return list(self.conn.execute(sql).fetchall())

    async def _pragmas(self, *names: str) -> dict[str, Any]:
        return {name: (await self._execute(f"PRAGMA {name}"))[0][0] for name in names}

    def _disk_bytes(self) -> int:
        return _file_size(self.db_path) + _file_size(Path(f"{self.db_path}-wal"))

    # -- the measured save ---------------------------------------------------------------------------------

    def submit(self, ack: AckCallback) -> None:
        """The prepared saves: one ``put`` inline, or ``aput`` (and any multi-checkpoint run) as a task."""
        self.before = self._disk_bytes()
        self.wchar_before = _wchar()
        if not self.asynchronous and self.count == 1:
            self.stored.append(self._save_now(self.pending[0]))
            self.wchar_after = _wchar()
            ack(None)
            return
        self.task = asyncio.get_running_loop().create_task(self._saves())

        def done(task: asyncio.Task[Any]) -> None:
            self.wchar_after = _wchar()
            if task.cancelled():
                ack(asyncio.CancelledError("the checkpoint task was cancelled"))
                return
            ack(task.exception())

        self.task.add_done_callback(done)

    def _save_now(self, checkpoint: Mapping[str, Any]) -> dict[str, Any]:
        clean = self._clean(checkpoint)
        config = self.stored[-1] if self.stored else self.config
        return self.saver.put(config, clean, self._metadata(checkpoint), dict(clean["channel_versions"]))

    async def _saves(self) -> None:
        for checkpoint in self.pending:
            if self.asynchronous:
                config = self.stored[-1] if self.stored else self.config
                clean = self._clean(checkpoint)
                self.stored.append(await self.saver.aput(config, clean, self._metadata(checkpoint),
                                                         dict(clean["channel_versions"])))
            else:
                self.stored.append(self._save_now(checkpoint))
                await asyncio.sleep(0)  # yield between checkpoints, as ours does

    def metrics(self) -> Mapping[str, Any]:
        out: dict[str, Any] = dict(self.extra)
        out["file_growth_bytes"] = self._disk_bytes() - self.before
        out["wal_bytes"] = _file_size(Path(f"{self.db_path}-wal"))
        out["bytes_written"] = out["file_growth_bytes"]
        out["bytes_written_method"] = "growth of the database file and WAL"
        if self.wchar_before is not None and self.wchar_after is not None:
            out["bytes_written"] = out["write_syscall_bytes"] = self.wchar_after - self.wchar_before
            out["bytes_written_method"] = "bytes passed to write() in the window (/proc/self/io wchar)"
        out["publications"] = len(self.stored)
        if self.count > 1:
            out["bytes_written_per_checkpoint"] = out["bytes_written"] / self.count
        out.update(self.labels)
        return out

    async def close(self) -> None:
        """Wait for an unfinished save, then close the connection (the database stays for inspection)."""
        if self.task is not None and not self.task.done():
            try:
                await asyncio.wait_for(asyncio.shield(self.task), timeout=30)
            except Exception:
                self.task.cancel()
        conn, self.conn = self.conn, None
        if conn is None:
            return
        if self.asynchronous:
            await conn.close()
        else:
            conn.close()


@requires(LANGGRAPH_SQLITE, AIOSQLITE)
@accepts(**SQLITE)
async def checkpoint(ctx: OperationContext) -> _SqliteCheckpoint:
    """A LangGraph checkpoint of the root transcript after one streamed turn. Params: ``saver`` = "sync"
    (SqliteSaver.put) or "async" (AsyncSqliteSaver.aput), ``synchronous`` ("FULL"), ``message_chars`` (2000),
    ``checkpoints`` (1; more run back to back, one turn each, as ours)."""
    op = _SqliteCheckpoint(ctx)
    try:
        return await op.setup()
    except BaseException:
        await op.close()
        raise
