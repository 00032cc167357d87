"""E3/E4: the values a session's parts share: its settings and fault hooks, what it reports (activity,
scheduler counts), acknowledgements and pending publications, artifact names. No behaviour beyond running
acknowledgements once."""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from perfsuite.engine._fs import DelegatingFileSystem, FileSystem
from perfsuite.engine._pipeline_values import Batch
from perfsuite.engine._steps import Step

Ack = Callable[[BaseException | None], None]
CONVERSATION_PREFIX = "conversations/"
ATTACHMENT_PREFIX = "attachments/"


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
    # format 2: each session log is preallocated to this many bytes (real zeros); a record larger
    # than what is left rolls over into a log of max(capacity, 2 x needed). Tests and campaigns use small ones.
    log_capacity: int = 16 * 1024 * 1024
    # group commit: publications that become pending while the job's sync is in flight are
    # written together when it returns and share the next fdatasync (each its own generation)
    group_commit: bool = True


@dataclass(frozen=True, slots=True)
class Activity:
    """What a session has in hand right now (read this, not the gate or the schedulers):
    an accepted job, a running or queued preparation, a publication in a driver, queued notifications,
    an observational change waiting for its debounced registry save (E5-E7)."""

    job: str | None  # the accepted job's publication id
    preparing: str | None  # the label of the preparation running under the gate
    queued: int  # preparations waiting for the gate
    publishing: bool  # a publication is in a driver (synchronous writer or job)
    notifications: int  # offered notifications not yet run
    registry_save_pending: bool

    @property
    def quiet(self) -> bool:
        """Nothing accepted, running, queued or pending: the session will do nothing on its own but timers
        for requests in flight (E7 in-flight checkpoints)."""
        return (self.job is None and self.preparing is None and not self.queued and not self.publishing
                and not self.notifications and not self.registry_save_pending)


@dataclass(frozen=True, slots=True)
class SchedulerStats:
    """What a session's schedulers have done so far (a read-only view, so a simulation counts
    debounced saves, checkpoint ticks and notification waits without reaching into the schedulers; E6/E7)."""

    debounce_fired: int  # debounced registry saves that ran
    debounce_absorbed: int  # observational changes folded into a save already due
    debounce_deferred: int  # saves postponed because a publication was in flight
    checkpoint_ticks: int  # periodic checkpoint timer ticks
    notification_waits: tuple[float, ...]  # offer-to-run delay of every notification that ran, seconds


@dataclass(frozen=True, slots=True)
class FaultHooks:
    """Documented fault hooks: how a checker builds a deliberately broken engine without
    patching its classes. Never set in production; ``Session.open(..., faults=...)``.

    ``acknowledge_after``: run a publication's acknowledgements right after this phase (e.g. "commit":
    before HEAD adoption, the E4 violation the crash checker must catch) instead of after finish.
    ``reorder_steps``: rewrite the order of a publication's steps (e.g. a file-backed sidecar replaced
    before its transcripts' barrier, E3/E7).

    Open-path hooks (the corruption probes' seeded bugs) ride on the I/O layer, ``with_fault_hooks(fs, hooks)``, so
    recovery and every reopen on that layer consult them too:
    ``torn_lease_owned``: a torn LEASE (read as pid 0) counts as a live owner, so open refuses for good.
    ``recover_head``: replaces the proof of adoption when HEAD is lost or does not verify; called as
    ``recover_head(store, hint, problems)`` with the session's generation store and returns what open loads
    (head, manifest, contents, problems), like the engine's own recovery (E3).
    ``retire_newer``: retirement also deletes generations newer than HEAD's (format 2: open deletes every
    log newer than HEAD's as an orphan, adopted or not).
    ``cut_at_first_bad_line``: a transcript's first undecodable line ends it, wherever it is (the rest is
    set aside as a torn tail) and no committed size is checked (E2).

    Format 2's commit path, consulted by the log store on the I/O layer they ride on:
    ``head_before_base_sync``: a roll-over replaces HEAD before the new log's BASE is fdatasynced.
    ``fsyncgate_ignored``: a failed write or fdatasync does not poison the log: the retry appends to it
    and syncs it again (E1 forbids it).
    ``damage_as_torn``: any invalid record ends the log as a torn tail, wherever it is (mid-log damage
    and a flipped byte in the last record are dropped, RocksDB's point-in-time recovery).
    ``skip_record_checksum``: a record whose header verifies is accepted without its sha256.
    ``skip_log_identity``: a log is accepted whatever session, number or salt its header names.
    ``readopt_as_new``: a roll-over whose HEAD replace landed but failed (its directory fsync) is taken as
    not landed, and the session goes on appending to the log it left, which HEAD may no longer name
    (the wedged-adoption defect's shape, planted back: format 1 retried a failed adoption as a new generation and
    could delete the manifest HEAD named on disk).
    ``forget_unreplayed_refs``: retirement knows only the BASE references of the logs the store replayed
    (after a reopen: HEAD's log's) and takes every other retained log to reference none, so it deletes a log
    an older retained generation's bytes rest on and restoring that generation fails (E3 keeps the last N;
    the behaviour before the fix, planted back).
    ``ack_failed_group``: a group commit's members (the job's absorbed round, E4) are acknowledged as
    durable without checking the result of the round's shared fdatasync: when it failed they are still
    acknowledged, then kept pending (E1: a failed fsync is never acknowledged; E4: one acknowledgement,
    after adoption).
    ``fence_after_head``: a roll-over re-checks the lease only after HEAD's replace (its commit point), not
    before its new log's rename nor before HEAD's replace, so an owner fenced mid roll-over still names a
    log over its successor's or replaces its successor's HEAD (E3 fencing).
    ``takeover_in_place``: an open that broke the lease without holding the log's flock (a layer without
    flock) neither reads the log again once the lease is its own nor starts a log of its own: it misses what
    the old owner acknowledged meanwhile and appends where the old owner's late write may land (E3 fencing).
    ``migrate_aside_first``: a format-1 session's migration sets the format-1 manifests aside before HEAD
    format 2 is durable, so a crash in between leaves HEAD format 1 naming a manifest that is gone (E3).
    (``recover_head``, for format 2, is called as ``recover_head(store, problems)`` and returns HEAD and
    problem lines, like ``_logadoption.recover_lost_head``.)
    ``accept_partial_line``: a last line without its newline that still decodes is loaded as a message
    instead of being recovered as a torn tail (E2; the next append then merges into it).
    ``skip_lease_check``: the commit point no longer re-checks that the lease still names the caller's token
    and epoch (format 2: before a record is written and after its fdatasync), so a writer whose lease
    another owner broke can still write and acknowledge (E3 fencing).

    Session hooks (the crash campaigns' seeded bugs; ``Session.open(..., faults=...)``):
    ``steal_pid_lock``: before the file-backed commit point, a ``session.pid`` that no longer names this
    owner is written again with its own token instead of fencing it (E3 file-backed fencing).
    ``drop_consumed``: delivered (consumed) mail is left out of every later sidecar at once instead of
    staying in the ledger until the receiving transcript commits its receipt (E7 at-least-once).
    ``ack_blocked_checkpoint``: ``request_checkpoint(ack=...)`` while a pending publication holds automatic
    checkpoints back acknowledges ``None`` at once (the early-acknowledgement defect, planted back).
    ``abandon_in_memory``: abandon rolls back in memory only: the session log (format 2: no roll-over past
    the abandoned record) or the file-backed sidecar and transcripts keep what the abandoned publication
    wrote (the abandon-kept-its-writes defect, planted back).
    ``ack_coalesced_running``: ``request_checkpoint(ack=...)`` while a checkpoint of that conversation is
    accepted and running coalesces into it: the request is acknowledged with the running checkpoint's
    result, although that checkpoint froze before the request's edit (E7: a request with an ``ack``
    coalesces only into a queued checkpoint, which freezes later).
    ``unsynced_rezero``: the open's re-zeroing of a torn log tail is written without its fdatasyncs, so the
    session goes on before the zeros are durable: a second crash can keep the next record over the torn
    one's place and lose the zeros behind it (E2/E3: the drop of a torn tail is itself made durable first).
    ``clear_changed_keys``: an installed publication marks every key it captured clean, also one changed
    again since the capture (a key set again while its save was in flight), so the next save leaves the
    newer value out (format 2's dirty journal: clean only at the captured version).
    ``forget_ledger_on_retire``: a retirement slice that deleted logs takes the consumed mail of every
    ledger as settled and drops it from the mailboxes the next publication writes, before the receiving
    transcript committed its receipt (E7 at-least-once mail, across retirement).
    ``fused_unsynced``: the synchronous writer's fused path (``run_fused``) adopts without the log's
    fdatasync, so it acknowledges a record that is not durable (E4: one fdatasync, the commit point)."""

    acknowledge_after: str | None = None
    reorder_steps: Callable[[Generator[Step, None, None]], Generator[Step, None, None]] | None = None
    torn_lease_owned: bool = False
    recover_head: Callable[[Any, Any, list[str]], tuple[Any, Any, dict[str, bytes], list[str]]] | None = None
    retire_newer: bool = False
    cut_at_first_bad_line: bool = False
    head_before_base_sync: bool = False
    fsyncgate_ignored: bool = False
    damage_as_torn: bool = False
    skip_record_checksum: bool = False
    skip_log_identity: bool = False
    accept_partial_line: bool = False
    skip_lease_check: bool = False
    steal_pid_lock: bool = False
    drop_consumed: bool = False
    ack_blocked_checkpoint: bool = False
    readopt_as_new: bool = False
    abandon_in_memory: bool = False
    forget_unreplayed_refs: bool = False
    ack_failed_group: bool = False
    fence_after_head: bool = False
    takeover_in_place: bool = False
    migrate_aside_first: bool = False
    ack_coalesced_running: bool = False
    unsynced_rezero: bool = False
    clear_changed_keys: bool = False
    forget_ledger_on_retire: bool = False
    fused_unsynced: bool = False


class _HookedFileSystem(DelegatingFileSystem):
    """The I/O layer ``inner`` with fault hooks attached; every primitive passes through unchanged."""

    def __init__(self, inner: FileSystem, hooks: FaultHooks) -> None:
        super().__init__(inner)
        self._hooks = hooks

    @property
    def fault_hooks(self) -> FaultHooks:
        return self._hooks


def with_fault_hooks(fs: FileSystem, hooks: FaultHooks) -> FileSystem:
    """``fs`` carrying ``hooks`` for the open path of every session and log opened on it (a checker's
    broken engine; never production)."""
    return _HookedFileSystem(fs, hooks)


def artifact_for(conversation: str) -> str:
    return f"{CONVERSATION_PREFIX}{conversation}.jsonl"


@dataclass
class PendingPublication:
    """A batch that failed before adoption: its frozen bytes are kept (in memory: format 2 stages nothing
    on disk), its acknowledgements are unresolved, and it blocks teardown until retried or abandoned (E4)."""

    batch: Batch
    phase: str
    error: str
    acks: list[Ack]
    recovered: bool = False  # found on disk after a crash rather than failed in this process (format 1)
    # Its record reached the log without being installed (the log is poisoned): an abandon rolls over so the
    # abandoned generation is never adopted by a reopen.
    written: bool = False


@dataclass
class AckSet:
    """Acknowledgements that run exactly once (E4 finish)."""

    callbacks: list[Ack] = field(default_factory=list)

    def resolve(self, error: BaseException | None) -> None:
        callbacks, self.callbacks = self.callbacks, []
        for callback in callbacks:
            callback(error)
