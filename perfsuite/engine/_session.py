"""E3/E4/E7: a session: a root conversation, agent conversations, a sidecar and diagnostic logs.

This module holds the portable profile (owner lease with an epoch, immutable generations behind one
HEAD) and everything both profiles share: acknowledged mutations that return only after adoption,
at-least-once mail, sidecar-only registry saves, pending publications with retry and abandon.
The file-backed profile (PID lock, transcripts written in place) is in ``_filesession``.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import itertools
import json
import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from perfsuite.engine._buffer import ConversationBuffer, FrozenText
from perfsuite.engine._clock import Clock, SystemClock
from perfsuite.engine._damage import DAMAGE, describe
from perfsuite.engine._fs import FileSystem, OsFileSystem
from perfsuite.engine._gate import DrainRefused, MutationGate, Preparation, Token
from perfsuite.engine._generations import (
    HEAD,
    LOGS,
    OBJECTS,
    STAGING,
    GenerationStore,
    HeadRef,
    Lease,
    Manifest,
    OwnerProbe,
    SessionError,
    StaleHead,
    manifest_epoch,
    manifest_tag,
    owner_alive,
)
from perfsuite.engine._job import Admission, PublicationJob
from perfsuite.engine._objects import ChunkRef, HashMemo, chunk_start_for, reuse_prefix
from perfsuite.engine._offload import Offload, ProcessOffload, make_offload
from perfsuite.engine._pipeline import (
    Batch,
    Publication,
    PublicationReport,
    SaveFailed,
    StageInput,
    remove_staging,
    run_inline,
)
from perfsuite.engine._schedulers import CheckpointTimer, Debouncer, Notification, NotificationQueue
from perfsuite.engine._sidecar import ACTIVITY_FLAVOURS, ROOT, SIDECAR_ARTIFACT, TERMINAL, MailRecord, Sidecar
from perfsuite.engine._transcript import Message, TranscriptError

Ack = Callable[[BaseException | None], None]
CONVERSATION_PREFIX = "conversations/"
ATTACHMENT_PREFIX = "attachments/"


def freeze_loaded_state() -> int:
    """``gc.freeze()``: move every object tracked so far to the permanent generation; return the count.

    Frozen objects are still freed by reference counting; only reference cycles among them leak."""
    gc.freeze()
    return gc.get_freeze_count()


class SaveAbandoned(Exception):
    """The acknowledgement's publication was explicitly abandoned: the mutation did not persist."""


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """Tunables. Defaults follow the seed; the suite varies them (chunking, debounce, offload)."""

    chunk_size: int = 64 * 1024  # 0: one chunk per artifact (the seed's whole-artifact design)
    keep_generations: int = 8
    retire_slice: int = 64
    registry_debounce_s: float = 2.0
    checkpoint_interval_s: float = 30.0
    drain_limit_s: float = 30.0
    offload: str = "thread"  # where the asynchronous job's blocking steps run: thread | process | inline
    asynchronous: bool = True  # warm local portable sessions use the asynchronous job (E4)
    notify_first_s: float = 0.05
    notify_max_s: float = 0.5
    # gc.freeze() once the session is open: the loaded state (and everything the application holds by
    # then) leaves the cyclic collector, so later full collections do not traverse it (M10 mitigation)
    freeze_loaded: bool = False


def artifact_for(conversation: str) -> str:
    return f"{CONVERSATION_PREFIX}{conversation}.jsonl"


@dataclass
class PendingPublication:
    """A batch that failed before adoption: its frozen bytes are kept (in memory and under staging/),
    its acknowledgements are unresolved, and it blocks teardown until retried or abandoned (E4)."""

    batch: Batch
    phase: str
    error: str
    acks: list[Ack]
    recovered: bool = False  # found on disk after a crash rather than failed in this process


@dataclass
class _AckSet:
    """Acknowledgements that run exactly once (E4 finish)."""

    callbacks: list[Ack] = field(default_factory=list)

    def resolve(self, error: BaseException | None) -> None:
        callbacks, self.callbacks = self.callbacks, []
        for callback in callbacks:
            callback(error)


class Session:
    """A portable session (E3). Owned by one event-loop thread; blocking publication steps may run
    elsewhere through the asynchronous job (issue 4), never concurrently with each other."""

    profile = "portable"

    def __init__(self, root: str, fs: FileSystem, clock: Clock, settings: SessionSettings) -> None:
        self.root = os.path.abspath(root)
        self.fs = fs
        self.clock = clock
        self.settings = settings
        self.store = GenerationStore(self.root, fs)
        self.lease: Lease | None = None
        self.owner_alive: OwnerProbe = owner_alive
        self.head: HeadRef | None = None
        self.manifest: Manifest | None = None
        self.memos: dict[str, HashMemo | None] = {}
        self.buffers: dict[str, ConversationBuffer] = {}
        self.sidecar = Sidecar()
        self.attachments: dict[str, bytes] = {}
        self._unpublished_attachments: set[str] = set()
        self.pending: PendingPublication | None = None
        self.save_failed: str | None = None
        self.problems: list[str] = []
        self.reports: collections.deque[PublicationReport] = collections.deque(maxlen=256)
        self.active: Publication | None = None
        self.closed = False
        self.frozen_objects: int | None = None  # gc.get_freeze_count() after freeze_loaded, else None
        self._serial = itertools.count(1)
        self.id_source: Callable[[], str] = lambda: uuid.uuid4().hex[:6]
        # Warm-local machinery (E4-E7): the gate, the job's offload, notifications and schedulers.
        self.gate = MutationGate()
        self._offload: Offload | None = None
        self.jobs: collections.deque[PublicationJob] = collections.deque(maxlen=256)
        self.transport_busy = False
        self.stopping = False
        self.root_live = True
        self.drain_ms: list[float] = []
        self._observed = 0  # version of observational changes (activity flavours, discards)
        self.registry_debounce = Debouncer(clock, settings.registry_debounce_s, self._registry_due,
                                           is_deferred=lambda: self.active is not None)
        self.notifications = NotificationQueue(
            clock, gate_idle=lambda: self.gate.idle and self.active is None,
            transport_idle=lambda: not self.transport_busy,
            live=lambda: self.root_live and not self.stopping,
            first_delay=settings.notify_first_s, max_delay=settings.notify_max_s)
        self.checkpoint_timer = CheckpointTimer(clock, settings.checkpoint_interval_s, self._checkpoint_tick)

    # -- open / create / recover --------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        create: bool = False,
        fs: FileSystem | None = None,
        clock: Clock | None = None,
        settings: SessionSettings | None = None,
        id_source: Callable[[], str] | None = None,
        owner_alive: OwnerProbe | None = None,
    ) -> Session:
        """Open (or create) a portable session: take the lease with a new epoch, adopt HEAD after
        verifying every digest, recover pending publications from staging. A lost HEAD is recovered
        only to a generation proven adopted, and a damaged newest generation refuses open rather than
        fall back silently (``_adoption``; ``Session.repair`` / ``perfsuite session repair`` adopt an older
        one explicitly). A second live owner, and any damage met, is a one-line :class:`SessionError`.
        ``id_source`` makes publication ids (and manifest names) deterministic, e.g. for fixtures;
        ``owner_alive(pid)`` is the liveness probe of the owner a lease or PID lock names (default: the
        real one; a crash checker passes a model in which the processes its crash killed are dead)."""
        fs = fs or OsFileSystem()
        session = cls(os.fspath(path), fs, clock or SystemClock(), settings or SessionSettings())
        if id_source is not None:
            session.id_source = id_source
        if owner_alive is not None:
            session.owner_alive = owner_alive
        try:
            session._open(create)
        except (SessionError, TranscriptError):
            session._abort_open()
            raise
        except DAMAGE as exc:
            session._abort_open()
            raise SessionError(f"{session.root}: cannot open the session: {describe(exc)}") from exc
        if session.settings.freeze_loaded:
            session.frozen_objects = freeze_loaded_state()
        return session

    def _abort_open(self) -> None:
        """Open failed: give back what it took (lease, lock, descriptors), best effort."""
        try:
            self._release_owner()
        except DAMAGE:
            pass
        self._release_machinery()
        self.closed = True

    @classmethod
    def repair(cls, path: str | os.PathLike[str], *, generation: str | int | None = None,
               fs: FileSystem | None = None, owner_alive: OwnerProbe | None = None) -> Any:
        """Repair what open refuses (issue 14): explicit, never automatic. Returns a ``RepairReport``
        whose lines say what was found and done; see :mod:`perfsuite.engine._repair`."""
        from perfsuite.engine._repair import repair_portable

        return repair_portable(os.fspath(path), generation=generation, fs=fs or OsFileSystem(),
                               owner_alive=owner_alive)

    def _check_layout(self, create: bool) -> None:
        """The session's directories are directories (issue 14 case 5): anything else is a one-line
        refusal naming the repair command, never a raw error later. Creates a missing session (with
        ``create``) and the directories a crash during creation may have lost."""
        store, fs = self.store, self.fs
        repair = f"run `perfsuite session repair {self.root}`"
        if fs.exists(self.root) and not fs.isdir(self.root):
            raise SessionError(f"{self.root}: not a directory, so not a portable session")
        objects = store.path(OBJECTS)
        if not fs.isdir(self.root) or not fs.exists(objects):
            if fs.exists(store.path(HEAD)):
                raise SessionError(f"{objects}: missing although HEAD names a generation; every generation is gone "
                                   "(restore the session from a backup)")
            if not create:
                raise SessionError(f"{self.root}: no portable session here")
            created = store.initialise()
            self.fs.sync_dirs(os.path.dirname(d) for d in created)
            self.fs.sync_dirs(created)
        elif not fs.isdir(objects):
            raise SessionError(f"{objects}: not a directory; the generations are gone (restore the session "
                               "from a backup)")
        for sub in (STAGING, LOGS):  # a crash during creation may have lost one of them
            directory = store.path(sub)
            if not fs.exists(directory):
                fs.makedirs(directory)
            elif not fs.isdir(directory):
                raise SessionError(f"{directory}: not a directory; {repair}")

    def _open(self, create: bool) -> None:
        store = self.store
        self._check_layout(create)
        head, manifest, contents, problems = store.open_newest_intact()
        self.problems.extend(problems)
        epoch_floor = max([head.epoch if head else 0] + [manifest_epoch(n) for n in store.list_manifests()])
        self.lease, broke = store.acquire_lease(epoch_floor, self.owner_alive)
        if broke:
            self.problems.append(broke if isinstance(broke, str) else f"{store.path('LEASE')}: broke a stale lease")
        if problems and head is not None:
            # Fall back: HEAD is repaired to name the newest intact generation (a recovery write).
            self.fs.atomic_replace(store.path("HEAD"), json.dumps(head.to_json(), sort_keys=True).encode())
        self.head, self.manifest = head, manifest
        store.known_objects = store.scan_objects()
        self._load_contents(contents)
        self._recover_staging()

    def _load_contents(self, contents: Mapping[str, bytes]) -> None:
        try:
            self.sidecar = Sidecar.from_bytes(contents.get(SIDECAR_ARTIFACT, b""))
        except DAMAGE as exc:  # verified by digest, so written like this: an engine bug, still one line
            raise SessionError(f"{self.root}: the committed sidecar does not decode ({describe(exc)})") from None
        self.buffers = {}
        for name, data in contents.items():
            if name.startswith(CONVERSATION_PREFIX):
                conversation = name[len(CONVERSATION_PREFIX) : -len(".jsonl")]
                try:
                    self.buffers[conversation] = ConversationBuffer(conversation, data.splitlines(keepends=True))
                except DAMAGE as exc:
                    raise SessionError(f"{self.root}: committed transcript {name} does not decode "
                                       f"({describe(exc)})") from None
            elif name.startswith(ATTACHMENT_PREFIX):
                self.attachments[name[len(ATTACHMENT_PREFIX) :]] = data
        self.buffers.setdefault(ROOT, ConversationBuffer(ROOT))

    def _recover_staging(self) -> None:
        """Staged batches left by a crash: already adopted ones are cleaned up; the newest unadopted one
        becomes a pending publication of its transcript bytes (its sidecar is never resurrected)."""
        staging = self.store.path(STAGING)
        chain = set(self.store.adopted_chain(self.head, self.settings.keep_generations + 1))
        adopted: set[str] = set()
        orphans: dict[str, Manifest] = {}  # committed but never adopted: a crash between commit and adopt
        for name in self.store.list_manifests():
            try:
                manifest = self.store.read_manifest(name)
            except DAMAGE:
                continue
            publication = str(manifest.meta.get("publication"))
            if name in chain:
                adopted.add(publication)
            else:
                orphans[publication] = manifest
        for pub in sorted(self.fs.listdir(staging)):
            directory = os.path.join(staging, pub)
            if not self.fs.isdir(directory):
                self._drop_unadopted(pub, chain)
                self._set_aside(directory, pub, "is not a staging directory")
                continue
            batch_file = os.path.join(directory, "batch.json")
            record: dict[str, Any] | None = None
            if self.fs.exists(batch_file):
                try:
                    record = json.loads(self.fs.read(batch_file))
                except DAMAGE:
                    record = None
            if not isinstance(record, dict) or pub in adopted:
                if pub not in adopted:
                    self._drop_unadopted(pub, chain)
                remove_staging(self.fs, directory)
                continue
            if record.get("base") != (self.head.to_json() if self.head else None):
                # Frozen against another head: its bytes may be older than what is committed now (a
                # resurrected directory, or a batch that later publications overtook). Never republish it
                # blindly: keep the bytes aside and say where.
                self._drop_unadopted(pub, chain)
                self._set_aside(directory, pub, "staged bytes of a publication frozen against an older head")
                continue
            buffers = self._recovered_buffers(directory, record, orphans.get(pub))
            if not buffers:
                self._drop_unadopted(pub, chain)
                remove_staging(self.fs, directory)
                continue
            texts = {c: b.freeze() for c, b in buffers.items()}
            projection = buffers[ROOT].projection() if ROOT in buffers else None
            batch = self._freeze_batch(kind="recovery", texts=texts, owner=pub, projection=projection)
            self.pending = PendingPublication(batch, "crash", "recovered after a crash", [], recovered=True)
            self.save_failed = f"{directory}: unpublished transcript bytes recovered after a crash"
            self.problems.append(self.save_failed)

    def _drop_unadopted(self, pub: str, chain: set[str]) -> None:
        """Before an unadopted publication's staging directory is removed or set aside: its
        committed-but-never-adopted manifest, durably first, since a manifest whose staging directory is
        gone counts as adopted when HEAD is lost (``_adoption``). (A batch recovered as the pending
        publication keeps both until its retry or abandon discards them, manifest first.)"""
        doomed = [n for n in self.store.list_manifests() if manifest_tag(n) == pub and n not in chain]
        removed = 0
        for name in doomed:
            try:
                self.fs.remove(self.store.path(name))
                removed += 1
            except OSError as exc:  # damage (a directory where the manifest was): left, and said
                self.problems.append(f"{self.store.path(name)}: unadopted manifest left in place ({describe(exc)})")
        if removed:
            self.fs.sync_dir(self.store.path(OBJECTS))

    def _set_aside(self, directory: str, pub: str, why: str) -> None:
        aside = self.store.path("recovery", pub)
        if self.fs.exists(self.store.path("recovery")) and not self.fs.isdir(self.store.path("recovery")):
            raise SessionError(f"{self.store.path('recovery')}: not a directory; run `perfsuite session repair "
                               f"{self.root}`")
        self.fs.makedirs(os.path.dirname(aside))
        if self.fs.exists(aside):
            if self.fs.isdir(directory):
                remove_staging(self.fs, directory)
            else:
                self.fs.remove(directory)
            return
        self.fs.replace(directory, aside)
        self.problems.append(f"{aside}: {why}; kept aside, not recovered")

    def _recovered_buffers(self, directory: str, record: Mapping[str, Any], orphan: Manifest | None
                           ) -> dict[str, ConversationBuffer]:
        """The frozen transcript bytes of a staged batch: committed prefix chunks plus staged files, or,
        when commit already moved the staged chunks into the store, the batch's unadopted manifest."""
        buffers: dict[str, ConversationBuffer] = {}
        for artifact, info in record.get("artifacts", {}).items():
            if not artifact.startswith(CONVERSATION_PREFIX):
                continue
            try:
                if orphan is not None and artifact in orphan.artifacts:
                    data = self.store.read_artifact(orphan.artifacts[artifact])
                else:
                    prefix = b"".join(self.store.read_object(_chunk(c)) for c in info["prefix"])
                    data = prefix + b"".join(self.fs.read(os.path.join(directory, f[2])) for f in info["files"])
            except DAMAGE:
                self.problems.append(f"{directory}: staged bytes of {artifact} are incomplete; not recovered")
                continue
            if len(data) != int(info["size"]):
                self.problems.append(f"{directory}: staged bytes of {artifact} are torn; not recovered")
                continue
            conversation = artifact[len(CONVERSATION_PREFIX) : -len(".jsonl")]
            buffer = ConversationBuffer(conversation, data.splitlines(keepends=True))
            buffer.dirty_from = 0
            buffers[conversation] = buffer
        return buffers

    # -- reading --------------------------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        assert self.lease is not None
        return self.lease.epoch

    def conversation(self, conversation: str) -> ConversationBuffer:
        try:
            return self.buffers[conversation]
        except KeyError:
            raise SessionError(f"{self.root}: no conversation {conversation!r}") from None

    def mailbox(self, conversation: str) -> list[MailRecord]:
        """Deliverable (committed) mail for ``conversation``; tentative records are hidden (E4)."""
        return self.sidecar.visible_mail(conversation)

    @property
    def idle(self) -> bool:
        return self.active is None

    # -- freeze (E4 phase 1) --------------------------------------------------------------------------
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
            detached = self.sidecar.detach(owner, receipts, projection or self.sidecar.root, marker)
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

    # -- drivers ----------------------------------------------------------------------------------------
    def publication(self, batch: Batch) -> Publication:
        assert self.lease is not None
        return Publication(batch, self.store, self.lease, self.store.known_objects, self._finish,
                           self._noop_install, phases_ms={"freeze": batch.freeze_ms})

    def publish(self, batch: Batch, acks: Iterable[Ack] = ()) -> PublicationReport:
        """The synchronous writer: every phase inline. Returns after adoption (or a no-op); on failure
        before adoption the batch becomes the pending publication and :class:`SaveFailed` is raised.
        While it runs, the gate is owned by this stack: gated work queues, drains fail fast (E5)."""
        publication = self.publication(batch)
        ack_set = list(acks)
        self.active = publication
        self.gate.sync_depth += 1
        try:
            run_inline(publication)
        except Exception as exc:
            return self._after_failure(publication, ack_set, exc)
        finally:
            self.gate.sync_depth -= 1
            self.active = None
            self._schedule_pump()
        self.reports.append(publication.report())
        _AckSet(ack_set).resolve(None)
        return publication.report()

    # -- the asynchronous job and the gate (E4, E5) ------------------------------------------------------
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
        return elapsed

    def accept_job(self, batch: Batch, token: Token, acks: Iterable[Ack] = (), *,
                   admission: Admission | None = None) -> PublicationJob:
        """Accept a publication job from inside a preparation (its token proves it holds the gate).
        The gate stays held until the job's finish; without a running loop the job is drained inline."""
        if not self.gate.holds(token):
            raise DrainRefused("a job can only be accepted by the preparation that holds the gate")
        acks = list(acks)
        publication = self.publication(batch)
        job = PublicationJob(publication, self.offload(), lambda j: self._job_done(j, acks), admission=admission)
        self.gate.job = job
        self.active = publication
        self.jobs.append(job)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            job.drain(limit_s=None)
        else:
            job.start(loop)
        return job

    def _job_done(self, job: PublicationJob, acks: list[Ack]) -> None:
        """The job's last step ran: release the gate, then acknowledge once (success), or retain the
        batch as the pending publication and report save failed (no acknowledgement yet)."""
        publication = job.publication
        self.gate.job = None
        self.active = None
        self.reports.append(publication.report())
        if publication.outcome == "failed":
            self._retain(publication, acks, publication.error or RuntimeError("failed"))
            self.problems.append(self.save_failed or "save failed")
        else:
            if publication.error is not None:
                self.problems.append(f"after adoption of {publication.batch.id}: {publication.error}")
            _AckSet(acks).resolve(None)
        self._schedule_pump()

    def _schedule_pump(self) -> None:
        """Queued preparations run once the gate is free, from the loop (never on a draining stack)."""
        if not self.gate.queue:
            return
        try:
            asyncio.get_running_loop().call_soon(self._pump)
        except RuntimeError:
            self._pump()

    def _pump(self) -> None:
        if not self.closed:
            self.gate.pump()

    def submit_preparation(self, label: str, prepare: Preparation, *, key: str | None = None) -> bool:
        """Gated work: runs now if the gate is free, else queues (holding no snapshot) (E5)."""
        self._check_open()
        return self.gate.submit(label, prepare, key=key)

    def deliver_background(self, to: str, body: str, *, sender: str, kind: str = "completion",
                           ack: Ack | None = None, admission: Admission | None = None) -> None:
        """Deliver a background command's completion or monitor batch to ``to``'s mailbox. Warm local
        sessions return at once and acknowledge after adoption through the asynchronous job; every
        other session publishes synchronously. The record is tentative (hidden) until then (E4)."""
        self.conversation(to)
        acks = [ack] if ack else []
        if not self.warm:
            self.append_mail(to, body, sender=sender, kind=kind, ack=ack)
            return

        def prepare(token: Token) -> None:
            owner = self._new_id(kind)
            self.sidecar.add_mail(self._new_mail(to, sender, kind, body), owner)
            self.accept_job(self.freeze(kind, (), owner=owner), token, acks, admission=admission)

        self.submit_preparation(f"mail:{to}", prepare)

    def request_checkpoint(self, conversation: str = ROOT, *, admission: Admission | None = None,
                           ack: Ack | None = None) -> bool:
        """An automatic checkpoint: a preparation that rechecks modified state, save failure and retained
        batches under the gate, then freezes. One accepted checkpoint per conversation (E7): a request
        that coalesces into an accepted one returns False. ``ack`` runs once after adoption, or at once
        for a nil preparation (nothing to publish, or retained recovery that it must not retry)."""
        key = f"checkpoint:{conversation}"
        running = self.gate.job
        if (running is not None and running.publication.batch.kind == "checkpoint"
                and conversation in running.publication.batch.texts) or key in self.gate.queued_keys():
            return False  # coalesced; later edits stay dirty for the next opportunity
        acks = [ack] if ack else []

        def prepare(token: Token) -> None:
            buffer = self.buffers.get(conversation)
            if buffer is None or self.pending is not None or self.save_failed \
                    or not self._needs_publish(conversation, buffer):
                # Automatic checkpoints never blindly retry retained recovery; a nil preparation
                # (an earlier save absorbed the edit) is a successful no-op.
                _AckSet(acks).resolve(None)
                return
            batch = self.freeze("checkpoint", (conversation,))
            if self.warm:
                self.accept_job(batch, token, acks, admission=admission)
            else:
                self.publish(batch, acks)

        self.submit_preparation(key, prepare, key=key)
        return True

    # -- observational changes and their debounced registry save (E7) -----------------------------------
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

    # -- notifications and in-flight checkpoints (E6, E7) -------------------------------------------------
    def notify(self, callback: Notification) -> bool:
        """Offer a notification (waiter wake, wake offer): never queued behind preparations, never run
        under a token. Returns whether it ran immediately."""
        return self.notifications.offer(callback)

    def request_started(self, conversation: str = ROOT) -> None:
        self.checkpoint_timer.request_started(conversation)

    def request_finished(self, conversation: str = ROOT) -> None:
        self.checkpoint_timer.request_finished(conversation)

    def _checkpoint_tick(self, conversations: frozenset[str]) -> None:
        for conversation in sorted(conversations):
            if conversation in self.buffers:
                self.request_checkpoint(conversation)

    # -- shutdown (E7) -------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Drain accepted work, flush agent transcripts, then pending registry saves, then the root,
        then release the lease. Pending recovery blocks shutdown (E7)."""
        if self.closed:
            return
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

    def _after_failure(self, publication: Publication, acks: list[Ack], exc: BaseException) -> PublicationReport:
        report = publication.report()
        self.reports.append(report)
        if publication.adopted:  # failure after adoption: durable, only logged (E4)
            self.problems.append(f"after adoption of {publication.batch.id}: {exc}")
            _AckSet(acks).resolve(None)
            return report
        self._retain(publication, acks, exc)
        raise SaveFailed(self.save_failed or "save failed", phase=publication.failed_phase or "?",
                         publication=publication.batch.id) from exc

    def _retain(self, publication: Publication, acks: list[Ack], exc: BaseException) -> None:
        """Failure before adoption: keep the frozen batch as the pending publication, report save failed."""
        batch = publication.batch
        phase = publication.failed_phase or "?"
        if self.pending is not None and self.pending.batch.owner == batch.owner:
            self.pending.acks.extend(acks)  # a failed retry: still the same unresolved acknowledgements
            self.pending.phase, self.pending.error = phase, str(exc)
        elif self.pending is not None:
            # One pending batch at a time: the older one keeps its acknowledgements; this one's
            # tentative records fold into it so a single retry or abandon resolves both.
            self.sidecar.transfer(batch.owner, self.pending.batch.owner)
            self.pending.acks.extend(acks)
        else:
            self.pending = PendingPublication(batch, phase, str(exc), list(acks))
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

    def _publish_now(self, kind: str, conversations: Iterable[str] | None, *, owner: str | None = None,
                     acks: Iterable[Ack] = (), sidecar: bool = True) -> PublicationReport:
        return self.publish(self.freeze(kind, conversations, owner=owner, sidecar=sidecar), acks)

    def _enter_sync(self, token: Token | None) -> None:
        """Every acknowledged mutation drains the gate before it mutates anything (E5)."""
        self._check_open()
        self.drain(token)

    # -- acknowledged mutations (synchronous; E3 item 3) ----------------------------------------------
    def append_mail(self, to: str, body: str, *, sender: str = ROOT, kind: str = "message",
                    ack: Ack | None = None, token: Token | None = None) -> MailRecord:
        """Mailbox append: returns only after its publication is adopted; the record is hidden from
        delivery until then (tentative)."""
        self.conversation(to)
        self._enter_sync(token)
        owner = self._new_id(kind)
        record = self._new_mail(to, sender, kind, body)
        self.sidecar.add_mail(record, owner)
        self._publish_now(kind, (), owner=owner, acks=[ack] if ack else ())
        return record

    def _new_mail(self, to: str, sender: str, kind: str, body: str) -> MailRecord:
        number = self.sidecar.next_mail
        self.sidecar.next_mail += 1
        return MailRecord(f"m{self.epoch}-{number}", to, sender, kind, body, self.clock.wall())

    def spawn_agent(self, agent: str, *, name: str | None = None, parent: str = ROOT,
                    prompt: str | None = None, token: Token | None = None) -> None:
        """Spawn registration: registry entry and initial transcript commit together, acknowledged."""
        self._enter_sync(token)
        if agent in self.buffers or agent == ROOT or "/" in agent:
            raise SessionError(f"{self.root}: agent {agent!r} already exists or is not a valid id")
        owner = self._new_id("spawn")
        self.sidecar.agents[agent] = {"name": name or agent, "parent": parent, "activity": "idle",
                                      "status": "active", "created": self.clock.wall()}
        self.sidecar.tentative[f"agent:{agent}"] = owner
        buffer = self.buffers[agent] = ConversationBuffer(agent)
        if prompt is not None:
            buffer.insert(Message("user", prompt, self.clock.wall()))
        self._publish_now("spawn", (agent,), owner=owner)

    def publish_result(self, agent: str, body: str, *, token: Token | None = None) -> MailRecord:
        """RESULT publication: the agent's answer as mail to its parent, acknowledged."""
        parent = str(self.sidecar.agents.get(agent, {}).get("parent", ROOT))
        return self.append_mail(parent, body, sender=agent, kind="RESULT", token=token)

    def settle(self, agent: str, status: str = "done", result: str | None = None, *,
               token: Token | None = None) -> None:
        """Terminal settlement: the agent's transcript commits with its metadata (and its RESULT)."""
        self._enter_sync(token)
        if status not in TERMINAL:
            raise SessionError(f"settlement status must be one of {sorted(TERMINAL)}, got {status!r}")
        record = self.sidecar.agents.get(agent)
        if record is None:
            raise SessionError(f"{self.root}: no agent {agent!r}")
        owner = self._new_id("settle")
        record.update(status=status, activity=status, settled=self.clock.wall())
        if result is not None:
            mail = self._new_mail(str(record.get("parent", ROOT)), agent, "RESULT", result)
            self.sidecar.add_mail(mail, owner)
        self._publish_now("settle", (agent,), owner=owner)

    def set_control(self, key: str, value: Any, *, token: Token | None = None) -> None:
        """Goal, plan and provider state: independently durable control state, acknowledged."""
        self._enter_sync(token)
        if key not in ("goal", "plan", "provider"):
            raise SessionError(f"unknown control key {key!r}: expected goal, plan or provider")
        self.sidecar.control[key] = value
        self._publish_now("control", ())

    # -- transcript streaming and delivery (not gated) -------------------------------------------------
    def add_message(self, conversation: str, message: Message) -> None:
        self.conversation(conversation).insert(message)

    def attach(self, name: str, data: bytes) -> None:
        """A file snapshot, published as an immutable artifact with the next full publication."""
        self.attachments[name] = data
        self._unpublished_attachments.add(name)

    def deliver_mail(self, conversation: str) -> list[MailRecord]:
        """Insert committed mail into the receiving transcript with a hidden receipt and consume it in
        memory, without a synchronous save; repeated delivery is deduplicated by receipt (E7)."""
        buffer = self.conversation(conversation)
        delivered: list[MailRecord] = []
        for record in self.sidecar.visible_mail(conversation):
            if record.id not in buffer.receipts:
                buffer.insert(Message("mail", f"[{record.kind} from {record.sender}] {record.body}", record.created,
                                      {"receipt": record.id, "hidden_receipt": True, "kind": record.kind}))
                delivered.append(record)
            self.sidecar.consume(conversation, record)
        return delivered

    # -- observational mutations -------------------------------------------------------------------------
    def set_activity(self, agent: str, flavour: str) -> None:
        """An observational change (e.g. permission-blocked/running): no publication of its own; the
        registry save publishes it (debounced by the session scheduler, issue 4)."""
        if flavour not in ACTIVITY_FLAVOURS:
            raise SessionError(f"unknown activity {flavour!r}: expected one of {sorted(ACTIVITY_FLAVOURS)}")
        record = self.sidecar.agents.get(agent)
        if record is None:
            raise SessionError(f"{self.root}: no agent {agent!r}")
        record["activity"] = flavour
        self._observe()

    def discard_mail(self, conversation: str, mail_id: str) -> bool:
        """Explicit discard: observational, published by the next registry save."""
        removed = self.sidecar.remove_mail(conversation, mail_id) is not None
        if removed:
            self._observe()
        return removed

    def save_registry(self, *, token: Token | None = None) -> PublicationReport:
        """The sidecar-only registry save (required commit, synchronous): never rewrites a transcript,
        rebuilds the prompt index or scans snapshots; it projects the committed root fields (E7)."""
        self._enter_sync(token)
        return self._publish_now("registry", (), sidecar=True)

    def full_save(self, *, rescan: bool = False, token: Token | None = None) -> PublicationReport:
        """Every modified conversation, new attachments and the sidecar (explicit save). ``rescan``
        restages and rehashes every conversation and attachment before comparing: the seed's rejected
        full registry save, kept as the baseline the registry-save recipe measures against."""
        self._enter_sync(token)
        if rescan:
            for buffer in self.buffers.values():
                buffer.dirty_from = 0
            self._unpublished_attachments.update(self.attachments)
        return self._publish_now("full", None)

    def checkpoint(self, conversation: str = ROOT, *, token: Token | None = None) -> PublicationReport:
        """An explicit checkpoint of one conversation with the sidecar (synchronous writer)."""
        self._enter_sync(token)
        return self._publish_now("checkpoint", (conversation,))

    # -- pending publications --------------------------------------------------------------------------
    def retry_pending(self) -> PublicationReport:
        """Explicit retry: republish the pending batch's frozen transcripts with a freshly projected
        sidecar; its candidate installs on adoption and its acknowledgements run once (E4)."""
        self._enter_sync(None)
        pending = self._require_pending()
        if pending.batch.epoch != self.epoch and not pending.recovered:
            raise StaleHead(f"{pending.batch.id}: frozen in epoch {pending.batch.epoch}, the session is now in "
                            f"epoch {self.epoch}; abandon it")
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
        self._discard_unadopted(pending.batch)
        self.sidecar.rollback(pending.batch.owner)
        self.pending = None
        self.save_failed = None
        _AckSet(pending.acks).resolve(SaveAbandoned(f"{pending.batch.id} was abandoned"))

    def _discard_unadopted(self, batch: Batch) -> None:
        """A failed attempt's never-adopted manifest (if its commit got that far), then its staged bytes:
        in this order, because a manifest whose staging directory is gone counts as adopted when HEAD is
        lost (``_adoption``); left alone, the orphan could be mistaken for an adopted generation."""
        current = self.head.manifest if self.head else None
        for name in self.store.list_manifests():
            if name.endswith(f"-{batch.id}.json") and name != current:
                try:
                    self.fs.remove(self.store.path(name))
                except OSError as exc:  # damage: left in place, and said
                    self.problems.append(f"{self.store.path(name)}: unadopted manifest left ({describe(exc)})")
        remove_staging(self.fs, batch.staging_dir)

    def _require_pending(self) -> PendingPublication:
        if self.pending is None:
            raise SessionError(f"{self.root}: no pending publication")
        return self.pending

    # -- generations -------------------------------------------------------------------------------------
    def retire(self, *, pinned: Iterable[str] = ()) -> tuple[int, bool]:
        """One idle slice of retirement: old generations beyond ``keep_generations`` (pinned kept), then
        unreferenced chunks. Returns (removed, more work left)."""
        try:
            return self.store.retire(keep=self.settings.keep_generations, pinned=pinned, head=self.head,
                                     max_deletions=self.settings.retire_slice, problems=self.problems)
        except DAMAGE as exc:
            raise SessionError(f"{self.root}: retirement failed: {describe(exc)}") from exc

    def restore(self, seq: int) -> HeadRef:
        """Restore generation ``seq`` as a new generation under a new owner epoch; stale candidates
        (from the old epoch) cannot install afterwards (E3)."""
        assert self.lease is not None
        name = next((n for n in self.store.list_manifests() if f"manifest-{seq:08d}-" in n), None)
        if name is None:
            raise SessionError(f"{self.root}: no generation {seq}")
        old, contents = self.store.load_verified(name, None)
        self.lease = self.store.bump_epoch(self.lease)
        manifest = Manifest(seq=(self.head.seq if self.head else 0) + 1, epoch=self.epoch,
                            parent=self.head.manifest if self.head else None, created=self.clock.wall(),
                            artifacts=old.artifacts, meta={"publication": f"restore-{seq}", "kind": "restore"})
        new = self.store.write_manifest(manifest)
        self.store.adopt(new, expected=self.head, lease=self.lease)
        self.head, self.manifest, self.memos = new, manifest, {}
        self._load_contents(contents)
        return new

    # -- teardown ------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Release the lease. Pending recovery blocks it (E4, E7 shutdown order)."""
        if self.closed:
            return
        if self.pending is not None:
            raise SessionError(f"{self.root}: a pending publication ({self.pending.batch.id}) blocks close; "
                               "retry or abandon it first")
        self._release_owner()
        self._release_machinery()
        self.closed = True

    def _release_owner(self) -> None:
        """Give up ownership: the portable profile releases its lease."""
        if self.lease is not None:
            self.store.release_lease(self.lease)

    def _release_machinery(self) -> None:
        self.registry_debounce.cancel()
        self.checkpoint_timer.stop()
        self.notifications.close(proceed=True)
        if self._offload is not None:
            self._offload.shutdown()
            self._offload = None

    def _check_open(self) -> None:
        if self.closed:
            raise SessionError(f"{self.root}: session is closed")

    def logs_dir(self) -> str:
        return self.store.path(LOGS)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pending is None:
            self.close()


def _chunk(record: Any) -> ChunkRef:
    return ChunkRef(str(record[0]), int(record[1]))
