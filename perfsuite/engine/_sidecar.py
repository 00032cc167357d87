"""E3/E7: the sidecar: agent registry, mailboxes, consumption ledger, committed root projection and
goal/plan/provider control state.

Tentative records (owned by a publication not yet adopted) are hidden from delivery and left out of
every other publication's sidecar, so a rollback can never be resurrected by a sidecar frozen
elsewhere (E4, E5). Consumed mail stays in a per-conversation ledger and is merged back into every
sidecar until the receiving transcript commits with its receipt (E7 at-least-once).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
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

    # -- records ----------------------------------------------------------------------------------------
    def visible_mail(self, conversation: str) -> list[MailRecord]:
        """Deliverable records: committed ones only (tentative records are hidden, E4)."""
        return [r for r in self.mailboxes.get(conversation, ()) if r.id not in self.tentative]

    def add_mail(self, record: MailRecord, owner: str | None) -> None:
        self.mailboxes.setdefault(record.to, []).append(record)
        if owner is not None:
            self.tentative[record.id] = owner

    def remove_mail(self, conversation: str, mail_id: str) -> MailRecord | None:
        box = self.mailboxes.get(conversation, [])
        for index, record in enumerate(box):
            if record.id == mail_id:
                del box[index]
                self.tentative.pop(mail_id, None)
                return record
        return None

    def consume(self, conversation: str, record: MailRecord) -> None:
        """Delivered: out of the live mailbox, into the ledger until the transcript commits (E7)."""
        self.remove_mail(conversation, record.id)
        self.ledger.setdefault(conversation, {})[record.id] = record

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

    def transfer(self, old_owner: str, new_owner: str) -> None:
        for key, value in list(self.tentative.items()):
            if value == old_owner:
                self.tentative[key] = new_owner

    def rollback(self, owner: str) -> list[str]:
        """A definitive rollback: the owner's tentative records disappear (never become deliverable)."""
        keys = [k for k, v in self.tentative.items() if v == owner]
        for key in keys:
            del self.tentative[key]
            if key.startswith("agent:"):
                self.agents.pop(key[len("agent:"):], None)
                continue
            for box in self.mailboxes.values():
                box[:] = [r for r in box if r.id != key]
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
            "root": dict(root_projection),
            "next_mail": self.next_mail,
            "checkpoint": dict(checkpoint) if checkpoint else None,
        }

    # -- load -------------------------------------------------------------------------------------------
    @classmethod
    def from_bytes(cls, data: bytes) -> Sidecar:
        record = json.loads(data) if data else {}
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
        sidecar.next_mail = int(record.get("next_mail", 1))
        sidecar.checkpoint = record.get("checkpoint")
        if sidecar.checkpoint is not None and not isinstance(sidecar.checkpoint, dict):
            raise ValueError("the checkpoint marker is not an object")
        return sidecar


def encode_sidecar(detached: Mapping[str, Any]) -> bytes:
    return json.dumps(detached, separators=(",", ":"), sort_keys=True).encode()
