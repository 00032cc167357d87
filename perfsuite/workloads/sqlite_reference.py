"""SQLite as a reference for the engine's acknowledgement (SPEC section 8): the same record bytes committed by
the storage engine a Python program would otherwise use, the standard library's ``sqlite3``.

The publication floor (:mod:`perfsuite.workloads.floors`) is the physics of one generation: raw calls, no
engine. It is not what a program could get from a real storage engine, so a second anchor stands beside it:
one small durable commit through SQLite, the best engine the standard library ships. To commit exactly
what the engine publishes, the factory (setup, outside the window) records one real publication of the
modelled operation on the sample's private copy with :func:`~perfsuite.workloads.floors.record_publication`
(the recording I/O layer, E1) and reads back, from the copy's log, the bytes each recorded ``pwrite`` wrote:
the record(s) of that publication, framing and checksum included. The measured ``submit`` inserts those
bytes as one row and commits: one ``INSERT`` + ``COMMIT`` per sample.

The database lives in the sample's scratch directory, on the same filesystem as the fixture copy. The
connection, ``PRAGMA journal_mode=WAL`` and ``PRAGMA synchronous=FULL`` (WAL syncs the log at every commit:
the commit is durable when it returns, like the engine's acknowledgement), the table and one warm-up commit
(so the WAL file exists and the measured commit appends to it, as the engine's record goes to its
preallocated log) are all set up outside the window.

Two hand-offs, one per side of the engine's comparison (``handoff``):

* ``inline``: the commit runs on the loop thread inside ``submit`` and acknowledges before it returns, the
  synchronous reference of the synchronous writer;
* ``thread``: the hand-off the engine's asynchronous job uses (E4, ``ThreadOffload``): one dedicated worker
  thread (a single-worker ``ThreadPoolExecutor``, started in setup), the job's step submitted from a task
  the submission creates on the loop, awaited there through ``asyncio.wrap_future`` (the worker wakes the
  loop with ``call_soon_threadsafe``) and acknowledged on the loop thread: the threaded reference of the
  asynchronous job.

Params: ``publication`` and the modelled operation's own (as the publication floor's; ``path`` names the
engine path whose record is committed), ``handoff``. ``storage`` (M10): SQLite's I/O does not go through the
engine's layers, so the profile is applied to the one durability point of a WAL commit with
``synchronous=FULL``: the ``COMMIT`` (its WAL write and fsync) is topped up to one draw of the profile's
fsync delay, by the same delay model the latency layer uses. Recipes declare the modes references.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perfsuite.engine.testing import DelayModel
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import AckCallback, Operation, OperationContext, Param, accepts
from perfsuite.workloads.floors import FLOOR, MODELLED, FloorStep, record_publication
from perfsuite.workloads.storage import storage_metrics, storage_model

__all__ = ["HANDOFFS", "SQLITE", "record_bytes", "sqlite_commit"]

#: where the commit runs: on the loop thread, or on one worker thread with the ack on the loop (E4)
HANDOFFS = ("inline", "thread")
SQLITE: dict[str, Param] = {
    **FLOOR,
    "handoff": Param(str, "inline", "inline: commit on the loop thread (the synchronous reference); thread: on "
                     "one worker thread, acknowledged on the loop, as the engine's asynchronous job", choices=HANDOFFS),
}
_SCHEMA = "CREATE TABLE IF NOT EXISTS records (id INTEGER PRIMARY KEY, body BLOB NOT NULL)"
_INSERT = "INSERT INTO records (body) VALUES (?)"
#: PRAGMA synchronous's reading of FULL
_FULL = 2


def record_bytes(workdir: Path, steps: Sequence[FloorStep]) -> bytes:
    """The bytes the recorded ``pwrite`` steps wrote, read back from the files under ``workdir`` at their
    offsets, in the engine's order (the recording layer keeps sizes only: the copy's log holds the bytes)."""
    parts = []
    for step in steps:
        if step.kind != "pwrite":
            continue
        with open(os.path.join(workdir, step.path), "rb") as fh:
            fh.seek(step.offset)
            data = fh.read(step.length)
        if len(data) != step.length:
            raise PerfsuiteError(f"sqlite reference: {step.path} holds {len(data)} of the {step.length} bytes "
                                 f"recorded at offset {step.offset}")
        parts.append(data)
    return b"".join(parts)


class _SqliteCommit(Operation):
    """One ``INSERT`` + ``COMMIT`` of ``payload`` per sample (see the module docstring)."""

    def __init__(self, payload: bytes, records: int, database: Path, handoff: str, label: str,
                 model: DelayModel | None = None) -> None:
        self.payload = payload
        self.records = records
        self.database = database
        self.wal = Path(f"{database}-wal")
        self.handoff = handoff
        self.label = label
        self.model = model
        self.commits = 0
        self.commit_thread = ""  # where the measured commit ran: the loop's thread, or the worker
        self.task: asyncio.Task[None] | None = None
        self.pool: cf.ThreadPoolExecutor | None = None
        database.parent.mkdir(parents=True, exist_ok=True)
        # the worker thread uses the connection the loop thread opened (one thread at a time: never both)
        self.conn = sqlite3.connect(database, check_same_thread=False)
        try:
            self.journal = str(self.conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]).lower()
            if self.journal != "wal":  # e.g. a filesystem without shared memory: not the reference asked for
                raise PerfsuiteError(f"sqlite reference: journal_mode=WAL refused on {database.parent} "
                                     f"(got {self.journal})")
            self.conn.execute("PRAGMA synchronous=FULL")
            if int(self.conn.execute("PRAGMA synchronous").fetchone()[0]) != _FULL:
                raise PerfsuiteError("sqlite reference: synchronous=FULL not in force")
            self.conn.execute(_SCHEMA)
            self.conn.commit()
            self.conn.execute(_INSERT, (payload,))  # warm-up: the WAL exists before the window
            self.conn.commit()
        except BaseException:
            self.conn.close()
            raise
        if handoff == "thread":
            self.pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-reference")
            self.pool.submit(int, 0).result()  # the worker thread runs before the window, as the engine's does
        if hasattr(os, "sync"):
            # like the publication floor: the commit must not pay for writing back the setup (the recorded
            # publication on the copy, the database's creation)
            os.sync()
        self.wal_before = self._wal_size()
        self.before = model.stats() if model is not None else None

    def _wal_size(self) -> int:
        try:
            return self.wal.stat().st_size
        except FileNotFoundError:
            return 0

    def _commit(self) -> None:
        """The measured commit, on whichever thread the hand-off chose."""
        self.conn.execute(_INSERT, (self.payload,))
        started = self.model.start() if self.model is not None else 0.0
        self.conn.commit()
        if self.model is not None:  # M10: the WAL commit's one durability point pays the profile's fsync
            self.model.settle("fsync", started)
        self.commits += 1
        self.commit_thread = threading.current_thread().name

    def submit(self, ack: AckCallback) -> None:
        if self.pool is None:
            try:
                self._commit()
            except (sqlite3.Error, OSError) as exc:
                ack(exc)
                return
            ack(None)
            return
        # the engine's asynchronous job: a task on the loop hands the step to its worker and acks on the loop
        self.task = asyncio.get_running_loop().create_task(self._threaded(self.pool, ack), name="sqlite-reference")

    async def _threaded(self, pool: cf.ThreadPoolExecutor, ack: AckCallback) -> None:
        try:
            await asyncio.wrap_future(pool.submit(self._commit))
        except (sqlite3.Error, OSError) as exc:
            ack(exc)
            return
        ack(None)

    def metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "record_bytes": len(self.payload),
            "records": self.records,
            "commits": self.commits,
            "wal_bytes": self._wal_size() - self.wal_before,  # what SQLite appended for the commit
            "models": self.label,
            "handoff": self.handoff,
            "commit_thread": self.commit_thread,
            "journal_mode": self.journal,
            "sqlite_version": sqlite3.sqlite_version,
        }
        out.update(storage_metrics(self.model, self.before))
        return out

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)
            self.pool = None
        self.conn.close()


@accepts(**SQLITE)
async def sqlite_commit(ctx: OperationContext) -> Operation:
    """SQLite's commit of the record bytes of ``params["publication"]`` (see the module docstring); the
    database in the sample's scratch directory, after recording one real publication on its fixture copy."""
    params = dict(ctx.params)
    name = params.pop("publication", None)
    handoff = params.pop("handoff", "inline")
    if not isinstance(name, str):
        raise PerfsuiteError(f"mode {ctx.mode}: publication: expected one of {', '.join(MODELLED)}, got {name!r}")
    if handoff not in HANDOFFS:
        raise PerfsuiteError(f"mode {ctx.mode}: handoff: expected one of {', '.join(HANDOFFS)}, got {handoff!r}")
    if ctx.scratch is None or ctx.workdir is None:
        raise PerfsuiteError(f"mode {ctx.mode}: the sqlite reference needs a session fixture and a scratch directory")
    storage = params.pop("storage", None)  # recorded without it: delays change no byte of the record
    steps, _before = await record_publication(ctx, name, params)
    payload = record_bytes(ctx.workdir, steps)
    if not payload:
        raise PerfsuiteError(f"mode {ctx.mode}: the modelled {name} publication pwrote no record")
    label = name + "(" + ", ".join(f"{k}={v}" for k, v in sorted(params.items())) + ")"
    records = sum(1 for s in steps if s.kind == "pwrite")
    model = storage_model({"storage": storage}, seed=ctx.sample)
    return _SqliteCommit(payload, records, ctx.scratch / "sqlite" / "reference.db", str(handoff), label, model)


# M10: the commit applies storage profiles (see the module docstring)
sqlite_commit.conditions = frozenset({"storage"})  # type: ignore[attr-defined]
