"""Format 2: a portable session's store, one append-only log per era behind a HEAD that moves
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

The store is one class built from its parts, each a module: ``_logvalues`` (names and values), ``_logfile``
(the files and the steady commit path), ``_logcompact`` and ``_logroll`` (roll-over), ``_logretire``
(retirement) and ``_logrecovery`` (what open reads back).
"""

from __future__ import annotations

from perfsuite.engine._logrecovery import LogRecovery
from perfsuite.engine._logretire import LogRetirement
from perfsuite.engine._logroll import LogRollOver
from perfsuite.engine._logvalues import StorageStats


class LogStore(LogRecovery, LogRetirement, LogRollOver):
    """Reads and writes one format-2 portable session directory through the E1 layer."""

    def space(self) -> StorageStats:
        """Space on disk (see :class:`StorageStats`); reads the older logs to measure their use."""
        numbers = self.log_numbers()
        allocated = sum(self.fs.size(self.log_path(n)) for n in numbers)
        used = sum(self.used(n) for n in numbers)
        live = sum(self.state.live_bytes().values())
        return StorageStats(len(numbers), allocated, used, live, sum(a.size for a in self.state.artifacts.values()),
                            self.appended, self.rolled)


__all__ = ["LogStore"]
