"""Explicit repair of a format-2 session that open refuses (``perfsuite session repair PATH``).

Open never guesses past damage that may cost acknowledged state; repair does what a person asked for and
says what it found and what is lost. It adopts:

- HEAD's log up to its last valid record (its *valid prefix*: a flipped byte, damage mid-log, a torn
  record that is not a crash's) when the state that prefix describes verifies;
- otherwise (HEAD's log deleted, truncated, from another session, its prefix unusable) the newest other
  log's valid prefix that verifies (the predecessor), naming the generations that are lost;
- or, with ``generation``, the log holding that generation, cut at it.

The adopted state is rolled over into a new log (its bytes copied out of the damaged log, so nothing
references that one any more) and HEAD names it; the damaged log and any log newer than the adopted one
are moved under ``recovery/`` (nothing is deleted). Control entries that are not regular files are
moved aside first, as for format 1.
"""

from __future__ import annotations

import itertools
from typing import Any

from perfsuite.engine._confined import LOG_BYTES
from perfsuite.engine._damage import DAMAGE, describe
from perfsuite.engine._fs import FileSystem
from perfsuite.engine._layout import HEAD, LEASE, LOG_DIR, LOGS, OwnerProbe, SessionError
from perfsuite.engine._logadoption import survey
from perfsuite.engine._logformat import BASE, LogDamage, LogHeader, Record, salt32, scan
from perfsuite.engine._logstate import LogState, apply_gen, state_from_base
from perfsuite.engine._logstore import LogStore
from perfsuite.engine._logvalues import GenerationRef


def _prefix(store: LogStore, number: int, upto: int | None = None) -> tuple[LogState | None, LogHeader | None,
                                                                               int, int, str]:
    """The state of log ``number``'s longest valid chain prefix (cut at generation ``upto``): (state, header,
    records used, records valid, why it stops)."""
    path = store.log_path(number)
    try:
        data = store.fs.read_regular(path, LOG_BYTES)  # an own file: no link or FIFO, bounded
        header = LogHeader.decode(data)
    except (OSError, LogDamage) as exc:
        return None, None, 0, 0, f"{path}: {describe(exc) if isinstance(exc, OSError) else exc}"
    found = scan(data, salt32(header.salt))
    records: list[Record] = list(found.records)
    why = found.tail.reason if found.tail.kind == "damage" else ""
    if len(data) != header.capacity:
        why = why or f"{path}: {len(data)} bytes, its capacity is {header.capacity} (truncated or grown)"
    if not records or records[0].kind != BASE:
        return None, header, 0, len(records), why or f"{path}: no BASE record"
    base = records[0]
    try:
        state = state_from_base(base.meta, base.seq, base.digest, base.epoch, number, base.payload_start)
    except DAMAGE as exc:
        return None, header, 0, len(records), f"{path}: its BASE does not decode ({describe(exc)})"
    store.salts.update({int(n): str(s) for n, s in dict(base.meta.get("logs", {})).items()})
    store.salts[number] = header.salt
    used = 1
    for previous, record in itertools.pairwise(records):
        if upto is not None and state.generation >= upto:
            break
        chained = record.seq == previous.seq + 1 and record.meta.get("parent") == previous.digest
        if not chained or record.epoch < previous.epoch:
            why = why or f"{path}: the record at byte {record.offset} does not follow the one before it"
            break
        try:
            apply_gen(state, record.meta, record.seq, record.digest, record.epoch, number, record.payload_start,
                      record.payload_length)
        except DAMAGE as exc:
            why = why or f"{path}: the record at byte {record.offset} does not apply ({describe(exc)})"
            break
        used += 1
    return state, header, used, len(records), why


def repair_log_session(root: str, *, generation: str | int | None, fs: FileSystem, owner_alive: OwnerProbe | None,
                       aside: Any, lines: list[str]) -> GenerationRef | None:
    """See the module docstring; ``aside`` moves damaged entries under ``recovery/`` (``_repair.Aside``)."""
    from perfsuite.engine._generations import owner_alive as default_probe

    store = LogStore(root, fs)
    store.log_dir()  # a symbolic link is refused before anything is moved or written (never followed)
    if not fs.isdir(store.path(LOG_DIR)):
        raise SessionError(f"{store.path(LOG_DIR)}: missing or not a directory: every generation is gone, nothing to "
                           "repair from (restore the session from a backup)")
    if generation is not None:  # checked before anything is moved or written: an unknown one is refused
        generation = _resolve(store, generation)
    for name in (LEASE, HEAD):
        aside.not_regular(store.path(name))  # a link, a FIFO, a directory: moved aside, never followed
    logs = fs.lstat(store.path(LOGS))
    if logs is not None and logs.kind != "directory":
        aside.move(store.path(LOGS), "not a directory")
    fs.makedirs(store.path(LOGS))
    candidates = survey(store)
    floor = max([0] + [c.header.epoch for c in candidates if c.header is not None]
                + [int(r.epoch) for c in candidates for r in c.records[-1:]])
    lease, broke = store.acquire_lease(floor, owner_alive or default_probe)
    if broke:
        lines.append(broke)
    try:
        return _adopt(store, generation, lease, aside, lines)
    finally:
        store.close()
        store.release_lease(lease)


def _resolve(store: LogStore, generation: str | int) -> int:
    """The generation number ``generation`` names, one some log of this session holds (a BASE's or a
    record's). Anything else (a sign, 20 digits, a path, a format-1 manifest name, a generation no log
    holds) is a one-line :class:`SessionError` naming the value and what is allowed."""
    text = str(generation) if not isinstance(generation, bool) else ""
    held = sorted({int(r.meta.get("generation", -1)) for c in survey(store) for r in c.records} - {-1},
                  reverse=True)
    if text.isascii() and text.isdigit() and len(text) <= 18 and int(text) in held:
        return int(text)
    shown = ", ".join(str(n) for n in held[:6]) + (", ..." if len(held) > 6 else "")
    allowed = (f"a generation number of this session ({shown})" if held else "nothing: no log holds a generation")
    raise SessionError(f"{store.root}: generation {str(generation)!r}: expected {allowed} (format 2 names no "
                       "manifest: a generation is a number)")


def _adopt(store: LogStore, generation: str | int | None, lease: Any, aside: Any, lines: list[str]
           ) -> GenerationRef | None:
    try:
        head = store.read_head()
    except (ValueError, SessionError) as exc:
        head = None
        lines.append(f"{store.path(HEAD)}: corrupt ({describe(exc)})")
    if head is not None and generation is None:
        try:
            store.load(head)
        except SessionError as exc:
            lines.append(f"open refuses: {exc}")
        else:
            if _links(store, head.number) <= 1:
                lines.append(f"HEAD is intact (generation {store.state.generation}): nothing to repair")
                return None
    upto = int(generation) if generation is not None else None
    numbers = sorted(store.log_numbers(), reverse=True)
    if head is not None and head.number in numbers:
        numbers.remove(head.number)
        numbers.insert(0, head.number)
    for number in numbers:
        state, header, used, valid, why = _prefix(store, number, upto)
        if state is None or header is None:
            lines.append(f"{store.log_path(number)}: not adoptable ({why})")
            continue
        if upto is not None and state.generation != upto:
            continue
        try:
            store.verify(state)
        except SessionError as exc:
            lines.append(f"{store.log_path(number)}: its valid prefix does not verify ({exc})")
            continue
        return _write(store, number, header, state, used, valid, why, lease, aside, lines)
    raise SessionError(f"{store.root}: no intact generation to adopt"
                       + (f" named {generation}" if generation is not None else ""))


def _links(store: LogStore, number: int) -> int:
    facts = store.fs.lstat(store.log_path(number))
    return facts.links if facts is not None else 0


def _write(store: LogStore, number: int, header: LogHeader, state: LogState, used: int, valid: int, why: str,
           lease: Any, aside: Any, lines: list[str]) -> GenerationRef:
    """Roll the adopted state over into a new log (bytes of the damaged log copied in), point HEAD at it and
    move the damaged log and every newer one aside."""
    lost = [n for n in store.log_numbers() if n > number]
    if why:
        lines.append(f"{why}")
    if used < valid or why:
        lines.append(f"{store.log_path(number)}: generations after {state.generation} are lost (the records past "
                     f"its valid prefix: {max(0, valid - used)} valid but unreachable, the rest damaged)")
    for newer in lost:
        lines.append(f"{store.log_path(newer)}: newer than the adopted log and lost")
    epoch = max(lease.epoch, state.epoch)
    store.head = None
    store.current = None
    linked = _links(store, number)
    if linked > 1:  # written in place from now on: its bytes are copied into the new log, it is moved aside
        lines.append(f"{store.log_path(number)}: has {linked} hard links; its generations are copied into a new "
                     "log (the other names keep the old one)")
    damaged = {number} if (why or used < valid or linked > 1) else set()
    state.epoch = epoch
    copy = damaged | {n for n in state.logs() if n in lost}
    base_state, payload = store._copied(state, copy)
    aside.keep(store.path(HEAD), "replaced by repair")  # repair keeps what it replaces
    _placed, base = store.roll_over((), state=base_state, epoch=epoch, session=header.session, compact=False,
                                    inline=payload)
    assert store.current is not None  # roll_over names its new log current
    store.state = base
    lines.append(f"{store.path(HEAD)}: now names {store.log_path(store.current.number)}, holding generation "
                 f"{base.generation} (adopted from {store.log_path(number)})")
    for moved in sorted(damaged | set(lost)):
        if store.fs.exists(store.log_path(moved)) and moved != store.current.number:
            aside.move(store.log_path(moved), "a damaged log, or one newer than the adopted one")
    return GenerationRef(base.generation, base.digest, base.epoch, store.current.number)


__all__ = ["repair_log_session"]
