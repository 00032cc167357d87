"""Seeded bugs: deliberately broken engines the checker must catch (SPEC section 7; SPEC 8:
every class of planted durability bug is caught).

A bug wraps the file system the engine is given (``wrap``), overriding E1 *policy* only or carrying the
engine's documented open-path fault hooks (``with_fault_hooks``: the open path as it was before its
corruption probes, ``bugs._open_path``), or opens the workload's sessions with fault hooks (``faults``:
``FaultHooks``, the engine's published seam).
Nothing patches an engine class and the engine's source is never edited. The primitives still go through
the recorder, so the trace shows exactly what the broken engine did. A bug is caught when the campaign
reports at least one violation with it and none without it. What ``wrap`` does also applies to recovery
(a broken engine recovers brokenly too); ``faults`` apply to the workload run only.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass

from perfsuite.crash.bugs._open_path import HEAD_LOST_FALLBACK, HEAD_LOST_PREVIOUS, LEASE_PID_ZERO, MID_TRANSCRIPT_CUT
from perfsuite.crash.model._model import CrashCheckError
from perfsuite.engine import DelegatingFileSystem, FileSystem, FsyncFailed
from perfsuite.engine.testing import FaultHooks, Step, with_fault_hooks

TEMP_MARK = ".tmp-"  # E1 atomic replace names its temp file ".<name>.tmp-<pid>-<serial>"


class SkipDirFsync(DelegatingFileSystem):
    """Directory fsync silently skipped: names (new transcripts, renamed rewrites) never become durable."""

    def sync_dir(self, path: str) -> bool:
        return True


class SkipHeadDirFsync(DelegatingFileSystem):
    """The directory fsync after the HEAD replace is skipped (E3 head adoption is not durable): the new
    HEAD may vanish after a crash although the publication was acknowledged."""

    def atomic_replace(self, path: str, data: bytes, *, sync_dir: bool = True, follow: bool = True) -> str:
        return super().atomic_replace(path, data, sync_dir=sync_dir and os.path.basename(path) != "HEAD",
                                      follow=follow)


class FsyncRetryAck(DelegatingFileSystem):
    """A failed fsync (or fdatasync) is retried on the same descriptor and, when the retry succeeds,
    acknowledged (the fsyncgate mistake E1 forbids)."""

    def fsync_file(self, fd: int, path: str = "?") -> None:
        try:
            super().fsync_file(fd, path)
        except FsyncFailed:
            super().fsync_file(fd, path)

    def fdatasync_file(self, fd: int, path: str = "?") -> None:
        try:
            super().fdatasync_file(fd, path)
        except FsyncFailed:
            super().fdatasync_file(fd, path)


class LogNamedBeforeDirFsync(DelegatingFileSystem):
    """Format 2 (the session log): a new session log is renamed to its name and HEAD switched to it without
    fsyncing ``log/``: a crash can keep HEAD's new name and lose the log's (a deleted log, to open)."""

    def sync_dir(self, path: str) -> bool:
        if os.path.basename(path.rstrip(os.sep)) == "log":
            return True
        return super().sync_dir(path)


class NoTempFsync(DelegatingFileSystem):
    """Atomic replace without fsyncing the temp file before the rename: the new name may be durable
    while its contents are not."""

    def write_new(self, path: str, data: bytes, *, exclusive: bool = False, sync: bool = True) -> None:
        super().write_new(path, data, exclusive=exclusive, sync=sync and TEMP_MARK not in os.path.basename(path))


def _sidecar_before_transcript(steps: Generator[Step, None, None]) -> Generator[Step, None, None]:
    """File-backed sessions replace the sidecar (their commit point) *before* the barrier of the
    transcripts it describes: a crash in between leaves a sidecar whose removals and checkpoint marker
    outrun the transcript text (E3, E7). A step order for ``FaultHooks.reorder_steps``."""
    held = None
    for step in steps:
        if step.phase == "commit":
            held = step  # the barrier waits until the sidecar is replaced
            continue
        yield step
        if step.phase == "adopt" and held is not None:
            yield held
            held = None


class SkipDirFsyncAfterRejection(DelegatingFileSystem):
    """A directory fsync the file system rejects (E1): once one directory's fsync was rejected (EINVAL),
    the layer decides directory fsync is unsupported *everywhere* and skips every later one, on directories
    that do support it too (a global flag where E1 asks for a per-directory warning)."""

    def __init__(self, inner: FileSystem) -> None:
        super().__init__(inner)
        self.rejected = False

    def sync_dir(self, path: str) -> bool:
        if self.rejected:
            return False
        done = super().sync_dir(path)
        self.rejected = not done
        return done


class RecoveryFileUnsynced(DelegatingFileSystem):
    """E2, what recovery sets aside: the bytes (a torn tail, a quarantined line) are written under
    ``recovery/`` without fsync, and ``recovery/`` is not synced, before the transcript is rewritten."""

    def write_new(self, path: str, data: bytes, *, exclusive: bool = False, sync: bool = True) -> None:
        aside = f"{os.sep}recovery{os.sep}" in path
        super().write_new(path, data, exclusive=exclusive, sync=sync and not aside)

    def sync_dir(self, path: str) -> bool:
        return True if os.path.basename(path.rstrip(os.sep)) == "recovery" else super().sync_dir(path)


#: acknowledgement callbacks run as soon as the generation is committed, *before* its commit point: in
#: format 2 (the session log) right after the pwrite of its record, before the fdatasync; in both drivers
ACK_BEFORE_FDATASYNC = FaultHooks(acknowledge_after="commit")
ACK_BEFORE_ADOPTION = ACK_BEFORE_FDATASYNC  # format 1's name: its commit point was HEAD's adoption
SIDECAR_BEFORE_TRANSCRIPT = FaultHooks(reorder_steps=_sidecar_before_transcript)
#: format 2's commit path (one pwrite and one fdatasync per publication, E4), as the engine's documented
#: hooks on the I/O layer
HEAD_BEFORE_BASE_SYNC = FaultHooks(head_before_base_sync=True)
APPEND_AFTER_FAILED_FDATASYNC = FaultHooks(fsyncgate_ignored=True)
MID_LOG_DAMAGE_AS_TORN = FaultHooks(damage_as_torn=True)
TORN_RECORD_ACCEPTED = FaultHooks(skip_record_checksum=True)
STALE_SALT_LOG_ACCEPTED = FaultHooks(skip_log_identity=True)
#: after a reopen the store has replayed HEAD's log only: retirement takes every other retained log's BASE to
#: reference nothing and deletes a log an older retained generation rests on (E3, the fixed defect planted back)
RETAINED_REFS_FORGOTTEN = FaultHooks(forget_unreplayed_refs=True)
#: a group commit's members are acknowledged durable without reading the result of the round's shared
#: fdatasync (E1 fsyncgate, E4: one acknowledgement, after adoption)
GROUP_FAILURE_ACKED = FaultHooks(ack_failed_group=True)


class SaverFaulted(DelegatingFileSystem):
    """Carries fault hooks of the LangGraph saver (``SaverFaults`` flag names) to the workloads that
    open one (``saver_faults``): the file operations pass through unchanged, like ``with_fault_hooks`` carries
    the engine's; the saver's own bug is in what it acknowledges, not in the I/O."""

    def __init__(self, inner: FileSystem, saver_faults: frozenset[str]) -> None:
        super().__init__(inner)
        self.saver_faults = saver_faults


def _saver_faulted(*flags: str) -> Callable[[FileSystem], FileSystem]:
    def wrap(fs: FileSystem) -> FileSystem:
        return SaverFaulted(fs, frozenset(flags))

    return wrap


def langgraph_missing() -> str | None:
    """Why the LangGraph saver workloads cannot run (the ``langgraph`` extra is not installed), or None. Looked
    up without importing anything (this module is imported by every crashcheck)."""
    try:
        found = all(importlib.util.find_spec(module) is not None for module in ("langgraph", "langchain_core"))
    except (ImportError, ValueError):  # a missing parent package, or a broken one
        found = False
    if found:
        return None
    from perfsuite._extras import install_hint

    return f"the LangGraph saver workloads need the langgraph extra: {install_hint('langgraph')}"


@dataclass(frozen=True, slots=True)
class SeededBug:
    """A named broken engine: ``wrap`` turns the recording file system into the one the engine gets (in the
    workload run and in recovery); ``faults`` (optional) are the engine's documented fault hooks the
    workload's sessions open with; ``shows_in`` names the standard workloads expected to expose it in the
    crash campaign, ``corrupt`` whether the corruption campaign (``crashcheck --corrupt``) must catch it, ``kill``
    whether the kill campaign must."""

    name: str
    description: str
    wrap: Callable[[FileSystem], FileSystem]
    shows_in: tuple[str, ...]
    corrupt: bool = False
    faults: FaultHooks | None = None
    kill: bool = False  # the kill campaign (``crashcheck --kill N --seeded-bug NAME``) must catch it too


def _same(fs: FileSystem) -> FileSystem:
    return fs


def _lease_pid_zero(fs: FileSystem) -> FileSystem:
    return with_fault_hooks(fs, LEASE_PID_ZERO)


def _head_lost_fallback(fs: FileSystem) -> FileSystem:
    return with_fault_hooks(fs, HEAD_LOST_FALLBACK)


def _mid_transcript_cut(fs: FileSystem) -> FileSystem:
    return with_fault_hooks(fs, MID_TRANSCRIPT_CUT)


def _hooked(hooks: FaultHooks) -> Callable[[FileSystem], FileSystem]:
    def wrap(fs: FileSystem) -> FileSystem:
        return with_fault_hooks(fs, hooks)

    return wrap


def _lease_unchecked(fs: FileSystem) -> FileSystem:
    return with_fault_hooks(fs, FaultHooks(skip_lease_check=True))


def _partial_line_accepted(fs: FileSystem) -> FileSystem:
    return with_fault_hooks(fs, FaultHooks(accept_partial_line=True))


def _head_lost_previous(fs: FileSystem) -> FileSystem:
    return with_fault_hooks(fs, HEAD_LOST_PREVIOUS)


SEEDED_BUGS: Mapping[str, SeededBug] = {
    bug.name: bug
    for bug in (
        SeededBug("skip-dir-fsync", "directory fsync silently skipped", SkipDirFsync,
                  ("transcript", "transcript-fsync-eio", "session-file")),
        SeededBug("head-dir-fsync-skipped", "directory fsync skipped after the HEAD replace", SkipHeadDirFsync,
                  ("session", "session-fault")),
        SeededBug("sidecar-before-transcript", "file-backed session replaces the sidecar before its transcripts' "
                  "barrier", _same, ("session-file",), faults=SIDECAR_BEFORE_TRANSCRIPT),
        # Bugs of format 2's commit path (the session log: one pwrite and one fdatasync per publication).
        SeededBug("ack-before-fdatasync", "acknowledgement callbacks run after the record's pwrite, before the "
                  "log's fdatasync (the commit point)", _same, ("session", "session-async"),
                  faults=ACK_BEFORE_FDATASYNC),  # session-async: the job's acks, in the turn that accepts its chain
        SeededBug("head-before-base-sync", "a roll-over replaces HEAD before the new log's BASE is fdatasynced",
                  _hooked(HEAD_BEFORE_BASE_SYNC), ("session", "session-fault")),
        SeededBug("append-after-failed-fdatasync", "after a failed fdatasync the log is appended to and synced "
                  "again, and the retry acknowledged", _hooked(APPEND_AFTER_FAILED_FDATASYNC), ("session-fault",)),
        SeededBug("mid-log-damage-as-torn", "an invalid record anywhere in a log is taken for a torn tail and "
                  "dropped with everything after it", _hooked(MID_LOG_DAMAGE_AS_TORN), (), corrupt=True),
        SeededBug("torn-record-accepted", "a record whose header verifies is accepted without its sha256 (a torn "
                  "record's zeros are read as data)", _hooked(TORN_RECORD_ACCEPTED), ("session",)),
        SeededBug("log-named-before-dir-fsync", "a new log is renamed to its name and HEAD switched to it before "
                  "log/ is fsynced", LogNamedBeforeDirFsync, ("session",)),
        SeededBug("stale-salt-log-accepted", "a log is accepted whatever session, number or salt its header names "
                  "(a stale or foreign log)", _hooked(STALE_SALT_LOG_ACCEPTED), (), corrupt=True),
        SeededBug("fsync-retry-ack", "a failed fsync retried, then acknowledged", FsyncRetryAck,
                  ("transcript-fsync-eio", "session-fault", "session-file-fault")),
        SeededBug("no-temp-fsync", "rewrite without fsyncing the temp file before replace", NoTempFsync,
                  ("transcript", "transcript-fsync-eio")),
        # Bugs of the open path (open loses nothing silently), carried by the I/O layer, so they also hold
        # during recovery.
        SeededBug("lease-pid-zero", "a torn LEASE is read as pid 0, which os.kill(0, 0) finds alive: the session "
                  "is unopenable for good", _lease_pid_zero, ("session-create",), corrupt=True),
        SeededBug("head-lost-fallback", "a lost HEAD falls back to the newest generation named as a parent (or to "
                  "an empty session), a damaged one to an older generation, and retire deletes newer ones",
                  _head_lost_fallback, ("session-fault",), corrupt=True),
        SeededBug("mid-transcript-cut", "a damaged line in the middle of a transcript is taken for a torn tail: "
                  "every later message is cut off", _mid_transcript_cut, (), corrupt=True),
        # The classes of bug the campaigns could not see (docs/crash.md), one seeded bug each, and the three
        # engine defects their workloads found, planted back.
        SeededBug("lease-unchecked", "head adoption does not check the lease: a writer whose lease a second "
                  "owner broke still adopts (class 1)", _lease_unchecked, ("session-second-owner",)),
        SeededBug("pid-lock-stolen-back", "a file-backed owner whose session.pid another writer replaced writes "
                  "its own back instead of being fenced (classes 1 and 3)", _same,
                  ("session-file-second-writer", "session-file-lost-lock"), faults=FaultHooks(steal_pid_lock=True)),
        SeededBug("dir-fsync-rejected-skips-all", "after one directory fsync is rejected (EINVAL), every later "
                  "directory fsync is skipped, on every directory (class 2)", SkipDirFsyncAfterRejection,
                  ("session-einval", "session-file-einval")),
        SeededBug("ledger-dropped", "delivered mail is dropped from every later sidecar instead of staying in the "
                  "ledger until the receiving transcript commits (class 4)", _same, ("session", "session-file"),
                  faults=FaultHooks(drop_consumed=True), kill=True),
        SeededBug("head-lost-previous", "a lost or torn HEAD is recovered to the generation before the newest "
                  "proven one (class 5)", _head_lost_previous, ("session-fault", "session-adopt-eio")),
        SeededBug("recovery-file-unsynced", "torn-tail and quarantine files are written without fsync and "
                  "recovery/ is not synced before the transcript is rewritten (class 6)", RecoveryFileUnsynced,
                  ("session-file-damaged", "transcript")),
        SeededBug("partial-line-accepted", "a last line without its newline that decodes is loaded as a message "
                  "(the next append merges into it)", _partial_line_accepted, ("transcript", "session-file"),
                  kill=True),
        SeededBug("pending-checkpoint-acked", "request_checkpoint(ack=...) acknowledges None at once while a "
                  "pending publication holds it back (defect 1 planted back)", _same,
                  ("session-fault", "session-file-fault"), faults=FaultHooks(ack_blocked_checkpoint=True)),
        SeededBug("adopt-failure-wedges", "a roll-over whose HEAD replace landed but failed is taken as not "
                  "landed: the session goes on in the log HEAD may no longer name (defect 2's shape planted back; "
                  "format 1: a failed adoption retried as a new generation)", _hooked(FaultHooks(readopt_as_new=True)),
                  ("session-adopt-eio",)),
        SeededBug("abandon-keeps-files", "abandon rolls back in memory only: HEAD or the file-backed sidecar and "
                  "transcripts keep the abandoned publication (defect 3 planted back)", _same,
                  ("session-file-abandon", "session-adopt-eio"), faults=FaultHooks(abandon_in_memory=True)),
        # Retention across reopens (E3: keep the last N): a fixed defect of retirement, planted back.
        SeededBug("retained-refs-forgotten", "after a reopen, retirement knows only HEAD's log's BASE references and "
                  "deletes a log an older retained generation rests on (its restore fails)",
                  _hooked(RETAINED_REFS_FORGOTTEN), ("session-retention",)),
        # Group commit under a failed shared fdatasync (E1 fsyncgate, E4: one acknowledgement, after adoption).
        SeededBug("group-failure-acked", "a group commit's members are acknowledged durable although the round's "
                  "shared fdatasync failed (then kept pending)", _same, ("session-group-fault",),
                  faults=GROUP_FAILURE_ACKED),
        # Torn-tail repair followed by a second crash (E2/E3: the drop of a torn tail is durable before the
        # session goes on), the sidecar's dirty journal across save rounds, the mail ledger across retirement.
        SeededBug("torn-tail-rezero-unsynced", "the repairing open re-zeroes a torn log tail without fdatasync: "
                  "the next record lands over it before the zeros are durable",
                  _hooked(FaultHooks(unsynced_rezero=True)), ("session-torn-tail",)),
        SeededBug("dirty-key-cleared-early", "an installed publication marks every key it captured clean, also one "
                  "set again while it was in flight: the next save leaves the newer value out", _same,
                  ("session-sidecar-rounds",), faults=FaultHooks(clear_changed_keys=True)),
        SeededBug("ledger-forgotten-on-retire", "a retirement slice that deleted logs drops consumed mail from the "
                  "ledger before the receiving transcript committed its receipt", _same, ("session-ledger-retire",),
                  faults=FaultHooks(forget_ledger_on_retire=True)),
        # A checkpoint request coalesced into a running checkpoint (E7: only into a queued one): caught by the
        # kill campaign's coalescing kills, where every such request is acknowledged with content it lacks.
        SeededBug("coalesced-into-running", "request_checkpoint(ack=...) while a checkpoint of that conversation runs "
                  "is acknowledged with the running checkpoint's result, which froze before the request's edit",
                  _same, (), faults=FaultHooks(ack_coalesced_running=True), kill=True),
        # Takeovers inside a publication (E3 fencing): the lease re-check of a roll-over after its commit point,
        # and a takeover on a layer without flock that neither reads the log again nor starts its own.
        SeededBug("lease-checked-after-head", "a roll-over re-checks the lease only after HEAD's replace: an owner "
                  "taken over mid roll-over names its log over its successor's or replaces its successor's HEAD",
                  _hooked(FaultHooks(fence_after_head=True)), ("session-lease-fence",)),
        SeededBug("takeover-in-place", "an open that broke the lease without the log's flock goes on in the old "
                  "owner's log as it first read it: no second read, no log of its own",
                  _hooked(FaultHooks(takeover_in_place=True)), ("session-noflock-takeover",)),
        # The format-1 migration under crash states (E3): a step reordered.
        SeededBug("format1-aside-first", "a format-1 session's migration sets the format-1 manifests aside before "
                  "HEAD format 2 is durable", _hooked(FaultHooks(migrate_aside_first=True)), ("session-migrate",)),
        # The LangGraph saver's own durability (E3): writes acknowledged before their publication is durable
        # (shown only where the langgraph extra is installed).
        SeededBug("saver-writes-before-fdatasync", "EngineSaver.put_writes returns once its record is staged, before "
                  "its publication's fdatasync (the next put publishes it)", _saver_faulted("writes_before_durable"),
                  () if langgraph_missing() else ("langgraph-saver",)),
        # The synchronous writer's fused path (one publication, nobody observing, no step-order hook): its
        # own commit point dropped, so only a bug of that path shows (E4: one fdatasync before the ack).
        SeededBug("fused-writer-unsynced", "the synchronous writer's fused path acknowledges a publication after "
                  "its record's pwrite without the log's fdatasync", _same, ("session",),
                  faults=FaultHooks(fused_unsynced=True)),
    )
}


def seeded_bug(name: str) -> SeededBug:
    """The seeded bug called ``name``; bad input raises :class:`CrashCheckError`."""
    try:
        return SEEDED_BUGS[name]
    except KeyError:
        raise CrashCheckError(f"unknown seeded bug {name!r} (choose from {', '.join(SEEDED_BUGS)})") from None
