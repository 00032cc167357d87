"""Recovery: what open reads back and trusts. HEAD's log verified (its identity, the BASE-then-GEN chain, every
chunk against its digest), a torn unacknowledged tail reported and re-zeroed durably, newer logs checked for a
rolled-back HEAD, and an older generation replayed for restore; any damage is one line, never merged."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from perfsuite.engine._confined import NotRegular
from perfsuite.engine._damage import DAMAGE, describe, one_line
from perfsuite.engine._layout import SessionError
from perfsuite.engine._logfile import LogFiles
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
    salt32,
    scan,
)
from perfsuite.engine._logstate import LogState, apply_gen, assemble, state_from_base
from perfsuite.engine._logvalues import HeadV2, Loaded, OpenLog


class LogRecovery(LogFiles):
    """Reading back what was committed, and refusing what cannot be trusted."""

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

    def check_newer(self) -> list[int]:
        """Logs newer than HEAD's: a crash cuts a roll-over before HEAD moved (an orphan, harmless), but a
        newer log with records appended after its BASE was adopted (HEAD named it): HEAD was rolled back or
        damaged, and opening the older log would drop acknowledged generations, so open refuses. Returns the
        newer logs provably abandoned: their BASE rolled from a record of HEAD's log that later records follow
        (HEAD's log was appended to after they were made)."""
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


__all__ = ["LogRecovery"]
