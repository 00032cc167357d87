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
from perfsuite.harness import AckCallback, Operation, OperationContext, Param, accepts
from perfsuite.workloads._engine_logs import diagnostic_append, transcript_barrier
from perfsuite.workloads._params import SESSION, count, ms, value
from perfsuite.workloads._session_operation import SessionOperation, _text, io_counts

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


# -- the parameters each operation declares (SESSION: every session operation's settings) -------------------

_PATH = Param(str, "async", "sync: the synchronous writer; async: the asynchronous job", choices=("sync", "async"))
MAILBOX = {**SESSION, "path": _PATH,
           "to": Param(str, "root", "the conversation whose mailbox receives the result"),
           "result_chars": count("chars", 4000, "characters of the delivered result"),
           "drain_after_submit": Param(bool, False, "drain synchronously right after the submission (E5)")}
DRAIN_AFTER_SUBMIT = {k: p for k, p in MAILBOX.items() if k not in ("path", "drain_after_submit")}
STALLED = {**SESSION,
           "drain_limit_s": ms(0.25, "seconds the synchronous drain waits before it signals", limit="ack_timeout_s"),
           "release_after_ms": ms(100.0, "ms after the signal at which the held admission is released"),
           "result_chars": count("chars", 4000, "characters of the delivered result")}
CHECKPOINT = {**SESSION, "path": _PATH,
              "conversation": Param(str, "root", 'the conversation checkpointed; "agent": the largest agent'),
              "checkpoints": count("checkpoints", 1, "checkpoints back to back, one streamed turn each"),
              "message_chars": count("chars", 2000, "characters of the streamed turn")}
REGISTRY = {**SESSION, "save": Param(str, "sidecar-only", "sidecar-only (E7) or the seed's full save",
                                     choices=("sidecar-only", "full"))}


# -- mailbox delivery (seed decision history: warm-local asynchronous mailbox acknowledgement) ---------

class _MailboxDelivery(SessionOperation):
    def __init__(self, ctx: OperationContext) -> None:
        super().__init__(ctx)
        self.asynchronous = value(ctx, MAILBOX, "path") == "async"
        self.to = value(ctx, MAILBOX, "to")
        self.body = _text(self.rng, value(ctx, MAILBOX, "result_chars"), f"execution result {ctx.sample}:")
        self.drain_after = value(ctx, MAILBOX, "drain_after_submit")

    def submit(self, ack: AckCallback) -> None:
        if not self.asynchronous:
            self.session.append_mail(self.to, self.body, sender="background", kind="completion", ack=ack)
            return
        self.session.deliver_background(self.to, self.body, sender="background", ack=ack)
        if self.drain_after:
            self.session.drain()


@accepts(**MAILBOX)
def mailbox_delivery(ctx: OperationContext) -> Operation:
    """One background command's 4000-character result delivered to a mailbox. Params: ``path`` =
    "sync" (the synchronous writer, Session.append_mail) or "async" (Session.deliver_background),
    ``result_chars`` (4000), ``to`` ("root")."""
    return _MailboxDelivery(ctx)


@accepts(**DRAIN_AFTER_SUBMIT)
def drain_after_submit(ctx: OperationContext) -> Operation:
    """Asynchronous delivery followed at once by a synchronous drain (E5): drain wait, ack, max gap."""
    params = {**ctx.params, "path": "async", "drain_after_submit": True}
    return _MailboxDelivery(_with_params(ctx, params))


def _with_params(ctx: OperationContext, params: Mapping[str, Any]) -> OperationContext:
    return OperationContext(ctx.workdir, params, ctx.mode, ctx.sample, ctx.scratch, ctx.kind)


class _StalledAdmission(SessionOperation):
    def __init__(self, ctx: OperationContext) -> None:
        super().__init__(ctx)
        self.limit_s = float(value(ctx, STALLED, "drain_limit_s"))
        self.release_after_s = float(value(ctx, STALLED, "release_after_ms")) / 1e3
        self.body = _text(self.rng, value(ctx, STALLED, "result_chars"), "stalled result:")
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


@accepts(**STALLED)
def stalled_admission(ctx: OperationContext) -> Operation:
    """E5: an asynchronous delivery whose admission is held; a synchronous drain with a 0.25 s limit
    signals and leaves the job accepted; the admission is released ``release_after_ms`` later."""
    return _StalledAdmission(ctx)


# -- checkpoints (root, agent, chunking, offload) ------------------------------------------------------

class _Checkpoint(SessionOperation):
    def __init__(self, ctx: OperationContext) -> None:
        super().__init__(ctx)
        self.asynchronous = value(ctx, CHECKPOINT, "path") == "async"
        target = value(ctx, CHECKPOINT, "conversation")
        self.conversation = self._largest_agent() if target == "agent" else target
        self.extra["conversation_bytes"] = self.session.conversation(self.conversation).size
        self.count = value(ctx, CHECKPOINT, "checkpoints")
        self.chars = value(ctx, CHECKPOINT, "message_chars")
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
                    done: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()

                    def durable(error: BaseException | None, d: asyncio.Future[BaseException | None] = done) -> None:
                        if not d.done():
                            d.set_result(error)

                    # one callback per publication, under its own name: the sample's ``ack`` runs once, last
                    self.session.request_checkpoint(self.conversation, ack=durable)
                    error = await done
                    if error is not None:
                        raise error
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
        storage = self.session.storage()  # format 2: the logs' disk use
        out["log_bytes_allocated"] = storage.allocated
        out["log_bytes_used"] = storage.used
        return out


@accepts(**CHECKPOINT)
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
        self.kind = value(ctx, REGISTRY, "save")
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


@accepts(**REGISTRY)
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
