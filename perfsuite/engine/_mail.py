"""E4/E7: at-least-once mail: acknowledged appends (tentative until adopted), delivery into the
receiving transcript with a hidden receipt, explicit discard. The consumption ledger is the sidecar's
(``_sidecar``). A part of :class:`~perfsuite.engine._session.Session`; background deliveries go through the
asynchronous job (``_warm``)."""

from __future__ import annotations

from perfsuite.engine._gate import Token
from perfsuite.engine._session_values import Ack
from perfsuite.engine._sessionstate import SessionState
from perfsuite.engine._sidecar import ROOT, MailRecord
from perfsuite.engine._transcript import Message


class Mail(SessionState):
    """Mailbox append, delivery and discard (mixed into ``Session``)."""

    def append_mail(self, to: str, body: str, *, sender: str = ROOT, kind: str = "message",
                    ack: Ack | None = None, token: Token | None = None) -> MailRecord:
        """Mailbox append: returns only after its publication is adopted; the record is hidden from
        delivery until then (tentative)."""
        self.conversation(to)
        self._enter_sync(token)
        owner = self._new_id(kind)
        record = self._new_mail(to, sender, kind, body)
        self.sidecar.add_mail(record, owner)
        self._publish_now(kind, (), owner=owner, acks=[ack] if ack else ())
        self._input("append_mail", to, body)
        return record

    def _new_mail(self, to: str, sender: str, kind: str, body: str) -> MailRecord:
        number = self.sidecar.take_mail_number()
        return MailRecord(f"m{self.epoch}-{number}", to, sender, kind, body, self.clock.wall())

    def publish_result(self, agent: str, body: str, *, token: Token | None = None) -> MailRecord:
        """RESULT publication: the agent's answer as mail to its parent, acknowledged."""
        parent = str(self.sidecar.agents.get(agent, {}).get("parent", ROOT))
        return self.append_mail(parent, body, sender=agent, kind="RESULT", token=token)

    def deliver_mail(self, conversation: str) -> list[MailRecord]:
        """Insert committed mail into the receiving transcript with a hidden receipt and consume it in
        memory, without a synchronous save; repeated delivery is deduplicated by receipt (E7)."""
        buffer = self.conversation(conversation)
        delivered: list[MailRecord] = []
        for record in self.sidecar.visible_mail(conversation):
            if record.id not in buffer.receipts:
                buffer.insert(Message("mail", f"[{record.kind} from {record.sender}] {record.body}", record.created,
                                      {"receipt": record.id, "hidden_receipt": True, "kind": record.kind}))
                delivered.append(record)
            self.sidecar.consume(conversation, record)
        return delivered

    def discard_mail(self, conversation: str, mail_id: str) -> bool:
        """Explicit discard: observational, published by the next registry save."""
        removed = self.sidecar.remove_mail(conversation, mail_id) is not None
        if removed:
            self._observe()
            self._input("discard_mail", conversation)
        return removed

    def mailbox(self, conversation: str) -> list[MailRecord]:
        """Deliverable (committed) mail for ``conversation``; tentative records are hidden (E4)."""
        return self.sidecar.visible_mail(conversation)
