"""Seeded bugs of the open path (open loses nothing silently): the engine as it was before the corruption
probes, kept so the crash and corruption campaigns prove they catch each one (``--seeded-bug NAME``).

Each is a set of the engine's documented fault hooks (``FaultHooks``, the engine's published seam) carried
by the I/O layer (``with_fault_hooks``), so the workload run, the campaign's recoveries and every reopen on
that layer see the broken open path. Nothing patches an engine class; the engine's source is never edited.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

from perfsuite.engine import HeadRef, SessionError
from perfsuite.engine.testing import FaultHooks

#: a manifest's name: ``objects/manifest-<seq>-e<epoch>-<publication>.json`` (the tag is its staging dir)
_MANIFEST = re.compile(r"manifest-(\d+)-e(\d+)-(.*)\.json$")


# -- lease-pid-zero ---------------------------------------------------------------------------------------
#: Before the fix: a torn LEASE (read as pid 0) is probed like any owner, and ``os.kill(0, 0)`` says it is
#: alive, so every later open is refused with "owned by pid 0".
LEASE_PID_ZERO = FaultHooks(torn_lease_owned=True)


# -- head-lost-fallback -----------------------------------------------------------------------------------
def _tag(name: str) -> str:
    match = _MANIFEST.search(name)
    return match.group(3) if match else ""


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


def old_recover_head(store: Any, hint: HeadRef | None, problems: list[str]
                     ) -> tuple[HeadRef | None, Any, dict[str, bytes], list[str]]:
    """Before the fix: with HEAD missing only manifests named as a parent are candidates (one generation:
    an empty session, silently; three: generation 2), and a generation HEAD names that does not verify is
    silently replaced by an older one. (``FaultHooks.recover_head``: called when HEAD is missing, corrupt
    (``problems`` set, no ``hint``) or names a generation that does not verify (``hint``).)"""
    problems = list(problems)
    names = store.list_manifests()
    adopted = _named_as_parent(store, names)
    if hint is not None and hint.parent:
        adopted.add(hint.parent)
    if hint is None and problems:  # HEAD present but corrupt: every manifest whose staging is gone
        unadopted = store.staged_publications()
        adopted.update(n for n in names if _tag(n) not in unadopted)
    for name in names:
        if name not in adopted or (hint is not None and name == hint.manifest):
            continue
        try:
            manifest, contents = store.load_verified(name, None)
        except SessionError as exc:
            problems.append(str(exc))
            continue
        data = store.fs.read(store.path(name))
        digest = hashlib.sha256(data).hexdigest()
        return HeadRef(manifest.seq, name, digest, manifest.epoch, manifest.parent), manifest, contents, problems
    if problems:
        raise SessionError(problems[0] + "; no intact adopted generation to fall back to")
    return None, None, {}, problems


def old_recover_head_v2(store: Any, problems: list[str]) -> tuple[int | None, list[str]]:
    """Format 2's version of the same mistake (the session log): only a log another log names as its predecessor
    counts as adopted (records appended to a log prove nothing to it), so with HEAD lost a session whose
    newest log has no successor falls back to the one before it, and a one-log session opens empty, silently.
    (``FaultHooks.recover_head`` for format 2: returns the log number to adopt, or None, and problem lines.)"""
    from perfsuite.crash.invariants._logcheck import logs_of

    digests: dict[str, int] = {}
    previous: set[str] = set()
    for number, header, found in logs_of(store):
        if found:
            digests[found[-1].digest] = number
        if header.get("previous"):
            previous.add(str(header["previous"]))
    adopted = sorted(digests[d] for d in previous if d in digests)
    return (adopted[-1] if adopted else None), []


def _recover_head_either(store: Any, *args: Any) -> Any:
    """The buggy recovery of either format: format 1 calls it with (store, hint, problems)."""
    if len(args) == 2:
        return old_recover_head(store, *args)
    return old_recover_head_v2(store, *args)


#: ... and retire deletes every manifest off HEAD's chain, newer generations included (format 2: open
#: deletes every log newer than HEAD's, adopted or not).
HEAD_LOST_FALLBACK = FaultHooks(recover_head=_recover_head_either, retire_newer=True)


# -- mid-transcript-cut -----------------------------------------------------------------------------------
#: Before the fix: the first line that does not decode ends the log, wherever it is; everything after it,
#: fsynced messages included, goes to ``recovery/`` (and no committed size is checked).
MID_TRANSCRIPT_CUT = FaultHooks(cut_at_first_bad_line=True)


# -- head-lost-previous (a crash while HEAD is also lost) -----------------------------------------------------
def _manifest_seq(name: str) -> int:
    """A manifest's sequence number from its name (0 for a name that is not a manifest's)."""
    match = _MANIFEST.search(name)
    return int(match.group(1)) if match else 0


def previous_recover_head(store: Any, hint: HeadRef | None, problems: list[str]
                          ) -> tuple[HeadRef | None, Any, dict[str, bytes], list[str]]:
    """Off by one: a lost or torn HEAD is recovered to the newest intact manifest that another one names as
    its parent, i.e. the generation *before* the newest, silently (``FaultHooks.recover_head``)."""
    names = sorted(store.list_manifests(), key=_manifest_seq, reverse=True)
    parents = _named_as_parent(store, names)
    for name in names:
        if name not in parents or (hint is not None and name == hint.manifest):
            continue
        try:
            manifest, contents = store.load_verified(name, None)
        except SessionError:
            continue
        digest = hashlib.sha256(store.fs.read(store.path(name))).hexdigest()
        return HeadRef(manifest.seq, name, digest, manifest.epoch, manifest.parent), manifest, contents, list(problems)
    return None, None, {}, list(problems)


def previous_recover_head_v2(store: Any, problems: list[str]) -> tuple[int | None, list[str]]:
    """Format 2's off-by-one (the session log): a lost or torn HEAD is recovered to the log *before* the newest
    one proven adopted (records appended to it, or named as a predecessor), silently; a session with one
    proven log opens empty (``FaultHooks.recover_head`` for format 2)."""
    from perfsuite.crash.invariants._logcheck import logs_of

    logs: list[tuple[int, str | None, bool]] = []  # (number, last record's digest, records appended to it)
    previous: set[str] = set()
    for number, header, found in logs_of(store):
        if not found:
            continue
        carried = int(found[0].meta.get("carried", 0) or 0)
        logs.append((number, found[-1].digest, len(found) > 1 + carried))
        if header.get("previous"):
            previous.add(str(header["previous"]))
    proven = [number for number, last, appended in logs if appended or last in previous]
    return (proven[-2] if len(proven) > 1 else None), []


def _previous_either(store: Any, *args: Any) -> Any:
    """The off-by-one recovery of either format: format 1 calls it with (store, hint, problems)."""
    if len(args) == 2:
        return previous_recover_head(store, *args)
    return previous_recover_head_v2(store, *args)


HEAD_LOST_PREVIOUS = FaultHooks(recover_head=_previous_either)
