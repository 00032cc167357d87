"""Roll-over: a new log whose BASE holds the whole state (referencing older logs' bytes, copying only what
compaction picks) and the records it carries, its name and size durable before any record goes in, its records
durable before HEAD is switched to it; the lease re-checked before each step that another owner would see (E3)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from dataclasses import replace

from perfsuite.engine._fs import O_EXCL_CREATE, FileSystem
from perfsuite.engine._layout import FORMAT
from perfsuite.engine._logcompact import LogCompaction, _remap
from perfsuite.engine._logformat import BASE, LOG_HEADER_SIZE, LogHeader, encode_record, salt32
from perfsuite.engine._logstate import THIS, LogState, base_meta, empty_document
from perfsuite.engine._logvalues import HeadV2, OpenLog, Placement, RecordSpec, _placements

_ZERO_BLOCK = bytes(1 << 20)


class LogRollOver(LogCompaction):
    """The commit's slow path and a new session's first log: a new log, durable, then HEAD switched to it."""

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
                    # A seeded bug: the landed HEAD is taken for a failed one and
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


def _round_up(n: int, step: int) -> int:
    return (n + step - 1) // step * step


def _quietly_remove(fs: FileSystem, path: str) -> None:
    try:
        if fs.exists(path):
            fs.remove(path)
    except OSError:
        pass


__all__ = ["LogRollOver"]
