"""Session workloads for the classes of bug the campaigns could not see (docs/crash.md, the blind classes).

Each workload below is a small scenario on the recorder, checked by the session invariants (and the
ones added for them: F fencing, A abandoned, E rejected directory fsync) under both rename models:

- ``session-second-owner`` / ``session-file-second-writer``: a second writer takes the session over (a new
  lease epoch; a second opener on a layer without ``flock`` whose probe cannot see the first owner's pid);
  the first writer keeps trying, and nothing it does may be acknowledged (class 1);
- ``session-einval`` / ``session-file-einval``: the standard mix on a layer that rejects directory fsync
  with EINVAL for some directories (class 2; E1: warn once per directory, continue);
- ``session-file-lost-lock``: ``session.pid`` removed while its owner runs (written again under the held
  directory lock), then replaced by another owner's (fenced) (class 3);
- ``session-adopt-eio``: HEAD's directory fsync fails once (retried by re-adoption), then again (abandoned:
  HEAD names the committed state again); each crash state is also recovered with HEAD lost (classes 5, 7);
- ``session-file-abandon``: a file-backed publication fails at its barrier, then after its sidecar
  replace; both are abandoned and must not be there after a reopen (class 7);
- ``session-file-damaged``: a file-backed session whose root transcript holds a damaged middle line and a
  torn tail; the workload's own open quarantines and recovers them, and the bytes it keeps must be durable
  before the transcript is rewritten (class 6).

Publications between a delivery and the receiver's checkpoint (class 4) are in the standard mix
(``workloads._sessions.mixed``); automatic checkpoints requested while a publication is pending (class 7) are in
``session-fault`` and ``session-file-fault``; HEAD lost on top of a crash (class 5) in ``session-fault``
too.
"""

from __future__ import annotations

import errno
import json
import os
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from perfsuite.crash.invariants._sessions import SESSION, session_invariants
from perfsuite.crash.model._trace import WorkloadEnv
from perfsuite.crash.workloads._driver import ROOT, SessionDriver, _ids, settings
from perfsuite.crash.workloads._registry import Workload, register_workload
from perfsuite.crash.workloads._sessions import (
    mixed,
    open_file,
    open_portable,
    recover_file,
    recover_portable,
    setup_file,
    setup_portable,
)
from perfsuite.engine import (
    DelegatingFileSystem,
    DirectoryFsyncUnsupported,
    FileSession,
    OsFileSystem,
    SaveFailed,
    Session,
    SessionError,
)
from perfsuite.engine.testing import Fault, VirtualClock

REFUSED = (SaveFailed, SessionError)


def _nobody(_pid: int) -> bool:
    """The liveness probe of an opener on another host (or in another pid namespace): it cannot see the
    first owner's process, so it takes that owner for dead."""
    return False


class NoFlock(DelegatingFileSystem):
    """A layer without advisory locks (``flock`` unsupported: some network file systems; Windows): only the
    PID lock's token fences its writers (E3)."""

    def lock(self, fd: int) -> bool | None:
        return None


def attempt(env: WorkloadEnv, label: str, action: Callable[[], Any]) -> bool:
    """Run a mutation a fenced writer tries: its refusal is noted; True when it was not refused."""
    try:
        action()
    except REFUSED as exc:
        env.note(f"{label}: refused ({type(exc).__name__})", kind="refused")
        return False
    return True


def drop(session: Session) -> None:
    """A writer that goes away without closing (its process ends): whatever it still holds is abandoned
    in memory, its directory lock goes with its process; nothing it no longer owns is released."""
    if session.pending is not None:
        try:
            session.abandon_pending()
        except REFUSED:
            pass
    session._release_owner()  # the lease or PID lock only if it is still its own; its directory lock
    session._release_machinery()
    session.closed = True


@contextmanager
def warnings_noted(env: WorkloadEnv) -> Iterator[None]:
    """Every ``DirectoryFsyncUnsupported`` warning the engine gives, noted with its directory (E1)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            for warning in caught:
                if issubclass(warning.category, DirectoryFsyncUnsupported):
                    text = str(warning.message)
                    directory = text.split("directory fsync rejected for ", 1)[-1].split(" (", 1)[0]
                    env.note(f"warning: {text}", kind="dir-fsync-warning",
                             directory=os.path.relpath(directory, env.root).replace(os.sep, "/"))


def _fail_publication(env: WorkloadEnv, d: SessionDriver, conversation: str, *texts: str) -> list[bytes]:
    """A turn whose publication is expected to fail (a fault declared on the workload): its lines."""
    lines = d.add(conversation, *texts)
    d.publishing(conversation)
    try:
        d.session.checkpoint(conversation)
        env.note(f"checkpoint of {conversation} returned although it was to fail", kind="unexpected")
    except SaveFailed as exc:
        env.note(f"{conversation} checkpoint failed in {exc.phase} (pending)")
    return lines


# -- class 1: a second writer -------------------------------------------------------------------------------
def run_second_owner(env: WorkloadEnv) -> None:
    """Owner A works; B opens the same session from another host (a new lease, a new epoch); A's next
    publication, before and after B publishes, its mail and its automatic checkpoint are refused, and
    its abandon leaves B's HEAD alone; B goes on and shuts down."""
    a = open_portable(env)
    da = SessionDriver(env, a, writer="A")
    da.turn("A turn 1", ROOT, "owner A asks", "owner A is answered")
    da.mail("A mail", ROOT, "a note from A", sender=ROOT)
    # Another host: its liveness probe cannot see A's pid, and its layer has no flock A's log lock could
    # refuse it with (format 2 holds the log under flock; the lease and its epoch are what fence A then,
    # and B's open rolls over into a log of its own, so nothing A still appends can reach B's log).
    b = Session.open(env.path(SESSION), fs=NoFlock(env.fs), clock=VirtualClock(), settings=settings(),
                     faults=env.faults, id_source=_ids("b"), owner_alive=_nobody)
    env.note("B broke A's lease: A is fenced", kind="fenced", writer="A")
    db = SessionDriver(env, b, writer="B", serial=da.serial)
    attempt(env, "A turn before B published", lambda: da.turn("A turn before B published", ROOT, "A again"))
    db.turn("B turn 1", ROOT, "owner B continues", "owner B is answered")
    attempt(env, "A mail after B published", lambda: da.mail("A mail after B published", ROOT, "A's late note"))
    attempt(env, "A checkpoint", lambda: da.auto_checkpoint("A automatic checkpoint", ROOT, "A's late turn"))
    attempt(env, "A abandons", a.abandon_pending if a.pending is not None else lambda: None)
    db.mail("B mail", ROOT, "a note from B", sender=ROOT)
    db.deliver(ROOT)
    db.turn("B turn 2", ROOT, "owner B reads its mail")
    attempt(env, "A turn after B's mail", lambda: da.turn("A turn after B's mail", ROOT, "A once more"))
    drop(a)
    db.shutdown("B shutdown")


def run_file_second_writer(env: WorkloadEnv) -> None:
    """Owner A works; a second opener that respects the directory lock is refused; one on a layer without
    ``flock`` whose probe cannot see A's pid takes ``session.pid`` over (B). A's later publications are
    fenced before they write anything, its abandon leaves B's files alone; B goes on and shuts down."""
    a = open_file(env)
    da = SessionDriver(env, a, writer="A")
    da.turn("A turn 1", ROOT, "owner A asks", "owner A is answered")
    da.mail("A mail", ROOT, "a note from A")
    try:
        FileSession.open(env.path(SESSION), fs=env.fs, clock=VirtualClock(), settings=settings(), faults=env.faults,
                         owner_alive=_nobody)
        env.note("a second opener got the session while A holds its lock", kind="unexpected")
    except SessionError:
        env.note("a second opener respecting the lock was refused")
    b = FileSession.open(env.path(SESSION), fs=NoFlock(env.fs), clock=VirtualClock(), settings=settings(),
                         faults=env.faults, owner_alive=_nobody)
    env.note("B took session.pid over: A is fenced", kind="fenced", writer="A")
    db = SessionDriver(env, b, writer="B", serial=da.serial)
    db.turn("B turn 1", ROOT, "owner B continues", "owner B is answered")
    attempt(env, "A turn", lambda: da.turn("A turn after the takeover", ROOT, "A again"))
    db.turn("B turn 2", ROOT, "owner B goes on")
    attempt(env, "A mail", lambda: da.mail("A mail after the takeover", ROOT, "A's late note"))
    attempt(env, "A abandons", a.abandon_pending if a.pending is not None else lambda: None)
    db.mail("B mail", ROOT, "a note from B")
    db.deliver(ROOT)
    db.turn("B turn 3", ROOT, "owner B reads its mail")
    drop(a)
    db.shutdown("B shutdown")


# -- class 3: a lost PID lock ---------------------------------------------------------------------------
def run_file_lost_lock(env: WorkloadEnv) -> None:
    """``session.pid`` is removed while its owner runs (an administrator, a cleanup job): the owner, still
    holding the directory lock, writes it again and goes on. Then it is replaced by another owner's: the
    owner is fenced, nothing more it does is acknowledged, and its abandon leaves the files alone."""
    a = open_file(env)
    d = SessionDriver(env, a, writer="A")
    lock = env.path(SESSION, "session.pid")
    d.turn("turn 1", ROOT, "question", "answer")
    env.outside.remove(lock)
    env.note("session.pid removed by someone else")
    d.turn("turn after the lock was removed", ROOT, "still the owner")
    d.mail("mail after the lock was removed", ROOT, "a note")
    d.deliver(ROOT)
    d.turn("turn with the mail", ROOT, "got it")
    env.outside.atomic_replace(lock, f"{os.getpid()} another-owner-token\n".encode())
    env.note("session.pid replaced by another owner's: A is fenced", kind="fenced", writer="A")
    attempt(env, "turn after the lock was replaced", lambda: d.turn("turn after the lock was replaced", ROOT,
                                                                    "no longer the owner"))
    attempt(env, "mail after the lock was replaced", lambda: d.mail("mail after the lock was replaced", ROOT, "x"))
    attempt(env, "abandon", a.abandon_pending if a.pending is not None else lambda: None)
    drop(a)


# -- class 2: directory fsync rejected with EINVAL ------------------------------------------------------------
def run_einval(env: WorkloadEnv) -> None:
    with warnings_noted(env):
        session = open_portable(env)
        d = SessionDriver(env, session)
        mixed(d, rounds=1)
        d.shutdown("shutdown")


def run_file_einval(env: WorkloadEnv) -> None:
    with warnings_noted(env):
        session = open_file(env)
        d = SessionDriver(env, session)
        mixed(d, rounds=1)
        d.shutdown("shutdown")


# -- classes 5 and 7: a failed commit retried through a roll-over whose HEAD fails, then an abandon -------
def run_adopt_eio(env: WorkloadEnv) -> None:
    """Format 2 (faults on the workload): a publication's fdatasync fails, so its log is poisoned (never
    synced again, fsyncgate) and the retry rolls over into a new log; that roll-over's HEAD replace fails
    at its directory fsync (HEAD may name the new log already: an adoption-phase failure), so it is retried
    again, through another new log, and acknowledged. A compaction's HEAD replace fails the same way, from
    a healthy log: the next turn must not be appended to the log HEAD may no longer name. A later
    publication's fdatasync fails and it is abandoned: a roll-over from the committed state, so HEAD names
    a log without the abandoned record. The session goes on publishing either way (format 1's version
    retried and abandoned a failed HEAD adoption; format 2 has no HEAD on the steady path)."""
    session = open_portable(env)
    d = SessionDriver(env, session)
    d.turn("turn 1", ROOT, "question", "answer")
    ack, calls = d.callback()
    d.add(ROOT, "a turn whose adoption fails")
    d.publishing(ROOT)
    try:
        session.publish(session.freeze("checkpoint", [ROOT]), [ack])
        env.note("publish returned although its log's fdatasync failed", kind="unexpected")
    except SaveFailed as exc:
        env.note(f"root checkpoint failed in {exc.phase} (pending)")
    if calls:
        env.note("acknowledged a publication whose commit failed", kind="unexpected")
    try:
        session.retry_pending()
        env.note("a retry returned although its roll-over's HEAD directory fsync failed", kind="unexpected")
    except SaveFailed as exc:
        env.note(f"the retry failed in {exc.phase} (still pending)")
    if calls:
        env.note("acknowledged a publication whose roll-over's HEAD failed", kind="unexpected")
    if attempt(env, "retry", session.retry_pending):
        at = d._acked_at(calls, "retried adoption")
        if at is not None:
            d.ack_transcript("retried adoption", ROOT, at)
    else:
        env.note("the second retry of a failed commit was refused", kind="unexpected")
    d.turn("turn after the retry", ROOT, "and on")
    try:
        session.compact()  # a roll-over off the acknowledgement path, from a healthy log
        env.note("a compaction returned although its HEAD directory fsync failed", kind="unexpected")
    except OSError as exc:
        env.note(f"the compaction failed at HEAD's directory fsync ({type(exc).__name__})")
    d.turn("turn after the failed compaction", ROOT, "HEAD may name the compaction's log")
    lines = _fail_publication(env, d, ROOT, "a turn whose adoption fails again")
    if attempt(env, "abandon", session.abandon_pending):
        d.abandoned(ROOT, lines)
    d.mail("mail after the abandon", ROOT, "a note", sender=ROOT)
    d.turn("turn after the abandon", ROOT, "the abandoned text is published again by this turn")
    d.retire()
    d.shutdown("shutdown")


def run_file_abandon(env: WorkloadEnv) -> None:
    """A file-backed publication fails at its transcript barrier (EIO) and is abandoned; a later one fails
    after its sidecar replace (the session directory's fsync) and is abandoned too: neither abandoned
    turn may be there after a reopen until a later save publishes the text again."""
    session = open_file(env)
    d = SessionDriver(env, session)
    d.turn("turn 1", ROOT, "question", "answer")
    lines = _fail_publication(env, d, ROOT, "a turn whose barrier fails")
    if attempt(env, "abandon", session.abandon_pending):
        d.abandoned(ROOT, lines)
    d.mail("mail after the abandon", ROOT, "a note")
    d.turn("turn after the abandon", ROOT, "published again")
    lines = _fail_publication(env, d, ROOT, "a turn whose sidecar directory fsync fails")
    if attempt(env, "abandon", session.abandon_pending):
        d.abandoned(ROOT, lines)
    d.control("goal after the abandon", "goal", {"text": "after the abandon"})
    d.turn("turn after the second abandon", ROOT, "published again, once more")
    d.shutdown("shutdown")


# -- class 6: recovery files durable before the transcript is rewritten ------------------------------------
TORN = b'{"role":"user","content":"a turn torn by the crash before this sess'
DAMAGED = b'{"role":"assistant","content":"a line damaged in place \xff\xfe"\n'


def setup_file_damaged(root: str) -> None:
    """A file-backed session whose root transcript then got a damaged middle line and a torn tail (after
    its committed bytes): the workload's open quarantines one and recovers the other."""
    setup_file(root)
    path = os.path.join(root, SESSION, "conversations", ROOT, "conversation.jsonl")
    line = json.dumps({"role": "user", "content": "an unacknowledged line after the damage", "timestamp": 2.0},
                      separators=(",", ":")).encode() + b"\n"
    fs = OsFileSystem()  # (through the I/O layer: tests/crash/test_audit.py audits every workload)
    fd = fs.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        fs.write_all(fd, DAMAGED + line + TORN)
    finally:
        fs.close(fd)


def run_file_damaged(env: WorkloadEnv) -> None:
    session = open_file(env)
    if not session.problems:
        env.note("open found nothing to recover in a damaged transcript", kind="unexpected")
    d = SessionDriver(env, session)
    d.turn("turn after recovery", ROOT, "the session goes on", "with the damage set aside")
    d.mail("mail after recovery", ROOT, "a note")
    d.deliver(ROOT)
    d.turn("turn with the mail", ROOT, "read it")
    d.shutdown("shutdown")


register_workload(Workload(
    "session-second-owner", "portable session taken over by a second owner (new lease epoch): the first is fenced",
    run_second_owner, recover_portable, session_invariants("portable"), setup=setup_portable, max_states=1500,
))
register_workload(Workload(
    "session-file-second-writer", "file-backed session: a second opener is refused, one without flock takes "
    "session.pid over: the first writer is fenced",
    run_file_second_writer, recover_file, session_invariants("file"), setup=setup_file, max_states=1500,
))
register_workload(Workload(
    "session-file-lost-lock", "file-backed session whose session.pid is removed (rewritten), then replaced "
    "(fenced) while its owner runs",
    run_file_lost_lock, recover_file, session_invariants("file"), setup=setup_file, max_states=1500,
))
register_workload(Workload(
    "session-einval", "portable session on a layer that rejects directory fsync (EINVAL) for the session directory",
    run_einval, recover_portable, session_invariants("portable"), setup=setup_portable, max_states=1500,
    faults=(Fault("fsync_dir", path=f"*/{SESSION}", error=errno.EINVAL, repeat=True),),
))
register_workload(Workload(
    "session-file-einval", "file-backed session on a layer that rejects directory fsync (EINVAL) for its "
    "conversation directories",
    run_file_einval, recover_file, session_invariants("file"), setup=setup_file, max_states=1500,
    faults=(Fault("fsync_dir", path=f"*/{SESSION}/conversations/*", error=errno.EINVAL, repeat=True),),
))
register_workload(Workload(
    "session-adopt-eio", "portable session: a failed fdatasync retried through a roll-over whose HEAD directory "
    "fsync fails (retried again), a compaction whose HEAD fails too, then one abandoned; crash states also "
    "recovered with HEAD lost",
    run_adopt_eio, recover_portable, session_invariants("portable"), setup=setup_portable, max_states=1500,
    faults=(Fault("fdatasync", nth=2, path=f"*/{SESSION}/log/*", error=errno.EIO),
            Fault("fsync_dir", nth=2, path=f"*/{SESSION}", error=errno.EIO),
            Fault("fsync_dir", nth=3, path=f"*/{SESSION}", error=errno.EIO),
            Fault("fdatasync", nth=7, path=f"*/{SESSION}/log/*", error=errno.EIO)),  # (a fired fault hides its match)
    head_loss=True,
))
register_workload(Workload(
    "session-file-abandon", "file-backed session: a publication failing at its barrier, then one failing after "
    "its sidecar replace, both abandoned",
    run_file_abandon, recover_file, session_invariants("file"), setup=setup_file, max_states=1500,
    faults=(Fault("fsync", nth=2, path="conversation.jsonl", error=errno.EIO),
            Fault("fsync_dir", nth=4, path=f"*/{SESSION}", error=errno.EIO)),
))
register_workload(Workload(
    "session-file-damaged", "file-backed session whose root transcript holds a damaged line and a torn tail: "
    "quarantine and torn-tail recovery files durable before the rewrite",
    run_file_damaged, recover_file, session_invariants("file"), setup=setup_file_damaged, max_states=1500,
))
