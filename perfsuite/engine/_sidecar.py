"""E3/E7: the sidecar: agent registry, mailboxes, consumption ledger, committed root projection and
goal/plan/provider control state.

Tentative records (owned by a publication not yet adopted) are hidden from delivery and left out of
every other publication's sidecar, so a rollback can never be resurrected by a sidecar frozen
elsewhere (E4, E5). Consumed mail stays in a per-conversation ledger and is merged back into every
sidecar until the receiving transcript commits with its receipt (E7 at-least-once).

Format 2 publishes the sidecar as a delta, O(change) in bytes and CPU: every mutator marks the
keys it touches in a dirty journal (an agent, a conversation's mailbox, a control key, the mail counter);
a publication captures the detached values of exactly those keys (plus the keys holding its own
tentative records, and the mailboxes whose ledger it commits), never the whole document. A key is clean
again only when a publication that captured it at its current version is installed (a failed one's
changes stay dirty). The file-backed profile still writes the whole detached document.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ACTIVITY_FLAVOURS = frozenset({"idle", "running", "permission-blocked", "waiting", "done", "failed", "cancelled"})
TERMINAL = frozenset({"done", "failed", "cancelled"})
ROOT = "root"
SIDECAR_ARTIFACT = "sidecar.json"


@dataclass(frozen=True, slots=True)
class MailRecord:
    """One mail record with a durable id; the receiving transcript carries it as a hidden receipt."""

    id: str
    to: str
    sender: str
    kind: str
    body: str
    created: float

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "to": self.to, "sender": self.sender, "kind": self.kind, "body": self.body,
                "created": self.created}

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> MailRecord:
        return cls(str(record["id"]), str(record["to"]), str(record["sender"]), str(record["kind"]),
                   str(record["body"]), float(record["created"]))


Key = tuple[str, str | None]  # (section, name): ("agents", id), ("mailboxes", conversation), ("control", key)
DELETED = None  # a captured value that removes the key from the committed document
#: the sections the dirty journal tracks; the root projection and the checkpoint marker come with the
#: transcripts a publication commits
SECTIONS = ("agents", "mailboxes", "control", "next_mail")


@dataclass(frozen=True, slots=True)
class SidecarCapture:
    """What freeze captured of the sidecar for a delta (format 2): the detached value of each captured
    key (``None``: the key is absent) and the dirty version each was captured at."""

    values: Mapping[Key, Any]
    versions: Mapping[Key, int] = field(default_factory=dict)


class Sidecar:
    """Live sidecar state, owned by the loop thread."""

    def __init__(self) -> None:
        self.agents: dict[str, dict[str, Any]] = {}
        self.mailboxes: dict[str, list[MailRecord]] = {}
        self.tentative: dict[str, str] = {}  # mail id or "agent:<id>" -> owning publication id
        self.ledger: dict[str, dict[str, MailRecord]] = {}
        self.control: dict[str, Any] = {"goal": None, "plan": None, "provider": None}
        self.root: dict[str, Any] = {}  # committed projection: as of the last committed root transcript
        self.next_mail = 1
        self.checkpoint: dict[str, Any] | None = None
        # The dirty journal (format 2): key -> version of its last change since the last committed capture.
        self.dirty: dict[Key, int] = {}
        self._versions = itertools.count(1)
        self._where: dict[str, Key] = {}  # tentative key -> the document key holding it

    # -- the dirty journal (format 2 deltas) --------------------------------------------------------------
    def touch(self, section: str, name: str | None = None) -> None:
        """Mark a key changed (every mutator calls this; session code never writes the dicts directly)."""
        self.dirty[(section, name)] = next(self._versions)

    def capture(self, owner: str | None, committing: Mapping[str, frozenset[str]],
                before: frozenset[str] = frozenset()) -> SidecarCapture:
        """The detached values (as :meth:`detach` computes them, for this owner) of the dirty keys, the keys
        holding the owner's tentative records, and the mailboxes whose ledger this publication commits:
        O(what changed), never the whole document. ``before``: owners of the publications committed ahead
        of this one in the same group (group commit): their tentative records are in its base, so visible."""
        owners = {owner, *before}
        keys = set(self.dirty)
        for key, holder in self.tentative.items():
            if holder in owners and key in self._where:
                keys.add(self._where[key])
        keys.update(("mailboxes", c) for c in committing if self.ledger.get(c))
        values = {key: self._detached(key, owner, committing, before) for key in keys}
        return SidecarCapture(values, {key: self.dirty[key] for key in keys if key in self.dirty})

    def clear(self, versions: Mapping[Key, int]) -> None:
        """A publication that captured ``versions`` was installed: keys unchanged since are clean."""
        for key, version in versions.items():
            if self.dirty.get(key) == version:
                del self.dirty[key]

    def _detached(self, key: Key, owner: str | None, committing: Mapping[str, frozenset[str]],
                  before: frozenset[str] = frozenset()) -> Any:
        section, name = key

        def visible(tentative_key: str) -> bool:
            holder = self.tentative.get(tentative_key)
            return holder is None or holder == owner or holder in before

        if section == "agents":
            record = self.agents.get(str(name))
            return dict(record) if record is not None and visible(f"agent:{name}") else DELETED
        if section == "mailboxes":
            conversation = str(name)
            records = [r.to_json() for r in self.mailboxes.get(conversation, ()) if visible(r.id)]
            keep = committing.get(conversation, frozenset())
            records += [r.to_json() for rid, r in self.ledger.get(conversation, {}).items() if rid not in keep]
            return records or DELETED
        if section == "control":
            return copy.deepcopy(self.control.get(str(name)))
        if section == "next_mail":
            return self.next_mail
        raise ValueError(f"unknown sidecar section {section!r}")

    # -- mutators that are not mail -------------------------------------------------------------------------
    def set_agent(self, agent: str, record: dict[str, Any], owner: str | None = None) -> None:
        self.agents[agent] = record
        if owner is not None:
            self.tentative[f"agent:{agent}"] = owner
            self._where[f"agent:{agent}"] = ("agents", agent)
        self.touch("agents", agent)

    def update_agent(self, agent: str, **fields: Any) -> None:
        self.agents[agent].update(fields)
        self.touch("agents", agent)

    def set_control(self, key: str, value: Any) -> None:
        self.control[key] = value
        self.touch("control", key)

    def take_mail_number(self) -> int:
        number = self.next_mail
        self.next_mail += 1
        self.touch("next_mail")
        return number

    # -- records ----------------------------------------------------------------------------------------
    def visible_mail(self, conversation: str) -> list[MailRecord]:
        """Deliverable records: committed ones only (tentative records are hidden, E4)."""
        return [r for r in self.mailboxes.get(conversation, ()) if r.id not in self.tentative]

    def add_mail(self, record: MailRecord, owner: str | None) -> None:
        self.mailboxes.setdefault(record.to, []).append(record)
        if owner is not None:
            self.tentative[record.id] = owner
            self._where[record.id] = ("mailboxes", record.to)
        self.touch("mailboxes", record.to)

    def remove_mail(self, conversation: str, mail_id: str) -> MailRecord | None:
        box = self.mailboxes.get(conversation, [])
        for index, record in enumerate(box):
            if record.id == mail_id:
                del box[index]
                self.tentative.pop(mail_id, None)
                self._where.pop(mail_id, None)
                self.touch("mailboxes", conversation)
                return record
        return None

    def consume(self, conversation: str, record: MailRecord) -> None:
        """Delivered: out of the live mailbox, into the ledger until the transcript commits (E7)."""
        self.remove_mail(conversation, record.id)
        self.ledger.setdefault(conversation, {})[record.id] = record
        self.touch("mailboxes", conversation)

    def retire(self, conversation: str, receipts: frozenset[str]) -> int:
        """The receiving transcript committed these receipts: their ledger entries are done."""
        ledger = self.ledger.get(conversation)
        if not ledger:
            return 0
        done = [rid for rid in ledger if rid in receipts]
        for rid in done:
            del ledger[rid]
        return len(done)

    def reveal(self, owner: str) -> None:
        """Adoption: the owner's tentative records become committed and deliverable."""
        for key in [k for k, v in self.tentative.items() if v == owner]:
            del self.tentative[key]
            self._where.pop(key, None)

    def transfer(self, old_owner: str, new_owner: str) -> None:
        for key, value in list(self.tentative.items()):
            if value == old_owner:
                self.tentative[key] = new_owner

    def rollback(self, owner: str) -> list[str]:
        """A definitive rollback: the owner's tentative records disappear (never become deliverable)."""
        keys = [k for k, v in self.tentative.items() if v == owner]
        for key in keys:
            del self.tentative[key]
            self._where.pop(key, None)
            if key.startswith("agent:"):
                self.agents.pop(key[len("agent:"):], None)
                self.touch("agents", key[len("agent:"):])
                continue
            for conversation, box in self.mailboxes.items():
                kept = [r for r in box if r.id != key]
                if len(kept) != len(box):
                    box[:] = kept
                    self.touch("mailboxes", conversation)
        return keys

    # -- freeze (E4 phase 1) ----------------------------------------------------------------------------
    def detach(self, owner: str | None, committing: Mapping[str, frozenset[str]],
               root_projection: Mapping[str, Any], checkpoint: Mapping[str, Any] | None) -> dict[str, Any]:
        """A JSON-ready copy for one publication: committed records plus the owner's own tentative ones;
        ledger records merged back unless this very publication commits their receipt."""

        def visible(key: str) -> bool:
            holder = self.tentative.get(key)
            return holder is None or holder == owner

        mailboxes: dict[str, list[dict[str, Any]]] = {}
        for conversation, box in self.mailboxes.items():
            records = [r.to_json() for r in box if visible(r.id)]
            if records:
                mailboxes[conversation] = records
        for conversation, ledger in self.ledger.items():
            keep = committing.get(conversation, frozenset())
            merged = [r.to_json() for rid, r in ledger.items() if rid not in keep]
            if merged:
                mailboxes.setdefault(conversation, []).extend(merged)
        return {
            "version": 1,
            "agents": {aid: dict(a) for aid, a in self.agents.items() if visible(f"agent:{aid}")},
            "mailboxes": mailboxes,
            "control": copy.deepcopy(self.control),
            "root": {k: (list(v) if k == "prompt_index" and v is not None else v) for k, v in root_projection.items()},
            "next_mail": self.next_mail,
            "checkpoint": dict(checkpoint) if checkpoint else None,
        }

    # -- load -------------------------------------------------------------------------------------------
    @classmethod
    def from_bytes(cls, data: bytes) -> Sidecar:
        return cls.from_doc(json.loads(data) if data else {})

    @classmethod
    def from_doc(cls, record: Mapping[str, Any]) -> Sidecar:
        """The live sidecar of a committed document (a format-1 sidecar artifact or format 2's state)."""
        if not isinstance(record, Mapping):
            raise ValueError("the sidecar is not an object")
        sidecar = cls()
        sidecar.agents = {aid: dict(a) for aid, a in record.get("agents", {}).items()}
        for conversation, box in record.get("mailboxes", {}).items():
            seen: set[str] = set()
            for item in box:
                mail = MailRecord.from_json(item)
                if mail.id not in seen:
                    seen.add(mail.id)
                    sidecar.mailboxes.setdefault(conversation, []).append(mail)
        sidecar.control.update(record.get("control", {}))
        sidecar.root = dict(record.get("root", {}))
        if isinstance(sidecar.root.get("prompt_index"), list):  # never shared with the committed document
            sidecar.root["prompt_index"] = list(sidecar.root["prompt_index"])
        sidecar.next_mail = int(record.get("next_mail", 1))
        sidecar.checkpoint = record.get("checkpoint")
        if sidecar.checkpoint is not None and not isinstance(sidecar.checkpoint, dict):
            raise ValueError("the checkpoint marker is not an object")
        return sidecar


def encode_sidecar(detached: Mapping[str, Any]) -> bytes:
    return json.dumps(detached, separators=(",", ":"), sort_keys=True).encode()
