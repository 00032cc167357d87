"""The kill campaign (issue 10 item 4): real processes, the real file system, real SIGKILL.

A child process (``python -m perfsuite.crash.kill._campaign DIR PROFILE SEED TAG``) opens a session (recovering
whatever the previous child left) and runs a long, seeded, mixed session workload on the real file
system, printing one flushed line per acknowledgement (``ACK {json}``) and per value it is about to
make live, delivery or discard (``NOTE {json}``). The parent reads a seeded random number of
acknowledgements, waits a seeded random fraction of a few milliseconds, SIGKILLs the child, reads what it
printed before it died, then recovers the session in this process with the engine's open path (a stale
lease or PID lock names the dead child) and checks the session invariants (1-6 of SPEC section 7, as
:mod:`perfsuite.crash.invariants._sessions` defines them) against every acknowledgement of every child so
far. The session is then closed and the next child continues it.

Unlike the enumerated campaign this loses only what a *process* crash loses (the page cache survives),
so it tests the engine's own ordering and recovery paths under real concurrency (the portable child runs
the asynchronous job on an asyncio loop with the thread offload), not the durability of fsync.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from perfsuite.cluster import ATTEMPTS, Runner, Task, WorkerLost
from perfsuite.crash._execution import Execution, runner_for
from perfsuite.crash.invariants._checks import clean_prefix
from perfsuite.crash.invariants._sessions import (
    acknowledged_problems,
    clean_transcript_problems,
    head_problems,
    mail_problems,
    removal_problems,
)
from perfsuite.crash.model._model import CrashCheckError, snapshot
from perfsuite.crash.model._trace import Ack, Note
from perfsuite.engine import DelegatingFileSystem

PROFILES = ("portable", "file")
FLAVOURS = ("running", "permission-blocked", "waiting", "idle")


@dataclass(frozen=True, slots=True)
class KillConfig:
    """``kills`` SIGKILLs (split between the profiles), each after 1..``max_acks`` acknowledgements plus up
    to ``max_delay_s``; ``directory`` keeps the sessions (default: a temporary directory, removed)."""

    kills: int = 200
    seed: int = 0
    profiles: tuple[str, ...] = PROFILES
    max_acks: int = 12
    max_delay_s: float = 0.006
    directory: str | None = None
    timeout_s: float = 120.0
    seeded_bug: str | None = None  # run against a deliberately broken engine (``SeededBug.kill`` ones)
    torn_every: int = 3  # every Nth file-backed kill tears a transcript write first (0: never; issue 27)


@dataclass(frozen=True, slots=True)
class KillViolation:
    kill: int
    profile: str
    invariant: str
    message: str
    kept: str | None = None  # a copy of the session directory as recovery found it


@dataclass(frozen=True, slots=True)
class KillReport:
    """What the campaign did: kills per profile, acknowledgements checked, pending publications found by
    recovery (and retried), violations, and how long it took."""

    kills: int
    per_profile: dict[str, int]
    acks: int
    recovered_pending: int
    violations: tuple[KillViolation, ...]
    seconds: float
    directory: str | None = None
    child_seconds: float = 0.0
    recovery_seconds: float = 0.0
    torn: int = 0  # kills whose child tore a transcript write first (issue 27)
    seeded_bug: str | None = None

    @property
    def caught(self) -> bool:
        """With a seeded bug: at least one violation (the bug was caught)."""
        return bool(self.violations)


# -- the child --------------------------------------------------------------------------------------------
#: a child's waiter: submits with an acknowledgement callback, True once it ran without error
Waiter = Callable[[Callable[[Callable[[BaseException | None], None]], object]], Awaitable[bool]]


class _Child:
    """One child's mixed workload; ``emit`` prints a flushed line the parent reads."""

    def __init__(self, directory: str, profile: str, seed: int, tag: str, bug: str | None = None,
                 tear: int = 0) -> None:
        from perfsuite.crash.workloads._driver import settings
        from perfsuite.engine import FileSession, Session, SystemClock

        self.rng = random.Random(seed)
        self.tag = tag
        self.serial = itertools.count()
        self.profile = profile
        fs, faults = layer(bug)
        if tear:
            fs = TearingFileSystem(fs, abs(tear), "newline" if tear > 0 else "half")
        if profile == "portable":
            self.session: Any = Session.open(directory, clock=SystemClock(), settings=settings("thread"), fs=fs,
                                             faults=faults)
        else:
            self.session = FileSession.open(directory, clock=SystemClock(), settings=settings(), fs=fs, faults=faults)

    def emit(self, what: str, **record: Any) -> None:
        print(f"{what} {json.dumps(record, sort_keys=True)}", flush=True)

    def ack_transcript(self, conversation: str) -> None:
        data = self.session.buffers[conversation].data()
        head = self.session.head
        self.emit("ACK", kind="transcript", conversation=conversation, size=len(data),
                  sha256=hashlib.sha256(data).hexdigest(), seq=head.seq if head is not None else None)

    def ack_value(self, key: str, value: Any) -> None:
        head = self.session.head
        self.emit("ACK", kind="value", key=key, value=value, seq=head.seq if head is not None else None)

    def ack_mail(self, record: Any) -> None:
        head = self.session.head
        self.emit("ACK", kind="mail", id=record.id, to=record.to, body=record.body,
                  seq=head.seq if head is not None else None)

    def attempt(self, key: str, value: Any) -> None:
        self.emit("NOTE", kind="value", key=key, value=value)

    def name(self) -> str:
        return f"{self.tag}-{next(self.serial)}"

    def active_agents(self) -> list[str]:
        return sorted(a for a, r in self.session.sidecar.agents.items() if r.get("status") == "active")

    def conversations(self) -> list[str]:
        return ["root", *self.active_agents()]

    def add(self, conversation: str, count: int) -> None:
        from perfsuite.engine import Message

        for _ in range(count):
            size = self.rng.choice((40, 200, 900))
            self.session.add_message(conversation, Message(self.rng.choice(("user", "assistant")),
                                                           f"{self.name()} " + "m" * size, time.time()))

    def find_mail(self, to: str, body: str) -> Any:
        return next(r for r in self.session.sidecar.mailboxes.get(to, ()) if r.body == body)

    async def step(self, waiter: Waiter) -> None:
        s, rng = self.session, self.rng
        op = rng.choices(("turn", "auto", "mail", "background", "deliver", "activity", "spawn", "settle",
                          "retire", "control", "discard"),
                         weights=(5, 3, 4, 4, 4, 2, 1, 1, 1, 1, 1))[0]
        conversation = rng.choice(self.conversations())
        if op == "turn":
            self.add(conversation, rng.randint(1, 3))
            s.checkpoint(conversation)
            self.ack_transcript(conversation)
        elif op == "auto":
            self.add(conversation, 1)
            acked = await waiter(lambda ack: s.request_checkpoint(conversation, ack=ack))
            if acked:
                self.ack_transcript(conversation)
        elif op == "mail":
            record = s.append_mail(conversation, f"mail {self.name()}")
            self.ack_mail(record)
        elif op == "background":
            body = f"completion {self.name()}"
            sender = rng.choice(self.active_agents() or ["root"])
            acked = await waiter(lambda ack: s.deliver_background(conversation, body, sender=sender, ack=ack))
            if acked:
                self.ack_mail(self.find_mail(conversation, body))
        elif op == "deliver":
            for record in s.deliver_mail(conversation):
                self.emit("NOTE", kind="delivered", id=record.id, to=conversation)
        elif op == "activity" and self.active_agents():
            agent = rng.choice(self.active_agents())
            flavour = rng.choice([f for f in FLAVOURS if f != s.sidecar.agents[agent].get("activity")])
            self.attempt(f"activity:{agent}", flavour)
            s.set_activity(agent, flavour)
            s.save_registry()  # right after the change: a file-backed no-op save is an engine bug (see tests)
            for name, agent_record in sorted(s.sidecar.agents.items()):
                self.ack_value(f"activity:{name}", agent_record.get("activity"))
        elif op == "spawn" and len(self.active_agents()) < 3:
            agent = f"a{self.name()}"
            self.attempt(f"status:{agent}", "active")
            self.attempt(f"activity:{agent}", "idle")
            s.spawn_agent(agent, prompt=f"work for {agent}")
            self.ack_transcript(agent)
            self.ack_value(f"status:{agent}", "active")
            self.ack_value(f"activity:{agent}", "idle")
        elif op == "settle" and self.active_agents():
            agent = rng.choice(self.active_agents())
            for record in s.deliver_mail(agent):
                self.emit("NOTE", kind="delivered", id=record.id, to=agent)
            result = f"result {self.name()}"
            self.attempt(f"status:{agent}", "done")
            self.attempt(f"activity:{agent}", "done")
            s.settle(agent, "done", result)
            self.ack_transcript(agent)
            self.ack_value(f"status:{agent}", "done")
            self.ack_value(f"activity:{agent}", "done")
            self.ack_mail(self.find_mail(str(s.sidecar.agents[agent].get("parent", "root")), result))
        elif op == "retire":
            while s.retire()[1]:
                pass
        elif op == "control":
            value = {"step": self.name()}
            self.attempt("control:plan", value)
            s.set_control("plan", value)
            self.ack_value("control:plan", value)
        elif op == "discard":
            box = s.mailbox(conversation)
            if box:
                record = rng.choice(box)
                self.emit("NOTE", kind="discard", id=record.id, to=conversation)
                s.discard_mail(conversation, record.id)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()

        async def waiter(submit: Callable[[Callable[[BaseException | None], None]], object]) -> bool:
            """Submit with an acknowledgement callback; True once it ran without error. A submission
            that coalesced into an earlier one (``False``) never acknowledges: not waited for."""
            done: asyncio.Future[BaseException | None] = loop.create_future()

            def ack(error: BaseException | None) -> None:
                if not done.done():
                    loop.call_soon_threadsafe(done.set_result, error)

            if submit(ack) is False:
                return False
            return await done is None

        self.emit("READY", pid=os.getpid())
        while True:
            await self.step(waiter)
            await asyncio.sleep(0)


def child_main(argv: Sequence[str]) -> int:
    """Entry point of the child process: ``DIR PROFILE SEED TAG [BUG|- [TEAR]]``; runs until it is killed
    (or, with ``TEAR`` != 0, until that write to a transcript tears and it kills itself: all but its newline
    when ``TEAR`` > 0, half of it when < 0)."""
    directory, profile, seed, tag, *rest = argv
    bug = rest[0] if rest and rest[0] != "-" else None
    tear = int(rest[1]) if len(rest) > 1 else 0
    asyncio.run(_Child(directory, profile, int(seed), tag, bug, tear).run())
    return 0


def layer(bug: str | None) -> tuple[Any, Any]:
    """The I/O layer and fault hooks of the engine under test: the real ones, or a seeded bug's (its layer
    also wraps the parent's recovery: a broken engine recovers brokenly too)."""
    from perfsuite.crash.bugs._seeded import seeded_bug
    from perfsuite.engine import OsFileSystem

    if bug is None:
        return OsFileSystem(), None
    broken = seeded_bug(bug)
    return broken.wrap(OsFileSystem()), broken.faults


class TearingFileSystem(DelegatingFileSystem):
    """The child's layer for a torn kill (issue 27): the ``nth`` write to a main transcript is short (all
    but its newline, or half of it) and the process is SIGKILLed before ``write_all`` writes the rest, the
    state a kill between two partial writes (or ENOSPC mid-line, then a crash) leaves. Only unacknowledged
    bytes are torn: a write happens before its barrier."""

    def __init__(self, inner: Any, nth: int, mode: str) -> None:
        super().__init__(inner)
        self.left = nth
        self.mode = mode
        self.torn = False

    def write(self, fd: int, data: bytes) -> int:
        if self.torn:
            os.kill(os.getpid(), signal.SIGKILL)
        if self.path_of(fd)[0].endswith("conversation.jsonl") and len(data) > 2:
            self.left -= 1
            if self.left == 0:
                self.torn = True
                return super().write(fd, data[: len(data) - 1 if self.mode == "newline" else len(data) // 2])
        return super().write(fd, data)


# -- the parent -------------------------------------------------------------------------------------------
def create_session(directory: str, profile: str) -> None:
    """The session every child continues: created with one committed turn, in this process (the window
    before the first HEAD adoption has known engine bugs; ``session-create`` explores it)."""
    from perfsuite.crash.workloads._driver import settings
    from perfsuite.engine import FileSession, Message, Session

    cls = Session if profile == "portable" else FileSession
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


def check_recovered(directory: str, profile: str, oracle: _Oracle, bug: str | None = None
                    ) -> Iterator[tuple[str, str]]:
    """(invariant, message) for one recovery of ``directory``: 1-5 on the recovered view, 2 also on the
    files (file-backed), 3 on the tree, 6 by recovering again."""
    view = recover_view(directory, profile, bug)
    acks, notes = oracle.acks, oracle.notes
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


@dataclass(frozen=True, slots=True)
class _Kill:
    """One planned kill: drawn by the parent's seeded generator in kill order (the same plan on every back
    end), run by whichever worker holds its profile's chain."""

    index: int
    profile: str
    wanted: int
    delay: float
    seed: int
    tear: int = 0  # a torn kill (issue 27): the child tears its tear-th transcript write (> 0: all but the
    #                newline, < 0: half the line) and dies there


@dataclass(frozen=True, slots=True)
class _KillOutcome:
    index: int
    profile: str
    acks: int
    pending: int
    violations: tuple[KillViolation, ...]
    child_s: float
    recovery_s: float
    torn: bool = False


class KillChainDiverged(Exception):
    """A slice found its chain's session further on than its first kill (the scheduler re-ran a slice whose
    worker died after it had started): the chain is started again from its first kill."""


SLICE = 10  # kills per task: a chain's slices run one after another, on one host, in one session directory
MARKER = ".perfsuite-kills-done"


def plan_kills(config: KillConfig) -> list[_Kill]:
    """Every kill of the campaign: profile (alternating), acknowledgements to read, delay, child seed."""
    rng = random.Random(config.seed)
    plan = []
    torn = 0
    for kill in range(config.kills):
        profile = config.profiles[kill % len(config.profiles)]
        wanted = rng.randint(1, config.max_acks)
        delay = rng.random() * config.max_delay_s
        # A torn kill (issue 27): the child tears one of its next transcript writes and dies there; the
        # parent waits for that instead of killing it after ``wanted`` acknowledgements.
        tear = rng.randint(1, 6) if profile == "file" and config.torn_every and \
            (kill // len(config.profiles)) % config.torn_every == config.torn_every - 1 else 0
        if tear:
            tear = tear if torn % 2 == 0 else -tear  # alternately all but the newline, and half the line
            wanted = 4 * config.max_acks  # (a child that never reaches that write is killed as usual)
            torn += 1
        plan.append(_Kill(kill, profile, wanted, delay, rng.randrange(1 << 30), tear))
    return plan


def _kill_once(directory: str, oracle: _Oracle, kill: _Kill, config: KillConfig, env: dict[str, str]
               ) -> _KillOutcome:
    """Start a child on the chain's session, SIGKILL it after ``kill.wanted`` acknowledgements and the
    delay, recover and check (the module docstring)."""
    profile = kill.profile
    child_started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfsuite.crash.kill._campaign", directory, profile, str(kill.seed), f"k{kill.index}",
         config.seeded_bug or "-", str(kill.tear)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    acks = 0
    watchdog = threading.Timer(config.timeout_s, proc.kill)  # a hung child cannot hang the campaign
    watchdog.start()
    try:
        while acks < kill.wanted:
            line = proc.stdout.readline()
            if not line:
                break  # the child died by itself (its stderr says why) or the watchdog fired
            acks += oracle.read(line, kill.index)
        time.sleep(kill.delay)
    finally:
        proc.send_signal(signal.SIGKILL)
        # Read the rest through the same text buffer readline() used: communicate() reads the raw
        # pipes and would drop lines readline() had already buffered (a lost NOTE or ACK line).
        rest = proc.stdout.read()
        err = proc.stderr.read() if proc.stderr is not None else ""
        proc.wait(timeout=config.timeout_s)
        watchdog.cancel()
    for line in rest.splitlines():
        acks += oracle.read(line, kill.index)
    child_s = time.perf_counter() - child_started
    violations: list[KillViolation] = []
    if proc.returncode != -signal.SIGKILL:
        violations.append(KillViolation(kill.index, profile, "0", f"the child exited with {proc.returncode} "
                                        f"before it was killed: {err.strip().splitlines()[-1:]}"))
    recovery_started = time.perf_counter()
    crashed = tempfile.mkdtemp(prefix="perfsuite-kill-state-")
    shutil.copytree(directory, os.path.join(crashed, profile))  # what the kill left, for a violation
    try:
        found = list(check_recovered(directory, profile, oracle, config.seeded_bug))
    except Exception as exc:  # recovery itself failed: invariant 0
        found = [("0", f"recovery failed: {type(exc).__name__}: {exc}")]
    recovery_s = time.perf_counter() - recovery_started
    kept = crashed if any(i not in ("pending",) for i, _ in found) else None
    if kept is None:
        shutil.rmtree(crashed, ignore_errors=True)
    pending = 0
    for invariant, message in found:
        if invariant == "pending":
            pending += 1
        else:
            violations.append(KillViolation(kill.index, profile, invariant, message, kept))
    return _KillOutcome(kill.index, profile, acks, pending, tuple(violations), child_s, recovery_s, bool(kill.tear))


def run_kill_slice(directory: str, kills: Sequence[_Kill], oracle: tuple[list[Ack], list[Note], int],
                   config: KillConfig, first: bool, last: bool
                   ) -> tuple[tuple[list[Ack], list[Note], int], list[_KillOutcome]]:
    """Worker task: the next kills of one chain, on its session ``directory`` (created by the first slice,
    removed by the last unless the campaign keeps it); the chain's oracle comes in and goes out."""
    if first:
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(os.path.dirname(directory), exist_ok=True)
        create_session(directory, kills[0].profile)
    elif _done(directory) != kills[0].index:
        raise KillChainDiverged(f"{directory}: {_done(directory)} kills done, this slice starts at "
                                f"{kills[0].index}")
    state = _Oracle()
    state.acks, state.notes, state.counter = oracle[0], oracle[1], itertools.count(oracle[2])
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    outcomes = []
    for kill in kills:
        outcomes.append(_kill_once(directory, state, kill, config, env))
        with open(os.path.join(os.path.dirname(directory), f"{MARKER}-{os.path.basename(directory)}"), "w") as f:
            f.write(str(kill.index + 1))  # (read by the next slice: see KillChainDiverged)
    after = next(state.counter)
    if last and config.directory is None:
        shutil.rmtree(os.path.dirname(directory), ignore_errors=True)
    return (state.acks, state.notes, after), outcomes


def _done(directory: str) -> int | None:
    try:
        with open(os.path.join(os.path.dirname(directory), f"{MARKER}-{os.path.basename(directory)}")) as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return None


def run_kill_campaign(config: KillConfig, *, on_kill: Callable[[int, str, int, int], None] | None = None,
                      runner: Runner | None = None, execution: Execution | None = None) -> KillReport:
    """Run ``config.kills`` kills (profiles alternate) and check recovery after each (see module doc).
    ``on_kill(index, profile, acks read, violations so far)`` reports progress.

    Issue 32: each profile's kills form a chain (one session, continued by every child), cut into slices of
    :data:`SLICE` kills that run one after another on one host of ``runner`` (default: a local pool of one
    process per profile); chains run in parallel. The plan is drawn up front in kill order, the outcomes
    folded in kill order, so the kills, their profiles and the violations do not depend on the back end.
    A chain whose worker died is run again from its first kill in a new session."""
    started = time.perf_counter()
    if config.seeded_bug is not None:
        layer(config.seeded_bug)  # an unknown name fails here, before any child runs
    plan = plan_kills(config)
    chains = {p: [k for k in plan if k.profile == p] for p in config.profiles}
    chains = {p: kills for p, kills in chains.items() if kills}
    with runner_for(len(chains) or 1, None, runner, execution) as pool:
        hosts = sorted(pool.hosts())
        base = {p: config.directory or None for p in chains}
        outcomes = _run_chains(pool, chains, hosts, base, config, on_kill)
    ordered = sorted((o for chain in outcomes.values() for o in chain), key=lambda o: o.index)
    per_profile: dict[str, int] = dict.fromkeys(config.profiles, 0)
    for outcome in ordered:
        per_profile[outcome.profile] += 1
    return KillReport(config.kills, per_profile, sum(o.acks for o in ordered), sum(o.pending for o in ordered),
                      tuple(v for o in ordered for v in o.violations), time.perf_counter() - started,
                      config.directory, sum(o.child_s for o in ordered), sum(o.recovery_s for o in ordered),
                      sum(o.torn for o in ordered), config.seeded_bug)


def _run_chains(runner: Runner, chains: dict[str, list[_Kill]], hosts: list[str], base: dict[str, str | None],
                config: KillConfig, on_kill: Callable[[int, str, int, int], None] | None
                ) -> dict[str, list[_KillOutcome]]:
    """Drive every chain slice by slice (a slice needs its predecessor's oracle); restart a lost chain."""
    outcomes: dict[str, list[_KillOutcome]] = {p: [] for p in chains}
    attempts = dict.fromkeys(chains, 0)
    dirs: dict[str, str] = {}
    in_flight: dict[Any, tuple[str, int]] = {}
    violations = heard = 0
    ready: dict[int, _KillOutcome] = {}

    def submit(profile: str, start: int, oracle: tuple[list[Ack], list[Note], int]) -> None:
        kills = chains[profile][start : start + SLICE]
        host = hosts[list(chains).index(profile) % len(hosts)] if len(hosts) > 1 else None
        task = Task(start, run_kill_slice, (dirs[profile], kills, oracle, config, start == 0,
                                            start + SLICE >= len(chains[profile])), host=host)
        in_flight[runner.submit(task)] = (profile, start)

    def begin(profile: str) -> None:
        attempts[profile] += 1
        outcomes[profile] = []
        # made by the first slice, on the worker's machine
        root = base[profile] or os.path.join(tempfile.gettempdir(), f"perfsuite-kill-{uuid.uuid4().hex[:12]}")
        dirs[profile] = os.path.join(root, profile)
        submit(profile, 0, ([], [], 1))

    for profile in chains:
        begin(profile)
    try:
        while in_flight:
            for handle in runner.wait(list(in_flight)):
                profile, start = in_flight.pop(handle)
                try:
                    oracle, done = runner.result(handle)
                except (WorkerLost, KillChainDiverged) as exc:
                    if attempts[profile] >= ATTEMPTS:
                        raise CrashCheckError(f"the kill chain of {profile} lost its worker {ATTEMPTS} times: "
                                              f"{exc}") from None
                    for outcome in outcomes[profile]:
                        ready.pop(outcome.index, None)  # (not yet reported: run again with the chain)
                    begin(profile)
                    continue
                outcomes[profile].extend(done)
                ready.update((o.index, o) for o in done)
                while heard in ready:  # progress in kill order, as the sequential campaign reported it
                    outcome = ready.pop(heard)
                    heard += 1
                    violations += len(outcome.violations)
                    if on_kill is not None:
                        on_kill(outcome.index, outcome.profile, outcome.acks, violations)
                if start + SLICE < len(chains[profile]):
                    submit(profile, start + SLICE, oracle)
    finally:
        if in_flight:
            runner.cancel(in_flight)
    return outcomes


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
