"""E3: opening a portable session (format 2): the layout told apart (a format-1 session is migrated,
``_migrate``), HEAD read (or, when it is lost, the adopted log proven, ``_logadoption``), the log flock-ed,
scanned and verified, the lease taken, a torn unacknowledged tail dropped. A part of
:class:`~perfsuite.engine._session.Session`, whose ``__init__`` holds the state it uses."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace

from perfsuite.engine._buffer import ConversationBuffer
from perfsuite.engine._damage import DAMAGE, describe, one_line
from perfsuite.engine._layout import HEAD, LOG_DIR, LOGS, OBJECTS, STAGING, NotAFile, SessionError, format_version
from perfsuite.engine._logadoption import candidate_head, recover_lost_head
from perfsuite.engine._logvalues import GenerationRef, HeadV2
from perfsuite.engine._migrate import migrate_format1
from perfsuite.engine._session_values import ATTACHMENT_PREFIX, CONVERSATION_PREFIX
from perfsuite.engine._sessionstate import SessionState
from perfsuite.engine._sidecar import ROOT, Sidecar


class Opening(SessionState):
    """Open, creation and crash recovery of the portable store (mixed into ``Session``)."""

    def _layout(self, create: bool) -> str:
        """``format1`` (migrate), ``format2`` (open), or ``new`` (create). The session's directories are
        directories: anything else is a one-line refusal naming the repair command."""
        fs, store = self.fs, self.store
        repair = f"run `perfsuite session repair {self.root}`"
        if fs.exists(self.root) and not fs.isdir(self.root):
            raise SessionError(f"{self.root}: not a directory, so not a portable session")
        if not fs.isdir(self.root):
            if not create:
                raise SessionError(f"{self.root}: no portable session here")
            return "new"
        for sub in (LOG_DIR, LOGS, OBJECTS, STAGING):  # lstat: a link to a directory is no directory of its own
            directory = store.path(sub)
            facts = fs.lstat(directory)
            if facts is not None and facts.kind == "symlink":
                raise SessionError(f"{directory}: a symbolic link, not a directory: a session's own files are never "
                                   "reached through a link (nothing was changed)"
                                   + (f"; {repair}" if sub == LOGS else ""))
            if facts is not None and facts.kind != "directory" and sub in (LOG_DIR, LOGS):
                raise SessionError(f"{directory}: not a directory; {repair}")
        try:
            data = _read_head_bytes(self)
        except NotAFile as exc:
            raise NotAFile(f"{exc}; {repair}") from None
        version = None
        if data is not None:
            try:
                version = format_version(_json_format(data), store.path(HEAD))
            except ValueError:
                version = None  # damage: the layout says which format it was
        if version == 1 or (version is None and not fs.exists(store.path(LOG_DIR)) and fs.exists(store.path(OBJECTS))):
            return "format1"
        if data is None and not fs.exists(store.path(LOG_DIR)):
            if not create and not any(fs.exists(store.path(n)) for n in ("LEASE", LOGS)):
                raise SessionError(f"{self.root}: no portable session here")
            return "new"
        return "format2"

    def _open(self, create: bool) -> None:
        store = self.store
        store.check_format()  # a newer format is refused before anything is written
        layout = self._layout(create)
        if layout == "format1":
            migrate_format1(self)
            return
        if layout == "new":
            self._create()
            return
        head, problems = self._head()
        if head is None:
            self._create()
            return
        fd = store.lock_only(head)  # a live owner is refused before anything is read or written
        try:
            loaded = store.load(head)
        except BaseException:
            if fd is not None:
                store.fs.close(fd)
            raise
        assert store.current is not None
        store.current.fd = fd if fd is not None else store._open_locked(store.current.path)
        try:
            abandoned = store.check_newer()  # a newer adopted log refuses open (HEAD rolled back)
        except BaseException:
            store.close()
            raise
        self.problems.extend(problems)
        self.lease, broke = store.acquire_lease(max(loaded.state.epoch, head.epoch), self.owner_alive)
        store.fence = self._fence
        if broke:
            self.problems.append(broke)
        hooks = self.fs.fault_hooks
        fresh = broke and not store.locked and not (hooks is not None and hooks.takeover_in_place)  # a seeded bug
        if fresh:
            # No flock proves the previous owner gone (another host, a layer without locks): read the log
            # again now that the lease is ours (anything it acknowledged before is in it; nothing it writes
            # from now on is acknowledged), and start a new log so its later writes land where HEAD is not.
            held = store.current.fd
            store.forget()  # from the disk: the bytes read before the lease was ours miss its last records
            loaded = store.load(head)
            store.current.fd = held
        self.problems.extend(loaded.problems)
        if problems:
            store.write_head(head)  # HEAD lost or damaged: it names the log proven adopted again (a recovery write)
        if loaded.torn is not None:
            store.rezero(loaded.torn)
        self.fs.makedirs(store.path(LOGS))  # a crash during creation may have lost it
        store.remove_orphans(self.problems, abandoned)
        if fresh:
            # Its last records may never have been synced (it was taken over mid-publication): the new BASE
            # copies the log's live bytes (made durable with it) instead of referencing them (E1, E3).
            store.poison("another owner wrote it last, perhaps without syncing")
            _placed, base = store.roll_over((), epoch=self.lease.epoch, compact=False)
            store.state = base
        self._load_state(loaded.contents)
        store.forget()

    def _fence(self) -> None:
        """The lease still names this owner and its epoch (E3): checked before the store writes."""
        assert self.lease is not None
        self.store.check_lease(self.lease, self.lease.epoch)

    def _head(self) -> tuple[HeadV2 | None, list[str]]:
        """HEAD, or the one proven when it is missing or corrupt (with the problems met); None: create."""
        store = self.store
        hooks = self.fs.fault_hooks
        recover = recover_lost_head
        if hooks is not None and hooks.recover_head is not None:  # a seeded bug (FaultHooks): which log to adopt
            def seeded(store: object, problems: list[str]) -> tuple[HeadV2 | None, list[str]]:
                number, lines = hooks.recover_head(store, problems)
                return (candidate_head(self.store, number) if number is not None else None), lines

            recover = seeded
        try:
            head = store.read_head()
        except NotAFile as exc:
            raise NotAFile(f"{exc}; run `perfsuite session repair {self.root}`") from None
        except DAMAGE as exc:
            if isinstance(exc, SessionError):
                raise
            problem = one_line(f"{store.path(HEAD)}: corrupt HEAD ({describe(exc)})")
            recovered, lines = recover(store, [problem])
            return recovered, [problem, *lines]
        if head is not None:
            return head, []
        recovered, lines = recover(store, [])
        return recovered, lines

    def _create(self) -> None:
        """A new session: its directories (synced into their parents), the lease, log 1 with the empty BASE,
        and HEAD naming it. Nothing is acknowledged before HEAD is durable."""
        store, fs = self.store, self.fs
        leftovers = store.path(LOG_DIR)
        if fs.isdir(leftovers):  # a creation a crash cut before HEAD: what it left committed nothing
            for name in fs.listdir(leftovers):
                fs.remove(os.path.join(leftovers, name))
        created = fs.makedirs(self.root)
        for sub in (LOG_DIR, LOGS):
            created += fs.makedirs(store.path(sub))
        fs.sync_dirs(os.path.dirname(d) for d in created)
        fs.sync_dirs(created)
        self.lease, broke = store.acquire_lease(0, self.owner_alive)
        store.fence = self._fence
        if broke:
            self.problems.append(broke)
        store.create(self.lease.epoch)
        self._load_state({})

    def _load_state(self, contents: Mapping[str, bytes]) -> None:
        """The live session from the committed state: sidecar, buffers, attachments; each artifact remembers
        the buffer list it was loaded into, so the next checkpoint appends (O(change))."""
        state = self.store.state
        try:
            self.sidecar = Sidecar.from_doc(state.sidecar)
        except DAMAGE as exc:  # verified by digest, so written like this: an engine bug, still one line
            raise SessionError(f"{self.root}: the committed sidecar does not decode ({describe(exc)})") from None
        self.buffers = {}
        self.attachments = {}
        self.memos = {}
        for name, data in contents.items():
            if name.startswith(CONVERSATION_PREFIX):
                conversation = name[len(CONVERSATION_PREFIX) : -len(".jsonl")]
                try:
                    buffer = ConversationBuffer(conversation, data.splitlines(keepends=True))
                except DAMAGE as exc:
                    raise SessionError(f"{self.root}: committed transcript {name} does not decode "
                                       f"({describe(exc)})") from None
                self.buffers[conversation] = buffer
                state.artifacts[name] = replace(state.artifacts[name], source=buffer.line_list)
            elif name.startswith(ATTACHMENT_PREFIX):
                self.attachments[name[len(ATTACHMENT_PREFIX) :]] = data
        self.buffers.setdefault(ROOT, ConversationBuffer(ROOT))
        root = self.buffers[ROOT]
        state.prompt_reset = root.resets if state.sidecar.get("root", {}).get("prompt_index") == root.user_offsets \
            else None
        self.head = self._generation_ref()

    def _generation_ref(self) -> GenerationRef:
        state, log = self.store.state, self.store.current
        return GenerationRef(state.generation, state.digest, state.epoch, log.number if log is not None else 0)


def _read_head_bytes(session: Opening) -> bytes | None:
    from perfsuite.engine._layout import read_control

    return read_control(session.fs, session.store.path(HEAD))


def _json_format(data: bytes) -> object:
    import json

    record = json.loads(data)
    return record.get("format") if isinstance(record, dict) else None
