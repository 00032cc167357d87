"""The kill campaign's acknowledgement ledger: every acknowledgement (and note) a child makes, recorded durably
OUTSIDE the session as it arrives, and each one checked, one by one, against the reopened session.

The child appends each record to its side file and fdatasyncs it *before* it prints the line or goes on
(E1: an acknowledgement the caller saw is one the checker holds, whatever the kill interrupts); the parent
builds its oracle from the side file, not from the pipe, and checks that everything printed was recorded
first. A transcript only grows in the kill workload (no rewrite, no restore), so every acknowledged prefix,
not only the newest one, must be in the reopened transcript; every acknowledged mail not discarded must be
in its mailbox or delivered into its transcript (E7 at-least-once).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from perfsuite.crash.invariants._sessions import mail_in_transcript
from perfsuite.crash.model._trace import Ack, Note

LEDGER = ".perfsuite-kill-acks"  # the side file of a chain's kill: "<LEDGER>-<profile>-<kill>.jsonl", beside it


class AckLedger:
    """The child's side file: one JSON line per record, appended and fdatasynced before the caller goes on
    (a failed fdatasync is never retried: fsyncgate; the child dies and the parent reports it)."""

    def __init__(self, path: str | None) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if path else None

    def record(self, line: str) -> None:
        if self.fd is None:
            return
        data = (line + "\n").encode()
        while data:
            data = data[os.write(self.fd, data):]
        os.fdatasync(self.fd)


def ledger_path(directory: str, profile: str, kill: int) -> str:
    """The side file of ``kill`` in the chain whose session is ``directory`` (outside the session)."""
    return os.path.join(os.path.dirname(directory), f"{LEDGER}-{profile}-{kill}.jsonl")


def remove_ledgers(directory: str, profile: str) -> None:
    """A chain started again from its first kill drops the side files of its earlier attempt."""
    root = os.path.dirname(directory)
    for name in os.listdir(root) if os.path.isdir(root) else ():
        if name.startswith(f"{LEDGER}-{profile}-"):
            os.remove(os.path.join(root, name))


def ledger_lines(path: str) -> list[str]:
    """The complete records of a side file (a line torn by the kill is no record)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return []
    lines = data.decode("utf-8", "replace").split("\n")
    return [line for line in lines[:-1] if is_record(line)]


def is_record(line: str) -> bool:
    """An ``ACK`` or ``NOTE`` line whose JSON is complete (a line torn by the kill is none)."""
    what, _, body = line.strip().partition(" ")
    if what not in ("ACK", "NOTE"):
        return False
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


def unrecorded(printed: Sequence[str], recorded: Sequence[str]) -> list[str]:
    """The printed records the side file does not hold in the same order (each was recorded before it was
    printed): empty when ``printed`` is a prefix of ``recorded``."""
    strip = [line.strip() for line in printed]
    if list(recorded[: len(strip)]) == strip:
        return []
    held = set(recorded)
    return [line for line in strip if line not in held] or ["(recorded in another order)"]


def checked_kinds(acks: Iterable[Ack]) -> int:
    """How many acknowledgements the one-by-one check reads (checkpoints and mail; the saver's puts and writes)."""
    return sum(ack.kind in ("transcript", "mail", "lg-checkpoint", "lg-writes") for ack in acks)


def lost_acknowledgements(view: Mapping[str, Any], acks: Sequence[Ack], notes: Sequence[Note]) -> list[Ack]:
    """Every recorded acknowledgement of transcript bytes (a checkpoint, synchronous or asynchronous) or of
    mail that the reopened session (after open, and after a retried pending publication) does not hold."""
    discarded = {n.detail["id"] for n in notes if n.kind == "discard"}
    snapshots = [view["open"]] + ([view["retried"]] if view.get("retried") is not None else [])
    lost = []
    for ack in acks:
        if ack.kind == "transcript":
            missing = any(not _holds_prefix(snap, ack.detail) for snap in snapshots)
        elif ack.kind == "mail" and ack.detail["id"] not in discarded:
            missing = any(not _holds_mail(snap, ack.detail) for snap in snapshots)
        else:
            continue
        if missing:
            lost.append(ack)
    return lost


def _holds_prefix(snap: Mapping[str, Any], detail: Mapping[str, Any]) -> bool:
    got = snap["conversations"].get(detail["conversation"])
    size = int(detail["size"])
    return got is not None and len(got) >= size and hashlib.sha256(got[:size]).hexdigest() == detail["sha256"]


def _holds_mail(snap: Mapping[str, Any], detail: Mapping[str, Any]) -> bool:
    mail_id, to, body = detail["id"], detail["to"], detail["body"]
    box = {m[0]: m[3] for m in snap["mailboxes"].get(to, ())}
    if mail_id in box:
        return bool(box[mail_id] == body)
    return mail_in_transcript(snap["conversations"].get(to, b""), mail_id, body)
