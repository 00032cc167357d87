"""The kill campaign's child process (``python -m perfsuite.crash.kill._child DIR PROFILE SEED TAG ...``): opens
the session (recovering whatever the previous child left) and runs a long, seeded, mixed session workload on
the real file system, recording one line per acknowledgement (``ACK {json}``) and per value it is about to
make live, delivery or discard (``NOTE {json}``) in its side file (fdatasynced, ``_ledger``) and then
printing it, flushed, until the parent SIGKILLs it.

Its mix includes coalescing (E7): a checkpoint held at its admission (accepted and frozen, not started)
while its conversation is written again and more checkpoint requests with an acknowledgement arrive, and
mail is delivered; each acknowledged request must then be durable with the content it had when it was
made. A coalescing kill makes that certain: the child runs it after a few steps and dies right after.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import os
import random
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from perfsuite.crash.kill._config import FLAVOURS
from perfsuite.crash.kill._layer import layer
from perfsuite.crash.kill._ledger import AckLedger
from perfsuite.engine import DelegatingFileSystem

COALESCE_SHARE = 0.08  # of a portable child's steps, preceded by a coalescing step

#: a child's waiter: submits with an acknowledgement callback, True once it ran without error
Waiter = Callable[[Callable[[Callable[[BaseException | None], None]], object]], Awaitable[bool]]


class _Child:
    """One child's mixed workload; ``emit`` prints a flushed line the parent reads."""

    def __init__(self, directory: str, profile: str, seed: int, tag: str, bug: str | None = None,
                 tear: int = 0, coalesce: int = 0, ledger: str | None = None) -> None:
        from perfsuite.crash.workloads._driver import settings
        from perfsuite.engine import FileSession, Session, SystemClock

        self.rng = random.Random(seed)
        self.mix = random.Random(seed ^ 0x5EED)  # coalescing's own draws: the rest of the mix is as it was
        self.tag = tag
        self.serial = itertools.count()
        self.profile = profile
        self.coalesce_after = coalesce  # > 0: a coalescing kill, after that many steps
        self.ledger = AckLedger(ledger)
        fs, faults = layer(bug)
        if tear:
            fs = TearingFileSystem(fs, abs(tear), "newline" if tear > 0 else "half")
        if profile == "portable":
            self.session: Any = Session.open(directory, clock=SystemClock(), settings=settings("thread"), fs=fs,
                                             faults=faults)
        else:
            self.session = FileSession.open(directory, clock=SystemClock(), settings=settings(), fs=fs, faults=faults)

    def emit(self, what: str, **record: Any) -> None:
        line = f"{what} {json.dumps(record, sort_keys=True)}"
        if what in ("ACK", "NOTE"):
            self.ledger.record(line)  # durable outside the session before anyone sees it (``_ledger``)
        print(line, flush=True)

    def ack_transcript(self, conversation: str, data: bytes | None = None) -> None:
        """Acknowledge ``conversation``'s bytes: as they are now, or ``data``, as they were at the request."""
        data = self.session.buffers[conversation].data() if data is None else data
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

    def add(self, conversation: str, count: int, rng: random.Random | None = None) -> None:
        from perfsuite.engine import Message

        rng = rng or self.rng
        for _ in range(count):
            size = rng.choice((40, 200, 900))
            self.session.add_message(conversation, Message(rng.choice(("user", "assistant")),
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

    def pending_ack(self) -> tuple[asyncio.Future[BaseException | None], Callable[[BaseException | None], None]]:
        """A future and the acknowledgement callback that resolves it (from any thread, once)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[BaseException | None] = loop.create_future()

        def resolve(error: BaseException | None) -> None:
            if not done.done():
                done.set_result(error)

        def ack(error: BaseException | None) -> None:
            loop.call_soon_threadsafe(resolve, error)

        return done, ack

    def settle_gate(self) -> None:
        """Finish the accepted job and the queued preparations, so the held checkpoint is the one running."""
        s = self.session
        for _ in range(16):
            if s.gate.idle:
                return
            s.drain(limit_s=600.0)  # (a limit a loaded machine cannot reach: no timing in the workload)
            s.gate.pump()

    async def coalesce(self, conversation: str) -> bool:
        """A checkpoint of ``conversation`` held at its admission (E5: accepted and frozen, not started, the
        hand-over that makes coalescing certain), then two more edits, each with a checkpoint request with
        an acknowledgement (E7: the first arrives while the held one runs, the second coalesces into the
        first), and a background delivery; then the admission is released. Each request acknowledged
        ``None`` is acknowledged with the bytes it had when it was made. True when the requests met a
        running checkpoint (the portable session; the file-backed one publishes each at once)."""
        from perfsuite.engine import Admission

        s, rng = self.session, self.mix
        self.settle_gate()
        held = Admission(released=False)
        requests = []
        running = False
        for index in range(3):
            self.add(conversation, rng.randint(1, 2), rng)
            done, ack = self.pending_ack()
            requests.append((done, s.buffers[conversation].data()))
            s.request_checkpoint(conversation, ack=ack, admission=held if index == 0 else None)
            if index == 0:
                running = s.gate.job is not None  # the held checkpoint is accepted: what follows meets it
        self.emit("NOTE", kind="coalesced", conversation=conversation, running=running)
        body = f"completion {self.name()}"
        mail, ack = self.pending_ack()
        s.deliver_background(conversation, body, sender=rng.choice(self.active_agents() or ["root"]), ack=ack)
        held.release()
        for done, data in requests:  # (an acknowledgement runs exactly once, whatever the request coalesced into)
            if await done is None:
                self.ack_transcript(conversation, data)
        if await mail is None:
            self.ack_mail(self.find_mail(conversation, body))
        return running

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
        steps = 0
        while True:
            if steps == self.coalesce_after > 0:  # a coalescing kill: coalesce now, then die (every record is in
                await self.coalesce(self.mix.choice(self.conversations()))  # the side file already)
                os.kill(os.getpid(), signal.SIGKILL)
            if self.profile == "portable" and self.mix.random() < COALESCE_SHARE:  # (file-backed: all synchronous)
                await self.coalesce(self.mix.choice(self.conversations()))
            await self.step(waiter)
            await asyncio.sleep(0)
            steps += 1


def child_main(argv: Sequence[str]) -> int:
    """Entry point of the child process: ``DIR PROFILE SEED TAG [BUG|- [TEAR [COALESCE [LEDGER]]]]``; runs
    until it is killed (or, with ``TEAR`` != 0, until that write to a transcript tears and it kills itself:
    all but its newline when ``TEAR`` > 0, half of it when < 0; with ``COALESCE`` > 0, after that many steps
    and a coalescing step). ``LEDGER`` is the side file every record goes to first."""
    directory, profile, seed, tag, *rest = argv
    bug = rest[0] if rest and rest[0] != "-" else None
    tear = int(rest[1]) if len(rest) > 1 else 0
    coalesce = int(rest[2]) if len(rest) > 2 else 0
    ledger = rest[3] if len(rest) > 3 and rest[3] != "-" else None
    if profile == "langgraph":  # the LangGraph saver's loop (``_langgraph``; no torn or coalescing kills)
        from perfsuite.crash.kill._langgraph import saver_child

        return saver_child(directory, int(seed), tag, bug, ledger, coalesce)
    asyncio.run(_Child(directory, profile, int(seed), tag, bug, tear, coalesce, ledger).run())
    return 0


class TearingFileSystem(DelegatingFileSystem):
    """The child's layer for a torn kill (E2, a torn tail): the ``nth`` write to a main transcript is short (all
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


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
