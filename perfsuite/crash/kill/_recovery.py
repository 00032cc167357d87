"""The kill campaign's parent side of one kill: the session every child continues, the engine's recovery of a
killed child's session, and the checks of that recovery against every acknowledgement so far."""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Iterator
from typing import Any

from perfsuite.crash.invariants._checks import clean_prefix
from perfsuite.crash.invariants._sessions import (
    acknowledged_problems,
    clean_transcript_problems,
    head_problems,
    mail_problems,
    removal_problems,
)
from perfsuite.crash.kill._layer import layer
from perfsuite.crash.kill._ledger import checked_kinds, lost_acknowledgements
from perfsuite.crash.model._model import snapshot
from perfsuite.crash.model._trace import Ack, Note


def create_session(directory: str, profile: str) -> None:
    """The session every child continues: created with one committed turn, in this process (the window
    before the first HEAD adoption has known engine bugs; ``session-create`` explores it)."""
    from perfsuite.crash.workloads._driver import settings
    from perfsuite.engine import FileSession, Message, Session

    cls = Session if profile in ("portable", "langgraph") else FileSession  # (langgraph: the saver's session)
    session = cls.open(directory, create=True, settings=settings())
    session.add_message("root", Message("user", "kill campaign: first turn", time.time()))
    session.checkpoint("root")
    session.close()


def recover_view(directory: str, profile: str, bug: str | None = None) -> dict[str, Any]:
    """The engine's recovery of a killed child's session (real liveness: the child is dead), as the view
    the session invariants read; the session is closed afterwards."""
    from perfsuite.crash.workloads._driver import settings
    from perfsuite.crash.workloads._sessions import _recover
    from perfsuite.engine import FileSession, Session

    fs, _faults = layer(bug)
    if profile == "portable":
        session: Any = Session.open(directory, settings=settings(), fs=fs)
    else:
        session = FileSession.open(directory, settings=settings(), fs=fs)
    return _recover(session)


def on_disk_problems(directory: str) -> Iterator[str]:
    """Invariant 2 on disk (file-backed): after recovery every transcript file holds complete records only
    (a partial last line left in place would swallow the next append)."""
    conversations = os.path.join(directory, "conversations")
    for conversation in sorted(os.listdir(conversations)) if os.path.isdir(conversations) else ():
        path = os.path.join(conversations, conversation, "conversation.jsonl")
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as handle:
            data = handle.read()
        keep = clean_prefix(data, messages=True)
        if keep != len(data):
            yield (f"{conversation}/conversation.jsonl: {len(data) - keep}B at byte {keep} are not complete records "
                   "after recovery")


class _Oracle:
    """Every acknowledgement and note of every child so far, with a global sequence number as ``at``."""

    def __init__(self) -> None:
        self.acks: list[Ack] = []
        self.notes: list[Note] = []
        self.counter = itertools.count(1)

    def read(self, line: str, kill: int) -> bool:
        what, _, body = line.strip().partition(" ")
        if what not in ("ACK", "NOTE"):
            return False
        try:
            record = json.loads(body)
        except ValueError:
            return False  # a line torn by the kill is not an acknowledgement
        at = next(self.counter)
        kind = record.pop("kind")
        label = f"kill {kill}: {kind} {record.get('id') or record.get('key') or record.get('conversation')}"
        if what == "ACK":
            self.acks.append(Ack(at, label, "", kind, record))
        else:
            self.notes.append(Note(at, label, kind, record))
        return what == "ACK"


def check_recovered(directory: str, profile: str, oracle: _Oracle, bug: str | None = None,
                    lost: list[int] | None = None) -> Iterator[tuple[str, str]]:
    """(invariant, message) for one recovery of ``directory``: 1-5 on the recovered view, 2 also on the
    files (file-backed), 3 on the tree, 6 by recovering again; L: every recorded acknowledgement of a
    checkpoint or mail, one by one (``_ledger``; the ``at`` of each one missing goes to ``lost``). The
    ``langgraph`` profile reopens the saver instead (``_langgraph``: L, S and 6)."""
    if profile == "langgraph":
        from perfsuite.crash.kill._langgraph import check_saver_recovered

        yield from check_saver_recovered(directory, oracle.acks, oracle.notes, bug, lost)
        return
    view = recover_view(directory, profile, bug)
    acks, notes = oracle.acks, oracle.notes
    missing = lost_acknowledgements(view, acks, notes)
    if missing:
        if lost is not None:
            lost.extend(ack.at for ack in missing)
        shown = ", ".join(f"{a.label} (op #{a.at})" for a in missing[:4]) + (", ..." if len(missing) > 4 else "")
        yield "L", (f"{len(missing)} of {checked_kinds(acks)} recorded acknowledgements (checkpoints, mail) are "
                    f"missing after reopen: {shown}")
    yield from (("1", m) for m in acknowledged_problems(view, acks, notes))
    yield from (("2", m) for m in clean_transcript_problems(view))
    if profile == "file":
        yield from (("2", m) for m in on_disk_problems(directory))
    if profile == "portable":
        state = snapshot(directory)
        acked = max((int(a.detail.get("seq") or 0) for a in acks), default=0)
        yield from (("3", m) for m in head_problems(state, acked, view["final"]["head"], prefix=""))
    yield from (("4", m) for m in mail_problems(view, acks, notes))
    yield from (("5", m) for m in removal_problems(view, notes))
    before = snapshot(directory)
    again = recover_view(directory, profile, bug)
    if snapshot(directory).digest != before.digest:
        yield "6", "a second recovery changed the session directory"
    elif again["final"] != view["final"] or again["redelivered"] != view["redelivered"]:
        yield "6", "a second recovery loaded a different state"
    if view["retried"] is not None:
        yield "pending", "recovery found a pending publication and retried it"
