"""Operations that drive the engine for the recipes of SPEC section 4 (harness protocol: see
:class:`perfsuite.harness.Operation`).

Each factory opens the sample's private session copy on the recording I/O layer (bytes written per
publication, M3) *outside* the measured window, prepares the edit the recipe adds, and returns an
operation whose ``submit`` is exactly the call the recipe compares (synchronous writer or asynchronous
job). Mode parameters come from the recipe; every one has a default documented here. Two are run conditions
(SPEC M10) every operation here accepts: ``storage`` (a storage profile: the layer under the recorder
becomes the engine's latency layer with that profile, seeded by the sample index so every mode of a
round draws the same delays) and ``freeze_loaded`` (``SessionSettings(freeze_loaded=True)``:
``gc.freeze()`` once the session is open).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from perfsuite.engine import (
    Admission,
    DrainTimeout,
    Message,
)
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import AckCallback, Operation, OperationContext
from perfsuite.workloads._engine_base import SessionOperation, _param, _text, io_counts
from perfsuite.workloads._engine_logs import diagnostic_append, transcript_barrier

__all__ = [
    "checkpoint",
    "diagnostic_append",
    "drain_after_submit",
    "io_counts",
    "mailbox_delivery",
    "registry_save",
    "stalled_admission",
    "transcript_barrier",
]


# -- mailbox delivery (seed decision history: warm-local asynchronous mailbox acknowledgement) ---------

class _MailboxDelivery(SessionOperation):
    def __init__(self, ctx: OperationContext) -> None:
        super().__init__(ctx)
        self.asynchronous = _param(ctx, "path", "async", str) == "async"
        self.to = _param(ctx, "to", "root", str)
        self.body = _text(self.rng, _param(ctx, "result_chars", 4000, int), f"execution result {ctx.sample}:")
        self.drain_after = _param(ctx, "drain_after_submit", False, bool)

    def submit(self, ack: AckCallback) -> None:
        if not self.asynchronous:
            self.session.append_mail(self.to, self.body, sender="background", kind="completion", ack=ack)
            return
        self.session.deliver_background(self.to, self.body, sender="background", ack=ack)
        if self.drain_after:
            self.session.drain()


def mailbox_delivery(ctx: OperationContext) -> Operation:
    """One background command's 4000-character result delivered to a mailbox. Params: ``path`` =
    "sync" (the synchronous writer, Session.append_mail) or "async" (Session.deliver_background),
    ``result_chars`` (4000), ``to`` ("root")."""
    return _MailboxDelivery(ctx)


def drain_after_submit(ctx: OperationContext) -> Operation:
    """Asynchronous delivery followed at once by a synchronous drain (E5): drain wait, ack, max gap."""
    params = {**ctx.params, "path": "async", "drain_after_submit": True}
    return _MailboxDelivery(_with_params(ctx, params))


def _with_params(ctx: OperationContext, params: Mapping[str, Any]) -> OperationContext:
    return OperationContext(ctx.workdir, params, ctx.mode, ctx.sample, ctx.scratch, ctx.kind)


class _StalledAdmission(SessionOperation):
    def __init__(self, ctx: OperationContext) -> None:
        super().__init__(ctx)
        self.limit_s = float(_param(ctx, "drain_limit_s", 0.25, (int, float)))
        self.release_after_s = float(_param(ctx, "release_after_ms", 100, (int, float))) / 1e3
        self.body = _text(self.rng, _param(ctx, "result_chars", 4000, int), "stalled result:")
        self.acks = 0

    def submit(self, ack: AckCallback) -> None:
        admission = Admission(released=False)
        self.admissions.append(admission)

        def counted(error: BaseException | None) -> None:
            self.acks += 1
            ack(error)

        self.session.deliver_background("root", self.body, sender="background", ack=counted, admission=admission)
        started = time.perf_counter()
        try:
            self.session.drain(limit_s=self.limit_s)
            signalled = False
        except DrainTimeout:
            signalled = True
        self.extra["time_to_signal_ms"] = (time.perf_counter() - started) * 1e3
        self.extra["signalled"] = int(signalled)
        self.extra["job_retained"] = int(self.session.activity().job is not None and self.acks == 0)
        asyncio.get_running_loop().call_later(self.release_after_s, admission.release)

    def metrics(self) -> Mapping[str, Any]:
        out = dict(super().metrics())
        out["acknowledgements"] = self.acks
        return out


def stalled_admission(ctx: OperationContext) -> Operation:
    """E5: an asynchronous delivery whose admission is held; a synchronous drain with a 0.25 s limit
    signals and leaves the job accepted; the admission is released ``release_after_ms`` later."""
    return _StalledAdmission(ctx)


# -- checkpoints (root, agent, chunking, offload) ------------------------------------------------------

class _Checkpoint(SessionOperation):
    def __init__(self, ctx: OperationContext) -> None:
        super().__init__(ctx)
        self.asynchronous = _param(ctx, "path", "async", str) == "async"
        target = _param(ctx, "conversation", "root", str)
        self.conversation = self._largest_agent() if target == "agent" else target
        self.extra["conversation_bytes"] = self.session.conversation(self.conversation).size
        self.count = _param(ctx, "checkpoints", 1, int)
        self.chars = _param(ctx, "message_chars", 2000, int)
        self._match_layout()
        self._edit(0)

    def _match_layout(self) -> None:
        """A fixture committed with another chunk size would make the first measured checkpoint a
        full re-chunking. Do that conversion here, in setup, outside the window."""
        chunk_size = self.session.settings.chunk_size
        manifest = self.session.manifest
        entry = manifest.artifacts.get(f"conversations/{self.conversation}.jsonl") if manifest else None
        if entry is None:
            return
        whole = len(entry.chunks) <= 1
        aligned = all(c.size == chunk_size for c in entry.chunks[:-1]) and entry.chunks[-1].size <= chunk_size
        if (chunk_size <= 0 and whole) or (chunk_size > 0 and aligned and (entry.size <= chunk_size or not whole)):
            return
        self.session.buffers[self.conversation].dirty_from = 0
        self.session.checkpoint(self.conversation)
        self.extra["layout_converted"] = 1

    def _largest_agent(self) -> str:
        agents = [c for c in self.session.buffers if c != "root"]
        if not agents:
            raise PerfsuiteError(f"mode {self.ctx.mode}: the fixture has no agent conversation")
        return max(agents, key=lambda c: (self.session.buffers[c].size, c))

    def _edit(self, n: int) -> None:
        body = _text(self.rng, self.chars, f"streamed turn {self.ctx.sample}.{n}:")
        self.session.add_message(self.conversation, Message("assistant", body, 1_800_000_000.0 + n))

    def submit(self, ack: AckCallback) -> None:
        if self.count > 1:
            asyncio.get_running_loop().create_task(self._many(ack))
            return
        if self.asynchronous:
            self.session.request_checkpoint(self.conversation, ack=ack)
        else:
            self.session.checkpoint(self.conversation)
            ack(None)

    async def _many(self, ack: AckCallback) -> None:
        try:
            for n in range(self.count):
                if n:
                    self._edit(n)
                if self.asynchronous:
                    done = asyncio.get_running_loop().create_future()
                    self.session.request_checkpoint(self.conversation,
                                                    ack=lambda e, d=done: d.done() or d.set_result(e))
                    await done
                else:
                    self.session.checkpoint(self.conversation)
                    await asyncio.sleep(0)
        except Exception as exc:
            ack(exc)
            return
        ack(None)

    def metrics(self) -> Mapping[str, Any]:
        out = dict(super().metrics())
        if self.count > 1:
            out["bytes_written_per_checkpoint"] = out["bytes_written"] / self.count
            out["bytes_stored_per_checkpoint"] = out["bytes_stored"] / self.count
        storage = self.session.storage()  # format 2: the logs' disk use (issue 29)
        out["log_bytes_allocated"] = storage.allocated
        out["log_bytes_used"] = storage.used
        return out


def checkpoint(ctx: OperationContext) -> Operation:
    """A transcript checkpoint after one streamed turn. Params: ``path`` "sync" (Session.checkpoint) or
    "async" (Session.request_checkpoint), ``conversation`` "root" or "agent" (the largest agent),
    ``message_chars`` (2000), ``checkpoints`` (1; more run back to back, one turn each),
    ``chunk_size`` (65536; 0 = whole artifact), ``offload`` ("thread" or "process")."""
    return _Checkpoint(ctx)


# -- registry save (sidecar-only vs the seed's full save) ----------------------------------------------

class _RegistrySave(SessionOperation):
    def __init__(self, ctx: OperationContext) -> None:
        super().__init__(ctx)
        self.kind = _param(ctx, "save", "sidecar-only", str)
        if self.kind not in ("sidecar-only", "full"):
            raise PerfsuiteError(f"mode {ctx.mode}: save: expected sidecar-only or full, got {self.kind!r}")
        agents = sorted(a for a in self.session.sidecar.agents)
        if not agents:
            raise PerfsuiteError(f"mode {ctx.mode}: the fixture has no agents to observe")
        self.agent = agents[ctx.sample % len(agents)]

    def submit(self, ack: AckCallback) -> None:
        current = self.session.sidecar.agents[self.agent].get("activity")
        self.session.set_activity(self.agent, "permission-blocked" if current != "permission-blocked" else "running")
        if self.kind == "sidecar-only":
            self.session.save_registry()
        else:
            self.session.full_save(rescan=True)
        ack(None)


def registry_save(ctx: OperationContext) -> Operation:
    """One observational activity change saved. Params: ``save`` = "sidecar-only" (E7) or "full" (the
    seed's rejected full save: every conversation and attachment restaged and rehashed)."""
    return _RegistrySave(ctx)


#: run conditions (SPEC M10) these operations apply; the harness refuses a recipe that sets a condition
#: one of its modes' operations would silently ignore
_CONDITIONS = frozenset({"storage"})
for _factory in (checkpoint, diagnostic_append, drain_after_submit, mailbox_delivery, registry_save,
                 stalled_admission, transcript_barrier):
    _factory.conditions = _CONDITIONS  # type: ignore[attr-defined]
