"""M4, M6: a fixture directory must not change while a run copies it sample by sample.

A team's own session directory (``--session``, a recipe's ``session``) may belong to a program that is still
writing it; samples copied from a moving directory measure different inputs and compare nothing. The guard
takes a cheap fingerprint when the run starts (every entry's relative path, type, size, modification time
and link target: one ``lstat`` per file, no reading) and checks it before every sample's copy, outside the
measured window; a change stops the run with one line saying what changed (the samples so far are kept).
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from perfsuite.errors import PerfsuiteError

__all__ = ["FixtureChanged", "FixtureGuard", "tree_fingerprint"]


class FixtureChanged(PerfsuiteError):
    """The fixture directory changed between two samples of one run."""


@dataclass(frozen=True, slots=True)
class _Tree:
    files: int
    bytes: int
    digest: str
    entries: dict[str, tuple[str, int, int, str]]


def tree_fingerprint(path: Path) -> _Tree:
    """What the guard compares: (kind, size, mtime_ns, link target) per relative path, and their digest."""
    entries: dict[str, tuple[str, int, int, str]] = {}
    root = os.fspath(path)
    for directory, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names) + [d for d in dirs if os.path.islink(os.path.join(directory, d))]:
            full = os.path.join(directory, name)
            st = os.lstat(full)
            rel = os.path.relpath(full, root)
            if stat.S_ISLNK(st.st_mode):
                entries[rel] = ("link", 0, 0, os.readlink(full))
            else:
                entries[rel] = ("file", st.st_size, st.st_mtime_ns, "")
    h = hashlib.sha256()
    for rel in sorted(entries):
        kind, size, mtime, target = entries[rel]
        h.update(f"{rel}\0{kind}\0{size}\0{mtime}\0{target}\n".encode("utf-8", "surrogateescape"))
    files = sum(1 for e in entries.values() if e[0] == "file")
    return _Tree(files, sum(e[1] for e in entries.values()), h.hexdigest(), entries)


def _difference(before: _Tree, after: _Tree) -> str:
    added = sorted(set(after.entries) - set(before.entries))
    removed = sorted(set(before.entries) - set(after.entries))
    changed = sorted(k for k in set(before.entries) & set(after.entries) if before.entries[k] != after.entries[k])
    parts = []
    for word, names in (("added", added), ("removed", removed), ("modified", changed)):
        if names:
            more = f" and {len(names) - 1} more" if len(names) > 1 else ""
            parts.append(f"{word} {names[0]}{more}")
    sizes = f"{before.files} files, {before.bytes:,} bytes -> {after.files} files, {after.bytes:,} bytes"
    return f"{'; '.join(parts) or 'changed'} ({sizes})"


class FixtureGuard:
    """Fingerprint a fixture directory once, then :meth:`check` it before every copy."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._start = tree_fingerprint(self.path)

    def check(self, when: str) -> None:
        """Raise :class:`FixtureChanged` (one line) when the directory is no longer what the run started with."""
        try:
            now = tree_fingerprint(self.path)
        except OSError as exc:
            raise FixtureChanged(f"fixture {self.path} became unreadable {when}: {exc.strerror or exc}") from None
        if now.digest != self._start.digest:
            raise FixtureChanged(
                f"fixture {self.path} changed {when}: {_difference(self._start, now)}; refusing to measure on a "
                "moving directory (stop what writes to it, or measure a copy of it)")
