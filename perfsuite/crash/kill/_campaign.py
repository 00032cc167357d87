"""The kill campaign (SPEC section 7): real processes, the real file system, real SIGKILL.

A child process (``python -m perfsuite.crash.kill._child DIR PROFILE SEED TAG``) opens a session (recovering
whatever the previous child left) and runs a long, seeded, mixed session workload on the real file
system, printing one flushed line per acknowledgement (``ACK {json}``) and per value it is about to
make live, delivery or discard (``NOTE {json}``). The parent reads a seeded random number of
acknowledgements, waits a seeded random fraction of a few milliseconds, SIGKILLs the child, reads what it
printed before it died, then recovers the session in this process with the engine's open path (a stale
lease or PID lock names the dead child) and checks the session invariants (1-6 of SPEC section 7, as
:mod:`perfsuite.crash.invariants._sessions` defines them) against every acknowledgement of every child so
far. The session is then closed and the next child continues it.

Every record a child makes goes first to its side file outside the session, fdatasynced (``_ledger``):
the oracle is that file, and after each kill every recorded acknowledgement of a checkpoint or mail is
checked one by one against the reopened session (L). Every third portable kill is a coalescing kill: the
child coalesces checkpoint requests into a held running checkpoint (E7, ``_child``), then dies. The
``langgraph`` profile (named only) runs a child driving the LangGraph saver instead (``_langgraph``): every
third of its kills, the child dies by itself right after a ``put_writes`` acknowledgement.

Unlike the enumerated campaign this loses only what a *process* crash loses (the page cache survives),
so it tests the engine's own ordering and recovery paths under real concurrency (the portable child runs
the asynchronous job on an asyncio loop with the thread offload), not the durability of fsync.
"""

from __future__ import annotations

import itertools
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from perfsuite.cluster import ATTEMPTS, Runner, Task, WorkerLost
from perfsuite.crash._execution import Execution, runner_for
from perfsuite.crash.bugs._seeded import langgraph_missing
from perfsuite.crash.kill._config import PROFILES, KillConfig, KillReport, KillViolation
from perfsuite.crash.kill._layer import layer
from perfsuite.crash.kill._ledger import (
    checked_kinds,
    is_record,
    ledger_lines,
    ledger_path,
    remove_ledgers,
    unrecorded,
)
from perfsuite.crash.kill._recovery import _Oracle, check_recovered, create_session
from perfsuite.crash.model._model import CrashCheckError
from perfsuite.crash.model._trace import Ack, Note

__all__ = ["PROFILES", "KillChainDiverged", "KillConfig", "KillReport", "KillViolation", "check_recovered",
           "create_session", "plan_kills", "run_kill_campaign", "run_kill_slice"]


@dataclass(frozen=True, slots=True)
class _Kill:
    """One planned kill: drawn by the parent's seeded generator in kill order (the same plan on every back
    end), run by whichever worker holds its profile's chain."""

    index: int
    profile: str
    wanted: int
    delay: float
    seed: int
    tear: int = 0  # a torn kill (E2): the child tears its tear-th transcript write (> 0: all but the
    #                newline, < 0: half the line) and dies there
    coalesce: int = 0  # a coalescing kill: after that many steps the child coalesces checkpoint requests into
    #                    a held running one (E7), records the acknowledgements and dies there


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
    checked: int = 0  # recorded acknowledgements (checkpoints, mail) checked one by one after this reopen
    lost: tuple[int, ...] = ()  # the ``at`` of each recorded acknowledgement found missing
    coalescing: bool = False
    coalesced: int = 0


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
        # A torn kill (E2, a torn tail): the child tears one of its next transcript writes and dies there; the
        # parent waits for that instead of killing it after ``wanted`` acknowledgements.
        tear = rng.randint(1, 6) if profile == "file" and config.torn_every and \
            (kill // len(config.profiles)) % config.torn_every == config.torn_every - 1 else 0
        if tear:
            tear = tear if torn % 2 == 0 else -tear  # alternately all but the newline, and half the line
            wanted = 4 * config.max_acks  # (a child that never reaches that write is killed as usual)
            torn += 1
        seed = rng.randrange(1 << 30)
        # A coalescing kill (E7): 1-5 steps, then the coalescing step, then the child dies by itself (no draw
        # of the generator: the plan of every other kill stays as it was).
        # (langgraph: the child SIGKILLs itself right after that many turns' put_writes acknowledgement instead:
        # the window an acknowledgement that outran its fdatasync loses, hit without timing)
        coalesce = 1 + seed % 5 if profile in ("portable", "langgraph") and config.coalesce_every and \
            (kill // len(config.profiles)) % config.coalesce_every == config.coalesce_every - 1 else 0
        if coalesce:
            wanted = 4 * config.max_acks
        plan.append(_Kill(kill, profile, wanted, delay, seed, tear, coalesce))
    return plan


def _kill_once(directory: str, oracle: _Oracle, kill: _Kill, config: KillConfig, env: dict[str, str]
               ) -> _KillOutcome:
    """Start a child on the chain's session, SIGKILL it after ``kill.wanted`` acknowledgements and the
    delay, recover and check (the module docstring). The oracle takes what the child recorded in its side
    file (``_ledger``); what it printed only says when to kill, and must have been recorded first."""
    profile = kill.profile
    child_started = time.perf_counter()
    ledger = ledger_path(directory, profile, kill.index)
    if os.path.exists(ledger):
        os.remove(ledger)  # (a slice run again: that attempt's records are not this child's)
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfsuite.crash.kill._child", directory, profile, str(kill.seed), f"k{kill.index}",
         config.seeded_bug or "-", str(kill.tear), str(kill.coalesce), ledger],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    printed: list[str] = []
    seen = 0
    watchdog = threading.Timer(config.timeout_s, proc.kill)  # a hung child cannot hang the campaign
    watchdog.start()
    try:
        while seen < kill.wanted:
            line = proc.stdout.readline()
            if not line:
                break  # the child died by itself (its stderr says why) or the watchdog fired
            if is_record(line):
                printed.append(line)
                seen += line.startswith("ACK ")
        time.sleep(kill.delay)
    finally:
        proc.send_signal(signal.SIGKILL)
        # Read the rest through the same text buffer readline() used: communicate() reads the raw
        # pipes and would drop lines readline() had already buffered (a lost NOTE or ACK line).
        rest = proc.stdout.read()
        err = proc.stderr.read() if proc.stderr is not None else ""
        proc.wait(timeout=config.timeout_s)
        watchdog.cancel()
    printed += [line for line in rest.splitlines() if is_record(line)]
    recorded = ledger_lines(ledger)
    notes_before = len(oracle.notes)
    acks = sum(oracle.read(line, kill.index) for line in recorded)
    coalesced = sum(n.kind == "coalesced" and bool(n.detail.get("running")) for n in oracle.notes[notes_before:])
    child_s = time.perf_counter() - child_started
    violations: list[KillViolation] = []
    if proc.returncode != -signal.SIGKILL:
        violations.append(KillViolation(kill.index, profile, "0", f"the child exited with {proc.returncode} "
                                        f"before it was killed: {err.strip().splitlines()[-1:]}"))
    missed = unrecorded(printed, recorded)
    if missed:
        violations.append(KillViolation(kill.index, profile, "R", f"{len(missed)} printed record(s) not in the "
                                        f"side file first: {missed[0][:120]}"))
    recovery_started = time.perf_counter()
    crashed = tempfile.mkdtemp(prefix="perfsuite-kill-state-")
    shutil.copytree(directory, os.path.join(crashed, profile))  # what the kill left, for a violation
    lost: list[int] = []
    try:
        found = list(check_recovered(directory, profile, oracle, config.seeded_bug, lost))
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
    return _KillOutcome(kill.index, profile, acks, pending, tuple(violations), child_s, recovery_s, bool(kill.tear),
                        checked_kinds(oracle.acks), tuple(lost), bool(kill.coalesce) and profile == "portable",
                        coalesced)


def run_kill_slice(directory: str, kills: Sequence[_Kill], oracle: tuple[list[Ack], list[Note], int],
                   config: KillConfig, first: bool, last: bool
                   ) -> tuple[tuple[list[Ack], list[Note], int], list[_KillOutcome]]:
    """Worker task: the next kills of one chain, on its session ``directory`` (created by the first slice,
    removed by the last unless the campaign keeps it); the chain's oracle comes in and goes out."""
    if first:
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(os.path.dirname(directory), exist_ok=True)
        create_session(directory, kills[0].profile)
        remove_ledgers(directory, kills[0].profile)
    elif _done(directory) != kills[0].index:
        raise KillChainDiverged(f"{directory}: the chain's next kill is {_done(directory)}, this slice starts "
                                f"at {kills[0].index}")
    state = _Oracle()
    state.acks, state.notes, state.counter = oracle[0], oracle[1], itertools.count(oracle[2])
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    outcomes = []
    for kill in kills:
        outcomes.append(_kill_once(directory, state, kill, config, env))
        with open(os.path.join(os.path.dirname(directory), f"{MARKER}-{os.path.basename(directory)}"), "w") as f:
            # The chain's next kill (profiles alternate, one global index each), read by the next slice: see
            # KillChainDiverged.
            f.write(str(kill.index + len(config.profiles)))
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

    Where the kills run: each profile's kills form a chain (one session, continued by every child), cut into
    slices of :data:`SLICE` kills that run one after another on one host of ``runner`` (default: a local pool
    of one process per profile); chains run in parallel. The plan is drawn up front in kill order, the outcomes
    folded in kill order, so the kills, their profiles and the violations do not depend on the back end.
    A chain whose worker died is run again from its first kill in a new session."""
    started = time.perf_counter()
    if config.seeded_bug is not None:
        layer(config.seeded_bug)  # an unknown name fails here, before any child runs
    if "langgraph" in config.profiles and langgraph_missing() is not None:
        raise CrashCheckError(f"the kill profile langgraph: {langgraph_missing()}")
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
                      sum(o.torn for o in ordered), config.seeded_bug, sum(o.checked for o in ordered),
                      len({(o.profile, at) for o in ordered for at in o.lost}), sum(o.coalescing for o in ordered),
                      sum(o.coalesced for o in ordered))


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

