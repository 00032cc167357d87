"""One case of the corruption campaign, run in a worker process: damage a finished session, open it,
recover (retry a pending publication, deliver mail), retire, write a probe turn, close, reopen; then the
invariants below (nothing lost silently, a refusal in one line). A per-case deadline turns a hang into a
violation instead of a stuck campaign.

Invariants (ids as the report prints them):

- ``T`` no traceback: only the engine's own errors (``SessionError``, ``TranscriptError``, ``SaveFailed``,
  ``SaveAbandoned``) may escape; ``L`` their message is one non-empty line.
- ``A`` every acknowledged mutation is present after open (transcript bytes, values, mail), or open
  refused. A line the engine reports it quarantined counts as kept (its bytes are under ``recovery/``);
  a file-backed flip that still decodes is *undetectable* (that format has no checksums) and counted apart.
- ``G`` never an empty or older state while the newest adopted generation is intact (portable).
- ``R`` retirement never deletes the newest intact generation (portable).
- ``O`` open does not refuse damage that costs nothing: a missing, torn or dangling LEASE/PID lock (a crash
  leaves those), or a missing ``logs/`` or ``recovery/``.
- ``P`` a session that opened takes a new turn (or fails it with an engine error), closes, and reopens
  with everything acknowledged plus that turn.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from perfsuite.crash.bugs._seeded import seeded_bug
from perfsuite.crash.corrupt._damage import NONE, apply, damaged_range
from perfsuite.crash.invariants._sessions import SESSION, acknowledged_problems, mail_problems
from perfsuite.crash.model._model import FsState, materialize
from perfsuite.crash.model._trace import CRASHED, Ack, Note, owner_alive_after_crash
from perfsuite.crash.workloads._driver import settings
from perfsuite.crash.workloads._sessions import _release, recovery_view, snapshot_session
from perfsuite.engine import (
    FileSession,
    FileSystem,
    Message,
    OsFileSystem,
    SaveAbandoned,
    SaveFailed,
    Session,
    SessionError,
    TranscriptError,
    scan_lines,
)
from perfsuite.engine.testing import VirtualClock

ENGINE_ERRORS = (SessionError, TranscriptError, SaveFailed, SaveAbandoned)
OWNERSHIP = {"portable": f"{SESSION}/LEASE", "file": f"{SESSION}/session.pid"}
HARMLESS = (NONE, "delete", "truncate-0", "truncate-half", "garbage", "symlink")  # to an ownership file
PROBE = "a turn written after the damage"


@dataclass(frozen=True, slots=True)
class Case:
    """Damage ``kind`` applied to ``target`` (relative to the workload root) of the ``base`` tree."""

    base: str  # closed, owned, pending or recovered (see ``corrupt._campaign``)
    target: str
    kind: str


@dataclass(frozen=True, slots=True)
class Expect:
    """What the parent knows about the undamaged session: acknowledgements, notes, the newest generation
    (sequence, manifest and chunk paths; portable) and the base bytes of every file."""

    profile: str
    acks: tuple[Ack, ...]
    notes: tuple[Note, ...]
    generation: tuple[int, str, tuple[str, ...]] | None
    sizes: Mapping[str, int]
    transcripts: Mapping[str, bytes]  # conversation -> base bytes of its main transcript (file-backed)


#: what open and recovery did with one damaged tree (what the report counts per case)
CaseStatus = Literal["opened", "refused", "undetectable", "failed"]


@dataclass(frozen=True, slots=True)
class CaseOutcome:
    """``status``: opened, refused (at open or a later step), undetectable, or failed (a traceback)."""

    case: Case
    status: CaseStatus
    detail: str
    violations: tuple[tuple[str, str], ...]


class _Hang(BaseException):
    """The case ran past its deadline."""


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    def expire(signum: int, frame: Any) -> None:
        raise _Hang(f"no answer within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_cases(workload: str, bug: str | None, bases: Mapping[str, FsState], cases: Sequence[Case],
              expects: Mapping[str, Expect], seed: int, scratch: str | None, crashed: tuple[int, ...],
              timeout_s: float) -> list[CaseOutcome]:
    """Worker task: every case of the batch, each in a fresh copy of its base tree."""
    CRASHED.clear()
    CRASHED.update(crashed)
    broken = seeded_bug(bug) if bug else None
    base_dir = os.path.realpath(tempfile.mkdtemp(prefix="perfsuite-corrupt-", dir=scratch))
    out: list[CaseOutcome] = []
    try:
        for index, case in enumerate(cases):
            root = os.path.join(base_dir, f"c{index}")
            materialize(bases[case.base], root)
            apply(root, case.target, case.kind, seed)
            expect = expects[case.base]
            # Judged before open, which may repair the file: a flip that leaves it decodable.
            silent = expect.profile == "file" and case.kind == "flip" and _still_decodes(root, case.target)
            fs = broken.wrap(OsFileSystem()) if broken else OsFileSystem()
            try:
                with _deadline(timeout_s):
                    out.append(exercise(root, case, expect, fs, seed, silent=silent))
            except _Hang as exc:
                out.append(CaseOutcome(case, "failed", str(exc), (("T", f"hang: {exc}"),)))
            shutil.rmtree(root, ignore_errors=True)
    finally:
        shutil.rmtree(base_dir, ignore_errors=True)
    return out


def _where(exc: BaseException) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    place = f" ({os.path.basename(frame.filename)}:{frame.lineno})" if frame else ""
    return f"{type(exc).__name__}: {exc}{place}"


def _one_line(text: str) -> list[tuple[str, str]]:
    return [] if text and "\n" not in text else [("L", f"the error is not one line: {text!r}")]


def _open(profile: str, path: str, fs: FileSystem) -> Session:
    cls = Session if profile == "portable" else FileSession
    return cls.open(path, fs=fs, clock=VirtualClock(), settings=settings(), owner_alive=owner_alive_after_crash)


def must_open(case: Case, profile: str) -> bool:
    """Damage a crash can leave, or that costs nothing: refusing it would make a session unopenable.
    Undamaged bases, a missing, torn or dangling ownership file, anything inside a ``recovery/`` (kept
    bytes nobody reads back), and a missing ``logs/`` or ``recovery/``. (Format 2 stages nothing: its
    session log holds acknowledged generations, so its damage may be refused.)"""
    if case.kind == NONE:
        return True
    if case.target == OWNERSHIP[profile] and case.base == "owned":
        return case.kind in HARMLESS
    parts = case.target.split("/")
    if case.base == "recovered" and "recovery" in parts:
        return True
    return case.kind == "delete" and (case.target == f"{SESSION}/logs" or parts[-1] == "recovery")


def exercise(root: str, case: Case, expect: Expect, fs: FileSystem, seed: int, *, silent: bool = False
             ) -> CaseOutcome:
    """Open, recover, retire, probe, close and reopen one damaged session; check the invariants.
    ``silent``: the damage left the file decodable (file-backed, no checksums): data checks that fail
    count the case as undetectable instead."""
    path = os.path.join(root, SESSION)
    profile = expect.profile
    try:
        session = _open(profile, path, fs)
    except ENGINE_ERRORS as exc:
        found = _one_line(str(exc))
        if must_open(case, profile):
            found.append(("O", f"open refused damage that costs nothing: {exc}"))
        return CaseOutcome(case, "refused", str(exc), tuple(found))
    except Exception as exc:
        return CaseOutcome(case, "failed", _where(exc), (("T", f"open: {_where(exc)}"),))
    step, view, probe_ok, found = "recover", None, False, []
    try:
        view = recovery_view(session)
        problems = list(session.problems)
        step = "retire"
        while session.retire()[1]:
            pass
        found.extend(_retire_problems(root, case, expect))
        step = "probe"
        session.add_message("root", Message("user", PROBE, 0.0))
        try:
            session.checkpoint("root")
            probe_ok = True
        except ENGINE_ERRORS as exc:
            found.extend(_one_line(str(exc)))
            if session.pending is not None:
                session.abandon_pending()
        step = "close"
        _release(session)
    except ENGINE_ERRORS as exc:
        found.extend(_one_line(str(exc)))
        _quietly_release(session)
        if view is None:
            return CaseOutcome(case, "refused", f"at {step}: {exc}", tuple(found))
    except Exception as exc:
        _quietly_release(session)
        return CaseOutcome(case, "failed", _where(exc), (*found, ("T", f"{step}: {_where(exc)}")))
    data = _data_problems(view, problems, case, expect, seed)
    if data and silent:
        return CaseOutcome(case, "undetectable", data[0][1], tuple(found))
    found.extend(data)
    if step == "close":
        found.extend(_reopen(profile, path, fs, expect, problems, case, seed, probe_ok))
    return CaseOutcome(case, "opened", "", tuple(found))


def _quietly_release(session: Session) -> None:
    with contextlib.suppress(Exception):
        _release(session)


def _reopen(profile: str, path: str, fs: FileSystem, expect: Expect, problems: list[str], case: Case, seed: int,
            probe_ok: bool) -> list[tuple[str, str]]:
    try:
        session = _open(profile, path, fs)
    except ENGINE_ERRORS as exc:
        return [("P", f"opened and closed cleanly, then refuses to reopen: {exc}")]
    except Exception as exc:
        return [("T", f"reopen: {_where(exc)}")]
    try:
        snap = snapshot_session(session)
    finally:
        _quietly_release(session)
    view = {"open": snap, "retried": None, "final": snap, "redelivered": {}}
    found = [("P", message) for _inv, message in _data_problems(view, problems, case, expect, seed)]
    lines = snap["conversations"].get("root", b"").splitlines()
    if probe_ok and (not lines or PROBE.encode() not in lines[-1]):
        found.append(("P", "the turn written and checkpointed after the damage is not the last one after reopen"))
    return found


def _data_problems(view: Mapping[str, Any], problems: list[str], case: Case, expect: Expect,
                   seed: int) -> list[tuple[str, str]]:
    acks = _exempt(expect, case, problems, seed)
    found = [("A", m) for m in acknowledged_problems(view, acks, expect.notes)]
    found += [("A", m) for m in mail_problems(view, acks, expect.notes)]
    generation = expect.generation
    if generation is not None and _intact(case, generation):
        head = view["open"]["head"]
        if head is None or head[0] < generation[0]:
            found.append(("G", f"opened {'an empty session' if head is None else f'generation {head[0]}'} although "
                          f"generation {generation[0]} ({generation[1]}) is intact"))
    return found


def _intact(case: Case, generation: tuple[int, str, tuple[str, ...]]) -> bool:
    """The newest generation survives the damage (its logs and their directory are untouched)."""
    _seq, log, referenced = generation
    return case.target not in (SESSION, f"{SESSION}/log", log, *referenced)


def _retire_problems(root: str, case: Case, expect: Expect) -> list[tuple[str, str]]:
    generation = expect.generation
    if generation is None or not _intact(case, generation):
        return []
    missing = [p for p in (generation[1], *generation[2]) if not os.path.isfile(os.path.join(root, p))]
    return [("R", f"retire deleted {m} of the newest intact generation {generation[0]}") for m in missing[:1]]


def _exempt(expect: Expect, case: Case, problems: list[str], seed: int) -> tuple[Ack, ...]:
    """The acknowledgements to check: lines of a transcript the damage destroyed and the engine reported
    quarantined are dropped from what its acknowledgements demand, with the mail they delivered."""
    parts = case.target.split("/")
    if expect.profile != "file" or len(parts) != 4 or parts[1] != "conversations" or parts[3] != "conversation.jsonl":
        return expect.acks
    conversation = parts[2]
    if not any(case.target.split("/", 1)[1] in p and "quarantined" in p for p in problems):
        return expect.acks
    start, end = damaged_range(case.kind, seed, case.target, expect.sizes.get(case.target, 0))
    base = expect.transcripts.get(conversation, b"")
    lost: list[bytes] = []
    offset = 0
    for line in base.splitlines(keepends=True):
        if offset < end and offset + len(line) > start:
            lost.append(line)
        offset += len(line)
    out: list[Ack] = []
    for ack in expect.acks:
        if ack.kind == "transcript" and ack.detail.get("conversation") == conversation:
            want = b"".join(line for line in ack.detail["data"].splitlines(keepends=True) if line not in lost)
            ack = replace(ack, detail={**ack.detail, "data": want})
        elif ack.kind == "mail" and any(str(ack.detail["id"]).encode() in line for line in lost):
            continue
        out.append(ack)
    return tuple(out)


def _still_decodes(root: str, target: str) -> bool:
    """A file-backed JSON or JSON-lines file that decodes after a flip: its content changed undetectably."""
    try:
        with open(os.path.join(root, *target.split("/")), "rb") as handle:
            data = handle.read()
        if target.endswith(".jsonl"):
            decode = Message.from_json if target.endswith("conversation.jsonl") else dict
            _records, bad, tail = scan_lines(data, decode)
            return not bad and tail == len(data)
        return isinstance(json.loads(data), dict)
    except (OSError, ValueError):
        return False
