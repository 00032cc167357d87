"""E3/E4/E7: a session: a root conversation, agent conversations, a sidecar and diagnostic logs.

:class:`Session` is the portable profile (owner lease with an epoch, immutable generations behind one
HEAD) and everything both profiles share: acknowledged mutations that return only after adoption,
at-least-once mail, sidecar-only registry saves, pending publications with retry and abandon. This
module holds its state (``__init__``), open, the acknowledged mutations and teardown; the rest is split
by concern into parts it mixes in, each reading the state ``__init__`` sets:

- ``_opening``: the layout checked, HEAD's generation loaded, staged publications recovered after a crash;
- ``_publishing``: freeze, the synchronous writer, finish and install, the pending publication;
- ``_mail``: mailbox append, delivery with receipts, discard;
- ``_warm``: the gate, the asynchronous job, the schedulers, notifications and the shutdown order;
- ``_observing``: engine events for listeners of ``session.observers`` or the process.

Settings and the small shared records are in ``_session_values``; the file-backed profile (PID lock,
transcripts written in place) is in ``_filesession``.
"""

from __future__ import annotations

import collections
import copy
import gc
import itertools
import os
from collections.abc import Callable, Iterable
from typing import Any, Self

from perfsuite.engine._buffer import ConversationBuffer
from perfsuite.engine._clock import Clock, SystemClock
from perfsuite.engine._damage import DAMAGE, describe, environmental
from perfsuite.engine._events import Observers, SessionInput
from perfsuite.engine._fs import FileSystem, OsFileSystem
from perfsuite.engine._gate import MutationGate, Token
from perfsuite.engine._generations import (
    LOGS,
    Lease,
    Manifest,
    OwnerProbe,
    SessionError,
    owner_alive,
)
from perfsuite.engine._job import PublicationJob
from perfsuite.engine._logstore import LogStore
from perfsuite.engine._logvalues import GenerationRef, StorageStats
from perfsuite.engine._mail import Mail
from perfsuite.engine._migrate import cleanup_slice, is_migrated_leftover
from perfsuite.engine._objects import HashMemo
from perfsuite.engine._observing import Observing
from perfsuite.engine._offload import Offload
from perfsuite.engine._opening import Opening
from perfsuite.engine._pipeline import Publication
from perfsuite.engine._pipeline_values import PublicationReport
from perfsuite.engine._publishing import Publishing
from perfsuite.engine._repair import repair_portable
from perfsuite.engine._runner import JobRunner, LoopRunner
from perfsuite.engine._schedulers import CheckpointTimer, Debouncer, NotificationQueue
from perfsuite.engine._session_values import (
    ATTACHMENT_PREFIX,
    CONVERSATION_PREFIX,
    Ack,
    Activity,
    FaultHooks,
    PendingPublication,
    SaveAbandoned,
    SchedulerStats,
    SessionSettings,
    artifact_for,
)
from perfsuite.engine._sidecar import ACTIVITY_FLAVOURS, ROOT, TERMINAL, Sidecar
from perfsuite.engine._transcript import Message, TranscriptError
from perfsuite.engine._warm import WarmLocal


def freeze_loaded_state() -> int:
    """``gc.freeze()``: move every object tracked so far to the permanent generation; return the count.

    Frozen objects are still freed by reference counting; only reference cycles among them leak."""
    gc.freeze()
    return gc.get_freeze_count()


class Session(Opening, Publishing, Mail, WarmLocal, Observing):
    """A portable session (E3). Owned by one event-loop thread; blocking publication steps may run
    elsewhere through the asynchronous job (E4), never concurrently with each other."""

    profile = "portable"

    def __init__(self, root: str, fs: FileSystem, clock: Clock, settings: SessionSettings) -> None:
        self.root = os.path.abspath(root)
        self.fs = fs
        self.clock = clock
        self.settings = settings
        self.store = LogStore(self.root, fs, capacity=settings.log_capacity)
        self.lease: Lease | None = None
        self.owner_alive: OwnerProbe = owner_alive
        self.head: GenerationRef | None = None
        self.migrated: str | None = None  # what a format-1 session's migration did, when it did
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
        self.id_source: Callable[[], str] = lambda: os.urandom(3).hex()  # 24 random bits, as uuid4().hex[:6]; cheaper
        # Engine events: listeners see what the session does; checked before anything is built.
        self.observers = Observers()
        self._internal = 0  # > 0 while the engine calls its own entry points (not inputs)
        self.runner: JobRunner = LoopRunner()
        self.faults: FaultHooks | None = None  # documented fault hooks for checkers; never in production
        # Warm-local machinery (E4-E7): the gate, the job's offload, notifications and schedulers.
        self.gate = MutationGate()
        self.gate.on_admit = self._admitted
        self._offload: Offload | None = None
        self.jobs: collections.deque[PublicationJob] = collections.deque(maxlen=256)
        self.transport_busy = False
        self.stopping = False
        self.root_live = True
        self.drain_ms: list[float] = []
        # Acknowledgements of checkpoint requests coalesced into a queued one, by its gate key (E5, E7)
        self._checkpoint_waiters: dict[str, list[Ack]] = {}
        self._observed = 0  # version of observational changes (activity flavours, discards)
        self.registry_debounce = Debouncer(clock, settings.registry_debounce_s, self._registry_due,
                                           is_deferred=lambda: self.active is not None,
                                           observe=self._scheduler_observer("registry-save"))
        self.notifications = NotificationQueue(
            clock, gate_idle=lambda: self.gate.idle and self.active is None,
            transport_idle=lambda: not self.transport_busy,
            live=lambda: self.root_live and not self.stopping,
            first_delay=settings.notify_first_s, max_delay=settings.notify_max_s,
            observe=self._scheduler_observer("notifications"))
        self.checkpoint_timer = CheckpointTimer(clock, settings.checkpoint_interval_s, self._checkpoint_tick,
                                                observe=self._scheduler_observer("checkpoint-timer"))

    # -- open / create / repair ------------------------------------------------------------------------
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
        runner: JobRunner | None = None,
        faults: FaultHooks | None = None,
        entropy: Callable[[], str] | None = None,
    ) -> Self:
        """Open (or create) a portable session: take the lease with a new epoch, adopt HEAD after
        verifying every digest, recover pending publications from staging. A lost HEAD is recovered
        only to a generation proven adopted, and a damaged newest generation refuses open rather than
        fall back silently (``_adoption``; ``Session.repair`` / ``perfsuite session repair`` adopt an older
        one explicitly). A second live owner, and any damage met, is a one-line :class:`SessionError`.
        ``id_source`` makes publication ids (and manifest names) deterministic, e.g. for fixtures;
        ``owner_alive(pid)`` is the liveness probe of the owner a lease or PID lock names (default: the
        real one; a crash checker passes a model in which the processes its crash killed are dead).
        ``runner`` runs accepted jobs (default: the asyncio loop; ``VirtualRunner``: modelled durations in
        virtual time, for the what-if simulator). ``faults`` builds a deliberately broken engine for a
        checker (:class:`FaultHooks`). ``entropy`` returns 32 hex digits per call for the session's id and its
        logs' salts (default random; a fixture generator passes a seeded one so two builds are identical)."""
        fs = fs or OsFileSystem()
        session = cls(os.fspath(path), fs, clock or SystemClock(), settings or SessionSettings())
        if id_source is not None:
            session.id_source = id_source
        if entropy is not None:
            session.store.entropy = entropy
        if runner is not None:
            session.runner = runner
        session.faults = faults
        if owner_alive is not None:
            session.owner_alive = owner_alive
        try:
            session._open(create)
        except (SessionError, TranscriptError):
            session._abort_open()
            raise
        except DAMAGE as exc:
            session._abort_open()
            advice = environmental(exc)
            raise SessionError(f"{session.root}: cannot open the session: {describe(exc)}"
                               + (f"; {advice}" if advice else "")) from exc
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
        """Repair what open refuses (E3): explicit, never automatic. Returns a ``RepairReport``
        whose lines say what was found and done; see :mod:`perfsuite.engine._repair`."""
        return repair_portable(os.fspath(path), generation=generation, fs=fs or OsFileSystem(),
                               owner_alive=owner_alive)

    # -- reading ---------------------------------------------------------------------------------------
    @property
    def manifest(self) -> Manifest | None:
        """The committed generation as format 1's manifest: each artifact's chunks and size (the sidecar is
        format 2's document, :attr:`sidecar`, not an artifact). Built on demand: for callers, not the engine."""
        if self.profile != "portable":
            return None
        state = self.store.state
        artifacts = {name: artifact.entry() for name, artifact in state.artifacts.items()}
        return Manifest(state.generation, state.epoch, None, 0.0, artifacts, {"log": self.store.current.number
                                                                            if self.store.current else 0})

    @property
    def state(self) -> Any:
        """The committed state (format 2's :class:`LogState`): artifacts with their chunks and extents, the
        sidecar document, the log chain's position."""
        return self.store.state

    def durable_files(self) -> list[str]:
        """The files the committed generation rests on (format 2): HEAD, the current log and every older
        log whose bytes its state references (absolute paths, sorted). A checker verifies that none of them
        had a failed sync before an acknowledgement that rests on them (SPEC section 7, invariant 7)."""
        if self.profile != "portable" or self.store.current is None:
            return []
        logs = self.store.state.logs() | {self.store.current.number}
        return sorted([self.store.path("HEAD"), *(self.store.log_path(n) for n in logs if n > 0)])

    def storage(self) -> StorageStats:
        """Disk use of the session's logs (format 2): allocated, used and live bytes, space amplification,
        bytes appended and roll-overs by this process."""
        return self.store.space()

    def committed_sidecar(self) -> dict[str, Any]:
        """A copy of the committed sidecar document (as of the last adopted generation: what a reopen loads),
        as opposed to :attr:`sidecar`, the live one with tentative and uncommitted changes."""
        return copy.deepcopy(self.store.state.sidecar)

    @property
    def epoch(self) -> int:
        assert self.lease is not None
        return self.lease.epoch

    def conversation(self, conversation: str) -> ConversationBuffer:
        try:
            return self.buffers[conversation]
        except KeyError:
            raise SessionError(f"{self.root}: no conversation {conversation!r}") from None

    @property
    def idle(self) -> bool:
        return self.active is None

    def activity(self) -> Activity:
        """What the session has in hand now: accepted job, preparations, notifications, pending saves."""
        job = self.gate.job
        return Activity(job.publication.batch.id if job is not None else None,
                        self.gate.preparing.label if self.gate.preparing is not None else None,
                        len(self.gate.queue), self.active is not None, len(self.notifications.fifo),
                        self.registry_debounce.pending)

    def scheduler_stats(self) -> SchedulerStats:
        """Counters of the debouncer, the checkpoint timer and the notification queue (read-only copy)."""
        debounce = self.registry_debounce
        return SchedulerStats(debounce.fired, debounce.absorbed, debounce.deferred, self.checkpoint_timer.ticks,
                              tuple(self.notifications.waits))

    def stop_checkpoints(self) -> None:
        """Stop the periodic checkpoint timer (E7): a replay's trace has ended and no new tick may start."""
        self.checkpoint_timer.stop()

    def _input(self, operation: str, conversation: str, text: str | None = None, **detail: Any) -> None:
        """Engine event: a caller's input, after it returned (not the engine's own nested calls). The
        size of ``text`` is computed only when someone listens (a body's encoding is an allocation)."""
        if self.observers and not self._internal:
            self.observers.emit(SessionInput(self.root, operation, conversation, _size(text), detail))

    # -- acknowledged mutations (synchronous; E3 item 3) -----------------------------------------------
    def _enter_sync(self, token: Token | None) -> None:
        """Every acknowledged mutation drains the gate before it mutates anything (E5)."""
        self._check_open()
        self.drain(token)

    def spawn_agent(self, agent: str, *, name: str | None = None, parent: str = ROOT,
                    prompt: str | None = None, token: Token | None = None) -> None:
        """Spawn registration: registry entry and initial transcript commit together, acknowledged."""
        self._enter_sync(token)
        if agent in self.buffers or agent == ROOT or "/" in agent:
            raise SessionError(f"{self.root}: agent {agent!r} already exists or is not a valid id")
        owner = self._new_id("spawn")
        self.sidecar.set_agent(agent, {"name": name or agent, "parent": parent, "activity": "idle",
                                       "status": "active", "created": self.clock.wall()}, owner)
        buffer = self.buffers[agent] = ConversationBuffer(agent)
        if prompt is not None:
            buffer.insert(Message("user", prompt, self.clock.wall()))
        self._publish_now("spawn", (agent,), owner=owner)
        self._input("spawn_agent", agent)

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
        self.sidecar.update_agent(agent, status=status, activity=status, settled=self.clock.wall())
        if result is not None:
            mail = self._new_mail(str(record.get("parent", ROOT)), agent, "RESULT", result)
            self.sidecar.add_mail(mail, owner)
        self._publish_now("settle", (agent,), owner=owner)
        self._input("settle", agent, result, status=status)

    def set_control(self, key: str, value: Any, *, token: Token | None = None) -> None:
        """Goal, plan and provider state: independently durable control state, acknowledged."""
        self._enter_sync(token)
        if key not in ("goal", "plan", "provider"):
            raise SessionError(f"unknown control key {key!r}: expected goal, plan or provider")
        self.sidecar.set_control(key, value)
        self._publish_now("control", ())

    # -- transcript streaming (not gated) and observational changes (E7) -------------------------------
    def add_message(self, conversation: str, message: Message) -> None:
        self.conversation(conversation).insert(message)
        if self.observers:
            self._input("add_message", conversation, message.content)

    def attach(self, name: str, data: bytes) -> None:
        """A file snapshot, published as an immutable artifact with the next full publication."""
        self.attachments[name] = data
        self._unpublished_attachments.add(name)

    def set_activity(self, agent: str, flavour: str) -> None:
        """An observational change (e.g. permission-blocked/running): no publication of its own; the
        registry save publishes it (debounced by the session scheduler, E7)."""
        if flavour not in ACTIVITY_FLAVOURS:
            raise SessionError(f"unknown activity {flavour!r}: expected one of {sorted(ACTIVITY_FLAVOURS)}")
        record = self.sidecar.agents.get(agent)
        if record is None:
            raise SessionError(f"{self.root}: no agent {agent!r}")
        self.sidecar.update_agent(agent, activity=flavour)
        self._observe()
        self._input("set_activity", agent, flavour=flavour)

    # -- explicit saves --------------------------------------------------------------------------------
    def save_registry(self, *, token: Token | None = None) -> PublicationReport:
        """The sidecar-only registry save (required commit, synchronous): never rewrites a transcript,
        rebuilds the prompt index or scans snapshots; it projects the committed root fields (E7)."""
        self._enter_sync(token)
        report = self._publish_now("registry", (), sidecar=True)
        self._input("save_registry", ROOT)
        return report

    def full_save(self, *, rescan: bool = False, token: Token | None = None) -> PublicationReport:
        """Every modified conversation, new attachments and the sidecar (explicit save). ``rescan``
        restages and rehashes every conversation and attachment before comparing: the seed's rejected
        full registry save, kept as the baseline the registry-save recipe measures against."""
        self._enter_sync(token)
        if rescan:
            for buffer in self.buffers.values():
                buffer.dirty_from = 0
            self._unpublished_attachments.update(self.attachments)
        report = self._publish_now("full", None)
        self._input("full_save", ROOT)
        return report

    def checkpoint(self, conversation: str = ROOT, *, token: Token | None = None) -> PublicationReport:
        """An explicit checkpoint of one conversation with the sidecar (synchronous writer)."""
        self._enter_sync(token)
        report = self._publish_now("checkpoint", (conversation,))
        self._input("checkpoint", conversation)
        return report

    # -- generations -----------------------------------------------------------------------------------
    def retire(self, *, pinned: Iterable[int | str] = ()) -> tuple[int, bool]:
        """One idle slice of consolidation (format 2), off the acknowledgement path: the format-1
        leftovers of a migration, then a roll-over when the log is 75 % full or poisoned (its BASE copies
        the live bytes of logs under half live: compaction), then whole logs nothing retained references
        (the last ``keep_generations`` generations and the ``pinned`` ones, by number). Returns (removed,
        more work left). Does nothing while a publication is in hand or pending."""
        self._check_open()
        if self.active is not None or self.gate.job is not None or self.pending is not None:
            return 0, False
        try:
            if is_migrated_leftover(self):
                removed, more = cleanup_slice(self, self.settings.retire_slice)
                if more:
                    return removed, True
            log = self.store.current
            due = log is not None and (log.poisoned or log.filled >= 0.75)
            if due or not self.store.head_durable:
                _placed, base = self.store.roll_over((), epoch=self.epoch, compact=True)
                self.store.state = base
                self.head = self._generation_ref()
            numbers = [int(p) for p in pinned if isinstance(p, int) or str(p).isdigit()]
            removed, more = self.store.retire(self.settings.keep_generations, numbers, self.settings.retire_slice,
                                              self.problems)
            if removed and self.faults is not None and self.faults.forget_ledger_on_retire:  # a seeded bug
                for conversation in [c for c, entries in self.sidecar.ledger.items() if entries]:
                    self.sidecar.ledger[conversation].clear()
                    self.sidecar.touch("mailboxes", conversation)
            return removed, more
        except DAMAGE as exc:
            raise SessionError(f"{self.root}: retirement failed: {describe(exc)}") from exc

    def compact(self) -> StorageStats:
        """Consolidate on demand (off the acknowledgement path, like :meth:`retire`'s roll-overs): roll over
        into a new log whose BASE copies every live byte, so once the retained generations are all in the new
        log, retirement deletes every older one (e.g. before copying a session). Returns the disk use after."""
        self._enter_sync(None)
        if self.pending is not None:
            raise SessionError(f"{self.root}: a pending publication ({self.pending.batch.id}) blocks compaction")
        _placed, base = self.store.roll_over((), epoch=self.epoch, compact="all")
        self.store.state = base
        self.head = self._generation_ref()
        return self.store.space()

    def restore(self, seq: int) -> GenerationRef:
        """Restore generation ``seq`` as a new generation under a new owner epoch, written as a roll-over (a
        new log whose BASE holds that generation's state); stale candidates (from the old epoch) cannot
        install afterwards (E3)."""
        assert self.lease is not None
        self._enter_sync(None)
        old = self.store.state_at(seq)
        contents = self.store.verify(old)
        self.lease = self.store.bump_epoch(self.lease)
        old.generation, old.epoch = self.store.state.generation + 1, self.epoch
        _placed, base = self.store.roll_over((), state=old, epoch=self.epoch, compact=False)
        self.store.state = base
        self.memos = {}
        self._load_state(contents)
        return self.head  # type: ignore[return-value]

    # -- teardown --------------------------------------------------------------------------------------
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
        """Give up ownership: the portable profile closes its log (its flock) and releases its lease."""
        self.store.close()
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


def _size(text: str | None) -> int:
    return len((text or "").encode("utf-8", "replace"))


# Names other modules import from here (the file-backed profile, the facade, the suite).
__all__ = ["ATTACHMENT_PREFIX", "CONVERSATION_PREFIX", "Ack", "PendingPublication", "SaveAbandoned", "Session",
           "SessionSettings", "artifact_for"]
