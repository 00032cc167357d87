"""E4-E7: the asynchronous side of a warm local session: the mutation gate and job acceptance, the pump
of queued preparations, background deliveries, automatic checkpoints, the debounced registry save, the
checkpoint timer, notifications, and the shutdown order. A part of
:class:`~perfsuite.engine._session.Session`, whose ``__init__`` wires the gate and the schedulers."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from perfsuite.engine._events import GateDrained
from perfsuite.engine._gate import DrainRefused, Preparation, Token
from perfsuite.engine._job import Admission, PublicationJob
from perfsuite.engine._offload import Offload, ProcessOffload, make_offload
from perfsuite.engine._pipeline_values import Batch, SaveFailed
from perfsuite.engine._schedulers import Notification
from perfsuite.engine._session_values import Ack, AckSet
from perfsuite.engine._sessionstate import SessionState
from perfsuite.engine._sidecar import ROOT


class WarmLocal(SessionState):
    """The gate, the job and the schedulers of a warm local session (mixed into ``Session``)."""

    @property
    def warm(self) -> bool:
        """Warm local portable sessions publish automatic work through the asynchronous job."""
        return self.profile == "portable" and self.settings.asynchronous

    def offload(self) -> Offload:
        if self._offload is None:
            self._offload = make_offload(self.settings.offload)
            if isinstance(self._offload, ProcessOffload):
                # start the worker and run the real stage/hash once now, not inside the first publication
                self._offload.warm_up(self.store, self.settings.chunk_size if self.settings.chunk_size > 0 else 65536)
        return self._offload

    def drain(self, token: Token | None = None, *, limit_s: float | None = None) -> float:
        """A synchronous caller drains the gate first: the accepted job advances to its end inline.
        Fails fast under a running preparation or a synchronous publication on this stack. Returns
        the milliseconds spent draining. Queued preparations stay queued (never reported committed)."""
        job = self.gate.job
        if job is None and self.gate.preparing is None and self.gate.sync_depth == 0:
            return 0.0
        if self.gate.holds(token):
            return 0.0  # the running preparation reenters with its own token
        self.gate.check_drain_allowed(token)
        if job is None:
            return 0.0
        started = time.perf_counter()
        self.gate.drains += 1
        job.drain(limit_s=self.settings.drain_limit_s if limit_s is None else limit_s)
        elapsed = (time.perf_counter() - started) * 1e3
        self.drain_ms.append(elapsed)
        if self.observers:
            self.observers.emit(GateDrained(self.root, job.publication.batch.id, elapsed))
        return elapsed

    def accept_job(self, batch: Batch, token: Token, acks: Iterable[Ack] = (), *,
                   admission: Admission | None = None) -> PublicationJob:
        """Accept a publication job from inside a preparation (its token proves it holds the gate).
        The gate stays held until the job's finish; without a running loop the job is drained inline.
        While the running job absorbs the preparations queued behind it (group commit), the
        publication joins its next round instead: its own generation, sharing the round's fdatasync."""
        if not self.gate.holds(token):
            raise DrainRefused("a job can only be accepted by the preparation that holds the gate")
        acks = list(acks)
        publication = self.publication(batch)
        offload = self.offload()
        publication.process = isinstance(offload, ProcessOffload)  # stage jobs carry their bytes to the worker
        self._apply_faults(publication, acks)
        running = self.gate.job
        if running is not None and running.absorbing is not None:
            running.absorbing.append((publication, acks, admission))
            self._watch(publication, "job")
            return running
        job = PublicationJob(publication, offload, self._job_released, admission=admission, acks=acks,
                             on_round=self._round_done,
                             absorb=self._absorb if self.settings.group_commit else None)
        self.gate.job = job
        self.active = publication
        self.jobs.append(job)
        self._watch(publication, "job")
        self.runner.start(job)  # the running loop (or inline without one); virtual time in the simulator
        return job

    def _round_done(self, job: PublicationJob, members: list[tuple[Any, list[Ack]]]) -> None:
        """A round of the job ended: each member, in order, is acknowledged once (success), or retained as
        the pending publication with save failed reported (no acknowledgement yet)."""
        for publication, acks in members:
            self.reports.append(publication.report())
            self._settled(publication)
            if publication.outcome == "failed":
                if self.faults is not None and self.faults.ack_failed_group and publication.group > 1 \
                        and publication.failed_phase == "adopt":  # a seeded bug: the shared sync's result unread
                    AckSet(acks).resolve(None)
                    acks = []
                self._retain(publication, acks, publication.error or RuntimeError("failed"))
                self.problems.append(self.save_failed or "save failed")
            else:
                if publication.error is not None:
                    self.problems.append(f"after adoption of {publication.batch.id}: {publication.error}")
                AckSet(acks).resolve(None)
        if job.done:
            self._schedule_pump()  # the gate is free: queued preparations go next, from the loop

    def _absorb(self, job: PublicationJob) -> list[tuple[Any, list[Ack], Admission | None]]:
        """Group commit: run the preparations queued behind the job while it still holds the gate
        (each with its own token, as the pump would); those that accept a job join its next round. Stops at
        one whose admission is not released (the round waits for it). Nothing while a publication is
        pending (its retry or abandon comes first) or the session is closing."""
        if self.closed or self.stopping or self.pending is not None or not self.gate.queue:
            return []
        job.absorbing = []
        try:
            while self.gate.queue and job.absorbing is not None:
                try:
                    self.gate.run_next()
                except Exception as exc:  # a preparation's own failure must not strand the gate
                    self.problems.append(f"a queued preparation failed while absorbed: {type(exc).__name__}: {exc}")
                if any(a is not None and not a.released for _p, _acks, a in job.absorbing):
                    break
            return job.absorbing
        finally:
            job.absorbing = None

    def _job_released(self, job: PublicationJob) -> None:
        """The job's last round ended: release the gate (its members are resolved next, then the queued
        preparations go, from the loop: ``_round_done``)."""
        self.gate.job = None
        self.active = None

    def _schedule_pump(self) -> None:
        """Queued preparations run once the gate is free, from the loop (never on a draining stack)."""
        if not self.gate.queue:
            return
        self.runner.soon(self._pump)

    def _pump(self) -> None:
        if not self.closed:
            self.gate.pump()

    def submit_preparation(self, label: str, prepare: Preparation, *, key: str | None = None) -> bool:
        """Gated work: runs now if the gate is free, else queues (holding no snapshot) (E5)."""
        self._check_open()
        return self.gate.submit(label, prepare, key=key)

    # -- automatic work through the gate (E4, E5, E7) --------------------------------------------------
    def deliver_background(self, to: str, body: str, *, sender: str, kind: str = "completion",
                           ack: Ack | None = None, admission: Admission | None = None) -> None:
        """Deliver a background command's completion or monitor batch to ``to``'s mailbox. Warm local
        sessions return at once and acknowledge after adoption through the asynchronous job; every
        other session publishes synchronously. The record is tentative (hidden) until then (E4)."""
        self.conversation(to)
        acks = [ack] if ack else []
        if not self.warm:
            self._internal += 1
            try:
                self.append_mail(to, body, sender=sender, kind=kind, ack=ack)
            finally:
                self._internal -= 1
            self._input("deliver_background", to, body)
            return

        def prepare(token: Token) -> None:
            owner = self._new_id(kind)
            self.sidecar.add_mail(self._new_mail(to, sender, kind, body), owner)
            self.accept_job(self.freeze(kind, (), owner=owner), token, acks, admission=admission)

        self.submit_preparation(f"mail:{to}", prepare)
        self._input("deliver_background", to, body)

    def request_checkpoint(self, conversation: str = ROOT, *, admission: Admission | None = None,
                           ack: Ack | None = None) -> bool:
        """An automatic checkpoint: a preparation that rechecks modified state, save failure and retained
        batches under the gate, then freezes. One accepted checkpoint per conversation (E7): a request
        that coalesces into an accepted one returns False.

        ``ack`` runs exactly once and means what a synchronous save means (E4: never acknowledged early): ``None``
        once the conversation as it stood at the request is durable (after this checkpoint's adoption, or
        at once when an earlier save already committed it); :class:`SaveFailed` when it was not published
        because a pending publication (an earlier failure) holds automatic checkpoints back, since they
        never blindly retry retained recovery; or the failure of the checkpoint's own publication, once
        that is retried or abandoned. A request with an ``ack`` coalesces only into a queued checkpoint
        (which freezes later, so it covers the edit), never into a running one that froze before it."""
        key = f"checkpoint:{conversation}"
        running = self.gate.job
        if ack is None and running is not None and any(p.batch.kind == "checkpoint" and conversation in p.batch.texts
                                                       for p in running.publications):
            self._input("request_checkpoint", conversation)
            return False  # coalesced; later edits stay dirty for the next opportunity
        if ack is not None and running is not None and self.faults is not None and self.faults.ack_coalesced_running:
            for publication, acks in running.members:  # a seeded bug (FaultHooks): acked with what froze before
                if publication.batch.kind == "checkpoint" and conversation in publication.batch.texts:
                    acks.append(ack)
                    self._input("request_checkpoint", conversation)
                    return False
        if key in self.gate.queued_keys():
            if ack is not None:
                self._checkpoint_waiters.setdefault(key, []).append(ack)
            self._input("request_checkpoint", conversation)
            return False  # coalesced into a queued checkpoint, which will freeze this edit too
        first = [ack] if ack else []

        def prepare(token: Token) -> None:
            acks = first + self._checkpoint_waiters.pop(key, [])
            buffer = self.buffers.get(conversation)
            if buffer is None or not self._needs_publish(conversation, buffer):
                AckSet(acks).resolve(None)  # a nil preparation: an earlier save committed the edit
                return
            if (self.pending is not None or self.save_failed) and self.faults is not None \
                    and self.faults.ack_blocked_checkpoint:
                AckSet(acks).resolve(None)  # a seeded bug (FaultHooks): the early acknowledgement planted back
                return
            if self.pending is not None or self.save_failed:
                blocked = self.pending.batch.id if self.pending is not None else "an earlier publication"
                AckSet(acks).resolve(SaveFailed(
                    f"{conversation} not checkpointed: {blocked} is pending ({self.save_failed}); retry or "
                    "abandon it, then save", phase="freeze", publication=blocked))
                return
            batch = self.freeze("checkpoint", (conversation,))
            if self.warm:
                self.accept_job(batch, token, acks, admission=admission)
                return
            try:
                self.publish(batch, acks)
            except SaveFailed:
                # As the job's failure: the batch is pending, its acknowledgements wait for retry or abandon.
                self.problems.append(self.save_failed or "save failed")

        self.submit_preparation(key, prepare, key=key)
        self._input("request_checkpoint", conversation)
        return True

    # -- observational changes and their debounced registry save (E7) ----------------------------------
    def _observe(self) -> None:
        self._observed += 1
        self.registry_debounce.touch()

    def _registry_due(self) -> None:
        def prepare(token: Token) -> None:
            batch = self.freeze("registry", ())
            if self.warm:
                self.accept_job(batch, token)
            else:
                self.publish(batch)

        self.submit_preparation("registry", prepare, key="registry")

    # -- notifications and in-flight checkpoints (E6, E7) ----------------------------------------------
    def notify(self, callback: Notification) -> bool:
        """Offer a notification (waiter wake, wake offer): never queued behind preparations, never run
        under a token. Returns whether it ran immediately."""
        ran = self.notifications.offer(callback)
        self._input("notify", ROOT)
        return ran

    def request_started(self, conversation: str = ROOT) -> None:
        self.checkpoint_timer.request_started(conversation)
        self._input("request_started", conversation)

    def request_finished(self, conversation: str = ROOT) -> None:
        self.checkpoint_timer.request_finished(conversation)
        self._input("request_finished", conversation)

    def _checkpoint_tick(self, conversations: frozenset[str]) -> None:
        self._internal += 1  # the timer's own checkpoints are not inputs
        try:
            for conversation in sorted(conversations):
                if conversation in self.buffers:
                    self.request_checkpoint(conversation)
        finally:
            self._internal -= 1

    # -- shutdown (E7) ---------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Drain accepted work, flush agent transcripts, then pending registry saves, then the root,
        then release the lease. Pending recovery blocks shutdown (E7)."""
        if self.closed:
            return
        self._internal += 1  # shutdown's flush is the engine's own doing, not inputs
        try:
            self._shutdown()
        finally:
            self._internal -= 1

    def _shutdown(self) -> None:
        self.stopping = True
        self.notifications.close(proceed=True)
        self.checkpoint_timer.stop()
        self.drain()
        while self.gate.queue:
            self.gate.pump()
            self.drain()
        if self.pending is None:
            for conversation, buffer in sorted(self.buffers.items()):
                if conversation != ROOT and self._needs_publish(conversation, buffer):
                    self.checkpoint(conversation)
            if self.registry_debounce.pending:
                self.registry_debounce.cancel()
                self.registry_debounce.pending_since = None
                self.save_registry()
            if self._needs_publish(ROOT, self.buffers[ROOT]):
                self.checkpoint(ROOT)
        self.close()

