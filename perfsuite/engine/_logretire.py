"""Retirement: whole logs deleted once nothing retained needs them (the committed state, the BASEs of the logs
holding the last ``keep`` generations or a pinned one), never guessing a log unreferenced, and the leftovers of
unfinished roll-overs removed."""

from __future__ import annotations

import os
from collections.abc import Iterable

from perfsuite.engine._damage import describe
from perfsuite.engine._logfile import LogFiles
from perfsuite.engine._logformat import BASE, LogDamage, LogHeader, salt32, scan
from perfsuite.engine._logvalues import log_name


class LogRetirement(LogFiles):
    """Which logs may go, and deleting them."""

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


__all__ = ["LogRetirement"]
