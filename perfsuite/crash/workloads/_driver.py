"""The session crash workloads' oracle writer (SPEC section 7, 7.1): :class:`SessionDriver` runs acknowledged
mutations on a session and records, for every acknowledgement, the trace index at which it was given, what it
acknowledged and the files it rests on (invariant 7). Every session workload (``_sessions``, ``_bug_classes``,
``_retention``) drives its sessions through it, so they all write the oracle the same way.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from typing import Any

from perfsuite.crash.invariants._sessions import SESSION
from perfsuite.crash.model._trace import WorkloadEnv
from perfsuite.engine import MailRecord, Message, Session, SessionSettings

ROOT = "root"
MAIN_FILE = "conversation.jsonl"
# Engine finding E (tests/crash/test_engine_findings.py), fixed: recovery sets aside a staged batch frozen
# against another head, so the workloads no longer fsync the staging directory themselves.


#: format 2 (the session log): logs this small roll over every few publications, so every workload crosses
#: HEAD's replace (the only rename) under both rename models, and retirement deletes whole logs
LOG_CAPACITY = 4 * 1024


def settings(offload: str = "inline") -> SessionSettings:
    """Small chunks (transcripts span several), two kept generations, small retirement slices and small
    logs, so a short workload exercises chunk reuse, roll-over, retirement and its slicing."""
    return SessionSettings(chunk_size=512, keep_generations=2, retire_slice=6, offload=offload,
                           log_capacity=LOG_CAPACITY)


def _ids(prefix: str) -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"{prefix}{next(counter)}"


def message(i: int, text: str, size: int = 60) -> Message:
    role = "user" if i % 2 == 0 else "assistant"
    return Message(role, f"{text} " + "abcdefghij"[i % 10] * size, float(i))


# -- the oracle writer -------------------------------------------------------------------------------------
class SessionDriver:
    """Runs mutations on ``session`` and notes, for each acknowledgement, what it covers (see module doc)."""

    def __init__(self, env: WorkloadEnv, session: Session, writer: str | None = None,
                 serial: itertools.count[int] | None = None) -> None:
        self.env = env
        self.session = session
        self.portable = session.profile == "portable"
        self.serial = serial if serial is not None else itertools.count()
        # Which writer acknowledged (E3 fencing: a second owner; invariant F checks a fenced writer's)
        self.writer = writer

    # -- what an acknowledgement rests on ---------------------------------------------------------------
    def rel(self, path: str) -> str:
        return os.path.relpath(path, self.env.root).replace(os.sep, "/")

    def depends(self) -> list[str]:
        """Files the committed state rests on now: HEAD and the logs holding its bytes (portable, format 2);
        the sidecar and every transcript file (file-backed). Invariant 7 checks none had a failed sync."""
        s = self.session
        if self.portable:
            return [self.rel(path) for path in s.durable_files()]
        files = [self.rel(os.path.join(s.root, "sidecar.json"))]
        for log in getattr(s, "logs", {}).values():
            files.append(self.rel(os.path.join(log.logdir, MAIN_FILE)))
        return files

    def _ack(self, label: str, kind: str, at: int | None, **detail: Any) -> None:
        s = self.session
        seq = s.head.seq if self.portable and s.head is not None else None
        if self.writer is not None:
            detail["writer"] = self.writer
        self.env.ack(label, scope=SESSION, kind=kind, at=at, seq=seq, depends=self.depends(), **detail)

    def idle(self) -> None:
        """After a publication: nothing to do (the engine needs no help from the workload)."""

    def ack_transcript(self, label: str, conversation: str, at: int | None = None) -> None:
        self._ack(label, "transcript", at, conversation=conversation,
                  data=self.session.buffers[conversation].data())

    def ack_mail(self, label: str, record: MailRecord, at: int | None = None) -> None:
        self._ack(label, "mail", at, id=record.id, to=record.to, body=record.body)

    def ack_value(self, label: str, key: str, value: Any, at: int | None = None) -> None:
        self._ack(label, "value", at, key=key, value=value)

    def attempt(self, key: str, value: Any) -> None:
        """A value a mutation is about to make live: it may become durable before (or without) its own
        acknowledgement, so it is an allowed recovered value from now on."""
        self.env.note(f"set {key}", kind="value", key=key, value=value)

    def callback(self) -> tuple[Callable[[BaseException | None], None], list[tuple[int, BaseException | None]]]:
        """An acknowledgement callback that notes the trace index at which it ran (and its error)."""
        calls: list[tuple[int, BaseException | None]] = []

        def ack(error: BaseException | None) -> None:
            calls.append((self.env.mark(), error))

        return ack, calls

    def _acked_at(self, calls: list[tuple[int, BaseException | None]], label: str) -> int | None:
        if len(calls) > 1:
            self.env.note(f"{label}: acknowledgement ran {len(calls)} times", kind="repeated-ack")
        good = [at for at, error in calls if error is None]
        return good[0] if good else None

    # -- mutations --------------------------------------------------------------------------------------
    def add(self, conversation: str, *texts: str) -> list[bytes]:
        """Add messages; returns their transcript lines."""
        lines = []
        for text in texts:
            m = message(next(self.serial), text)
            self.session.add_message(conversation, m)
            lines.append(m.encode())
        return lines

    def publishing(self, conversation: str) -> None:
        """A publication of ``conversation`` starts: from here its transcript may hold any text of its
        buffer again (invariant A: an abandoned mutation stays out only until the next attempt)."""
        self.env.note(f"publishing {conversation}", kind="publishing", conversation=conversation)

    def rewriting(self, conversation: str, data: bytes) -> None:
        """A rewrite of ``conversation`` (``replace_messages``, a restore) is about to be published: from here
        its recovered transcript may start with these bytes instead of the last acknowledged ones, which it
        need not extend (invariant 1 allows either until the rewrite's own acknowledgement)."""
        self.env.note(f"rewriting {conversation}", kind="rewriting", conversation=conversation, data=data)

    def rewrite(self, label: str, conversation: str, *texts: str) -> None:
        """A rewrite (undo, edit): ``replace_messages`` with these messages, then an explicit checkpoint;
        acknowledged when it returns."""
        self.session.buffers[conversation].replace_messages([message(next(self.serial), t) for t in texts])
        self.rewriting(conversation, self.session.buffers[conversation].data())
        self.publishing(conversation)
        self.session.checkpoint(conversation)
        self.ack_transcript(label, conversation)
        self.idle()

    def turn(self, label: str, conversation: str, *texts: str) -> None:
        """A turn: messages, then an explicit (synchronous) checkpoint; acknowledged when it returns."""
        self.add(conversation, *texts)
        self.publishing(conversation)
        self.session.checkpoint(conversation)
        self.ack_transcript(label, conversation)
        self.idle()

    def auto_checkpoint(self, label: str, conversation: str, *texts: str) -> None:
        """An automatic checkpoint through the asynchronous job; acknowledged by its callback (an error
        from it, SaveFailed under a pending publication say, is noted and never counted durable)."""
        self.add(conversation, *texts)
        ack, calls = self.callback()
        self.publishing(conversation)
        self.session.request_checkpoint(conversation, ack=ack)
        at = self._acked_at(calls, label)
        if at is not None:
            self.ack_transcript(label, conversation, at)
            if self.session.buffers[conversation].modified:
                # The oracle's own guard (an acknowledgement means durable, SPEC 8): None claims durability,
                # so the session itself must count the conversation as saved by then (nothing edits it in
                # between here). A checkpoint requested under a pending publication acknowledged None while the
                # edit was still unsaved.
                self.env.note(f"{label}: acknowledged None while the session still counts {conversation!r} "
                              "as unsaved", kind="unexpected")
        elif calls:
            self.env.note(f"{label}: {type(calls[0][1]).__name__}", kind="refused")
        self.idle()

    def abandoned(self, conversation: str, lines: list[bytes]) -> None:
        """An ``abandon_pending`` returned: these transcript lines were reported abandoned (invariant A)."""
        self.env.note(f"abandoned {len(lines)} lines of {conversation}", kind="abandoned", conversation=conversation,
                      lines=tuple(lines))

    def mail(self, label: str, to: str, body: str, *, sender: str = ROOT) -> MailRecord:
        ack, calls = self.callback()
        record = self.session.append_mail(to, body, sender=sender, ack=ack)
        at = self._acked_at(calls, label)
        self.ack_mail(label, record, self.env.mark() if at is None else at)
        self.idle()
        return record

    def background(self, label: str, to: str, body: str, *, sender: str) -> None:
        """A background completion delivered through the asynchronous job (synchronously on sessions that
        are not warm local ones); acknowledged by its callback."""
        ack, calls = self.callback()
        self.session.deliver_background(to, body, sender=sender, ack=ack)
        at = self._acked_at(calls, label)
        if at is not None:
            self.ack_mail(label, self.find_mail(to, body), at)
        self.idle()

    def find_mail(self, to: str, body: str) -> MailRecord:
        for record in self.session.sidecar.mailboxes.get(to, ()):
            if record.body == body:
                return record
        raise AssertionError(f"mail {body!r} to {to} not found after its acknowledgement")

    def deliver(self, conversation: str) -> list[MailRecord]:
        """Delivery into the transcript (consumed in memory, not acknowledged): noted for invariant 5."""
        delivered = self.session.deliver_mail(conversation)
        for record in delivered:
            self.env.note(f"delivered {record.id}", kind="delivered", id=record.id, to=conversation)
        return delivered

    def spawn(self, label: str, agent: str, prompt: str) -> None:
        self.attempt(f"status:{agent}", "active")
        self.attempt(f"activity:{agent}", "idle")
        self.session.spawn_agent(agent, prompt=prompt)
        self.ack_transcript(label, agent)
        self.ack_value(label, f"status:{agent}", "active")
        self.ack_value(label, f"activity:{agent}", "idle")
        self.idle()

    def activity(self, agent: str, flavour: str) -> None:
        self.attempt(f"activity:{agent}", flavour)
        self.session.set_activity(agent, flavour)

    def registry(self, label: str) -> None:
        """The sidecar-only registry save: acknowledges every agent's live activity."""
        self.session.save_registry()
        for agent, record in sorted(self.session.sidecar.agents.items()):
            self.ack_value(label, f"activity:{agent}", record.get("activity"))
        self.idle()

    def control(self, label: str, key: str, value: Any) -> None:
        self.attempt(f"control:{key}", value)
        self.session.set_control(key, value)
        self.ack_value(label, f"control:{key}", value)
        self.idle()

    def settle(self, label: str, agent: str, status: str, result: str) -> None:
        self.attempt(f"status:{agent}", status)
        self.attempt(f"activity:{agent}", status)
        parent = str(self.session.sidecar.agents[agent].get("parent", ROOT))
        self.session.settle(agent, status, result)
        self.ack_transcript(label, agent)
        self.ack_value(label, f"status:{agent}", status)
        self.ack_value(label, f"activity:{agent}", status)
        self.ack_mail(label, self.find_mail(parent, result))
        self.idle()

    def discard(self, conversation: str, mail_id: str) -> None:
        self.env.note(f"discard {mail_id}", kind="discard", id=mail_id, to=conversation)
        self.session.discard_mail(conversation, mail_id)

    def retire(self) -> None:
        """Generation retirement in idle slices until no work is left (not acknowledged)."""
        while self.session.retire()[1]:
            pass

    def shutdown(self, label: str) -> None:
        """E7 shutdown: flushes agents, the registry and the root, then releases the lease."""
        conversations = sorted(self.session.buffers)
        for conversation in conversations:
            self.publishing(conversation)
        self.session.shutdown()
        for conversation in conversations:
            self.ack_transcript(f"{label} ({conversation})", conversation)
