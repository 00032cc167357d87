"""The log store's files (E1): the lease, HEAD's durable replace, logs read (bounded, never through a link)
and checked against the session and HEAD, the open log's flock, and the steady commit path: one pwrite at the
tail and one fdatasync, a failure of either poisoning the log (fsyncgate)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from perfsuite.engine._confined import CONTROL_BYTES, LOG_BYTES, HardLinked, open_own
from perfsuite.engine._damage import describe
from perfsuite.engine._fs import FileSystem
from perfsuite.engine._generations import GenerationStore, owner_alive
from perfsuite.engine._layout import (
    HEAD,
    LEASE,
    LOG_DIR,
    Lease,
    OwnerConflict,
    OwnerProbe,
    SessionError,
    format_version,
    read_control,
)
from perfsuite.engine._logformat import LogDamage, LogHeader, encode_record, scan
from perfsuite.engine._logstate import LogState, empty_document
from perfsuite.engine._logvalues import (
    DEFAULT_CAPACITY,
    HeadV2,
    OpenLog,
    OwnerConflictFenced,
    Placement,
    RecordSpec,
    _placements,
    log_name,
    log_number,
)

_O_RDWR = os.O_RDWR


class LogFiles:
    """The state every part of the log store shares, and the file operations the parts build on: the lease,
    HEAD, reading and checking logs, the open log's flock, and appending at its tail."""

    def __init__(self, root: str, fs: FileSystem, *, capacity: int = DEFAULT_CAPACITY) -> None:
        self.root = os.path.abspath(root)
        self.fs = fs
        self.capacity = capacity
        self.v1 = GenerationStore(self.root, fs)  # the lease and format 1 (migration, format checks)
        self.head: HeadV2 | None = None
        self.head_durable = True  # False after HEAD's replace landed but its directory sync failed
        self.current: OpenLog | None = None
        self.state = LogState(0, 0, None, 0, {}, empty_document())
        self.salts: dict[int, str] = {}  # log number -> salt, of every log the state may reference
        self.ranges: dict[int, tuple[int, int]] = {}  # log number -> (first, last) generation in it
        self.refs: dict[int, frozenset[int]] = {}  # log number -> logs its BASE references
        self.appended = 0  # bytes of records appended by this process (the suite's "bytes stored")
        self.locked = False  # the open log's flock is held (False where the layer has no flock)
        # Re-validates the lease before a record is written or a log created (E3 fencing): set by the session
        self.fence: Callable[[], None] | None = None
        # 32 hex digits per call: session ids and log salts (random; a fixture generator makes them seeded)
        self.entropy: Callable[[], str] = lambda: uuid.uuid4().hex
        self.rolled = 0  # roll-overs by this process
        # Logs left poisoned by a roll-over (their bytes are copied out at the next roll-over, never
        # referenced: a log whose sync failed is rested on by nothing acknowledged later, fsyncgate)
        self.poisoned: set[int] = set()
        self._cache: dict[int, bytes] = {}
        self._chain: dict[str, int] = {}  # digest -> index of each record of HEAD's log, as open found it
        self._chain_length = 0

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    def log_path(self, number: int) -> str:
        return self.path(log_name(number))

    # -- the lease and formats (shared with format 1) -------------------------------------------------------
    def acquire_lease(self, epoch_floor: int, alive: OwnerProbe = owner_alive) -> tuple[Lease, str | None]:
        return self.v1.acquire_lease(epoch_floor, alive)

    def read_lease(self) -> Lease | None:
        return self.v1.read_lease()

    def release_lease(self, lease: Lease) -> None:
        self.v1.release_lease(lease)

    def bump_epoch(self, lease: Lease) -> Lease:
        return self.v1.bump_epoch(lease)

    def check_format(self) -> int:
        return self.v1.check_format()

    def _fenced(self) -> None:
        if self.fence is not None and not (self.hooks is not None and self.hooks.skip_lease_check):
            self.fence()

    def _fence_late(self) -> bool:
        """A seeded bug (``FaultHooks.fence_after_head``): a roll-over re-checks the lease only after HEAD's
        replace, not before its new log is named and before HEAD's replace."""
        return self.hooks is not None and self.hooks.fence_after_head

    def check_lease(self, lease: Lease, epoch: int) -> None:
        """Re-validate the lease before acknowledging (E3 fencing): a read, no sync."""
        if self.hooks is not None and self.hooks.skip_lease_check:  # a seeded bug (FaultHooks)
            return
        current = self.read_lease()
        if current is None or current.token != lease.token or current.epoch != epoch:
            raise OwnerConflictFenced(f"{self.path(LEASE)}: epoch {epoch} is no longer the owner's epoch; fenced: "
                                      "nothing more is acknowledged")

    # -- HEAD -----------------------------------------------------------------------------------------------
    def read_head(self) -> HeadV2 | None:
        """HEAD, or None when there is none; ValueError when its bytes are not a format-2 HEAD; NotAFile."""
        path = self.path(HEAD)
        data = read_control(self.fs, path)
        if data is None:
            return None
        return HeadV2.decode(data, path)

    def write_head(self, head: HeadV2) -> None:
        """Replace HEAD durably (temp, fsync, rename, directory fsync). If the rename landed but a later step
        failed, HEAD names ``head`` now (it is adopted in memory too, but not durable until rewritten)."""
        data = head.encode()
        try:
            self.fs.atomic_replace(self.path(HEAD), data, follow=False)  # own: a link is replaced, not followed
        except BaseException:
            try:
                landed = self.fs.read_regular(self.path(HEAD), CONTROL_BYTES) == data
            except OSError:
                landed = False
            if landed:
                self.head, self.head_durable = head, False
            raise
        self.head, self.head_durable = head, True

    # -- reading logs -----------------------------------------------------------------------------------------
    def read_log(self, number: int) -> bytes:
        data = self._cache.get(number)
        if data is None:
            # an own file: never through a link or a FIFO, its size bounded before a byte is read
            data = self.fs.read_regular(self.log_path(number), LOG_BYTES)
            self._cache[number] = data
        return data

    def reader(self) -> Any:
        """A reader of logs' bytes for :func:`assemble` (the current log from memory, others from disk)."""
        return self.read_log

    def forget(self) -> None:
        """Drop cached log bytes (after open: the tail of the current log changes as it is appended to)."""
        self._cache.clear()

    @property
    def hooks(self) -> Any:
        """Fault hooks a checker attached to the I/O layer (``with_fault_hooks``; never in production)."""
        return self.fs.fault_hooks

    def _scan(self, data: bytes, salt: int) -> Any:
        hooks = self.hooks
        if hooks is None:
            return scan(data, salt)
        return scan(data, salt, verify=not hooks.skip_record_checksum, damage_as_torn=hooks.damage_as_torn)

    def check_log(self, number: int, salt: str, session: str, data: bytes, *, what: str) -> LogHeader:
        """A log's header names this session, number and salt, and its size is its capacity: else a
        one-line :class:`SessionError` naming it (damage: truncated, grown, another session's, a stale one)."""
        path = self.log_path(number)
        try:
            header = LogHeader.decode(data)
        except LogDamage as exc:
            raise SessionError(f"{path}: {what} is damaged: {exc}") from None
        if format_version(header.format, path) != 2:
            raise SessionError(f"{path}: {what} is not a format-2 log")
        if self.hooks is not None and self.hooks.skip_log_identity:  # a seeded bug: any log will do
            return header
        if header.session != session:
            raise SessionError(f"{path}: {what} belongs to another session")
        if header.number != number or header.salt != salt:
            raise SessionError(f"{path}: {what} is not the log this session wrote there (a stale or misplaced log: "
                               f"number {header.number}, salt {header.salt[:8]})")
        if len(data) != header.capacity:
            raise SessionError(f"{path}: {what} is {len(data)} bytes, its capacity is {header.capacity} (truncated "
                               "or grown: its size is durable since creation and never changes)")
        return header

    # -- ownership of the open log --------------------------------------------------------------------------
    def open_current(self) -> None:
        """Open HEAD's log for writing and take its flock: a live owner holding it is an OwnerConflict."""
        assert self.current is not None
        self.current.fd = self._open_locked(self.current.path)

    def _open_locked(self, path: str) -> int:
        try:
            fd = open_own(self.fs, path, _O_RDWR)  # written in place: no link, FIFO or second hard link
        except HardLinked as exc:
            raise SessionError(f"{path}: {exc.strerror}; run `perfsuite session repair {self.root}` to copy it "
                               "(nothing was changed)") from None
        locked = self.fs.lock(fd)
        self.locked = locked is True
        if locked is False:
            self.fs.close(fd)
            try:
                lease = self.read_lease()
            except SessionError:
                lease = None
            owner = (f"pid {lease.pid} on {lease.host} (epoch {lease.epoch}, {self.path(LEASE)})" if lease and lease.pid
                     else f"another process ({self.path(LEASE)} names none)")
            raise OwnerConflict(f"{path}: session is owned by {owner}, which holds its log open; refusing a second "
                                "owner")
        return fd

    def close(self) -> None:
        if self.current is not None and self.current.fd is not None:
            fd, self.current.fd = self.current.fd, None
            self.fs.close(fd)

    # -- the steady commit path -------------------------------------------------------------------------------
    def must_roll(self, nbytes: int) -> str | None:
        """Why ``nbytes`` of records cannot go at the tail (None: they can)."""
        log = self.current
        if log is None:
            return "no log is open"
        if log.poisoned:
            return f"{log.path} is poisoned ({log.poisoned})"
        if not self.head_durable:
            return "HEAD's replace is not durable"
        if log.tail + nbytes > log.header.capacity:
            return f"{log.path} is full"
        return None

    def encode(self, specs: Sequence[RecordSpec], *, seq: int, parent: str | None, salt: int
               ) -> tuple[list[bytes], list[tuple[int, str, int]]]:
        """Each spec's bytes, chained from ``seq``/``parent``: (bytes, [(seq, digest, payload offset)])."""
        out, info = [], []
        for spec in specs:
            data, digest, payload = encode_record(spec.kind, seq, spec.epoch, salt, {**spec.meta, "parent": parent},
                                                  spec.payload)
            out.append(data)
            info.append((seq, digest, payload))
            seq, parent = seq + 1, digest
        return out, info

    def append(self, specs: Sequence[RecordSpec]) -> list[Placement]:
        """ONE pwrite of the records at the tail (no sync). A failure poisons the log."""
        log = self.current
        assert log is not None
        chunks, info = self.encode(specs, seq=self.state.seq + 1, parent=self.state.digest, salt=log.salt)
        return self._write(chunks, info)

    def _write(self, chunks: Sequence[bytes], info: Sequence[tuple[int, str, int]]) -> list[Placement]:
        log = self.current
        assert log is not None and log.fd is not None
        self._fenced()  # a fenced owner writes nothing (where there is no flock, another owner may hold the log)
        data = b"".join(chunks)
        offset = log.tail
        try:
            self.fs.pwrite_all(log.fd, data, offset)
        except BaseException as exc:
            if not (self.hooks is not None and self.hooks.fsyncgate_ignored):
                log.poisoned = f"a write failed ({describe(exc) if isinstance(exc, OSError) else type(exc).__name__})"
            raise
        log.tail = offset + len(data)
        self.appended += len(data)
        self._cache.pop(log.number, None)
        return _placements(log.number, offset, chunks, info)

    def sync(self) -> None:
        """The commit point: ONE fdatasync of the log. A failure poisons it (never retried, fsyncgate)."""
        log = self.current
        assert log is not None and log.fd is not None
        try:
            self.fs.fdatasync_file(log.fd, log.path)
        except BaseException as exc:
            if not (self.hooks is not None and self.hooks.fsyncgate_ignored):
                why = describe(exc) if isinstance(exc, OSError) else type(exc).__name__
                log.poisoned = f"its fdatasync failed ({why})"
            raise

    def poison(self, why: str) -> None:
        """A record the session will not install sits in the log (a failed publication after its write)."""
        if self.hooks is not None and self.hooks.fsyncgate_ignored:  # a seeded bug: append after it anyway
            return
        if self.current is not None and not self.current.poisoned:
            self.current.poisoned = why

    # -- the logs on disk ---------------------------------------------------------------------------------------
    def log_dir(self) -> str:
        """``log/``, refused in one line when it is anything but a directory of its own (a symbolic link would
        lead compaction, retirement and orphan removal outside the session)."""
        directory = self.path(LOG_DIR)
        facts = self.fs.lstat(directory)
        if facts is not None and facts.kind != "directory":
            raise SessionError(f"{directory}: {facts.what}, not a directory: a session's own files are never "
                               "reached through a link (nothing was changed)")
        return directory

    def log_numbers(self) -> list[int]:
        directory = self.log_dir()
        if not self.fs.isdir(directory):
            return []
        return sorted(n for n in (log_number(name) for name in self.fs.listdir(directory)) if n is not None)


__all__ = ["LogFiles"]
