"""Proving a log adopted without HEAD (format 2; format 1's proofs are ``_adoption``).

HEAD moves only at roll-over, after the new log's BASE (and the records it carries) are durable, so when
HEAD is missing or does not verify, which log it named must be proven from the logs themselves:

1. *Named as predecessor.* A roll-over writes the new log's header with the digest of the last record of
   the log HEAD named then; a valid log whose header names log ``n``'s last record proves ``n`` adopted.
2. *Appended to.* Records after a BASE and the records it carried (its ``carried`` count) were appended on
   the steady path, which only ever appends to the log HEAD names: the log was adopted.

Open recovers the newest valid log proven adopted, and rewrites HEAD, only when nothing newer can have
been adopted: a newer valid log that is not proven (a roll-over whose HEAD switch may have landed, with
acknowledged carried records) or a newer damaged one makes open refuse with one line naming it and
``perfsuite session repair PATH``. A session whose only log holds nothing but the empty BASE of its
creation (a crash before the first HEAD) committed nothing: it is created again.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfsuite.engine._confined import LOG_BYTES
from perfsuite.engine._layout import HEAD, SessionError
from perfsuite.engine._logformat import BASE, DAMAGED, LogDamage, LogHeader, Record, salt32, scan
from perfsuite.engine._logstore import LogStore
from perfsuite.engine._logvalues import HeadV2


@dataclass(frozen=True, slots=True)
class LogCandidate:
    """One log file of the session, read without trusting HEAD."""

    number: int
    header: LogHeader | None
    records: tuple[Record, ...]
    problem: str | None  # why it is not a valid log (None: valid)

    @property
    def valid(self) -> bool:
        return self.problem is None

    @property
    def last_digest(self) -> str | None:
        return self.records[-1].digest if self.records else None

    @property
    def appended(self) -> bool:
        """Records beyond its BASE and what the BASE carried: appended while HEAD named it."""
        if not self.records:
            return False
        carried = int(self.records[0].meta.get("carried", 0) or 0)
        return len(self.records) > 1 + carried

    @property
    def generation(self) -> int:
        return int(self.records[-1].meta.get("generation", 0)) if self.records else -1

    def head(self) -> HeadV2:
        assert self.header is not None and self.records
        base = self.records[0]
        return HeadV2(self.header.session, self.number, self.header.salt, self.header.capacity, base.seq,
                      int(base.meta.get("generation", 0)), self.header.epoch)


def survey(store: LogStore) -> list[LogCandidate]:
    """Every log of the session, oldest first, each checked on its own (header, size, records, BASE)."""
    out: list[LogCandidate] = []
    for number in store.log_numbers():
        path = store.log_path(number)
        try:
            data = store.fs.read_regular(path, LOG_BYTES)  # an own file: no link or FIFO, bounded
            header = LogHeader.decode(data)
        except (OSError, LogDamage) as exc:
            out.append(LogCandidate(number, None, (), f"{path}: unreadable or not a log ({exc})"))
            continue
        if header.number != number or len(data) != header.capacity:
            out.append(LogCandidate(number, header, (), f"{path}: misnamed or truncated"))
            continue
        found = scan(data, salt32(header.salt))
        problem = None
        if not found.records or found.records[0].kind != BASE:
            problem = f"{path}: does not start with a BASE record"
        elif found.tail.kind == DAMAGED:
            problem = f"{path}: {found.tail.reason}"
        out.append(LogCandidate(number, header, found.records, problem))
    return out


def recover_lost_head(store: LogStore, problems: list[str]) -> tuple[HeadV2 | None, list[str]]:
    """The HEAD open should use when HEAD is missing or corrupt (``problems`` says which), or None when the
    session never committed anything (then it is created afresh). Refuses (one-line SessionError) rather
    than fall back past a log that may have been adopted; see the module docstring."""
    candidates = survey(store)
    what = problems[0] if problems else f"{store.path(HEAD)}: missing"
    repair = f"`perfsuite session repair {store.root}`"
    valid = [c for c in candidates if c.valid]
    if not problems and all(len(c.records) == 1 and c.generation == 0 for c in valid):
        # HEAD missing, and no log holds more than an empty BASE of generation 0 (a torn or partial log
        # holds less): a crash before the first HEAD. Nothing was ever committed or acknowledged.
        return None, []
    named = {c.header.previous for c in valid if c.header is not None and c.header.previous}
    proven = [c for c in valid if c.appended or c.last_digest in named]
    if not proven:
        raise SessionError(f"{what}; and no log can be proven adopted; {repair} lists what is left")
    chosen = proven[-1]
    newer = [c for c in candidates if c.number > chosen.number]
    if newer:
        why = newer[-1].problem or f"{store.log_path(newer[-1].number)} is intact but not proven adopted"
        raise SessionError(f"{what}; a newer log may hold acknowledged generations ({why}); {repair} adopts "
                           f"{store.log_path(chosen.number)} (generation {chosen.generation}), losing what is after it")
    proof = ("records were appended to it" if chosen.appended else
             "a newer log names its last record as its predecessor")
    return chosen.head(), [f"{store.path(HEAD)}: {'lost' if problems else 'missing'}; recovered "
                           f"{store.log_path(chosen.number)} (generation {chosen.generation}), proven adopted: {proof}"]


def candidate_head(store: LogStore, number: int) -> HeadV2 | None:
    """The HEAD that names log ``number`` as it is on disk (None when it is not a valid log)."""
    for candidate in survey(store):
        if candidate.number == number and candidate.valid:
            return candidate.head()
    return None


def describe_candidates(store: LogStore) -> list[str]:
    """One line per log, for repair's report."""
    lines = []
    for c in survey(store):
        if c.valid:
            lines.append(f"{store.log_path(c.number)}: generations {c.records[0].meta.get('generation')}-{c.generation}"
                         f", {len(c.records)} records")
        else:
            lines.append(str(c.problem))
    return lines


__all__ = ["LogCandidate", "candidate_head", "describe_candidates", "recover_lost_head", "survey"]
