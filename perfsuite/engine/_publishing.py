"""E4: one publication, from freeze to finish, and the pending publication a failure leaves: the
synchronous writer, failure before or after adoption, install on adoption, explicit retry and abandon.
A part of :class:`~perfsuite.engine._session.Session`, whose ``__init__`` holds the state it uses; the
asynchronous job runs the same publication (``_warm``)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from perfsuite.engine._buffer import ConversationBuffer, FrozenText
from perfsuite.engine._damage import describe
from perfsuite.engine._generations import OBJECTS, STAGING, SessionError, StaleHead
from perfsuite.engine._objects import HashMemo, chunk_start_for, reuse_prefix
from perfsuite.engine._pipeline import (
    Batch,
    Publication,
    PublicationReport,
    SaveFailed,
    StageInput,
    remove_staging,
    run_inline,
)
from perfsuite.engine._sessiontypes import (
    ATTACHMENT_PREFIX,
    Ack,
    AckSet,
    PendingPublication,
    SaveAbandoned,
    artifact_for,
)
from perfsuite.engine._sidecar import ROOT, SIDECAR_ARTIFACT


class Publishing:
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
    ) -> Batch:
        committed = self.manifest.artifacts if self.manifest else {}
        chunk_size = self.settings.chunk_size
        inputs: list[StageInput] = []
        for conversation, frozen in texts.items():
            name = artifact_for(conversation)
            entry = committed.get(name)
            start = chunk_start_for(frozen.dirty_from, chunk_size) if entry is not None else 0
            try:
                prefix = reuse_prefix(entry, start)
            except ValueError:  # chunk size changed since that commit: restage from the beginning
                start, prefix = 0, ()
            inputs.append(StageInput(name, start, frozen.dirty_from if entry is not None else 0, frozen.size,
                                     prefix, chunk_size, text=frozen))
        for attachment in attachments:
            data = self.attachments[attachment]
            inputs.append(StageInput(ATTACHMENT_PREFIX + attachment, 0, 0, len(data), (), chunk_size, data=data))
        receipts = {c: t.receipts for c, t in texts.items()}
        if ROOT not in texts:
            projection = None
        elif projection is None:  # the live buffer is exactly what was frozen a moment ago
            projection = self.buffers[ROOT].projection()
        batch_id = owner if kind == "recovery" else self._new_id(kind)
        candidate = {
            "publication": batch_id,
            "epoch": self.epoch,
            "kind": kind,
            "observed": self._observed,
            "conversations": {c: {"tick": t.tick, "size": t.size} for c, t in texts.items()},
        }
        # The sidecar marker names the committed transcripts only (no publication id), so a save that
        # changes nothing encodes identically and selects nothing.
        marker = {"epoch": self.epoch, "conversations": dict((self.sidecar.checkpoint or {}).get("conversations", {}))}
        marker["conversations"].update({c: {"size": t.size, "messages": t.count} for c, t in texts.items()})
        candidate["marker"] = marker
        if document:
            committing = receipts
            if self.faults is not None and self.faults.drop_consumed:  # a seeded bug (FaultHooks, issue 27)
                committing = {c: frozenset(ledger) for c, ledger in self.sidecar.ledger.items()}
            detached = self.sidecar.detach(owner, committing, projection or self.sidecar.root, marker)
            inputs.append(StageInput(SIDECAR_ARTIFACT, 0, 0, 0, (), 0, document=detached))
        return Batch(
            id=batch_id,
            kind=kind,
            epoch=self.epoch,
            base=self.head,
            base_manifest=self.manifest,
            inputs=inputs,
            memos={i.artifact: self.memos.get(i.artifact) for i in inputs},
            texts=dict(texts),
            receipts=receipts,
            projection=dict(projection) if projection is not None else None,
            candidate=candidate,
            owner=owner,
            created=self.clock.wall(),
            staging_dir=self.store.path(STAGING, batch_id),
        )

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
        committed = self.manifest.artifacts if self.manifest else {}
        return buffer.modified or buffer.dirty_from < buffer.size or artifact_for(conversation) not in committed

    # -- drivers: the synchronous writer, failure and finish (E4) --------------------------------------
    def publication(self, batch: Batch) -> Publication:
        assert self.lease is not None
        return Publication(batch, self.store, self.lease, self.store.known_objects, self._finish,
                           self._noop_install, phases_ms={"freeze": batch.freeze_ms})

    def publish(self, batch: Batch, acks: Iterable[Ack] = ()) -> PublicationReport:
        """The synchronous writer: every phase inline. Returns after adoption (or a no-op); on failure
        before adoption the batch becomes the pending publication and :class:`SaveFailed` is raised.
        While it runs, the gate is owned by this stack: gated work queues, drains fail fast (E5)."""
        return self._drive(self.publication(batch), acks)

    def _drive(self, publication: Publication, acks: Iterable[Ack]) -> PublicationReport:
        """Run ``publication``'s remaining steps inline: all of them for a new one; adopt and finish for
        a retried one whose generation was already committed (``PendingPublication.committed``)."""
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

    def _apply_faults(self, publication: Any, acks: list[Ack]) -> None:
        """Documented fault hooks (``FaultHooks``; a checker's broken engine, never production)."""
        faults = self.faults
        if faults is None:
            return
        publication.reorder = faults.reorder_steps
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
        """Failure before adoption: keep the frozen batch as the pending publication, report save failed."""
        batch = publication.batch
        phase = publication.failed_phase or "?"
        # A generation that was committed (its chunks, manifest and their directory durable) but whose
        # adoption failed is retried by adoption alone: HEAD may already name it (a replace whose directory
        # fsync failed), and a new generation would then be refused as a stale head (issue 27 defect 2).
        committed = publication if getattr(publication, "head", None) is not None and phase == "adopt" else None
        if self.faults is not None and self.faults.readopt_as_new:  # a seeded bug: defect 2 planted back
            committed = None
        if self.pending is not None and self.pending.batch.owner == batch.owner:
            self.pending.acks.extend(acks)  # a failed retry: still the same unresolved acknowledgements
            self.pending.phase, self.pending.error = phase, str(exc)
            self.pending.committed = committed
        elif self.pending is not None:
            # One pending batch at a time: the older one keeps its acknowledgements; this one's
            # tentative records fold into it so a single retry or abandon resolves both.
            self.sidecar.transfer(batch.owner, self.pending.batch.owner)
            self.pending.acks.extend(acks)
        else:
            self.pending = PendingPublication(batch, phase, str(exc), list(acks), committed=committed)
        self.save_failed = f"save failed in {phase}: {exc}"

    def _finish(self, publication: Publication) -> None:
        """E4 phase 7, on adoption: install the committed state and the checkpoint candidate, clear
        modified flags only for unchanged buffers, retire committed receipts, reveal tentative records."""
        batch = publication.batch
        assert publication.selection is not None and publication.hashed is not None
        if batch.candidate["epoch"] != self.epoch:
            self.problems.append(f"{batch.id}: candidate from epoch {batch.candidate['epoch']} not installed")
            return
        self.head = publication.head
        self.manifest = publication.selection.manifest or self.manifest
        self.store.known_objects.update(c.digest for c, _ in publication.selection.fresh)
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
        if batch.candidate.get("observed", -1) >= self._observed:
            self.registry_debounce.absorb()  # this commit captured every observational change
        for item in batch.inputs:
            if item.artifact.startswith(ATTACHMENT_PREFIX):
                self._unpublished_attachments.discard(item.artifact[len(ATTACHMENT_PREFIX) :])
        if self.pending is not None and self.pending.batch.owner == batch.owner:
            self.pending = None
            self.save_failed = None

    def _noop_install(self, publication: Publication) -> None:
        """An empty selection is a successful no-op; it installs nothing it did not publish and never
        consumes retained recovery (E4 phase 4)."""
        batch = publication.batch
        hashed = getattr(publication, "hashed", None)  # the file-backed pipeline keeps no hasher memos
        if hashed is not None:
            self.memos.update(hashed.memos)
        for conversation, frozen in batch.texts.items():
            self.buffers[conversation].mark_committed(frozen)
        self.sidecar.reveal(batch.owner)  # the committed sidecar already holds the owner's records

    # -- pending publications (E4) ---------------------------------------------------------------------
    def retry_pending(self) -> PublicationReport:
        """Explicit retry: republish the pending batch's frozen transcripts with a freshly projected
        sidecar; its candidate installs on adoption and its acknowledgements run once (E4)."""
        self._enter_sync(None)
        pending = self._require_pending()
        if pending.batch.epoch != self.epoch and not pending.recovered:
            raise StaleHead(f"{pending.batch.id}: frozen in epoch {pending.batch.epoch}, the session is now in "
                            f"epoch {self.epoch}; abandon it")
        if pending.committed is not None:
            return self._readopt(pending)
        texts = {c: t for c, t in pending.batch.texts.items() if self._still_newer(c, t, pending.recovered)}
        if pending.recovered:
            edited = sorted(c for c in texts if c in self.buffers and self.buffers[c].modified)
            if edited:
                raise SessionError(f"{self.root}: {', '.join(edited)} changed since the crash recovery was found; "
                                   "abandon the recovered batch or save first")
        batch = self._freeze_batch(kind=pending.batch.kind, texts=texts, owner=pending.batch.owner,
                                   projection=pending.batch.projection)
        self._discard_unadopted(pending.batch)
        acks = pending.acks
        pending.acks = []
        report = self.publish(batch, acks)
        if pending.recovered:
            for conversation, frozen in texts.items():
                self.buffers[conversation] = ConversationBuffer(conversation, frozen.lines[: frozen.count])
        if self.pending is pending:  # a no-op retry still resolves the pending batch
            self.pending = None
            self.save_failed = None
        return report

    def _readopt(self, pending: PendingPublication) -> PublicationReport:
        """Retry a committed generation whose adoption failed: adopt it again. ``adopt_head`` writes HEAD
        into a new file, renames it and fsyncs the directory again: a new change made durable, never a
        failed fsync retried and trusted (fsyncgate, E1). Its acknowledgements run once, on success."""
        publication = pending.committed
        assert publication is not None
        publication.outcome, publication.error, publication.failed_phase = "running", None, None
        acks, pending.acks = pending.acks, []
        return self._drive(publication, acks)

    def _still_newer(self, conversation: str, frozen: FrozenText, recovered: bool) -> bool:
        if recovered:
            return True
        buffer = self.buffers.get(conversation)
        return buffer is not None and buffer.committed_tick < frozen.tick

    def abandon_pending(self) -> None:
        """Explicit abandon: delete the staged recovery, roll back its tentative records (they never
        become deliverable) and fail its unresolved acknowledgements exactly once (E4)."""
        self._enter_sync(None)
        pending = self._require_pending()
        self._roll_back(pending)
        self.sidecar.rollback(pending.batch.owner)
        self.pending = None
        self.save_failed = None
        AckSet(pending.acks).resolve(SaveAbandoned(f"{pending.batch.id} was abandoned"))

    def _roll_back(self, pending: PendingPublication) -> None:
        """Abandon's rollback: what the session's files say afterwards is the committed state, so the
        abandoned mutation, reported failed, is not there after a reopen (issue 27 defect 3). A HEAD that
        an adoption-phase failure may have left naming the abandoned generation is first replaced, durably,
        by the committed one (a new file, renamed, its directory fsynced); then the generation goes."""
        if self.faults is not None and self.faults.abandon_in_memory:  # a seeded bug: defect 3 planted back
            self._discard_unadopted(pending.batch)
            return
        if pending.phase == "adopt" and self._still_owner():
            on_disk = self._head_on_disk()
            if on_disk is not None and on_disk.manifest.endswith(f"-{pending.batch.id}.json"):
                self.store.rewrite_head(self.head)
        self._discard_unadopted(pending.batch)

    def _still_owner(self) -> bool:
        """The lease still names this session (a fenced owner never rewrites its successor's HEAD)."""
        try:
            lease = self.store.read_lease()
        except SessionError:
            return False
        return lease is not None and self.lease is not None and lease.token == self.lease.token

    def _head_on_disk(self) -> Any:
        """The HEAD the store holds now (None when missing or unreadable: open has diagnosed it)."""
        try:
            return self.store.read_head()
        except (ValueError, SessionError, OSError):
            return None

    def _discard_unadopted(self, batch: Batch) -> None:
        """A failed attempt's never-adopted manifest (if its commit got that far), then its staged bytes:
        in this order, because a manifest whose staging directory is gone counts as adopted when HEAD is
        lost (``_adoption``); left alone, the orphan could be mistaken for an adopted generation. The
        manifest HEAD names on disk is never removed, whatever this session believes (issue 27 defect 2)."""
        current = {self.head.manifest if self.head else None}
        on_disk = self._head_on_disk()
        if on_disk is not None and not (self.faults is not None and self.faults.readopt_as_new):
            current.add(on_disk.manifest)
        removed = False
        for name in self.store.list_manifests():
            if name.endswith(f"-{batch.id}.json") and name not in current:
                try:
                    self.fs.remove(self.store.path(name))
                    removed = True
                except OSError as exc:  # damage: left in place, and said
                    self.problems.append(f"{self.store.path(name)}: unadopted manifest left ({describe(exc)})")
        if removed:
            # Durably, before the staging goes (as open's ``_drop_unadopted`` does): a crash that kept the
            # manifest but lost its staging would make it "proven adopted" if HEAD is lost (issue 27 class 5:
            # an abandoned generation came back).
            self.fs.sync_dir(self.store.path(OBJECTS))
        remove_staging(self.fs, batch.staging_dir)

    def _require_pending(self) -> PendingPublication:
        if self.pending is None:
            raise SessionError(f"{self.root}: no pending publication")
        return self.pending
