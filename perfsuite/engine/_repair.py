"""Explicit repair of what open refuses: ``Session.repair`` / ``FileSession.repair`` and the
``perfsuite session repair PATH`` command (``_profiles.repair_session`` tells the profiles apart). Open
never guesses past damage that may cost acknowledged state; repair does what a person asked for, says
what it found and what is lost, and keeps every damaged file it moves under ``recovery/`` (nothing is
deleted).

Portable: control entries that are not regular files (``LEASE``, ``HEAD``) and ``staging/`` or ``logs/``
that are not directories are moved aside; then, while holding the lease, HEAD is pointed at the newest
intact generation proven adopted (``_adoption``), or at ``generation`` (a sequence number or a manifest
name), and the damaged generations newer than it are moved aside. A missing ``objects/`` cannot be
repaired from: every generation is gone.

File-backed: non-regular ``session.pid``, sidecar and transcripts are moved aside; transcripts are loaded
(torn tails and damaged lines kept under their ``recovery/``); the sidecar (or, if it is gone or does not
decode, an empty one: registry, mailboxes and control state lost) is rewritten with a checkpoint marker
that records what the transcripts really hold, naming every committed byte that is gone.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from dataclasses import dataclass
from typing import Any

from perfsuite.engine._adoption import choose, survey
from perfsuite.engine._damage import DAMAGE, describe
from perfsuite.engine._fs import FileSystem
from perfsuite.engine._generations import (
    FORMAT,
    HEAD,
    LEASE,
    LOGS,
    OBJECTS,
    STAGING,
    GenerationStore,
    HeadRef,
    OwnerProbe,
    SessionError,
    manifest_epoch,
    read_control,
)
from perfsuite.engine._generations import owner_alive as default_probe
from perfsuite.engine._layout import LOG_DIR, MANIFEST_PATH_RE
from perfsuite.engine._logrepair import repair_log_session
from perfsuite.engine._sidecar import SIDECAR_ARTIFACT, Sidecar, encode_sidecar
from perfsuite.engine._transcript import MAIN_FILE, TranscriptError, TranscriptLog

RECOVERY = "recovery"


@dataclass(frozen=True, slots=True)
class RepairReport:
    """What repair found and did, one line each; ``adopted`` is the generation HEAD now names (portable:
    format 2's ``GenerationRef``, format 1's ``HeadRef``)."""

    path: str
    profile: str
    lines: tuple[str, ...]
    changed: bool
    adopted: Any = None


class Aside:
    """Moves damaged entries under ``<root>/recovery/`` (made a directory first if it is not one)."""

    def __init__(self, fs: FileSystem, root: str, lines: list[str]) -> None:
        self.fs, self.root, self.lines = fs, root, lines
        self.moved = 0

    def move(self, path: str, why: str) -> None:
        directory = os.path.join(self.root, RECOVERY)
        facts = self.fs.lstat(directory)
        if facts is not None and facts.kind != "directory":  # a link to a directory too: never written through
            self._rename(directory, os.path.join(self.root, f"{RECOVERY}.damaged-{uuid.uuid4().hex[:8]}"), why="")
        self.fs.makedirs(directory)
        name = os.path.relpath(path, self.root).replace(os.sep, "__")
        self._rename(path, os.path.join(directory, f"{name}.damaged-{uuid.uuid4().hex[:8]}"), why)

    def not_regular(self, path: str) -> None:
        """Move ``path`` aside when it is there but not a regular file (a directory, a symbolic link, a FIFO, a
        device): it is kept as it is (a link is moved, never followed), and the repair goes on without it."""
        facts = self.fs.lstat(path)
        if facts is not None and facts.kind != "file":
            self.move(path, f"{facts.what}, not a regular file (never followed)")

    def keep(self, path: str, why: str) -> None:
        """Copy a regular file's bytes under ``recovery/`` before repair replaces it (repair keeps what it
        replaces); read without following a link, bounded like a control file."""
        try:
            data = read_control(self.fs, path)
        except SessionError:
            self.not_regular(path)
            return
        if data is None:
            return
        directory = os.path.join(self.root, RECOVERY)
        facts = self.fs.lstat(directory)
        if facts is not None and facts.kind != "directory":
            self._rename(directory, os.path.join(self.root, f"{RECOVERY}.damaged-{uuid.uuid4().hex[:8]}"), why="")
        for created in self.fs.makedirs(directory):
            self.fs.sync_dir(os.path.dirname(created))
        name = os.path.relpath(path, self.root).replace(os.sep, "__")
        kept = os.path.join(directory, f"{name}.replaced-{uuid.uuid4().hex[:8]}")
        self.fs.write_new(kept, data, exclusive=True, sync=True)
        self.fs.sync_dir(directory)
        self.lines.append(f"{path}: {why}; its old bytes kept in {kept}")

    def _rename(self, src: str, dst: str, why: str) -> None:
        self.fs.replace(src, dst)
        self.fs.sync_dir(os.path.dirname(dst))
        self.moved += 1
        self.lines.append(f"{src}: {why or 'not a directory'}; moved to {dst}")


def repair_portable(root: str, *, generation: str | int | None, fs: FileSystem,
                    owner_alive: OwnerProbe | None = None) -> RepairReport:
    """See the module docstring. Raises a one-line :class:`SessionError` when nothing can be repaired
    (no session, every generation gone, a live owner, no intact generation to adopt)."""
    root = os.path.abspath(root)
    store = GenerationStore(root, fs)
    lines: list[str] = []
    aside = Aside(fs, root, lines)
    if not fs.isdir(root):
        raise SessionError(f"{root}: no portable session here")
    store.check_format()  # never "repair" a session written by a newer perfsuite
    if _format2(store, fs):
        adopted2 = repair_log_session(root, generation=generation, fs=fs, owner_alive=owner_alive, aside=aside,
                                      lines=lines)
        return RepairReport(root, "portable", tuple(lines), bool(aside.moved or adopted2), adopted2)
    facts = fs.lstat(store.path(OBJECTS))
    if facts is not None and facts.kind == "symlink":
        raise SessionError(f"{store.path(OBJECTS)}: a symbolic link, not a directory: a session's own files are never "
                           "reached through a link; put the directory it names in its place (nothing was changed)")
    if not fs.isdir(store.path(OBJECTS)):
        raise SessionError(f"{store.path(OBJECTS)}: missing or not a directory: every generation is gone, nothing "
                           "to repair from (restore the session from a backup)")
    store.check_format()  # never "repair" a session written by a newer perfsuite
    # the generation asked for is checked before anything is moved or written ("-1" on an intact
    # session used to be answered "left as it was", exit 0)
    only = _resolve(store, generation) if generation is not None else None
    for name in (LEASE, HEAD):
        aside.not_regular(store.path(name))  # a link is moved aside, never followed
    for name in (STAGING, LOGS):
        path = store.path(name)
        facts = fs.lstat(path)
        if facts is not None and facts.kind != "directory":
            aside.move(path, "not a directory")
        fs.makedirs(path)
    floor = max([0] + [manifest_epoch(n) for n in store.list_manifests()])
    lease, broke = store.acquire_lease(floor, owner_alive or default_probe)
    if broke:
        lines.append(broke)
    try:
        adopted = _adopt(store, generation, only, lines, aside)
    finally:
        store.release_lease(lease)
    return RepairReport(root, "portable", tuple(lines), bool(aside.moved or adopted or broke), adopted)


def _format2(store: GenerationStore, fs: FileSystem) -> bool:
    """A format-2 session: a log directory, or a HEAD that says format 2 (format 1: objects/ and HEAD v1)."""
    if fs.exists(store.path(LOG_DIR)):
        return True
    try:
        data = read_control(fs, store.path(HEAD))
        record = json.loads(data) if data else None
    except (SessionError, *DAMAGE):
        return not fs.exists(store.path(OBJECTS))
    return isinstance(record, dict) and record.get("format") == FORMAT


def _adopt(store: GenerationStore, generation: str | int | None, only: str | None, lines: list[str],
           aside: Aside) -> HeadRef | None:
    try:
        head, _manifest, _contents, problems = store.open_newest_intact()
    except SessionError as exc:
        lines.append(f"open refuses: {exc}")
    else:
        if not problems:
            if generation is not None:
                lines.append("HEAD is intact: nothing to repair (Session.restore goes back to an older generation)")
            else:
                lines.append(f"HEAD is intact (generation {head.seq if head else 0}): nothing to repair")
            return None
        lines.extend(problems)
        if generation is None and head is not None:
            _write_head(store, head, aside)
            lines.append(f"{store.path(HEAD)}: now names generation {head.seq} ({head.manifest})")
            return head
    choice = choose(store, only=only)
    if choice.head is None:
        raise SessionError(f"{store.root}: no intact generation to adopt"
                           + (f" named {generation}" if generation is not None else "")
                           + (f" ({choice.damaged[0]})" if choice.damaged else ""))
    target = choice.head
    for candidate in survey(store):
        if (candidate.seq, candidate.epoch) <= (target.seq, target.epoch) or candidate.name == target.manifest:
            continue
        try:
            store.load_verified(candidate.name, None)
        except SessionError as exc:
            lines.append(f"generation {candidate.seq} is damaged and lost: {exc}")
            aside.move(store.path(candidate.name), "a damaged generation newer than the one adopted")
        else:
            lines.append(f"generation {candidate.seq} ({candidate.name}) is intact but not adopted; kept")
    _write_head(store, target, aside)
    lines.append(f"{store.path(HEAD)}: now names generation {target.seq} ({target.manifest}), "
                 + (f"proven adopted: {choice.proof}" if choice.proof else "as asked"))
    return target


_NUMBER = re.compile(r"[0-9]{1,19}")  # ASCII digits only ("١" is a digit to str.isdigit); at most int64


def _resolve(store: GenerationStore, generation: str | int) -> str:
    """The manifest ``generation`` names: a generation number of this session (the newest manifest with it)
    or the name of one of its manifests (``manifest-...json``, bare or as ``objects/manifest-...json``).
    Anything else (a negative or 20-digit number, another path such as ``objects/../HEAD``, a name this
    session does not hold) is a one-line :class:`SessionError` naming the value and what is allowed."""
    names = store.list_manifests()
    candidates = survey(store)
    text = str(generation) if not isinstance(generation, bool) else ""
    matching: list[str] = []
    if _NUMBER.fullmatch(text):
        matching = [c.name for c in candidates if c.seq == int(text)]
    elif MANIFEST_PATH_RE.fullmatch(text) or MANIFEST_PATH_RE.fullmatch(f"{OBJECTS}/{text}"):
        wanted = text if text.startswith(f"{OBJECTS}/") else f"{OBJECTS}/{text}"
        matching = [n for n in names if n == wanted]
    if not matching:
        numbers = sorted({c.seq for c in candidates}, reverse=True)
        shown = ", ".join(str(n) for n in numbers[:6]) + (", ..." if len(numbers) > 6 else "")
        examples = ", ".join(os.path.basename(n) for n in names[:2]) + (", ..." if len(names) > 2 else "")
        allowed = (f"a generation number of this session ({shown}) or the name of one of its manifests "
                   f"({examples})" if names else "nothing: this session has no manifest")
        raise SessionError(f"{store.root}: generation {str(generation)!r}: expected {allowed}")
    return matching[0]


def _write_head(store: GenerationStore, head: HeadRef, aside: Aside) -> None:
    aside.keep(store.path(HEAD), "replaced by repair")
    store.fs.atomic_replace(store.path(HEAD), json.dumps(head.to_json(), sort_keys=True).encode(), follow=False)


def repair_file_tree(fs: FileSystem, root: str, lines: list[str], aside: Aside) -> None:
    """The file-backed profile's tree, repaired by its owner (``FileSession.repair`` holds the PID lock)."""
    conversations = os.path.join(root, "conversations")
    if fs.exists(conversations) and not fs.isdir(conversations):
        aside.move(conversations, "not a directory")
    fs.makedirs(conversations)
    sizes: dict[str, dict[str, int]] = {}
    for name in fs.listdir(conversations):
        directory = os.path.join(conversations, name)
        if not fs.isdir(directory):
            aside.move(directory, "not a conversation directory")
            continue
        main = os.path.join(directory, MAIN_FILE)
        if fs.isdir(main) or (fs.exists(main) and not fs.exists(fs.realpath(main))):
            aside.move(main, "a directory or a dangling symbolic link, not a transcript")
        try:
            log = TranscriptLog.open(directory, fs=fs)
        except TranscriptError as exc:
            aside.move(directory, f"does not load ({exc})")
            continue
        messages = log.messages()
        log.close()
        lines.extend(f"{t.path}: torn tail kept in {t.recovery_file}" for t in log.torn)
        lines.extend(f"{q.path}: damaged line kept in {q.recovery_file}" for q in log.quarantined)
        sizes[name] = {"size": sum(len(m.encode()) for m in messages), "messages": len(messages)}
    sidecar_path = os.path.join(root, SIDECAR_ARTIFACT)
    record: dict[str, object] | None = None
    if fs.exists(sidecar_path):
        try:
            data = fs.read(sidecar_path)
            Sidecar.from_bytes(data if data else b"!")  # validates the shape
            record = json.loads(data)
        except DAMAGE as exc:
            aside.move(sidecar_path, f"does not decode ({describe(exc)})")
    if record is None:
        record = dict(Sidecar().detach(None, {}, {}, None))
        lines.append(f"{sidecar_path}: rebuilt empty: the agent registry, mailboxes and control state are lost")
    marker = record.get("checkpoint") if isinstance(record.get("checkpoint"), dict) else {}
    assert isinstance(marker, dict)
    claimed = marker.get("conversations") if isinstance(marker.get("conversations"), dict) else {}
    assert isinstance(claimed, dict)
    for name, claim in sorted(claimed.items()):
        held = sizes.get(name, {"size": 0})["size"]
        try:
            lost = int(claim["size"]) - held
        except DAMAGE:
            lost = 0
        if lost > 0:
            lines.append(f"{os.path.join(conversations, name)}: {lost}B of committed messages are lost")
    record["checkpoint"] = {**marker, "conversations": sizes}
    fs.atomic_replace(sidecar_path, encode_sidecar(record), follow=False)  # an own file: a link is not followed
    lines.append(f"{sidecar_path}: rewritten; its checkpoint marker records what the transcripts hold")


__all__ = ["Aside", "RepairReport", "repair_file_tree", "repair_portable"]
