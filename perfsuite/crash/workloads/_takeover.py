"""Takeover crash workloads (E3 fencing): a second owner takes the session over *inside* the first one's
publication, at one point of its commit path, through a layer that runs the takeover there.

``session-lease-fence`` is a chain of owners; each one's publication is interrupted at the next point of
:data:`FENCE_POINTS` by a new owner (on a layer without ``flock``, from a host whose probe cannot see the
old owner's pid: only the lease and its epoch fence the old owner) that opens the session, publishes and
acknowledges a turn, then lets the interrupted publication go on. The steady path's points: the fence
check before the record's write, the write, the fdatasync (the commit point), after it (the re-check
before the acknowledgement); a roll-over's (the publication does not fit): the new log's creation, its
temp file fsynced (before its rename), its BASE durable (before HEAD's replace), HEAD replaced (before the
re-check). The interrupted owner must never acknowledge (invariant F), nor name a log or replace HEAD over
its successor's: every acknowledged turn of its successors survives every crash state (invariants 0, 1).

``session-noflock-takeover`` runs every owner on a layer without ``flock`` (E1: some network file systems,
Windows), so the log lock never refuses the new owner: (a) the old owner acknowledges a turn after the new
one read its log and before it took the lease; (b) the new owner takes over between the old one's fence
check and its record's write. The new owner must read the log again once the lease is its own and start a
log of its own, or the old owner's acknowledged turn is lost (a) or its late write lands on the new
owner's acknowledged record (b).

The irreducible window (the last read of LEASE and the rename that follows it, without a lock) is not
a point here: a layer without ``flock`` has no compare-and-swap to close it.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable

from perfsuite.crash.invariants._sessions import SESSION, session_invariants
from perfsuite.crash.model._trace import WorkloadEnv
from perfsuite.crash.workloads._bug_classes import NoFlock, _nobody, attempt, drop
from perfsuite.crash.workloads._driver import ROOT, SessionDriver, _ids, settings
from perfsuite.crash.workloads._registry import Workload, register_workload
from perfsuite.crash.workloads._sessions import recover_portable, setup_portable
from perfsuite.engine import DelegatingFileSystem, FileSystem, Session
from perfsuite.engine.testing import VirtualClock

AGENT = "a1"  # the conversation the old owner's last acknowledged turn goes to in ``session-noflock-takeover``
LOG = "*/log/*.log"
#: (name, primitive, when, path pattern): where the next owner takes over, in the order the chain runs
#: them; the steady path's first (the publication fits its log), then a roll-over's (it does not)
FENCE_POINTS: tuple[tuple[str, str, str, str], ...] = (
    ("stage: before the fence check", "read", "before", "*/LEASE"),
    ("record write: after the fence check", "pwrite", "before", LOG),
    ("fdatasync: the commit point", "fdatasync", "before", LOG),
    ("after the fdatasync: before the re-check", "fdatasync", "after", LOG),
    ("roll-over: the new log's creation", "open", "before", "*/log/.*.log.tmp-*"),
    ("roll-over: the new log's temp fsynced, before its rename", "fsync", "after", "*/log/.*.log.tmp-*"),
    ("roll-over: its BASE durable, before HEAD's replace", "fdatasync", "after", LOG),
    ("roll-over: HEAD replaced, before the re-check", "replace", "after", "*/HEAD"),
)
ROLL_OVER = 4  # FENCE_POINTS from here on interrupt a roll-over (the publication is larger than the log's room)
BIG = 8200  # characters of a turn that fits no log: a roll-over leaves 4-8 KiB of room (capacity 4 KiB)


class Takeover(DelegatingFileSystem):
    """An owner's I/O layer that runs an action once, at one armed point: before or after the first
    primitive of a kind on a matching path (E1 primitives, so the engine's composed writes hit them)."""

    def __init__(self, inner: FileSystem) -> None:
        super().__init__(inner)
        self._armed: tuple[str, str, str, Callable[[], None]] | None = None
        self.fired = False

    def arm(self, primitive: str, when: str, pattern: str, action: Callable[[], None]) -> None:
        self._armed, self.fired = (primitive, when, pattern, action), False

    def _at(self, primitive: str, when: str, path: str) -> None:
        armed = self._armed
        if armed is not None and armed[:2] == (primitive, when) and fnmatch.fnmatch(path, armed[2]):
            self._armed, self.fired = None, True
            armed[3]()

    def read(self, path: str) -> bytes:
        self._at("read", "before", path)
        return super().read(path)

    def read_regular(self, path: str, limit: int) -> bytes:  # (a session's own files: LEASE, HEAD)
        self._at("read", "before", path)
        return super().read_regular(path, limit)

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        self._at("open", "before", path)
        return super().open(path, flags, mode)

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        self._at("pwrite", "before", self.path_of(fd)[0])
        return super().pwrite(fd, data, offset)

    def fsync(self, fd: int) -> None:
        super().fsync(fd)
        self._at("fsync", "after", self.path_of(fd)[0])

    def fdatasync(self, fd: int) -> None:
        path = self.path_of(fd)[0]
        self._at("fdatasync", "before", path)
        super().fdatasync(fd)
        self._at("fdatasync", "after", path)

    def replace(self, src: str, dst: str) -> None:
        self._at("replace", "before", dst)
        super().replace(src, dst)
        self._at("replace", "after", dst)


def open_owner(env: WorkloadEnv, fs: FileSystem, name: str) -> Session:
    """An owner on ``fs`` whose liveness probe cannot see any other owner's pid (another host)."""
    return Session.open(env.path(SESSION), create=True, fs=fs, clock=VirtualClock(), settings=settings(),
                        faults=env.faults, id_source=_ids(f"{name}-"), owner_alive=_nobody)


class Chain:
    """Owners in turn: each new one takes the session over from the current one (see the module doc)."""

    def __init__(self, env: WorkloadEnv, flock: bool) -> None:
        self.env = env
        self.layers: list[Takeover] = []
        self.drivers: list[SessionDriver] = []
        self.flock = flock
        self.first = self._owner()

    def _owner(self) -> SessionDriver:
        name = f"O{len(self.drivers)}"
        inner = self.env.fs if self.flock and not self.drivers else NoFlock(self.env.fs)
        layer = Takeover(inner)
        serial = self.drivers[-1].serial if self.drivers else None
        driver = SessionDriver(self.env, open_owner(self.env, layer, name), writer=name, serial=serial)
        self.layers.append(layer)
        self.drivers.append(driver)
        return driver

    def take_over(self, why: str) -> SessionDriver:
        """A new owner opens the session (breaking the lease), the old one is noted fenced, and the new one
        publishes and acknowledges a turn before anything else happens."""
        old = self.drivers[-1]
        new = self._owner()
        self.env.note(f"{new.writer} took the session over ({why}): {old.writer} is fenced", kind="fenced",
                      writer=old.writer)
        new.turn(f"{new.writer} turn after the takeover", ROOT, f"{new.writer} took over at {why}")
        return new


def _interrupted(env: WorkloadEnv, chain: Chain, d: SessionDriver, why: str, point: tuple[str, str, str],
                 text: str) -> SessionDriver:
    """``d``'s publication of ``text`` with the next owner's takeover armed at ``point``: it, and one more turn
    after it, must be refused; ``d`` then goes away. Returns the owner that goes on."""
    layer = chain.layers[-1]

    def take() -> None:
        chain.take_over(why)

    layer.arm(*point, take)
    attempt(env, f"{d.writer} interrupted at {why}", lambda: d.turn(f"{d.writer} interrupted turn", ROOT, text))
    if not layer.fired:
        env.note(f"{d.writer}: its publication never reached {why}", kind="unexpected")
        return d
    attempt(env, f"{d.writer} turn after it was fenced", lambda: d.turn(f"{d.writer} late turn", ROOT, "late"))
    drop(d.session)
    return chain.drivers[-1]


def run_lease_fence(env: WorkloadEnv) -> None:
    """The chain over :data:`FENCE_POINTS` (module doc); each new owner goes on with a turn of its own; the
    last owner shuts down."""
    chain = Chain(env, flock=True)
    d = chain.first
    d.turn("O0 turn 1", ROOT, "the first owner asks", "and is answered")
    for i, (why, primitive, when, pattern) in enumerate(FENCE_POINTS):
        text = "x" * BIG if i >= ROLL_OVER else f"{d.writer} turn during which it is taken over"
        d = _interrupted(env, chain, d, why, (primitive, when, pattern), text)
        d.turn(f"{d.writer} turn 2", ROOT, f"{d.writer} goes on")
    d.shutdown(f"{d.writer} shutdown")


def run_noflock_takeover(env: WorkloadEnv) -> None:
    """Every owner without ``flock`` (module doc): (a) O0 acknowledges a turn of the agent while O1's open
    has read the log and not yet broken the lease; (b) O2 takes over between O1's fence check and its
    record's write. Each interrupted owner's later publications are refused; the last owner shuts down."""
    env_fs = NoFlock(env.fs)
    a = SessionDriver(env, open_owner(env, env_fs, "O0"), writer="O0")
    a.spawn("O0 spawns a1", AGENT, "an agent")
    a.turn("O0 turn 1", ROOT, "the first owner asks", "and is answered")
    b_layer = Takeover(NoFlock(env.fs))
    b_layer.arm("replace", "before", "*/.LEASE.stale-*",  # O1 read the log and is breaking O0's lease
                lambda: a.turn("O0 turn while O1 opens", AGENT, "O0 still owns the lease"))
    b = SessionDriver(env, open_owner(env, b_layer, "O1"), writer="O1", serial=a.serial)
    env.note("O1 took the session over: O0 is fenced", kind="fenced", writer="O0")
    if not b_layer.fired:
        env.note("O1's open never broke O0's lease", kind="unexpected")
    attempt(env, "O0 turn after the takeover", lambda: a.turn("O0 late turn", ROOT, "late"))
    drop(a.session)
    b.turn("O1 turn 1", ROOT, "O1 goes on")
    holder: list[SessionDriver] = []

    def take() -> None:
        c = SessionDriver(env, open_owner(env, NoFlock(env.fs), "O2"), writer="O2", serial=b.serial)
        env.note("O2 took the session over: O1 is fenced", kind="fenced", writer="O1")
        c.turn("O2 turn after the takeover", ROOT, "O2 publishes while O1 is about to write")
        holder.append(c)

    b_layer.arm("pwrite", "before", LOG, take)
    attempt(env, "O1 interrupted before its record's write", lambda: b.turn("O1 interrupted turn", ROOT, "O1 writes"))
    if not holder:
        env.note("O1's publication never reached its record's write", kind="unexpected")
        return
    drop(b.session)
    c = holder[0]
    c.turn("O2 turn 2", AGENT, "O2 reads the agent")
    c.shutdown("O2 shutdown")


register_workload(Workload(
    "session-lease-fence", "portable session taken over by a new owner (no flock, new epoch) at every point of "
    "the old owner's commit path: steady (fence check, write, fdatasync, re-check) and roll-over (new log, "
    "its rename, HEAD's replace)",
    run_lease_fence, recover_portable, session_invariants("portable"), setup=setup_portable, max_states=1500,
))
register_workload(Workload(
    "session-noflock-takeover", "portable session whose owners all run without flock: the old owner acknowledges "
    "while the new one opens, then a new owner takes over between the fence check and the record's write",
    run_noflock_takeover, recover_portable, session_invariants("portable"), setup=setup_portable, max_states=1500,
))
