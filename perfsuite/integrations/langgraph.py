"""LangGraph checkpointers on perfsuite's engine (the ``langgraph`` extra): :class:`EngineSaver` (synchronous)
and :class:`AsyncEngineSaver` (through the engine's asynchronous job).

One saver is one engine session (a directory); every thread's checkpoints and writes are records of its
root conversation. Each ``put`` and ``put_writes`` returns only once its record is durable: one publication,
one record and one fdatasync (E3). A new checkpoint's record holds only the channels whose versions
changed. The engine imports nothing from LangGraph; this package sits above it (SPEC section 1).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Self, TypeVar

from perfsuite._extras import require

require("langgraph", "langgraph.checkpoint.base", "langchain_core")

# ruff: noqa: E402  (the optional modules are imported after require says which extra provides them)
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from perfsuite.engine import ROOT, FileSystem, SessionSettings
from perfsuite.integrations._base import EngineCheckpointer, Plan, open_session

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SaverFaults:
    """Private fault hooks of :class:`EngineSaver`, for the crash checker's seeded bugs only (``perfsuite
    crashcheck --seeded-bug``): each flag plants one deliberate durability bug; production never passes any.
    ``writes_before_durable``: ``put_writes`` stages its record and returns without publishing it (the next
    publication carries it), so it acknowledges writes a crash can still lose (E3: durable on return)."""

    writes_before_durable: bool = False


class EngineSaver(EngineCheckpointer):
    """The synchronous saver: each write is a synchronous publication (the session's job is off), so it
    returns after its fdatasync. Safe from several threads (LangGraph's sync loop puts from a pool): one
    lock orders the publications. The async methods call the synchronous ones (they block the loop; use
    :class:`AsyncEngineSaver` on an event loop)."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True, serde: SerializerProtocol | None = None,
                 settings: SessionSettings | None = None, fs: FileSystem | None = None,
                 faults: SaverFaults | None = None) -> None:
        super().__init__(open_session(path, create=create, settings=settings, fs=fs, asynchronous=False), serde=serde)
        self._lock = threading.RLock()
        self._faults = faults or SaverFaults()  # (private: the crash checker's seeded bugs, see SaverFaults)

    def close(self) -> None:
        """Release the session (its lease). Pending recovery blocks it, as the engine's close says."""
        with self._lock:
            self.session.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _publish(self, plan: Plan) -> None:
        with self._lock:
            self._stage(plan)
            self.session.checkpoint(ROOT)  # one publication: returns after its fdatasync, or raises SaveFailed
            self._applied(plan)

    def _change(self, plan_of: Any, *args: Any) -> None:
        with self._lock:
            plan = plan_of(*args)
            if plan is not None:
                self._publish(plan)

    # -- the contract -----------------------------------------------------------------------------------
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        with self._lock:
            return super().get_tuple(config)

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None, limit: int | None = None) -> Iterator[CheckpointTuple]:
        with self._lock:
            return super().list(config, filter=filter, before=before, limit=limit)

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        record, stored = self._checkpoint_record(config, checkpoint, metadata, new_versions)
        self._publish(Plan(add=[record]))
        return stored

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                   task_path: str = "") -> None:
        with self._lock:
            record = self._writes_record(config, writes, task_id, task_path)
            if record is None:
                return
            if self._faults.writes_before_durable:  # a seeded bug: acknowledged before its publication
                plan = Plan(add=[record])
                self._stage(plan)
                self._applied(plan)
                return
            self._publish(Plan(add=[record]))

    def delete_thread(self, thread_id: str) -> None:
        self._change(self._plan_delete, [str(thread_id)])

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._change(self._plan_delete_runs, list(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._change(self._plan_copy, str(source_thread_id), str(target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._change(self._plan_prune, list(thread_ids), strategy)

    # -- the async face (what LangGraph's async loop and the conformance suite call) ------------------------
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.get_tuple(config)

    async def alist(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
                    before: RunnableConfig | None = None, limit: int | None = None) -> AsyncIterator[CheckpointTuple]:
        for tup in self.list(config, filter=filter, before=before, limit=limit):
            yield tup

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                   new_versions: ChannelVersions) -> RunnableConfig:
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        self.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        self.delete_thread(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.delete_for_runs(run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.copy_thread(source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self.prune(thread_ids, strategy=strategy)


class AsyncEngineSaver(EngineCheckpointer):
    """The asynchronous saver: each write appends its record and asks the engine's asynchronous job for a
    checkpoint of the root conversation with an acknowledgement (``request_checkpoint(ack=...)``); the await
    returns when the job says the record is durable, so the loop never waits on the disk. Concurrent writes
    share a publication or a group commit; a delete, prune or copy waits for the writes in flight and holds
    new ones back until its own publication is acknowledged.

    Open it on the loop that uses it (``await AsyncEngineSaver.open(path)``). The synchronous methods work
    from other threads (through that loop); on the loop's thread only the reads do."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True, serde: SerializerProtocol | None = None,
                 settings: SessionSettings | None = None, fs: FileSystem | None = None) -> None:
        super().__init__(open_session(path, create=create, settings=settings, fs=fs, asynchronous=True), serde=serde)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._exclusive = asyncio.Lock()
        self._inflight: set[asyncio.Future[None]] = set()

    @classmethod
    async def open(cls, path: str | os.PathLike[str], *, create: bool = True, serde: SerializerProtocol | None = None,
                   settings: SessionSettings | None = None, fs: FileSystem | None = None) -> Self:
        """Open (and replay) off the loop thread, then bind the saver to the running loop."""
        saver = await asyncio.to_thread(cls, path, create=create, serde=serde, settings=settings, fs=fs)
        saver._loop = asyncio.get_running_loop()
        return saver

    async def aclose(self) -> None:
        """Wait for the writes in flight, then release the session."""
        async with self._exclusive:
            await self._quiesce()
            self.session.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- publication through the job ------------------------------------------------------------------
    async def _quiesce(self) -> None:
        if self._inflight:
            await asyncio.gather(*list(self._inflight), return_exceptions=True)

    async def _publish(self, plan: Plan) -> None:
        loop = self._loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()

        def settle(error: BaseException | None) -> None:
            if error is None:
                self._applied(plan)  # the index follows the acknowledgement, even if the awaiting task left
            if not future.done():
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(error)

        def ack(error: BaseException | None) -> None:
            loop.call_soon_threadsafe(settle, error)  # acknowledgements may run on the job's thread

        self._stage(plan)
        self._inflight.add(future)
        future.add_done_callback(self._inflight.discard)
        try:
            self.session.request_checkpoint(ROOT, ack=ack)
        except BaseException:
            future.cancel()  # never accepted: nothing will acknowledge it (a close waits for no such write)
            raise
        await future

    async def _write(self, plan: Plan) -> None:
        if self._exclusive.locked():
            async with self._exclusive:  # a delete, prune or copy is rewriting: wait for its acknowledgement
                pass
        await self._publish(plan)

    async def _change(self, plan_of: Any, *args: Any) -> None:
        async with self._exclusive:
            await self._quiesce()  # the plan reads an index every acknowledged write is in
            plan = plan_of(*args)
            if plan is not None:
                await self._publish(plan)

    # -- the contract -----------------------------------------------------------------------------------
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return super().get_tuple(config)

    async def alist(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
                    before: RunnableConfig | None = None, limit: int | None = None) -> AsyncIterator[CheckpointTuple]:
        for tup in super().list(config, filter=filter, before=before, limit=limit):
            yield tup

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                   new_versions: ChannelVersions) -> RunnableConfig:
        record, stored = self._checkpoint_record(config, checkpoint, metadata, new_versions)
        await self._write(Plan(add=[record]))
        return stored

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        if self._exclusive.locked():
            async with self._exclusive:
                pass
        record = self._writes_record(config, writes, task_id, task_path)
        if record is not None:
            await self._publish(Plan(add=[record]))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._change(self._plan_delete, [str(thread_id)])

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._change(self._plan_delete_runs, list(run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._change(self._plan_copy, str(source_thread_id), str(target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._change(self._plan_prune, list(thread_ids), strategy)

    # -- the synchronous face: from other threads, through the saver's loop ------------------------------
    def _on_loop(self, make: Callable[[], Coroutine[Any, Any, T]], read: Callable[[], T] | None = None) -> T:
        """Run ``make()`` on the saver's loop from another thread and wait for it; on the loop's own thread
        only a read (served from memory) may run, since waiting there would block the loop on itself."""
        loop = self._loop
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop:
            if read is not None:
                return read()
            raise RuntimeError("AsyncEngineSaver: call the async methods on its event loop (or use EngineSaver); "
                               "the synchronous ones are for other threads")
        return asyncio.run_coroutine_threadsafe(make(), loop).result()

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._on_loop(lambda: self.aget_tuple(config),
                             lambda: super(AsyncEngineSaver, self).get_tuple(config))

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None, limit: int | None = None) -> Iterator[CheckpointTuple]:
        def read() -> Iterator[CheckpointTuple]:
            return super(AsyncEngineSaver, self).list(config, filter=filter, before=before, limit=limit)

        async def listed() -> Iterator[CheckpointTuple]:
            return read()

        return self._on_loop(listed, read)

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        return self._on_loop(lambda: self.aput(config, checkpoint, metadata, new_versions))

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                   task_path: str = "") -> None:
        self._on_loop(lambda: self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._on_loop(lambda: self.adelete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._on_loop(lambda: self.adelete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._on_loop(lambda: self.acopy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._on_loop(lambda: self.aprune(thread_ids, strategy=strategy))


__all__ = ["AsyncEngineSaver", "EngineSaver", "SaverFaults"]
