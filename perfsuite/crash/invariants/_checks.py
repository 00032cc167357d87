"""Invariants of SPEC section 7, as data: each takes a :class:`CheckContext` and yields violation messages.

A state-level invariant sees one recovery outcome of one crash state (the tree recovery started from,
the tree it left, a second recovery's tree and views); a trace-level one sees the trace once. The
transcript invariants here are 1, 2, 6 and 7; :mod:`perfsuite.crash.invariants._sessions` holds the
session versions of 1, 2, 6 and 7 and adds 3, 4 and 5 the same way (a workload lists the invariants
that apply to it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from perfsuite.crash.model._model import FsState, Timeline
from perfsuite.crash.model._states import CrashSpec
from perfsuite.crash.model._trace import Ack, OpTrace


@dataclass(frozen=True, slots=True)
class Outcome:
    """One recovery of one tree: ``pre`` before, ``post`` after, ``post_again`` after recovering again.
    ``label`` is "recover" or "recovery crash: ..." (a crash during recovery, then a new recovery)."""

    label: str
    pre: FsState
    post: FsState | None
    post_again: FsState | None
    view: Any = None
    view_again: Any = None
    error: str | None = None
    recovery_ops: int = 0
    # A crash of recovery itself: the crash state the first recovery started from (its torn bytes must
    # survive in ``recovery/`` whatever recovery had done when it crashed: E2, a torn tail kept aside).
    origin: FsState | None = None
    # Damage applied to the crash state before recovery (``head_loss``: "HEAD deleted", "HEAD torn"):
    # recovery may then refuse (``refused``: one line, the engine's own error), never load less silently.
    damage: str | None = None
    refused: bool = False


@dataclass(frozen=True, slots=True)
class CheckContext:
    """Everything an invariant may read. ``spec`` and ``outcome`` are ``None`` for trace-level checks."""

    trace: OpTrace
    timeline: Timeline
    spec: CrashSpec | None = None
    outcome: Outcome | None = None

    @property
    def at(self) -> int:
        return self.spec.at if self.spec is not None else len(self.trace.ops)


@dataclass(frozen=True, slots=True)
class Invariant:
    """A SPEC section 7 invariant: ``id`` is its number there ("0" is "recovery succeeds")."""

    id: str
    name: str
    check: Callable[[CheckContext], Iterable[str]]
    per: Literal["state", "trace"] = "state"


# -- helpers ---------------------------------------------------------------------------------------------
def clean_prefix(data: bytes, *, messages: bool) -> int:
    """Length of the longest prefix of complete JSON-lines records (E2 load: what is kept, not torn)."""
    offset = 0
    while offset < len(data):
        end = data.find(b"\n", offset)
        if end < 0:
            break
        try:
            record = json.loads(data[offset:end])
        except ValueError:
            break
        if not isinstance(record, dict) or (messages and not {"role", "content"} <= record.keys()):
            break
        offset = end + 1
    return offset


def transcript_files(scope: str, state: FsState) -> Iterator[tuple[str, bytes]]:
    """The JSON-lines files of the log in ``scope``: transcripts, model trace, event log (no temps, no
    recovery files)."""
    prefix = f"{scope}/" if scope else ""
    for path, data in state.files:
        if data is None or not path.startswith(prefix) or not path.endswith(".jsonl"):
            continue
        if path.startswith(f"{prefix}recovery/") or ".tmp-" in os.path.basename(path):
            continue
        yield path, data


def _is_event_log(path: str) -> bool:
    return os.path.basename(path) == "events.jsonl"


def _is_messages(path: str) -> bool:
    return "/branches/" in f"/{path}" or "/views/" in f"/{path}" or path.endswith("conversation.jsonl")


def _first_difference(a: bytes, b: bytes) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def _latest_acks(ctx: CheckContext, kind: str) -> dict[str, Ack]:
    latest: dict[str, Ack] = {}
    for ack in ctx.trace.oracle.acks_before(ctx.at):
        if ack.kind == kind:
            latest[ack.scope] = ack
    return latest


# -- 0: recovery itself ----------------------------------------------------------------------------------
def check_recovery_succeeds(ctx: CheckContext) -> Iterator[str]:
    """Recovery must open every crash state (a crash state it cannot open loses everything in it). A crash
    state also damaged (HEAD lost) may be refused with the engine's one-line error, never a traceback."""
    assert ctx.outcome is not None
    if ctx.outcome.error and not (ctx.outcome.damage and ctx.outcome.refused):
        yield f"recovery failed: {ctx.outcome.error}"


# -- 1: acknowledged turns are present ------------------------------------------------------------------
def check_acknowledged_present(ctx: CheckContext) -> Iterator[str]:
    """Every file an acknowledged barrier covered holds at least its acknowledged bytes, or (when a rewrite
    issued after the acknowledgement replaced it) at least the complete rewritten bytes (SPEC 7.1)."""
    assert ctx.outcome is not None and ctx.spec is not None
    if ctx.outcome.post is None:
        return
    post = ctx.outcome.post.as_dict()
    for scope, ack in _latest_acks(ctx, "barrier").items():
        for path, content in transcript_files(scope, ctx.timeline.live[ack.at]):
            got = post.get(path)
            if got is None:
                yield f"{path}: acknowledged by {ack.label!r} (op #{ack.at}) but missing after recovery"
                continue
            rebound = [b for b in ctx.timeline.bindings.get(path, ())
                       if ack.at <= b.at < ctx.spec.at and b.inode >= 0]
            if got.startswith(content) or any(got.startswith(b.content) for b in rebound):
                continue
            yield (f"{path}: {ack.label!r} (op #{ack.at}) acknowledged {len(content)}B, recovery has {len(got)}B "
                   f"differing at byte {_first_difference(got, content)}")


# -- 2: clean prefix -------------------------------------------------------------------------------------
def check_clean_prefix(scope: str) -> Callable[[CheckContext], Iterator[str]]:
    """SPEC 7.2 for the log in ``scope``: recovery keeps exactly the complete records, moves a torn tail
    byte for byte into ``recovery/``, leaves only complete records, and what is left is a prefix of one
    version the file really had (no mixed content)."""

    def check(ctx: CheckContext) -> Iterator[str]:
        outcome = ctx.outcome
        assert outcome is not None
        if outcome.post is None:
            return
        post = outcome.post.as_dict()
        recovery_prefix = f"{scope}/recovery/" if scope else "recovery/"
        recovered = [(p, d) for p, d in outcome.post.files if p.startswith(recovery_prefix) and d is not None]
        for path, before in transcript_files(scope, outcome.pre):
            messages = _is_messages(path)
            got = post.get(path)
            if got is None:
                yield f"{path}: present before recovery, missing after"
                continue
            pieces = damaged_pieces(before, messages=messages)
            intact = _without(before, pieces)  # the complete records, a damaged middle line quarantined
            keep = len(before) - sum(len(p) for _o, p, w in pieces if w == "torn")
            if _is_event_log(path):
                if not got.startswith(intact):
                    yield f"{path}: recovery lost complete event records"
            elif got != intact:
                yield f"{path}: recovery kept {len(got)}B, the complete records were {len(intact)}B"
            for offset, piece, what in pieces:
                if what == "torn":
                    stem = os.path.basename(path) + ".torn-"
                    if not any(os.path.basename(p).startswith(stem) and d == piece for p, d in recovered):
                        yield f"{path}: torn tail of {len(piece)}B at offset {keep} not preserved under recovery/"
                elif not any(d == piece for _p, d in recovered):
                    yield f"{path}: damaged line of {len(piece)}B at offset {offset} not quarantined under recovery/"
        yield from _kept_from(scope, ctx, recovered)
        for path, data in transcript_files(scope, outcome.post):
            if clean_prefix(data, messages=_is_messages(path)) != len(data):
                yield f"{path}: torn or mixed content left after recovery"
            elif not _is_event_log(path) and data and not _is_prefix_of_a_version(ctx.timeline, path, data):
                yield f"{path}: {len(data)}B after recovery are not a prefix of any content the file had"

    return check


def damaged_pieces(data: bytes, *, messages: bool) -> list[tuple[int, bytes, str]]:
    """What an E2 load must set aside from ``data``, read independently of the engine: every complete
    line in the middle that is not a record (quarantined) and the torn tail (a last line without its
    newline, or from the first line holding NUL bytes on): ``(offset, bytes, "corrupt" | "torn")``."""
    out: list[tuple[int, bytes, str]] = []
    offset = 0
    while offset < len(data):
        end = data.find(b"\n", offset)
        if end < 0 or data.find(b"\0", offset, end) >= 0:
            out.append((offset, data[offset:], "torn"))
            break
        if clean_prefix(data[offset : end + 1], messages=messages) == 0:
            out.append((offset, data[offset : end + 1], "corrupt"))
        offset = end + 1
    return out


def _kept_from(scope: str, ctx: CheckContext, recovered: Sequence[tuple[str, bytes | None]]) -> Iterator[str]:
    """E2, what recovery sets aside: the bytes (torn tails, quarantined lines) are durable before
    the transcript that held them is rewritten. So whatever recovery had done when it crashed, the damaged
    pieces of the tree it started from (and of the workload's initial tree, which a workload's own open
    recovers) are, after the next recovery, still in the transcript or byte for byte in ``recovery/``."""
    outcome = ctx.outcome
    assert outcome is not None and outcome.post is not None
    sources = [s for s in (outcome.origin, ctx.trace.initial if ctx.spec is not None else None) if s is not None]
    if not sources:
        return
    post = outcome.post.as_dict()
    kept = {d for _p, d in recovered if d}
    for source in sources:
        for path, before in transcript_files(scope, source):
            if _is_event_log(path):
                continue
            now = post.get(path) or b""
            for offset, piece, what in damaged_pieces(before, messages=_is_messages(path)):
                if piece in kept or (what == "corrupt" and piece in now):
                    continue
                where = "the crash state recovery started from" if source is outcome.origin else "the initial tree"
                yield (f"{path}: the {what} bytes at offset {offset} ({len(piece)}B) of {where} are neither in the "
                       "transcript nor preserved under recovery/ (a recovery file that was not durable before the "
                       "rewrite)")


def _without(data: bytes, pieces: list[tuple[int, bytes, str]]) -> bytes:
    """``data`` without its damaged pieces (what an E2 load keeps)."""
    out, start = [], 0
    for offset, piece, _what in pieces:
        out.append(data[start:offset])
        start = offset + len(piece)
    if not pieces or pieces[-1][2] != "torn":
        out.append(data[start:])
    return b"".join(out)


def _is_prefix_of_a_version(tl: Timeline, path: str, data: bytes) -> bool:
    """``data`` is a prefix of some content the file had (or of one with its damaged lines quarantined)."""
    for binding in tl.bindings.get(path, ()):
        if binding.inode < 0:
            continue
        versions = (binding.content, *tl.versions.get(binding.inode, ()))
        if any(v.startswith(data) for v in versions):
            return True
        messages = _is_messages(path)
        if any(_without(v, damaged_pieces(v, messages=messages)).startswith(data) for v in versions):
            return True
    return False


# -- 6: idempotent recovery ------------------------------------------------------------------------------
def check_idempotent(ctx: CheckContext) -> Iterator[str]:
    """Recovering a recovered tree changes nothing, on disk or in what the engine loads (SPEC 7.6)."""
    outcome = ctx.outcome
    assert outcome is not None
    if outcome.post is None or outcome.post_again is None:
        return
    if outcome.post.digest != outcome.post_again.digest:
        first, second = outcome.post.as_dict(), outcome.post_again.as_dict()
        changed = sorted(p for p in set(first) | set(second) if first.get(p) != second.get(p))
        yield f"a second recovery changed {', '.join(changed[:4])}"
    elif outcome.view != outcome.view_again:
        yield "a second recovery loaded a different state"


# -- 7: nothing acknowledged after an fsync error -------------------------------------------------------
def failed_fsyncs(ctx: CheckContext, problems: list[str]) -> Iterator[tuple[int, Any, str]]:
    """Each failed fsync as (op index, inode, path); a retry of fsync on the same inode (fsyncgate) is
    appended to ``problems``. Shared by the transcript and session versions of invariant 7."""
    tl, trace = ctx.timeline, ctx.trace
    for i, op in enumerate(trace.ops):
        if op.kind not in ("fsync_failed", "fdatasync_failed"):
            continue
        inode = tl.op_inode[i]
        path = trace.rel(op.path)
        what = op.kind.removesuffix("_failed")
        for j in range(i + 1, len(trace.ops)):
            if trace.ops[j].kind in ("fsync", "fdatasync") and tl.op_inode[j] == inode:
                problems.append(f"{path}: {what} failed at op #{i} and was retried on the same file at op "
                                f"#{j} ({trace.ops[j].kind})")
                break
        yield i, inode, path


def check_no_ack_after_fsync_error(ctx: CheckContext) -> Iterator[str]:
    """After a failed fsync the file's contents are unknown (E1): it is never fsynced again, and no later
    acknowledgement may rest on it; only a rewrite into a new file may be acknowledged (SPEC 7.7)."""
    tl, trace = ctx.timeline, ctx.trace
    problems: list[str] = []
    for i, inode, path in failed_fsyncs(ctx, problems):
        yield from problems
        problems.clear()
        for ack in trace.oracle.acks:
            if ack.at <= i or not (path + "/").startswith(f"{ack.scope}/" if ack.scope else ""):
                continue
            bound = [b for b in tl.bindings.get(path, ()) if b.at < ack.at]
            if bound and bound[-1].inode == inode:
                yield (f"{path}: {ack.label!r} acknowledged at op #{ack.at} although the file's fsync failed "
                       f"at op #{i} and it was not rewritten")


def transcript_invariants(scope: str) -> tuple[Invariant, ...]:
    """The invariants that apply to a transcript log in ``scope`` (relative to the workload root)."""
    return (
        Invariant("0", "recovery succeeds", check_recovery_succeeds),
        Invariant("1", "acknowledged turns present byte for byte", check_acknowledged_present),
        Invariant("2", "transcripts are clean prefixes", check_clean_prefix(scope)),
        Invariant("6", "recovery is idempotent", check_idempotent),
        Invariant("7", "nothing acknowledged after an fsync error", check_no_ack_after_fsync_error, per="trace"),
    )
