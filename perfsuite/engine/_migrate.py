"""Format 1 -> format 2 (the session log): a format-1 session (HEAD naming a manifest of content-addressed chunks)
opens and migrates.

The verified format-1 generation is loaded with format 1's own code (``GenerationStore``: digests checked,
a lost HEAD recovered only to a generation proven adopted), under the lease; then log 1 is written with a
BASE holding the whole state (the bytes copied in once, chunked by the session's chunk size), HEAD v2
names it, and only then the format-1 manifests are moved aside (``objects/format1-manifest-*``: a format-1
engine facing a lost HEAD would otherwise "recover" an old manifest; with HEAD v2 it refuses the session
with FormatTooNew). ``objects/`` and ``staging/`` are removed in idle slices (``Session.retire``); staged
bytes of a format-1 publication that never committed are kept under ``recovery/``. A crash before HEAD
v2 is durable leaves the format-1 session as it was (migrated again at the next open; the unnamed log is
an orphan retirement deletes).
"""

from __future__ import annotations

import json
import os
from typing import Any

from perfsuite.engine._damage import DAMAGE, describe
from perfsuite.engine._layout import LOGS, MANIFEST_PREFIX, OBJECTS, STAGING, SessionError, manifest_epoch
from perfsuite.engine._logstate import THIS, ArtifactState, Extent, LogState, Piece, empty_document
from perfsuite.engine._objects import digest_bytes
from perfsuite.engine._sidecar import SIDECAR_ARTIFACT

ASIDE_PREFIX = "format1-"  # objects/format1-manifest-...: no longer a manifest to format 1's listing


def migrate_format1(session: Any) -> None:
    """Open a format-1 session as format 2 (see the module docstring)."""
    store, fs = session.store, session.fs
    objects = store.path(OBJECTS)
    if not fs.exists(objects):
        raise SessionError(f"{objects}: missing although HEAD names a generation; every generation is gone "
                           "(restore the session from a backup)")
    if not fs.isdir(objects):
        raise SessionError(f"{objects}: not a directory; the generations are gone (restore the session from a "
                           "backup)")
    v1 = store.v1
    head, _manifest, contents, problems = v1.open_newest_intact()
    floor = max([head.epoch if head else 0] + [manifest_epoch(n) for n in v1.list_manifests()])
    session.lease, broke = store.acquire_lease(floor, session.owner_alive)
    store.fence = session._fence
    session.problems.extend(problems)
    if broke:
        session.problems.append(broke)
    sidecar = contents.pop(SIDECAR_ARTIFACT, None)
    try:
        document = json.loads(sidecar) if sidecar else empty_document()
        if not isinstance(document, dict):
            raise ValueError("not an object")
    except DAMAGE as exc:  # verified by digest: written like this
        raise SessionError(f"{store.root}: the committed format-1 sidecar does not decode ({describe(exc)})") from None
    artifacts: dict[str, ArtifactState] = {}
    parts: list[bytes] = []
    offset = 0
    chunk = session.settings.chunk_size
    for name, data in sorted(contents.items()):
        pieces = []
        for start in range(0, len(data), chunk if chunk > 0 else max(1, len(data))):
            piece = data[start : start + chunk] if chunk > 0 else data
            pieces.append(Piece(digest_bytes(piece), len(piece), (Extent(THIS, offset + start, len(piece)),)))
        artifacts[name] = ArtifactState(len(data), tuple(pieces))
        parts.append(data)
        offset += len(data)
    state = LogState(head.seq if head else 0, 0, None, session.lease.epoch, artifacts, document)
    _leftovers_removed(session)
    created = fs.makedirs(store.path("log")) + fs.makedirs(store.path(LOGS))
    fs.sync_dirs(os.path.dirname(d) for d in created)  # log/ durable in the session before HEAD names a log in it
    aside_first = fs.fault_hooks is not None and fs.fault_hooks.migrate_aside_first  # a seeded bug (FaultHooks)
    if aside_first:
        _manifests_aside(session)
    _placed, base = store.roll_over((), state=state, epoch=session.lease.epoch, compact=False, inline=b"".join(parts))
    store.state = base  # HEAD v2 is durable: the session is format 2 from here on
    if not aside_first:
        _manifests_aside(session)
    _staging_aside(session)
    session.migrated = (f"{store.root}: migrated from format 1 (generation {state.generation}, "
                        f"{len(artifacts)} artifacts, {offset} bytes) into {store.log_path(store.current.number)}")
    session._load_state({name: data for name, data in contents.items()})
    store.forget()


def _leftovers_removed(session: Any) -> None:
    """What an earlier migration a crash cut before HEAD format 2 left in ``log/`` (temp files, an unnamed
    log): HEAD is still format 1, so none of it committed anything; removed so this migration writes log 1
    again and recovery is idempotent (a crash may resurrect them: removed again next time)."""
    store, fs = session.store, session.fs
    directory = store.path("log")
    if fs.isdir(directory):
        for name in fs.listdir(directory):
            fs.remove(os.path.join(directory, name))


def _manifests_aside(session: Any) -> None:
    store, fs = session.store, session.fs
    objects = store.path(OBJECTS)
    moved = 0
    for name in fs.listdir(objects):
        if name.startswith(MANIFEST_PREFIX):
            fs.replace(os.path.join(objects, name), os.path.join(objects, ASIDE_PREFIX + name))
            moved += 1
    if moved:
        fs.sync_dir(objects)


def _staging_aside(session: Any) -> None:
    """Staged bytes of format-1 publications that never committed: kept under ``recovery/`` (unacknowledged
    bytes, never resurrected; format 2 stages nothing on disk)."""
    store, fs = session.store, session.fs
    staging = store.path(STAGING)
    if not fs.isdir(staging) or not fs.listdir(staging):
        return
    aside = store.path("recovery", "format1-staging")
    fs.makedirs(os.path.dirname(aside))
    if fs.exists(aside):
        return
    fs.replace(staging, aside)
    fs.sync_dir(store.path("recovery"))
    session.problems.append(f"{aside}: staged bytes of format-1 publications that never committed, kept aside")


def cleanup_slice(session: Any, budget: int) -> tuple[int, bool]:
    """One idle slice of the migration's cleanup: up to ``budget`` entries of ``objects/`` and ``staging/``
    removed (format 1's chunks and the manifests set aside), then the directories. Returns (removed, more)."""
    store, fs = session.store, session.fs
    removed = 0
    for sub in (OBJECTS, STAGING):
        directory = store.path(sub)
        if not fs.isdir(directory):
            continue
        for name in fs.listdir(directory):
            if removed >= budget:
                return removed, True
            path = os.path.join(directory, name)
            try:
                if fs.isdir(path):
                    for inner in fs.listdir(path):
                        fs.remove(os.path.join(path, inner))
                    fs.rmdir(path)
                else:
                    fs.remove(path)
            except OSError as exc:
                session.problems.append(f"{path}: left in place by the migration's cleanup ({describe(exc)})")
                return removed, False
            removed += 1
        try:
            fs.rmdir(directory)
        except OSError:
            pass
    return removed, False


def is_migrated_leftover(session: Any) -> bool:
    fs, store = session.fs, session.store
    return fs.isdir(store.path(OBJECTS)) or fs.isdir(store.path(STAGING))


__all__ = ["cleanup_slice", "is_migrated_leftover", "migrate_format1"]

