"""E3/E4: the session's settings and the small records its parts share (acknowledgements, pending
publications, artifact names). No behaviour beyond running acknowledgements once."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from perfsuite.engine._fs import DelegatingFileSystem, FileSystem
from perfsuite.engine._pipeline import Batch, Step

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


@dataclass(frozen=True, slots=True)
class Activity:
    """What a session has in hand right now (issue 19: read this, not the gate or the schedulers):
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
    """What a session's schedulers have done so far (issue 19: a read-only view, so a simulation counts
    debounced saves, checkpoint ticks and notification waits without reaching into the schedulers; E6/E7)."""

    debounce_fired: int  # debounced registry saves that ran
    debounce_absorbed: int  # observational changes folded into a save already due
    debounce_deferred: int  # saves postponed because a publication was in flight
    checkpoint_ticks: int  # periodic checkpoint timer ticks
    notification_waits: tuple[float, ...]  # offer-to-run delay of every notification that ran, seconds


@dataclass(frozen=True, slots=True)
class FaultHooks:
    """Documented fault hooks (issue 19): how a checker builds a deliberately broken engine without
    patching its classes. Never set in production; ``Session.open(..., faults=...)``.

    ``acknowledge_after``: run a publication's acknowledgements right after this phase (e.g. "commit":
    before HEAD adoption, the E4 violation the crash checker must catch) instead of after finish.
    ``reorder_steps``: rewrite the order of a publication's steps (e.g. a file-backed sidecar replaced
    before its transcripts' barrier, E3/E7).

    Open-path hooks (issue 14's seeded bugs) ride on the I/O layer, ``with_fault_hooks(fs, hooks)``, so
    recovery and every reopen on that layer consult them too:
    ``torn_lease_owned``: a torn LEASE (read as pid 0) counts as a live owner, so open refuses for good.
    ``recover_head``: replaces the proof of adoption when HEAD is lost or does not verify; called as
    ``recover_head(store, hint, problems)`` with the session's generation store and returns what open loads
    (head, manifest, contents, problems), like the engine's own recovery (E3).
    ``retire_newer``: retirement also deletes generations newer than HEAD's.
    ``cut_at_first_bad_line``: a transcript's first undecodable line ends it, wherever it is (the rest is
    set aside as a torn tail) and no committed size is checked (E2).
    ``accept_partial_line``: a last line without its newline that still decodes is loaded as a message
    instead of being recovered as a torn tail (E2; the next append then merges into it).
    ``skip_lease_check``: head adoption no longer checks that the lease still names the caller's token and
    epoch, so a writer whose lease another owner broke can still adopt (E3 fencing).

    Session hooks (issue 27's seeded bugs; ``Session.open(..., faults=...)``):
    ``steal_pid_lock``: before the file-backed commit point, a ``session.pid`` that no longer names this
    owner is written again with its own token instead of fencing it (E3 file-backed fencing).
    ``drop_consumed``: delivered (consumed) mail is left out of every later sidecar at once instead of
    staying in the ledger until the receiving transcript commits its receipt (E7 at-least-once).
    ``ack_blocked_checkpoint``: ``request_checkpoint(ack=...)`` while a pending publication holds automatic
    checkpoints back acknowledges ``None`` at once (issue 27 defect 1, planted back).
    ``readopt_as_new``: a committed generation whose adoption failed is retried as a new generation, and a
    failed attempt's cleanup may delete the manifest HEAD names on disk (issue 27 defect 2, planted back).
    ``abandon_in_memory``: abandon rolls back in memory only: HEAD or the file-backed sidecar and
    transcripts keep what the abandoned publication wrote (issue 27 defect 3, planted back)."""

    acknowledge_after: str | None = None
    reorder_steps: Callable[[Iterator[Step]], Iterator[Step]] | None = None
    torn_lease_owned: bool = False
    recover_head: Callable[[Any, Any, list[str]], tuple[Any, Any, dict[str, bytes], list[str]]] | None = None
    retire_newer: bool = False
    cut_at_first_bad_line: bool = False
    accept_partial_line: bool = False
    skip_lease_check: bool = False
    steal_pid_lock: bool = False
    drop_consumed: bool = False
    ack_blocked_checkpoint: bool = False
    readopt_as_new: bool = False
    abandon_in_memory: bool = False


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
    broken engine, issue 19; never production)."""
    return _HookedFileSystem(fs, hooks)


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
    # The failed publication itself when its generation was committed and only adoption failed: a retry
    # adopts that generation again instead of committing a new one (issue 27 defect 2).
    committed: Any = None


@dataclass
class AckSet:
    """Acknowledgements that run exactly once (E4 finish)."""

    callbacks: list[Ack] = field(default_factory=list)

    def resolve(self, error: BaseException | None) -> None:
        callbacks, self.callbacks = self.callbacks, []
        for callback in callbacks:
            callback(error)
