"""The standard crash workloads (SPEC section 7): what runs on the recorder, and how a state is recovered.

A :class:`Workload` is data: ``run(env)`` drives the engine on ``env.fs`` and notes acknowledgements;
``recover(root, fs)`` is the engine's real open path on a rebuilt tree and returns a comparable view of
what it loaded; ``invariants`` are the checks that apply; an optional ``setup`` builds the initial tree
(unrecorded, taken as durable) and ``max_states`` caps the workload's exploration by default. The
session workloads (:mod:`perfsuite.crash.workloads._sessions`) register the same way (:func:`register_workload`);
worker processes find workloads by name in :data:`WORKLOADS`.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from perfsuite.crash.bugs._seeded import seeded_bug
from perfsuite.crash.invariants._checks import Invariant, transcript_invariants
from perfsuite.crash.model._model import CrashCheckError, snapshot
from perfsuite.crash.model._trace import OpRecorder, OpTrace, WorkloadEnv, WorkloadRun
from perfsuite.engine import FileSystem, Message, OsFileSystem, TranscriptLog, commit_turn
from perfsuite.engine.testing import Fault, FaultyFileSystem

Recover = Callable[[str, FileSystem], Mapping[str, Any]]
LOG_DIR = "conv"  # the transcript workloads' log directory, relative to the workload root


@dataclass(frozen=True, slots=True)
class Workload:
    """A named crash workload: how to run it, how to recover a state of it, what must hold after."""

    name: str
    description: str
    run: WorkloadRun
    recover: Recover
    invariants: tuple[Invariant, ...]
    faults: tuple[Fault, ...] = ()
    standard: bool = True
    setup: Callable[[str], None] | None = None  # builds the initial tree (not recorded, taken as durable)
    max_states: int | None = None  # this workload's cap on unique crash states (None: the campaign's)
    # Each crash state is also recovered with HEAD deleted or torn (a crash while HEAD is also lost, a class the
    # campaigns were once blind to); recovery must then yield every acknowledged mutation or refuse with one line.
    head_loss: bool = False


WORKLOADS: dict[str, Workload] = {}


def register_workload(workload: Workload) -> Workload:
    """Add ``workload`` to the registry (by name; a second registration replaces the first)."""
    WORKLOADS[workload.name] = workload
    return workload


def get_workload(name: str) -> Workload:
    try:
        return WORKLOADS[name]
    except KeyError:
        raise CrashCheckError(f"unknown crash workload {name!r} (choose from {', '.join(WORKLOADS)})") from None


def standard_workloads() -> tuple[str, ...]:
    return tuple(name for name, w in WORKLOADS.items() if w.standard)


def record_workload(workload: Workload, root: str, bug: str | None = None) -> OpTrace:
    """Run ``workload`` in the empty directory ``root`` on the recorder (under its faults, wrapped by the
    seeded ``bug`` if any) and return its trace. ``root`` must exist; it and what the workload's ``setup``
    builds in it (on the real file system, unrecorded) are taken as the durable initial tree."""
    root = os.path.realpath(root)
    initial = None
    if workload.setup is not None:
        workload.setup(root)
        initial = snapshot(root)
    inner: FileSystem = OsFileSystem()
    if workload.faults:
        inner = FaultyFileSystem(inner, workload.faults)
    recorder = OpRecorder(inner)
    broken = seeded_bug(bug) if bug else None
    fs = broken.wrap(recorder) if broken else recorder
    env = WorkloadEnv(fs, recorder, root)
    env.faults = broken.faults if broken else None
    try:
        workload.run(env)
    except Exception as exc:  # a broken engine may fail where the workload expects success: a finding
        env.note(f"the workload stopped: {type(exc).__name__}: {exc}", kind="unexpected")
    return OpTrace(workload.name, root, tuple(recorder.ops), env.oracle(), bug, initial, os.getpid())


# -- transcript workloads ---------------------------------------------------------------------------------
def _msg(i: int, size: int = 40) -> Message:
    role = "user" if i % 2 == 0 else "assistant"
    return Message(role, f"message {i}: " + "abcdefghij"[i % 10] * size, float(i))


def _turn(env: WorkloadEnv, log: TranscriptLog, label: str, messages: list[Message], branch: str = "main") -> None:
    """A turn the way E2 callers run it: acknowledged only when the barrier returned."""
    if commit_turn(log, messages, branch=branch).completed:
        env.ack(label, scope=LOG_DIR)
    else:
        env.note(label)


def run_transcript(env: WorkloadEnv, rounds: int = 3) -> None:
    """Appends with barriers, a view and the model trace, a burst turn (more than ``subset_limit``
    pending operations), then every rewrite (fork, undo, edit, event compaction) each followed by an
    acknowledged turn, ``rounds`` times; then an unacknowledged tail (E2)."""
    log = TranscriptLog.open(env.path(LOG_DIR), fs=env.fs)
    n = 0

    def msgs(count: int, size: int = 40) -> list[Message]:
        nonlocal n
        n += count
        return [_msg(i, size) for i in range(n - count, n)]

    for r in range(rounds):
        _turn(env, log, f"r{r} turn 1", msgs(2))
        log.record_model_selection(model=f"model-{r}", reason="default")
        _turn(env, log, f"r{r} turn 2", [*msgs(1), *msgs(1, size=5000)])  # a write spanning a block boundary
        log.append_view(f"summary-{r}", msgs(1)[0])
        _turn(env, log, f"r{r} turn 3 (+view)", msgs(1))
        for message in msgs(4):  # a burst: many pending operations before one barrier
            log.append(message)
            log.append_view(f"summary-{r}", message)
        log.record_model_selection(model="large", reason="burst")
        _turn(env, log, f"r{r} burst turn", msgs(2))
        log.fork(f"alt-{r}", upto=2 + r)
        _turn(env, log, f"r{r} turn on branch alt-{r}", msgs(1), branch=f"alt-{r}")
        log.undo(1)
        _turn(env, log, f"r{r} turn after undo", msgs(2))
        log.edit(r, Message("user", f"an edited message {r}", 0.5))
        log.record_event("note", text=f"before compaction {r}")
        log.compact_events()
        _turn(env, log, f"r{r} turn after edit and compaction", msgs(1))
    for message in msgs(2):  # never acknowledged: may be lost, never torn into the transcript
        log.append(message)
    log.close()


def run_transcript_fsync_eio(env: WorkloadEnv) -> None:
    """The second fsync of the main transcript fails with EIO (fault declared on the workload): that turn
    must not be acknowledged, and later turns only after a rewrite into a new file (E1, SPEC 7.7)."""
    log = TranscriptLog.open(env.path(LOG_DIR), fs=env.fs)
    _turn(env, log, "turn 1", [_msg(0), _msg(1)])
    _turn(env, log, "turn 2 (fsync fails)", [_msg(2), _msg(3)])
    _turn(env, log, "turn 3 (after the failure)", [_msg(4)])
    log.fork("alt")
    _turn(env, log, "turn 4", [_msg(5), _msg(6)])
    log.append(_msg(7))
    log.close()


def run_transcript_dirfsync_eio(env: WorkloadEnv) -> None:
    """The first fsync of the log directory fails with EIO (fault declared on the workload): the turn fails;
    the next barrier rewrites every file under that directory into a new name before it acknowledges
    (a failed directory fsync may have dropped the entries pending in it; fsyncgate)."""
    log = TranscriptLog.open(env.path(LOG_DIR), fs=env.fs)
    _turn(env, log, "turn 1 (directory fsync fails)", [_msg(0), _msg(1)])
    _turn(env, log, "turn 2 (after the failure)", [_msg(2)])
    log.fork("alt")
    _turn(env, log, "turn 3", [_msg(3), _msg(4)])
    log.close()


def recover_transcript(root: str, fs: FileSystem) -> Mapping[str, Any]:
    """The engine's real open path (E2 load with torn-tail recovery); returns what it loaded."""
    with TranscriptLog.open(os.path.join(root, LOG_DIR), fs=fs) as log:
        return {
            "branches": {b: [m.to_json() for m in log.messages(b)] for b in log.branches()},
            "views": {v: [m.to_json() for m in log.view(v)] for v in log.views()},
            "model": log.model_trace(),
            "events": [e.get("kind") for e in log.events()],
        }


register_workload(Workload(
    "transcript",
    "transcript log: barriers, a view, the model trace, fork, undo, edit, event compaction",
    run_transcript, recover_transcript, transcript_invariants(LOG_DIR),
))
register_workload(Workload(
    "transcript-fsync-eio",
    "transcript log whose second main-transcript fsync fails with EIO",
    run_transcript_fsync_eio, recover_transcript, transcript_invariants(LOG_DIR),
    faults=(Fault("fsync", nth=2, path="conversation.jsonl", error=errno.EIO),),
))
register_workload(Workload(
    "transcript-dirfsync-eio",
    "transcript log whose first log-directory fsync fails with EIO",
    run_transcript_dirfsync_eio, recover_transcript, transcript_invariants(LOG_DIR),
    faults=(Fault("fsync_dir", nth=1, path=f"*/{LOG_DIR}", error=errno.EIO),),
))
