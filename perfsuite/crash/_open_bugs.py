"""Seeded bugs of the open path (issue 14): the engine as it was before the corruption probes, kept so the
crash and corruption campaigns prove they catch each one (``--seeded-bug NAME``).

Each is a context manager that puts the old code back for as long as it is held (the workload run and,
because these bugs live in recovery, the campaign's recoveries too: ``SeededBug.in_recovery``). The
engine's source is never edited.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from perfsuite.engine import OwnerConflict, SessionError


@contextlib.contextmanager
def _patched(target: Any, name: str, replacement: Any) -> Iterator[None]:
    original = getattr(target, name)
    setattr(target, name, replacement)
    try:
        yield
    finally:
        setattr(target, name, original)


# -- lease-pid-zero ---------------------------------------------------------------------------------------
def _old_pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # pid 0: our own process group, always "alive"
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _old_acquire_lease(self: Any, epoch_floor: int, alive: Any = None) -> tuple[Any, bool]:
    """Before the fix: a torn LEASE (read as pid 0) is probed like any owner, and ``os.kill(0, 0)`` says
    it is alive, so every later open is refused with "owned by pid 0"."""
    from perfsuite.engine import _generations as g

    broke = False
    for _attempt in range(5):
        existing = self.read_lease()
        if existing is not None:
            if existing.host != socket.gethostname() or (alive or g.owner_alive)(existing.pid):
                raise OwnerConflict(f"{self.path(g.LEASE)}: session is owned by pid {existing.pid} on "
                                    f"{existing.host} (epoch {existing.epoch}); refusing a second owner")
            aside = self.path(f".{g.LEASE}.stale-{uuid.uuid4().hex[:8]}")
            try:
                self.fs.replace(self.path(g.LEASE), aside)
            except FileNotFoundError:
                continue
            self.fs.remove(aside)
            epoch_floor = max(epoch_floor, existing.epoch)
            broke = True
        lease = g.Lease(epoch_floor + 1, uuid.uuid4().hex, os.getpid(), socket.gethostname())
        body = json.dumps({"epoch": lease.epoch, "token": lease.token, "pid": lease.pid, "host": lease.host})
        try:
            fd = self.fs.open(self.path(g.LEASE), g.O_EXCL_CREATE)
        except FileExistsError:
            continue
        try:
            self.fs.write_all(fd, body.encode())
            self.fs.fsync_file(fd, self.path(g.LEASE))
        finally:
            self.fs.close(fd)
        self.fs.sync_dir(self.root)
        return lease, broke
    raise OwnerConflict(f"{self.path(g.LEASE)}: could not acquire the lease (contended)")


@contextlib.contextmanager
def lease_pid_zero() -> Iterator[None]:
    from perfsuite.engine import _generations as g

    with _patched(g, "pid_alive", _old_pid_alive), _patched(g.GenerationStore, "acquire_lease", _old_acquire_lease):
        yield


# -- head-lost-fallback -----------------------------------------------------------------------------------
def _old_open_newest_intact(self: Any) -> tuple[Any, Any, dict[str, bytes], list[str]]:
    """Before the fix: with HEAD missing only manifests named as a parent are candidates (one generation:
    an empty session, silently; three: generation 2), and a generation HEAD names that does not verify
    is silently replaced by an older one."""
    from perfsuite.engine import _generations as g
    from perfsuite.engine._objects import digest_bytes

    problems: list[str] = []
    head = None
    head_present = self.fs.exists(self.path(g.HEAD))
    if head_present:
        try:
            head = self.read_head()
        except (ValueError, SessionError) as exc:
            problems.append(f"{self.path(g.HEAD)}: corrupt HEAD ({exc})")
    if head is not None:
        try:
            manifest, contents = self.load_verified(head.manifest, head.digest)
            return head, manifest, contents, problems
        except SessionError as exc:
            problems.append(str(exc))
    names = self.list_manifests()
    adopted = _named_as_parent(self, names)
    if head is not None and head.parent:
        adopted.add(head.parent)
    if head_present and head is None:
        unadopted = self.staged_publications()
        adopted.update(n for n in names if g.manifest_tag(n) not in unadopted)
    for name in names:
        if name not in adopted or (head is not None and name == head.manifest):
            continue
        try:
            manifest, contents = self.load_verified(name, None)
        except SessionError as exc:
            problems.append(str(exc))
            continue
        data = self.fs.read(self.path(name))
        return g.HeadRef(manifest.seq, name, digest_bytes(data), manifest.epoch, manifest.parent), manifest, \
            contents, problems
    if problems:
        raise SessionError(problems[0] + "; no intact adopted generation to fall back to")
    return None, None, {}, problems


def _named_as_parent(store: Any, names: Iterable[str]) -> set[str]:
    parents: set[str] = set()
    for name in names:
        try:
            parent = store.read_manifest(name).parent
        except Exception:
            continue
        if parent:
            parents.add(parent)
    return parents


def _old_retire(self: Any, *, keep: int, pinned: Iterable[str] = (), head: Any, max_deletions: int = 64,
                problems: Any = None) -> tuple[int, bool]:
    """Before the fix: every manifest off HEAD's chain is deleted, newer generations included."""
    retained = set(pinned) | set(self.adopted_chain(head, keep))
    if head is None:
        retained.update(self.list_manifests()[:keep])
    removed = 0
    doomed = [m for m in self.list_manifests() if m not in retained]
    for name in doomed[:max_deletions]:
        self.fs.remove(self.path(name))
        removed += 1
    if len(doomed) > max_deletions:
        return removed, True
    referenced: set[str] = set()
    for name in retained:
        try:
            referenced |= self.read_manifest(name).digests()
        except Exception:
            continue
    garbage = sorted(self.scan_objects() - referenced - self._staging_references())
    victims = garbage[: max(0, max_deletions - removed)]
    for digest in victims:
        self.fs.remove(self.object_path(digest))
        self.known_objects.discard(digest)
    return removed + len(victims), len(garbage) > len(victims)


@contextlib.contextmanager
def head_lost_fallback() -> Iterator[None]:
    from perfsuite.engine import _generations as g

    with _patched(g.GenerationStore, "open_newest_intact", _old_open_newest_intact), \
            _patched(g.GenerationStore, "retire", _old_retire):
        yield


# -- mid-transcript-cut -----------------------------------------------------------------------------------
def _old_load_file(self: Any, entry: Any, decode: Any, committed: int = 0) -> None:
    """Before the fix: the first line that does not decode ends the log, wherever it is; everything after
    it, fsynced messages included, goes to ``recovery/`` (and no committed size is checked)."""
    if not self.fs.exists(entry.path):
        return
    entry.exists = True
    data = self.fs.read(entry.path)
    offset = 0
    records: list[Any] = []
    while offset < len(data):
        end = data.find(b"\n", offset)
        if end < 0:
            break
        try:
            records.append(decode(json.loads(data[offset:end])))
        except (ValueError, KeyError, TypeError):
            break
        offset = end + 1
    entry.records = records
    if offset < len(data):
        self._recover_damage(entry, data, [], offset)


@contextlib.contextmanager
def mid_transcript_cut() -> Iterator[None]:
    from perfsuite.engine._transcript import TranscriptLog

    with _patched(TranscriptLog, "_load_file", _old_load_file):
        yield
