"""Format 2 (issue 29): a portable session's store, one append-only log per era behind a HEAD that moves
only at roll-over.

Layout::

    LEASE               owner lease (O_EXCL), unchanged
    HEAD                {"format": "perfsuite-session/2", "log": "log/00000003.log", "salt", "capacity", ...}:
                        replaced (temp, fsync, rename, directory fsync) only at roll-over
    log/<n>.log         preallocated to its capacity with real zeros, its name and size durable (file
                        fsync, rename, fsync of log/) before any record goes in and before HEAD names it
    logs/               diagnostic logs (E8), unchanged

The steady path of every publication is one ``pwrite`` of its record(s) at the log's tail inside the
preallocated zeros and ONE ``fdatasync`` (the commit point): no rename, no directory fsync, no new name.
A roll-over (the record does not fit, the log's sync failed, an idle slice finds it 75 % full, restore,
abandon) writes a new log whose BASE record holds the whole state, referencing older logs' bytes rather
than copying them (except from a log being retired: compaction), then switches HEAD. Retirement deletes
whole logs nothing retained references. The owner holds an exclusive ``flock`` on the open log for the
session's lifetime.

fsyncgate (E1): once a write to a log or its sync failed, or a record the session did not install sits
in it, the log is *poisoned*: it is never synced or appended to again; the next publication rolls over
from memory (its BASE copies the acknowledged bytes out of the poisoned log).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from perfsuite.engine._confined import CONTROL_BYTES, LOG_BYTES, HardLinked, NotRegular, open_own
from perfsuite.engine._damage import DAMAGE, describe, one_line
from perfsuite.engine._fs import O_EXCL_CREATE, FileSystem
from perfsuite.engine._generations import GenerationStore, owner_alive
from perfsuite.engine._layout import (
    FORMAT,
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
from perfsuite.engine._logformat import (
    BASE,
    DAMAGED,
    GEN,
    HEADER_SIZE,
    LOG_HEADER_SIZE,
    REZERO_HEADER,
    TORN,
    LogDamage,
    LogHeader,
    Record,
    Tail,
    content_end,
    encode_record,
    salt32,
    scan,
)
from perfsuite.engine._logstate import (
    THIS,
    ArtifactState,
    Extent,
    LogState,
    Piece,
    apply_gen,
    assemble,
    base_meta,
    empty_document,
    state_from_base,
)

DEFAULT_CAPACITY = 16 * 1024 * 1024
_ZERO_BLOCK = bytes(1 << 20)
_LOG_RE = re.compile(r"(\d{8})\.log$")
_O_RDWR = os.O_RDWR


def log_name(number: int) -> str:
    return f"{LOG_DIR}/{number:08d}.log"


def log_number(name: str) -> int | None:
    match = _LOG_RE.fullmatch(os.path.basename(name))
    return int(match.group(1)) if match else None


@dataclass(frozen=True, slots=True)
class HeadV2:
    """HEAD in format 2: which log is current, who it belongs to, and a checksum of these fields."""

    session: str
    number: int
    salt: str
    capacity: int
    base_seq: int  # seq of the log's BASE record
    generation: int  # the generation its BASE holds
    epoch: int

    @property
    def log(self) -> str:
        return log_name(self.number)

    def _fields(self) -> dict[str, Any]:
        return {"format": FORMAT, "session": self.session, "log": self.log, "number": self.number,
                "salt": self.salt, "capacity": self.capacity, "base_seq": self.base_seq,
                "generation": self.generation, "epoch": self.epoch}

    def encode(self) -> bytes:
        fields = self._fields()
        check = hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
        return json.dumps({**fields, "check": check}, sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes, path: str) -> HeadV2:
        """A format-2 HEAD; FormatTooNew for a newer format, ValueError for any damage (its checksum)."""
        record = json.loads(data)
        if not isinstance(record, dict):
            raise ValueError("not a perfsuite HEAD")
        format_version(record.get("format"), path)
        try:
            head = cls(str(record["session"]), int(record["number"]), str(record["salt"]), int(record["capacity"]),
                       int(record["base_seq"]), int(record["generation"]), int(record["epoch"]))
        except (KeyError, TypeError, OverflowError) as exc:
            raise ValueError(f"not a head record ({type(exc).__name__})") from None
        fields = head._fields()
        check = hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
        if record.get("check") != check or record.get("log") != head.log:
            raise ValueError("its checksum does not match its fields")
        return head


@dataclass(frozen=True, slots=True)
class StorageStats:
    """A format-2 session's disk use (``Session.storage()``): logs on disk, bytes they allocate (their
    preallocated capacities), bytes in use (records), bytes the committed state references (live), the
    artifacts' total size, and this process's bytes appended and roll-overs. Space amplification is
    ``allocated / artifacts`` (what the disk holds per byte of session) or ``used / live``."""

    logs: int
    allocated: int
    used: int
    live: int
    artifacts: int
    appended: int
    rolled: int

    @property
    def amplification(self) -> float | None:
        return self.allocated / self.artifacts if self.artifacts else None


@dataclass(frozen=True, slots=True)
class GenerationRef:
    """The session's committed generation (``Session.head``): its number, the digest of the record that
    made it, the epoch it was written in and the log it is in."""

    seq: int
    digest: str | None
    epoch: int
    log: int


@dataclass
class OpenLog:
    """The log the session appends to: its identity, descriptor (flock-ed), tail and health."""

    header: LogHeader
    path: str
    fd: int | None
    tail: int
    poisoned: str | None = None  # why it may no longer be synced or appended to (fsyncgate)
    base_end: int = LOG_HEADER_SIZE  # where its BASE (and the records it carried) end: the room starts there

    @property
    def filled(self) -> float:
        """How much of the room after its BASE the appended records use (0..1): roll-overs are due at 0.75."""
        room = self.header.capacity - self.base_end
        return (self.tail - self.base_end) / room if room > 0 else 1.0

    @property
    def number(self) -> int:
        return self.header.number

    @property
    def salt(self) -> int:
        return salt32(self.header.salt)


@dataclass(frozen=True, slots=True)
class RecordSpec:
    """A record to place: its kind, epoch and generation, its meta (the parent is added when it is placed:
    a roll-over puts a BASE before it) and its payload."""

    kind: int
    epoch: int
    meta: Mapping[str, Any]
    payload: bytes = b""


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a record went: its log, offset, seq and digest, and the absolute offset of its payload."""

    log: int
    offset: int
    size: int
    seq: int
    digest: str
    payload: int


@dataclass
class Loaded:
    """What open found: the committed state, every artifact's verified bytes, the current log's tail
    (``torn``: a torn unacknowledged record to drop) and one-line problems."""

    head: HeadV2
    state: LogState
    contents: dict[str, bytes]
    torn: Tail | None
    problems: list[str] = field(default_factory=list)


class LogStore:
    """Reads and writes one format-2 portable session directory through the E1 layer."""

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
        if self.hooks is not None and self.hooks.skip_lease_check:  # a seeded bug (FaultHooks, issue 27)
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

    def load(self, head: HeadV2) -> Loaded:
        """Read and verify the state HEAD's log holds (nothing is written). One-line :class:`SessionError`
        for any damage (``perfsuite session repair`` says what it can adopt); a torn unacknowledged tail is
        reported in ``torn`` for the caller to drop once it owns the session."""
        path = self.log_path(head.number)
        repair = f"run `perfsuite session repair {self.root}`"
        if not self.fs.exists(path):
            raise SessionError(f"{path}: missing, although HEAD names it (a deleted log: generations after "
                               f"{head.generation} are gone); {repair}")
        if self.fs.isdir(path):
            raise SessionError(f"{path}: is a directory, not a log; {repair}")
        try:
            data = self.read_log(head.number)
        except FileNotFoundError:
            raise SessionError(f"{path}: is a dangling symbolic link, not a log; {repair}") from None
        except NotRegular as exc:  # a link, a FIFO, a device: never followed or read
            raise SessionError(f"{path}: is {exc.strerror}; {repair}") from None
        except OSError as exc:  # TooLarge included: larger than any log, refused before a byte is read
            raise SessionError(f"{path}: unreadable ({exc.strerror or describe(exc)}); {repair}") from None
        try:
            header = self.check_log(head.number, head.salt, head.session, data, what="HEAD's log")
        except SessionError as exc:
            raise SessionError(f"{exc}; {repair}") from None
        if header.capacity != head.capacity and not (self.hooks is not None and self.hooks.skip_log_identity):
            raise SessionError(f"{path}: its capacity disagrees with HEAD's; {repair}")
        found = self._scan(data, salt32(header.salt))
        self._chain = {r.digest: i for i, r in enumerate(found.records)}
        self._chain_length = len(found.records)
        try:
            state = self.replay(header, found.records, base_seq=head.base_seq, data=data)
        except SessionError as exc:
            raise SessionError(f"{exc}; {repair}") from None
        if found.tail.kind == DAMAGED:
            last = state.generation
            raise SessionError(one_line(f"{path}: {found.tail.reason}; refusing to guess past it (the valid prefix "
                                        f"ends at generation {last}); {repair}"))
        contents = self.verify(state)
        self.head, self.state = head, state
        base_end = found.records[0].end if found.records else LOG_HEADER_SIZE
        self.current = OpenLog(header, path, None, found.tail.offset, base_end=base_end)
        self.ranges[head.number] = (head.generation, state.generation)
        problems = []
        torn = found.tail if found.tail.kind == TORN else None
        if torn is not None:
            problems.append(f"{path}: torn unacknowledged publication discarded (bytes {torn.offset}-{torn.end}: "
                            f"{torn.reason})")
        return Loaded(head, state, contents, torn, problems)

    def replay(self, header: LogHeader, records: Sequence[Record], *, base_seq: int | None, data: bytes) -> LogState:
        """The state a log's records build: a BASE first, then GENs, each following the one before by seq,
        parent digest and a non-decreasing epoch. Anything else is damage, never merged."""
        path = self.log_path(header.number)
        if not records or records[0].kind != BASE:
            raise SessionError(f"{path}: does not start with its BASE record")
        base = records[0]
        if base_seq is not None and base.seq != base_seq and not (self.hooks and self.hooks.skip_log_identity):
            raise SessionError(f"{path}: its BASE record is seq {base.seq}, HEAD names {base_seq}")
        if base.meta.get("parent") != header.previous:
            raise SessionError(f"{path}: its BASE does not follow the log its header names")
        try:
            state = state_from_base(base.meta, base.seq, base.digest, base.epoch, header.number, base.payload_start)
            refs = {int(n): str(s) for n, s in dict(base.meta.get("logs", {})).items()}
        except DAMAGE as exc:
            raise SessionError(f"{path}: its BASE record does not decode ({describe(exc)})") from None
        self.salts.update(refs)
        self.salts[header.number] = header.salt
        self.refs[header.number] = frozenset(refs)
        for older, salt in refs.items():
            if older == header.number:
                continue
            try:
                older_data = self.read_log(older)
            except FileNotFoundError:
                raise SessionError(f"{self.log_path(older)}: missing, although generation {state.generation}'s bytes "
                                   "rest on it") from None
            except OSError as exc:
                raise SessionError(f"{self.log_path(older)}: unreadable ({describe(exc)})") from None
            self.check_log(older, salt, header.session, older_data, what="a log the state rests on")
        for previous, record in itertools.pairwise(records):
            if record.kind != GEN:
                raise SessionError(f"{path}: a {record.name} record at byte {record.offset} where a GEN belongs")
            if record.seq != previous.seq + 1 or record.meta.get("parent") != previous.digest:
                raise SessionError(f"{path}: the record at byte {record.offset} does not follow the one before it "
                                   "(a broken seq or parent chain: two writers, or damage)")
            if record.epoch < previous.epoch:
                raise SessionError(f"{path}: a record of epoch {record.epoch} after one of epoch {previous.epoch} "
                                   "(a stale writer)")
            try:
                apply_gen(state, record.meta, record.seq, record.digest, record.epoch, header.number,
                          record.payload_start, record.payload_length)
            except DAMAGE as exc:
                raise SessionError(f"{path}: generation at byte {record.offset} does not apply "
                                   f"({describe(exc)})") from None
        return state

    def verify(self, state: LogState) -> dict[str, bytes]:
        """Every artifact's bytes, each chunk checked against its digest."""
        contents: dict[str, bytes] = {}
        for name, artifact in state.artifacts.items():
            try:
                contents[name] = assemble(artifact, self.read_log, name=name)
            except (ValueError, OSError) as exc:
                raise SessionError(f"{self.root}: {name} does not verify ({describe(exc)}); run `perfsuite session "
                                   f"repair {self.root}`") from None
        return contents

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

    def lock_only(self, head: HeadV2) -> int | None:
        """Before anything is read: the flock on HEAD's log (when it exists), so a live owner is refused
        before open touches anything. Returns the descriptor (kept as the open log's); ``locked`` says
        whether the layer held the lock (False where there is no flock: Windows, some network file systems)."""
        path = self.log_path(head.number)
        if not self.fs.exists(path) or self.fs.isdir(path):
            return None
        try:
            return self._open_locked(path)
        except (FileNotFoundError, NotRegular):
            return None  # load names the damage

    def close(self) -> None:
        if self.current is not None and self.current.fd is not None:
            fd, self.current.fd = self.current.fd, None
            self.fs.close(fd)

    def rezero(self, torn: Tail) -> None:
        """Zero a torn tail so the next record starts on zeros, from its end back to its start, each range
        durable before the next: the body, then the header in the ranges of ``REZERO_HEADER``, so every
        crash state on the way is still a torn record (a header's leading bytes intact up to its last nonzero
        one) or zeros. One write of zeros over the header could tear (its first bytes zeros, the rest the old
        header: damage, which open refuses), and a second crash would leave an acknowledged session unopenable."""
        log = self.current
        assert log is not None and log.fd is not None
        synced = not (self.hooks is not None and self.hooks.unsynced_rezero)  # a seeded bug: zeros left unsynced
        size = torn.end - torn.offset
        ranges = [(HEADER_SIZE, size)] + [(a, min(b, size)) for a, b in REZERO_HEADER]
        try:
            for start, end in ranges:
                if start < end:
                    self.fs.pwrite_all(log.fd, bytes(end - start), torn.offset + start)
                    if synced:
                        self.fs.fdatasync_file(log.fd, log.path)
        except OSError as exc:
            log.poisoned = f"re-zeroing its torn tail failed ({describe(exc)})"
            raise
        self._cache.pop(log.number, None)

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

    def place(self, specs: Sequence[RecordSpec], *, compact: bool = False) -> tuple[list[Placement], bool]:
        """The commit of ``specs``: at the tail (one pwrite, no sync) when they fit a healthy log, else a
        roll-over that makes them durable in a new log (forced: no compaction unless asked). Returns the
        placements and whether it rolled over."""
        log = self.current
        if log is not None and self.must_roll(0) is None:
            chunks, info = self.encode(specs, seq=self.state.seq + 1, parent=self.state.digest, salt=log.salt)
            if log.tail + sum(map(len, chunks)) <= log.header.capacity:
                return self._write(chunks, info), False
        placements, base = self.roll_over(specs, epoch=specs[0].epoch, compact=compact)
        self.state = base  # the BASE is the committed state (bytes it copied out of a poisoned log remapped)
        return placements, True

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

    # -- roll-over ---------------------------------------------------------------------------------------------
    def used(self, number: int) -> int:
        """Bytes in use in a log (its records), for compaction's live ratio."""
        if self.current is not None and number == self.current.number:
            return self.current.tail
        try:
            return content_end(self.read_log(number))
        except OSError:
            return 0

    def roll_over(self, carried: Sequence[RecordSpec], *, state: LogState | None = None, epoch: int,
                  session: str | None = None, compact: bool | str = True, inline: bytes = b""
                  ) -> tuple[list[Placement], LogState]:
        """A new log: BASE(state) then the ``carried`` records, durable, then HEAD switched to it. Returns the
        carried records' placements and the state the BASE describes (its extents remapped where bytes were
        copied in: a poisoned log's, a log under half live when ``compact``, every log when ``compact`` is
        ``"all"``). The caller installs that state as the committed one."""
        state = state or self.state
        self._fenced()  # a fenced owner never creates a log or replaces its successor's HEAD
        session = session or (self.head.session if self.head else self.entropy())
        numbers = [n for n in self.log_numbers() if n is not None]
        number = max([*numbers, self.current.number if self.current else 0]) + 1
        poisoned = set(self.poisoned)
        if self.current is not None and self.current.poisoned:
            poisoned.add(self.current.number)
        live = state.live_bytes()
        copy = {n for n, nbytes in live.items() if n in self.salts and (
            n in poisoned or compact == "all" or (compact and nbytes * 2 < self.used(n)))}
        base_state, payload = self._copied(state, copy, start=len(inline))
        payload = inline + payload  # ``inline``: bytes a state built elsewhere (migration) put in log THIS
        refs = {n: self.salts[n] for n in base_state.logs() if n != THIS}
        salt = self.entropy()
        meta = {**base_meta(base_state, refs, len(carried)), "parent": state.digest}
        base_bytes, base_digest, base_payload = encode_record(BASE, state.seq + 1, epoch, salt32(salt), meta, payload)
        chunks, info = self.encode(carried, seq=state.seq + 2, parent=base_digest, salt=salt32(salt))
        body = base_bytes + b"".join(chunks)
        # Room for the BASE and what it carries plus a whole capacity of new records: max(C, needed + C),
        # not the design's max(C, 2 x needed), which doubles a large session's disk use at a compaction or a
        # migration (its BASE inlines every live byte) for no gain: later BASEs reference, never copy.
        capacity = _round_up(LOG_HEADER_SIZE + len(body) + self.capacity, 4096)
        header = LogHeader(FORMAT, number, salt, session, epoch, capacity, state.digest)
        path = self.log_path(number)
        fd = self._create_log(header, path)
        head_first = self.hooks is not None and self.hooks.head_before_base_sync  # a seeded bug
        old_head = self.head
        try:
            head = HeadV2(session, number, salt, capacity, state.seq + 1, base_state.generation, epoch)
            if head_first:
                self.write_head(head)
            self.fs.pwrite_all(fd, body, LOG_HEADER_SIZE)
            self.fs.fdatasync_file(fd, path)
            old = self.current
            try:
                if not head_first:
                    if not self._fence_late():
                        self._fenced()  # E3: a fenced owner never replaces its successor's HEAD (the commit point)
                    self.write_head(head)
                    if self._fence_late():
                        self._fenced()  # the seeded bug: the re-check after HEAD already names this log
            except BaseException:
                if self.head is head and self.hooks is not None and self.hooks.readopt_as_new:
                    # A seeded bug (issue 27 defect 2's shape): the landed HEAD is taken for a failed one and
                    # the session goes on in the log it left, which HEAD may no longer name.
                    self.head, self.head_durable = (old_head, True)
                elif self.head is head:  # the rename landed: HEAD names the new log, which holds the carried
                    self._switch(header, path, fd, LOG_HEADER_SIZE + len(body), old,  # records: poisoned
                                 LOG_HEADER_SIZE + len(base_bytes))
                    fd = -1
                    assert self.current is not None
                    self.current.poisoned = "HEAD's replace onto it was not made durable"
                raise
            self._switch(header, path, fd, LOG_HEADER_SIZE + len(body), old, LOG_HEADER_SIZE + len(base_bytes))
            fd = -1
        finally:
            if fd >= 0:
                self.fs.close(fd)
        base_state = replace(base_state, artifacts={n: _remap(a, number, base_payload + LOG_HEADER_SIZE)
                                                    for n, a in base_state.artifacts.items()},
                             seq=state.seq + 1, digest=base_digest, epoch=epoch)
        base_state.prompt_reset = state.prompt_reset
        self.salts[number] = salt
        self.refs[number] = frozenset(refs)
        self.ranges[number] = (base_state.generation, base_state.generation)
        self.appended += len(body)
        self.rolled += 1
        return _placements(number, LOG_HEADER_SIZE + len(base_bytes), chunks, info), base_state

    def _copied(self, state: LogState, logs: set[int], *, start: int = 0) -> tuple[LogState, bytes]:
        """``state`` with every extent in ``logs`` copied into a BASE payload (extents in log THIS), whose
        copies start at ``start``."""
        if not logs:
            return state, b""
        parts: list[bytes] = []
        size = start
        artifacts: dict[str, ArtifactState] = {}
        for name, artifact in state.artifacts.items():
            if not any(e.log in logs for p in artifact.pieces for e in p.extents):
                artifacts[name] = artifact
                continue
            pieces = []
            for piece in artifact.pieces:
                extents = []
                for extent in piece.extents:
                    if extent.log in logs:
                        data = self.read_log(extent.log)[extent.offset : extent.offset + extent.length]
                        if len(data) != extent.length:
                            raise SessionError(f"{self.log_path(extent.log)}: shorter than the state it holds")
                        parts.append(data)
                        extent = Extent(THIS, size, extent.length)
                        size += extent.length
                    extents.append(extent)
                pieces.append(Piece(piece.digest, piece.size, tuple(extents)))
            artifacts[name] = ArtifactState(artifact.size, tuple(pieces), artifact.source)
        return replace(state, artifacts=artifacts), b"".join(parts)

    def _create_log(self, header: LogHeader, path: str) -> int:
        """A new log: a temp file of header and real zeros to its capacity, fsynced, renamed to its name, the
        directory fsynced; then opened for writing and flock-ed. Its name and size are durable first."""
        directory = self.log_dir()
        self.fs.makedirs(directory)
        temp = os.path.join(directory, f".{header.number:08d}.log.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        fd = self.fs.open(temp, O_EXCL_CREATE)
        try:
            self.fs.write_all(fd, header.encode())
            left = header.capacity - LOG_HEADER_SIZE
            while left > 0:
                step = min(left, len(_ZERO_BLOCK))
                self.fs.write_all(fd, _ZERO_BLOCK[:step])
                left -= step
            self.fs.fsync_file(fd, temp)
        except BaseException:
            self.fs.close(fd)
            _quietly_remove(self.fs, temp)
            raise
        self.fs.close(fd)
        try:
            if not self._fence_late():
                self._fenced()  # E3: the lease again before the name lands (another owner may use the number)
            self.fs.replace(temp, path)
        except BaseException:
            _quietly_remove(self.fs, temp)
            raise
        self.fs.sync_dir(directory)
        return self._open_locked(path)

    def _switch(self, header: LogHeader, path: str, fd: int, tail: int, old: OpenLog | None, base_end: int) -> None:
        if old is not None and old.poisoned:
            self.poisoned.add(old.number)
        self.current = OpenLog(header, path, fd, tail, base_end=base_end)
        if old is not None and old.fd is not None:
            self.fs.close(old.fd)
            old.fd = None
        self._cache.clear()

    def create(self, epoch: int, session: str | None = None) -> LogState:
        """A new session's first log (BASE of the empty state, generation 0) and its HEAD."""
        self.state = LogState(0, 0, None, epoch, {}, empty_document())
        _placed, state = self.roll_over((), epoch=epoch, session=session or self.entropy(), compact=False)
        self.state = state
        return state

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

    def check_newer(self) -> list[int]:
        """Logs newer than HEAD's: a crash cuts a roll-over before HEAD moved (an orphan, harmless), but a
        newer log with records appended after its BASE was adopted (HEAD named it): HEAD was rolled back or
        damaged, and opening the older log would drop acknowledged generations, so open refuses (issue 14
        case 2). Returns the newer logs provably abandoned: their BASE rolled from a record of HEAD's log
        that later records follow (HEAD's log was appended to after they were made)."""
        assert self.head is not None
        abandoned = []
        for number in self.log_numbers():
            if number <= self.head.number:
                continue
            path = self.log_path(number)
            try:
                data = self.read_log(number)
                header = LogHeader.decode(data)
                found = scan(data, salt32(header.salt))
            except (OSError, LogDamage):
                continue  # not a log this session can read: an unfinished creation, left alone
            records = found.records
            if self.hooks is not None and self.hooks.retire_newer:  # a seeded bug: every newer log is an orphan
                abandoned.append(number)
                continue
            if not records or records[0].kind != BASE or header.session != self.head.session:
                continue
            carried = int(records[0].meta.get("carried", 0) or 0)
            if len(records) > 1 + carried:
                raise SessionError(f"{path}: newer than the log HEAD names ({self.log_path(self.head.number)}) and "
                                   "records were appended to it, so it was adopted: HEAD was rolled back or damaged; "
                                   f"run `perfsuite session repair {self.root}`")
            position = self._chain.get(str(records[0].meta.get("parent")))
            if position is not None and position < self._chain_length - 1:
                abandoned.append(number)
        return abandoned

    def remove_orphans(self, problems: list[str], abandoned: Iterable[int] = ()) -> None:
        """Temp files of unfinished log creations and the newer logs :meth:`check_newer` proved abandoned."""
        assert self.head is not None
        directory = self.log_dir()
        doomed = {log_name(n).split("/")[-1] for n in abandoned}
        for name in self.fs.listdir(directory):
            if ".tmp-" in name or name in doomed:
                path = os.path.join(directory, name)
                try:
                    self.fs.remove(path)
                except OSError as exc:
                    problems.append(f"{path}: orphan of an unfinished roll-over left in place ({describe(exc)})")

    def retirable(self, keep: int, pinned: Iterable[int] = ()) -> list[int]:
        """Logs older than the current one that nothing retained needs: not referenced by the committed
        state, by the BASE of a log holding one of the last ``keep`` generations, or by a pinned one."""
        if self.current is None:
            return []
        floor = self.state.generation - max(1, keep) + 1
        pins = set(pinned)
        kept = {self.current.number}
        for number in self.log_numbers():
            if number >= self.current.number:
                continue
            first, last = self._range(number)
            if last >= floor or any(first <= p <= last for p in pins):
                kept.add(number)
        needed = set(kept) | self.state.logs()
        for number in kept:
            needed |= self._refs(number)
        return [n for n in self.log_numbers() if n < self.current.number and n not in needed]

    def _refs(self, number: int) -> frozenset[int]:
        """The logs ``number``'s BASE references. An open store has replayed only HEAD's log, so an older
        retained log's references are read from its BASE on first need; one that cannot be read keeps every
        older log (retirement never guesses a log is unreferenced)."""
        if number in self.refs:
            return self.refs[number]
        if self.hooks is not None and self.hooks.forget_unreplayed_refs:  # a seeded bug: an unread log names none
            return frozenset()
        try:
            data = self.read_log(number)
            header = LogHeader.decode(data)
            found = scan(data, salt32(header.salt))
            if not found.records or found.records[0].kind != BASE:
                raise LogDamage("no BASE record")
            refs = frozenset(int(n) for n in dict(found.records[0].meta.get("logs", {})) if int(n) != number)
        except (OSError, LogDamage, ValueError, TypeError, AttributeError):
            refs = frozenset(n for n in self.log_numbers() if n < number)
        self.refs[number] = refs
        return refs

    def _range(self, number: int) -> tuple[int, int]:
        if number in self.ranges:
            return self.ranges[number]
        successor = self.ranges.get(number + 1)
        try:
            data = self.read_log(number)
            header = LogHeader.decode(data)
            found = scan(data, salt32(header.salt))
            gens = [int(r.meta.get("generation", -1)) for r in found.records]
            result = (min(gens), max(gens)) if gens else (-1, -1)
        except (OSError, LogDamage, ValueError):
            result = (-1, successor[0] if successor else -1)
        self.ranges[number] = result
        return result

    def retire(self, keep: int, pinned: Iterable[int] = (), max_deletions: int = 64,
               problems: list[str] | None = None) -> tuple[int, bool]:
        """Delete whole logs nothing retained needs, at most ``max_deletions``. No directory fsync: a log a
        crash resurrects is unreachable garbage, deleted again by a later slice."""
        doomed = self.retirable(keep, pinned)
        removed = 0
        for number in doomed[:max_deletions]:
            path = self.log_path(number)
            try:
                self.fs.remove(path)
                removed += 1
            except FileNotFoundError:
                continue
            except OSError as exc:
                if problems is not None:
                    problems.append(f"{path}: left in place by retirement ({describe(exc)})")
            self._cache.pop(number, None)
            self.ranges.pop(number, None)
        return removed, len(doomed) > max_deletions

    # -- reading generations --------------------------------------------------------------------------------------
    def read_artifact(self, name: str, state: LogState | None = None) -> bytes:
        artifact = (state or self.state).artifacts[name]
        return assemble(artifact, self.read_log, name=name)

    def state_at(self, generation: int) -> LogState:
        """The state of an older generation still on disk (for restore), replayed from its log's BASE."""
        for number in sorted(self.log_numbers(), reverse=True):
            try:
                data = self.read_log(number)
                header = LogHeader.decode(data)
                found = scan(data, salt32(header.salt))
            except (OSError, LogDamage):
                continue
            if not found.records or found.records[0].kind != BASE:
                continue
            first = int(found.records[0].meta.get("generation", -1))
            if first > generation:
                continue
            records = [r for r in found.records if int(r.meta.get("generation", -1)) <= generation]
            if int(records[-1].meta.get("generation", -1)) != generation:
                break
            saved = (dict(self.salts), dict(self.refs))
            try:
                return self.replay(header, records, base_seq=None, data=data)
            finally:
                # what the replay learned of older logs (their salts and BASE references) is kept: restoring
                # this state rolls it over into a new BASE that names them; what was known already wins
                self.salts = {**self.salts, **saved[0]}
                self.refs = {**self.refs, **saved[1]}
        raise SessionError(f"{self.root}: no generation {generation} on disk (retired, or never written)")

    def space(self) -> StorageStats:
        """Space on disk (see :class:`StorageStats`); reads the older logs to measure their use."""
        numbers = self.log_numbers()
        allocated = sum(self.fs.size(self.log_path(n)) for n in numbers)
        used = sum(self.used(n) for n in numbers)
        live = sum(self.state.live_bytes().values())
        return StorageStats(len(numbers), allocated, used, live, sum(a.size for a in self.state.artifacts.values()),
                            self.appended, self.rolled)


class OwnerConflictFenced(SessionError):
    """The lease no longer names this owner: fenced before acknowledging (E3)."""


def _placements(log: int, offset: int, chunks: Sequence[bytes], info: Sequence[tuple[int, str, int]]
                ) -> list[Placement]:
    out = []
    for data, (seq, digest, payload) in zip(chunks, info):
        out.append(Placement(log, offset, len(data), seq, digest, offset + payload))
        offset += len(data)
    return out


def _remap(artifact: ArtifactState, number: int, payload: int) -> ArtifactState:
    """Extents a BASE copied into its payload (log THIS), named by the new log's number and offset."""
    if not any(e.log == THIS for p in artifact.pieces for e in p.extents):
        return artifact
    pieces = tuple(Piece(p.digest, p.size, tuple(Extent(number, payload + e.offset, e.length) if e.log == THIS else e
                                                 for e in p.extents)) for p in artifact.pieces)
    return ArtifactState(artifact.size, pieces, artifact.source)


def _round_up(n: int, step: int) -> int:
    return (n + step - 1) // step * step


def _quietly_remove(fs: FileSystem, path: str) -> None:
    try:
        if fs.exists(path):
            fs.remove(path)
    except OSError:
        pass


__all__ = [
    "DEFAULT_CAPACITY",
    "GenerationRef",
    "HeadV2",
    "Loaded",
    "LogStore",
    "OwnerConflictFenced",
    "Placement",
    "RecordSpec",
    "StorageStats",
    "log_name",
    "log_number",
]

