"""E4: one publication, from freeze to finish, and the pending publication a failure leaves: the
synchronous writer, failure before or after adoption, install on adoption, explicit retry and abandon.
A part of :class:`~perfsuite.engine._session.Session`, whose ``__init__`` holds the state it uses; the
asynchronous job runs the same publication (``_warm``).

Format 2: a failed publication stays pending *in memory* (its frozen batch); nothing is staged
on disk, so a crash loses only unacknowledged publications. A publication whose record reached the log
but did not install (its sync failed, or its lease check) poisons that log: the retry, or the next
publication, rolls over from memory into a new log; an abandon rolls over at once, so the abandoned
record is never adopted by a reopen (E4: abandoned means absent)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from perfsuite.engine._buffer import ConversationBuffer, FrozenText
from perfsuite.engine._layout import SessionError, StaleHead
from perfsuite.engine._logstate import apply_gen
from perfsuite.engine._objects import HashMemo
from perfsuite.engine._pipeline import Publication, run_inline
from perfsuite.engine._pipeline_values import Batch, PublicationReport, SaveFailed
from perfsuite.engine._session_values import (
    ATTACHMENT_PREFIX,
    Ack,
    AckSet,
    PendingPublication,
    SaveAbandoned,
    artifact_for,
)
from perfsuite.engine._sessionstate import SessionState
from perfsuite.engine._sidecar import ROOT, SidecarCapture


class Publishing(SessionState):
    """Freeze, publish, finish and install; the pending publication (mixed into ``Session``)."""

    # -- freeze (E4 phase 1) ---------------------------------------------------------------------------
    def _new_id(self, kind: str) -> str:
        return f"p{self.epoch}-{next(self._serial)}-{kind}-{self.id_source()}"

    def _freeze_batch(
        self,
        *,
        kind: str,
        texts: Mapping[str, FrozenText],
        owner: str,
        document: bool = True,
        attachments: Iterable[str] = (),
        projection: Mapping[str, Any] | None = None,
        prompt_reset: int | None = None,
    ) -> Batch:
        receipts = {c: t.receipts for c, t in texts.items()}
        if ROOT not in texts:
            projection, prompt_reset = None, None
        elif projection is None:  # the live buffer is exactly what was frozen a moment ago
            projection = self.buffers[ROOT].projection()
            prompt_reset = self.buffers[ROOT].resets
        batch_id = owner if kind == "recovery" else self._new_id(kind)
        candidate = {
            "publication": batch_id,
            "epoch": self.epoch,
            "kind": kind,
            "observed": self._observed,
            "conversations": {c: {"tick": t.tick, "size": t.size} for c, t in texts.items()},
        }
        # The sidecar marker names the committed transcripts only (no publication id), so a save that
        # changes nothing selects nothing.
        conversations = dict((self.sidecar.checkpoint or {}).get("conversations", {}))
        conversations.update({c: {"size": t.size, "messages": t.count} for c, t in texts.items()})
        marker = {"epoch": self.epoch, "conversations": conversations}
        candidate["marker"] = marker
        committing = receipts
        if self.faults is not None and self.faults.drop_consumed:  # a seeded bug (FaultHooks)
            committing = {c: frozenset(ledger) for c, ledger in self.sidecar.ledger.items()}
        capture, detached = (self._freeze_sidecar(owner, committing, projection, marker) if document
                             else (None, None))
        names = [artifact_for(c) for c in texts] + [ATTACHMENT_PREFIX + a for a in attachments]
        return Batch(
            id=batch_id,
            kind=kind,
            epoch=self.epoch,
            texts=dict(texts),
            attachments={ATTACHMENT_PREFIX + a: self.attachments[a] for a in attachments},
            memos={name: self.memos.get(name) for name in names},
            receipts=receipts,
            projection=dict(projection) if projection is not None else None,
            candidate=candidate,
            owner=owner,
            created=self.clock.wall(),
            chunk_size=self.settings.chunk_size,
            capture=capture,
            document=detached,
            prompt_reset=prompt_reset,
        )

    def _freeze_sidecar(self, owner: str, receipts: Mapping[str, frozenset[str]], projection: Mapping[str, Any] | None,
                        marker: Mapping[str, Any]) -> tuple[SidecarCapture | None, dict[str, Any] | None]:
        """Portable: the captured keys of the delta (format 2, O(change)); the file-backed profile overrides
        this to detach the whole document it writes. A publication the running job absorbs (group commit)
        is committed after the ones absorbed before it: their tentative records are in its base."""
        job = self.gate.job
        before = frozenset(p.batch.owner for p, _acks, _admission in job.absorbing) if job is not None and \
            job.absorbing is not None else frozenset()
        return self.sidecar.capture(owner, receipts, before), None

    def freeze(self, kind: str, conversations: Iterable[str] | None, *, owner: str | None = None,
               sidecar: bool = True) -> Batch:
        """Capture what a publication will publish: modified conversations among ``conversations``
        (all when None), new attachments, and (unless ``sidecar`` is False) the detached sidecar."""
        self._check_open()
        started = time.perf_counter()
        wanted = self.buffers.keys() if conversations is None else conversations
        texts: dict[str, FrozenText] = {}
        for conversation in wanted:
            buffer = self.conversation(conversation)
            if self._needs_publish(conversation, buffer):
                texts[conversation] = buffer.freeze()
        attachments = sorted(self._unpublished_attachments) if conversations is None else []
        batch = self._freeze_batch(kind=kind, texts=texts, owner=owner or self._new_id(kind),
                                   document=sidecar, attachments=attachments)
        batch.freeze_ms = (time.perf_counter() - started) * 1e3
        return batch

    def _needs_publish(self, conversation: str, buffer: ConversationBuffer) -> bool:
        return buffer.modified or buffer.dirty_from < buffer.size or artifact_for(conversation) not in \
            self.store.state.artifacts

    # -- drivers: the synchronous writer, failure and finish (E4) --------------------------------------
    def publication(self, batch: Batch) -> Publication:
        assert self.lease is not None
        return Publication(batch, self.store, self.lease, artifact_for, self._finish, self._noop_install,
                           phases_ms={"freeze": batch.freeze_ms}, memos=self.memos)

    def publish(self, batch: Batch, acks: Iterable[Ack] = ()) -> PublicationReport:
        """The synchronous writer: every phase inline. Returns after adoption (or a no-op); on failure
        before adoption the batch becomes the pending publication and :class:`SaveFailed` is raised.
        While it runs, the gate is owned by this stack: gated work queues, drains fail fast (E5)."""
        return self._drive(self.publication(batch), acks)

    def _drive(self, publication: Publication, acks: Iterable[Ack]) -> PublicationReport:
        """Run ``publication``'s steps inline."""
        ack_set = list(acks)
        self._apply_faults(publication, ack_set)
        self.active = publication
        self.gate.sync_depth += 1
        self._watch(publication, "sync")
        try:
            run_inline(publication)
        except Exception as exc:
            return self._after_failure(publication, ack_set, exc)
        finally:
            self.gate.sync_depth -= 1
            self.active = None
            self._schedule_pump()
        report = publication.report()
        self.reports.append(report)
        self._settled(publication)
        AckSet(ack_set).resolve(None)
        return report

    def _apply_faults(self, publication: Publication, acks: list[Ack]) -> None:
        """Documented fault hooks (``FaultHooks``; a checker's broken engine, never production)."""
        faults = self.faults
        if faults is None:
            return
        publication.reorder = faults.reorder_steps
        publication.unsynced = faults.fused_unsynced
        if faults.acknowledge_after is not None:
            def early() -> None:
                callbacks = acks[:]
                del acks[:]  # they run now and never again (the rest of the publication finds none)
                AckSet(callbacks).resolve(None)

            publication.early_ack = (faults.acknowledge_after, early)

    def _publish_now(self, kind: str, conversations: Iterable[str] | None, *, owner: str | None = None,
                     acks: Iterable[Ack] = (), sidecar: bool = True) -> PublicationReport:
        return self.publish(self.freeze(kind, conversations, owner=owner, sidecar=sidecar), acks)

    def _after_failure(self, publication: Publication, acks: list[Ack], exc: BaseException) -> PublicationReport:
        report = publication.report()
        self.reports.append(report)
        if publication.adopted:  # failure after adoption: durable, only logged (E4)
            self.problems.append(f"after adoption of {publication.batch.id}: {exc}")
            self._settled(publication)
            AckSet(acks).resolve(None)
            return report
        self._retain(publication, acks, exc)
        self._settled(publication)
        raise SaveFailed(self.save_failed or "save failed", phase=publication.failed_phase or "?",
                         publication=publication.batch.id) from exc

    def _retain(self, publication: Publication, acks: list[Ack], exc: BaseException) -> None:
        """Failure before adoption: keep the frozen batch as the pending publication (in memory), report
        save failed. A record that reached the log uninstalled poisons it (fsyncgate: never appended to or
        synced again; the retry rolls over from memory)."""
        batch = publication.batch
        phase = publication.failed_phase or "?"
        written = bool(getattr(publication, "written", False))
        if written and hasattr(self.store, "poison"):
            self.store.poison(f"{batch.id} failed in {phase} after its record was written")
        if self.pending is not None and self.pending.batch.owner == batch.owner:
            self.pending.acks.extend(acks)  # a failed retry: still the same unresolved acknowledgements
            self.pending.phase, self.pending.error = phase, str(exc)
            self.pending.written = self.pending.written or written
        elif self.pending is not None:
            # One pending batch at a time: the older one keeps its acknowledgements; this one's
            # tentative records fold into it so a single retry or abandon resolves both.
            self.sidecar.transfer(batch.owner, self.pending.batch.owner)
            self.pending.acks.extend(acks)
            self.pending.written = self.pending.written or written
        else:
            self.pending = PendingPublication(batch, phase, str(exc), list(acks), written=written)
        self.save_failed = f"save failed in {phase}: {exc}"

    def _finish(self, publication: Publication) -> None:
        """E4 phase 7, on adoption: install the committed state and the checkpoint candidate, clear
        modified flags only for unchanged buffers, retire committed receipts, reveal tentative records."""
        batch = publication.batch
        changes = publication.changes
        assert changes is not None and publication.placement is not None and publication.hashed is not None
        if batch.candidate["epoch"] != self.epoch:
            # Its record is durable, but this session's epoch moved on: never appended after again.
            self.store.poison(f"{batch.id}: a candidate from epoch {batch.candidate['epoch']} was not installed")
            self.problems.append(f"{batch.id}: candidate from epoch {batch.candidate['epoch']} not installed")
            return
        state = self.store.state
        placement = publication.placement
        # Installed as open replays it (the record spliced onto the committed state), not from the selection:
        # a roll-over that carried the record remapped the state it follows (bytes copied out of a poisoned
        # log), and the memory must rest on the same bytes as the disk.
        apply_gen(state, changes.meta, placement.seq, placement.digest, changes.epoch, placement.log,
                  placement.payload, len(changes.payload))
        for name in changes.artifacts:
            frozen = next((t for c, t in batch.texts.items() if artifact_for(c) == name), None)
            state.artifacts[name] = replace(state.artifacts[name], source=frozen.lines if frozen is not None else None)
        if changes.prompt is not None:
            state.prompt_reset = changes.prompt[1]
        self.store.ranges[placement.log] = (self.store.ranges.get(placement.log, (changes.generation,) * 2)[0],
                                            changes.generation)
        self.head = self._generation_ref()
        self._install(batch, publication.hashed.memos)

    def _install(self, batch: Batch, memos: Mapping[str, HashMemo | None]) -> None:
        self.memos.update(memos)
        for conversation, frozen in batch.texts.items():
            buffer = self.buffers.get(conversation)
            if buffer is not None and frozen.lines is not None:
                buffer.mark_committed(frozen)
            self.sidecar.retire(conversation, batch.receipts.get(conversation, frozenset()))
        if batch.projection is not None:
            self.sidecar.root = dict(batch.projection)
        self.sidecar.reveal(batch.owner)
        self.sidecar.checkpoint = batch.candidate["marker"]
        if batch.capture is not None:
            versions = batch.capture.versions
            if self.faults is not None and self.faults.clear_changed_keys:  # a seeded bug (FaultHooks)
                versions = {key: self.sidecar.dirty.get(key, v) for key, v in versions.items()}
            self.sidecar.clear(versions)
        if batch.candidate.get("observed", -1) >= self._observed:
            self.registry_debounce.absorb()  # this commit captured every observational change
        for name in batch.attachments:
            self._unpublished_attachments.discard(name[len(ATTACHMENT_PREFIX) :])
        if self.pending is not None and self.pending.batch.owner == batch.owner:
            self.pending = None
            self.save_failed = None

    def _noop_install(self, publication: Publication) -> None:
        """An empty selection is a successful no-op; it installs nothing it did not publish (E4 phase 4)."""
        batch = publication.batch
        hashed = getattr(publication, "hashed", None)  # the file-backed pipeline keeps no hasher memos
        if hashed is not None:
            self.memos.update(hashed.memos)
        for conversation, frozen in batch.texts.items():
            self.buffers[conversation].mark_committed(frozen)
        if batch.capture is not None:
            self.sidecar.clear(batch.capture.versions)  # the committed document already holds these values
        self.sidecar.reveal(batch.owner)  # the committed sidecar already holds the owner's records

    # -- pending publications (E4) ---------------------------------------------------------------------
    def retry_pending(self) -> PublicationReport:
        """Explicit retry: republish the pending batch's frozen transcripts with a freshly projected
        sidecar; its candidate installs on adoption and its acknowledgements run once (E4). After a failed
        sync the log it wrote to is poisoned, so this rolls over into a new log (fsyncgate, E1)."""
        self._enter_sync(None)
        pending = self._require_pending()
        if pending.batch.epoch != self.epoch and not pending.recovered:
            raise StaleHead(f"{pending.batch.id}: frozen in epoch {pending.batch.epoch}, the session is now in "
                            f"epoch {self.epoch}; abandon it")
        texts = {c: t for c, t in pending.batch.texts.items() if self._still_newer(c, t, pending.recovered)}
        batch = self._freeze_batch(kind=pending.batch.kind, texts=texts, owner=pending.batch.owner,
                                   projection=pending.batch.projection, prompt_reset=pending.batch.prompt_reset)
        acks = pending.acks
        pending.acks = []
        report = self.publish(batch, acks)
        if self.pending is pending:  # a no-op retry still resolves the pending batch
            self.pending = None
            self.save_failed = None
        return report

    def _still_newer(self, conversation: str, frozen: FrozenText, recovered: bool) -> bool:
        if recovered:
            return True
        buffer = self.buffers.get(conversation)
        return buffer is not None and buffer.committed_tick < frozen.tick

    def abandon_pending(self) -> None:
        """Explicit abandon: roll back its tentative records (they never become deliverable) and fail its
        unresolved acknowledgements exactly once (E4). What the session's files say afterwards is the
        committed state (E4: abandoned means absent)."""
        self._enter_sync(None)
        pending = self._require_pending()
        self._roll_back(pending)
        self.sidecar.rollback(pending.batch.owner)
        self.pending = None
        self.save_failed = None
        AckSet(pending.acks).resolve(SaveAbandoned(f"{pending.batch.id} was abandoned"))

    def _roll_back(self, pending: PendingPublication) -> None:
        """Abandon's rollback: a record the abandoned publication wrote may be in the log (its sync failed,
        so it may or may not persist); the session rolls over from memory into a new log whose BASE is the
        committed state, and HEAD names that one, so a reopen never adopts the abandoned generation (issue
        27 defect 3). A fenced owner rolls nothing over: HEAD is its successor's."""
        if self.faults is not None and self.faults.abandon_in_memory:  # a seeded bug: defect 3 planted back
            return
        if pending.written and self._still_owner():
            _placed, base = self.store.roll_over((), epoch=self.epoch, compact=False)
            self.store.state = base
            self.head = self._generation_ref()

    def _still_owner(self) -> bool:
        """The lease still names this session (a fenced owner never rewrites its successor's HEAD)."""
        try:
            lease = self.store.read_lease()
        except SessionError:
            return False
        return lease is not None and self.lease is not None and lease.token == self.lease.token

    def _require_pending(self) -> PendingPublication:
        if self.pending is None:
            raise SessionError(f"{self.root}: no pending publication")
        return self.pending
