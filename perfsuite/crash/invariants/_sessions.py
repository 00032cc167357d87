"""Invariants of SPEC section 7 for session workloads (E3's two profiles), as data like the transcript ones.

The checks read the recovery view :mod:`perfsuite.crash.workloads._sessions` returns (``open``: what
``Session.open`` loaded; ``retried``: after ``retry_pending`` of a recovered pending publication;
``final``: the later of the two; ``redelivered``: what ``deliver_mail`` inserted on the recovered
session), the tree recovery left (invariant 3 parses HEAD and the session log itself, without the
engine: ``invariants._logcheck``), and the oracle: acknowledgements with what they covered, and notes
(values a mutation was about to publish, deliveries, discards). The pure ``*_problems`` functions are
shared with the kill campaign.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from perfsuite.crash.invariants._checks import (
    CheckContext,
    Invariant,
    check_clean_prefix,
    check_recovery_succeeds,
    clean_prefix,
    failed_fsyncs,
)
from perfsuite.crash.invariants._logcheck import head_problems as log_head_problems
from perfsuite.crash.model._model import FsState
from perfsuite.crash.model._trace import Ack, Note

SESSION = "sess"  # the session directory of every session workload, relative to the workload root


# -- reading recovered bytes ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Parsed:
    """A transcript's bytes read once: the clean-prefix length, the number of complete records, and the
    mail receipts in order with the content of the message carrying each."""

    keep: int
    count: int
    receipts: tuple[str, ...]
    contents: tuple[str, ...]


@functools.lru_cache(maxsize=4096)
def parse(data: bytes) -> Parsed:
    """Cached by content: every invariant reads the same recovered transcripts (bytes cache their hash)."""
    keep = clean_prefix(data, messages=True)
    count, found, contents = 0, [], []
    for line in data[:keep].splitlines():
        count += 1
        if b'"receipt"' not in line:
            continue
        record = json.loads(line)
        meta = record.get("meta")
        if isinstance(meta, dict) and "receipt" in meta:
            found.append(str(meta["receipt"]))
            contents.append(str(record.get("content", "")))
    return Parsed(keep, count, tuple(found), tuple(contents))


def records(data: bytes) -> list[dict[str, Any]]:
    """The complete JSON-lines records of a transcript's bytes."""
    keep = parse(data).keep
    return [json.loads(line) for line in data[:keep].splitlines()]


def receipts(data: bytes) -> tuple[str, ...]:
    """Mail receipts carried by a transcript, in order (hidden ``meta.receipt`` fields, E7)."""
    return parse(data).receipts


def mail_in_transcript(data: bytes, mail_id: str, body: str) -> bool:
    """The transcript holds the delivered mail: its receipt, with the body byte for byte."""
    parsed = parse(data)
    return any(r == mail_id and c.endswith(body) for r, c in zip(parsed.receipts, parsed.contents))


def _snapshots(view: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    out = [("after open", view["open"])]
    if view.get("retried") is not None:
        out.append(("after retry_pending", view["retried"]))
    return out


def recovered_value(snapshot: Mapping[str, Any], key: str) -> Any:
    """``activity:<agent>``, ``status:<agent>`` or ``control:<key>`` in a recovered snapshot."""
    kind, _, name = key.partition(":")
    if kind == "control":
        return snapshot["control"].get(name)
    agent = snapshot["agents"].get(name)
    return None if agent is None else agent.get(kind)


# -- pure checks (shared with the kill campaign) ------------------------------------------------------------------
def acknowledged_problems(view: Mapping[str, Any], acks: Sequence[Ack], notes: Sequence[Note]) -> Iterator[str]:
    """Invariant 1: acknowledged transcript bytes are a prefix of the recovered transcript, byte for byte (or
    the bytes of a rewrite begun after them: ``replace_messages`` or a restore, which need not extend them);
    acknowledged registry, status and control values are recovered (or a value set after them)."""
    latest: dict[str, Ack] = {}
    for ack in acks:
        if ack.kind == "transcript":
            latest[f"transcript:{ack.detail['conversation']}"] = ack
        elif ack.kind == "value":
            latest[f"value:{ack.detail['key']}"] = ack
    for where, snap in _snapshots(view):
        for ack in latest.values():
            if ack.kind == "transcript":
                conversation = ack.detail["conversation"]
                got = snap["conversations"].get(conversation)
                if got is None:
                    yield (f"{where}: conversation {conversation!r} acknowledged by {ack.label!r} (op #{ack.at}) "
                           "is missing")
                    continue
                want = ack.detail.get("data")
                if want is not None:  # the bytes themselves
                    rewrites = [n.detail["data"] for n in notes if n.kind == "rewriting" and n.at >= ack.at
                                and n.detail["conversation"] == conversation]
                    if not any(got.startswith(w) for w in (want, *rewrites)):
                        since = f" (nor {len(rewrites)} rewrite(s) begun since)" if rewrites else ""
                        yield (f"{where}: {ack.label!r} (op #{ack.at}) acknowledged {len(want)}B of {conversation!r}, "
                               f"recovery has {len(got)}B differing at byte {_first_difference(got, want)}{since}")
                    continue
                size = int(ack.detail["size"])  # (the kill campaign sends a size and a digest)
                if len(got) < size or hashlib.sha256(got[:size]).hexdigest() != ack.detail["sha256"]:
                    yield (f"{where}: {ack.label!r} acknowledged {size}B of {conversation!r}, recovery has "
                           f"{len(got)}B whose first {size}B differ")
            else:
                name = ack.detail["key"]
                allowed = [ack.detail["value"]] + [n.detail["value"] for n in notes
                                                   if n.kind == "value" and n.detail["key"] == name and n.at >= ack.at]
                got = recovered_value(snap, name)
                if got not in allowed:
                    yield (f"{where}: {name} is {got!r}, but {ack.label!r} (op #{ack.at}) acknowledged "
                           f"{ack.detail['value']!r} (allowed: {allowed!r})")


def clean_transcript_problems(view: Mapping[str, Any]) -> Iterator[str]:
    """Invariant 2 (portable): every loaded or recovered-pending transcript is complete JSON-lines records."""
    for where, snap in _snapshots(view):
        parts = [(c, d, "") for c, d in snap["conversations"].items()]
        parts += [(c, d, " (pending)") for c, d in (snap.get("pending") or {}).items()]
        for conversation, data, what in parts:
            keep = parse(data).keep
            if keep != len(data):
                yield f"{where}: {conversation!r}{what} has torn or mixed content at byte {keep} of {len(data)}"


def head_problems(state: FsState, acked_seq: int, view_head: Any = None, prefix: str = SESSION) -> Iterator[str]:
    """Invariant 3, read off the tree (format 2, the session log): HEAD names a log that exists with a valid header
    whose record chain verifies (``invariants._logcheck``, an independent reader of the framing); the generation is not
    older than the newest acknowledged one (a fallback may not lose acknowledged state) and it is the one
    the engine loaded."""
    yield from log_head_problems(state.as_dict(), f"{prefix}/" if prefix else "", acked_seq, view_head)


def mail_problems(view: Mapping[str, Any], acks: Sequence[Ack], notes: Sequence[Note]) -> Iterator[str]:
    """Invariant 4: (a) nothing is delivered again: ``deliver_mail`` on the recovered session inserted no
    record whose receipt the committed transcript already holds, and no receipt is in a transcript twice;
    (b) every acknowledged mail (not explicitly discarded) is in its mailbox or its receipt, with the body,
    in the receiving transcript."""
    final = view["final"]
    for conversation, ids in view.get("redelivered", {}).items():
        held = set(receipts(final["conversations"].get(conversation, b"")))
        again = [i for i in ids if i in held]
        if again:
            yield f"{conversation!r}: deliver_mail after recovery delivered {', '.join(again)} again"
    for where, snap in _snapshots(view):
        for conversation, data in snap["conversations"].items():
            seen = receipts(data)
            twice = sorted({r for r in seen if seen.count(r) > 1}) if len(set(seen)) != len(seen) else []
            if twice:
                yield f"{where}: {conversation!r} holds the receipts of {', '.join(twice)} more than once"
    discarded = {n.detail["id"] for n in notes if n.kind == "discard"}
    for where, snap in _snapshots(view):
        for ack in acks:
            if ack.kind != "mail" or ack.detail["id"] in discarded:
                continue
            mail_id, to, body = ack.detail["id"], ack.detail["to"], ack.detail["body"]
            box = {m[0]: m[3] for m in snap["mailboxes"].get(to, ())}
            if mail_id in box:
                if box[mail_id] != body:
                    yield f"{where}: mail {mail_id} to {to!r} is in its mailbox with a different body"
            elif not mail_in_transcript(snap["conversations"].get(to, b""), mail_id, body):
                yield (f"{where}: mail {mail_id} to {to!r} acknowledged by {ack.label!r} (op #{ack.at}) is lost "
                       "(neither in the mailbox nor delivered into the transcript)")


def removal_problems(view: Mapping[str, Any], notes: Sequence[Note]) -> Iterator[str]:
    """Invariant 5: a committed removal implies its transcript text is committed: a delivered (consumed)
    record missing from the recovered mailbox has its receipt in the recovered transcript, and the
    sidecar's checkpoint marker and root projection never claim more transcript than was recovered."""
    discarded = {n.detail["id"] for n in notes if n.kind == "discard"}
    for where, snap in _snapshots(view):
        conversations = snap["conversations"]
        for note in notes:
            if note.kind != "delivered" or note.detail["id"] in discarded:
                continue
            mail_id, to = note.detail["id"], note.detail["to"]
            if any(m[0] == mail_id for m in snap["mailboxes"].get(to, ())):
                continue
            if mail_id not in receipts(conversations.get(to, b"")):
                yield (f"{where}: mail {mail_id} was removed from {to!r}'s mailbox but its receipt is not in the "
                       "recovered transcript")
        marker = (snap.get("checkpoint") or {}).get("conversations", {})
        for conversation, claim in marker.items():
            data = conversations.get(conversation, b"")
            if len(data) < int(claim.get("size", 0)) or parse(data).count < int(claim.get("messages", 0)):
                yield (f"{where}: the sidecar's checkpoint marker claims {claim.get('size')}B / "
                       f"{claim.get('messages')} messages of {conversation!r}, the transcript has {len(data)}B")
        projection = snap.get("root") or {}
        root = conversations.get("root", b"")
        if int(projection.get("bytes", 0)) > len(root) or int(projection.get("messages", 0)) > parse(root).count:
            yield (f"{where}: the committed root projection claims {projection.get('bytes')}B / "
                   f"{projection.get('messages')} messages, the root transcript has {len(root)}B")


def _first_difference(a: bytes, b: bytes) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


# -- invariants over a crash state ------------------------------------------------------------------------------
def _view(ctx: CheckContext) -> Mapping[str, Any] | None:
    """The recovery view the checks read. After damage (HEAD lost on top of the crash, ``head_loss``)
    open may fall back to an older generation *and* recover the newer one's staged bytes as a pending
    publication, saying so; what must hold then is the state after ``retry_pending`` (``final``)."""
    assert ctx.outcome is not None
    view = ctx.outcome.view if ctx.outcome.error is None else None
    if view is not None and ctx.outcome.damage:
        return {**view, "open": view["final"], "retried": None}
    return view


def check_session_acknowledged(ctx: CheckContext) -> Iterator[str]:
    view = _view(ctx)
    if view is not None:
        yield from acknowledged_problems(view, ctx.trace.oracle.acks_before(ctx.at),
                                         ctx.trace.oracle.notes_before(ctx.at))


def check_session_clean(ctx: CheckContext) -> Iterator[str]:
    view = _view(ctx)
    if view is not None:
        yield from clean_transcript_problems(view)


def check_head(ctx: CheckContext) -> Iterator[str]:
    view = _view(ctx)
    assert ctx.outcome is not None
    if view is None or ctx.outcome.post is None:
        return
    acked = max((int(a.detail.get("seq") or 0) for a in ctx.trace.oracle.acks_before(ctx.at)), default=0)
    yield from head_problems(ctx.outcome.post, acked, view["final"]["head"])


def check_mail(ctx: CheckContext) -> Iterator[str]:
    view = _view(ctx)
    if view is not None:
        yield from mail_problems(view, ctx.trace.oracle.acks_before(ctx.at), ctx.trace.oracle.notes_before(ctx.at))


def check_removal(ctx: CheckContext) -> Iterator[str]:
    view = _view(ctx)
    if view is not None:
        yield from removal_problems(view, ctx.trace.oracle.notes_before(ctx.at))


def check_session_idempotent(ctx: CheckContext) -> Iterator[str]:
    """Invariant 6: recovering the recovered tree changes nothing on disk, loads the same state and would
    deliver the same mail (a recovered pending publication is retried by the first recovery only)."""
    outcome = ctx.outcome
    assert outcome is not None
    if outcome.post is None or outcome.post_again is None:
        return
    if outcome.post.digest != outcome.post_again.digest:
        first, second = outcome.post.as_dict(), outcome.post_again.as_dict()
        changed = sorted(p for p in set(first) | set(second) if first.get(p) != second.get(p))
        yield f"a second recovery changed {', '.join(changed[:4])}"
    elif outcome.view["final"] != outcome.view_again["final"]:
        yield "a second recovery loaded a different state"
    elif outcome.view["redelivered"] != outcome.view_again["redelivered"]:
        yield "a second recovery would deliver different mail"


def check_session_fsync_errors(ctx: CheckContext) -> Iterator[str]:
    """Invariant 7: a file whose fsync failed is never fsynced again, and no acknowledgement given after
    the failure rests on it (an acknowledgement lists the files its committed state rests on: HEAD, the
    manifest and its chunks; or the sidecar and the transcripts). Also flags a failed publication that
    was acknowledged and an acknowledgement that ran more than once (E4)."""
    tl, trace = ctx.timeline, ctx.trace
    problems: list[str] = []
    for i, inode, path in failed_fsyncs(ctx, problems):
        yield from problems
        problems.clear()
        for ack in trace.oracle.acks:
            if ack.at <= i:
                continue
            for dep in ack.detail.get("depends", ()):
                bound = [b for b in tl.bindings.get(dep, ()) if b.at < ack.at]
                if bound and bound[-1].inode == inode:
                    yield (f"{dep}: {ack.label!r} acknowledged at op #{ack.at} rests on it although its fsync "
                           f"failed at op #{i} (as {path})")
    for note in trace.oracle.notes:
        if note.kind in ("unexpected", "repeated-ack"):
            yield f"op #{note.at}: {note.label}"


# -- the blind classes: fencing (E3), abandon (E4), rejected directory fsync (E1) ----------------------------
def fencing_problems(acks: Sequence[Ack], notes: Sequence[Note]) -> Iterator[str]:
    """Invariant F (E3 fencing): once another owner took the session over (a ``fenced`` note names the
    writer it fenced), nothing that writer does is acknowledged."""
    fenced = {n.detail["writer"]: n for n in notes if n.kind == "fenced"}
    for ack in acks:
        note = fenced.get(ack.detail.get("writer"))
        if note is not None and ack.at > note.at:
            yield (f"{ack.label!r} was acknowledged at op #{ack.at} by writer {ack.detail['writer']}, which "
                   f"{note.label!r} fenced at op #{note.at}")


def abandoned_problems(view: Mapping[str, Any], notes: Sequence[Note], at: int) -> Iterator[str]:
    """Invariant A (E4, an abandon rolls back): a mutation reported abandoned (``SaveAbandoned``) is not there
    after a reopen: from the abandon's return until the next publication of that conversation starts
    (which may publish the buffer's text again, with an acknowledgement of its own), the transcript open
    loads holds none of the abandoned lines."""
    for note in notes:
        if note.kind != "abandoned" or note.at > at:
            continue
        conversation = note.detail["conversation"]
        later = [n.at for n in notes if n.kind == "publishing" and n.detail["conversation"] == conversation
                 and n.at > note.at]
        if later and at >= min(later):
            continue
        data = view["open"]["conversations"].get(conversation, b"")
        back = [line for line in note.detail["lines"] if line in data]
        if back:
            yield (f"{conversation!r}: {len(back)} line(s) that {note.label!r} (op #{note.at}) reported abandoned are "
                   "in the transcript after reopen")


def dir_fsync_warning_problems(trace: Any) -> Iterator[str]:
    """E1: a directory fsync the file system rejects (EINVAL, ENOTSUP) warns once per
    directory and the engine continues: every rejected directory warned exactly once, and no publication
    failed for it (the workload notes a failed save on such a layer as ``unexpected``, invariant 7)."""
    rejected = sorted({trace.rel(op.path) for op in trace.ops if op.kind == "fsync_dir_rejected"})
    warned: dict[str, int] = {}
    for note in trace.oracle.notes:
        if note.kind == "dir-fsync-warning":
            warned[note.detail["directory"]] = warned.get(note.detail["directory"], 0) + 1
    for directory in rejected:
        count = warned.get(directory, 0)
        if count != 1:
            yield f"{directory}: its directory fsync was rejected, and the engine warned {count} times (E1: once)"


def check_fencing(ctx: CheckContext) -> Iterator[str]:
    yield from fencing_problems(ctx.trace.oracle.acks, ctx.trace.oracle.notes)


def check_abandoned(ctx: CheckContext) -> Iterator[str]:
    view = _view(ctx)
    if view is not None:
        yield from abandoned_problems(view, ctx.trace.oracle.notes, ctx.at)


def check_dir_fsync_warnings(ctx: CheckContext) -> Iterator[str]:
    yield from dir_fsync_warning_problems(ctx.trace)


def session_invariants(profile: str) -> tuple[Invariant, ...]:
    """The invariants that apply to a portable (HEAD and generations) or file-backed session workload."""
    clean: tuple[Invariant, ...]
    if profile == "portable":
        clean = (Invariant("2", "transcripts are clean prefixes", check_session_clean),
                 Invariant("3", "HEAD names an intact manifest; no acknowledged generation lost", check_head))
    else:
        clean = (Invariant("2", "transcripts are clean prefixes", check_file_transcripts),)
    return (
        Invariant("0", "recovery succeeds", check_recovery_succeeds),
        Invariant("1", "acknowledged turns and mutations present byte for byte", check_session_acknowledged),
        *clean,
        Invariant("4", "no committed mail delivered again; no acknowledged mail lost", check_mail),
        Invariant("5", "a committed removal implies its transcript text is committed", check_removal),
        Invariant("6", "recovery is idempotent", check_session_idempotent),
        Invariant("7", "nothing acknowledged after an fsync error", check_session_fsync_errors, per="trace"),
        Invariant("A", "an abandoned mutation is not there after reopen", check_abandoned),
        Invariant("E", "a rejected directory fsync warns once per directory", check_dir_fsync_warnings, per="trace"),
        Invariant("F", "nothing a fenced writer does is acknowledged", check_fencing, per="trace"),
    )


def check_file_transcripts(ctx: CheckContext) -> Iterator[str]:
    """Invariant 2 (file-backed): each conversation's E2 log is recovered to a clean prefix (the
    transcript checks of :func:`check_clean_prefix`, one log directory at a time)."""
    assert ctx.outcome is not None
    for logdir in _log_dirs(ctx.outcome.pre.files):
        yield from check_clean_prefix(logdir)(ctx)


def _log_dirs(files: Iterable[tuple[str, bytes | None]]) -> list[str]:
    base = f"{SESSION}/conversations/"
    return sorted({p for p, d in files if d is None and p.startswith(base) and "/" not in p[len(base):]})
