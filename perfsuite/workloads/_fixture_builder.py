"""M6: the fixture generators' building blocks: a session driven in virtual time with seeded text and exact-size
transcript growth (:class:`Builder`), and diagnostic logs written to an exact size. The generators in
``_fixture_gen`` compose them; exact sizes come by construction, so a fixture's bytes never depend on luck.
"""

from __future__ import annotations

import itertools
import json
import os
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfsuite.engine import (
    DiagnosticLog,
    Message,
    OsFileSystem,
    Session,
    SessionSettings,
    VirtualClock,
)
from perfsuite.errors import PerfsuiteError
from perfsuite.workloads._fixture_text import TextGen, log_uniform

ROOT = "root"
MODELS = ("claude-sonnet-4", "claude-opus-4", "gpt-4.1", "o3")
AGENT_ROLES = ("researcher", "test-runner", "reviewer", "refactorer", "doc-writer", "profiler",
                "bisector", "migrator", "linter", "planner", "builder", "verifier")

# -- building blocks -----------------------------------------------------------------------------------


class Builder:
    """Drives one session: seeded text, virtual time, and exact-size transcript growth."""

    def __init__(self, session: Session, clock: VirtualClock, text: TextGen) -> None:
        self.session = session
        self.clock = clock
        self.text = text
        self.rng = text.rng

    def wait(self, low: float, high: float) -> None:
        """Let virtual time pass (think time, generation time)."""
        self.clock.advance(self.rng.uniform(low, high))

    def size(self, conversation: str) -> int:
        return self.session.conversation(conversation).size

    def count(self, conversation: str) -> int:
        return len(self.session.conversation(conversation))

    def add(self, conversation: str, role: str, content: str, meta: Mapping[str, Any] | None = None) -> int:
        """Append one message now; return its encoded size."""
        message = Message(role, content, round(self.clock.wall(), 3), dict(meta) if meta else None)
        self.session.add_message(conversation, message)
        return len(message.encode())

    def user(self, conversation: str, low: int = 300, high: int = 1200) -> int:
        self.wait(15.0, 140.0)
        return self.add(conversation, "user", self.text.user_message(int(log_uniform(self.rng, low, high))))

    def assistant(self, conversation: str, low: int = 300, high: int = 2000) -> int:
        self.wait(4.0, 70.0)
        chars = int(log_uniform(self.rng, low, high))
        meta = {"model": MODELS[self.rng.randrange(len(MODELS))],
                "usage": {"input_tokens": self.rng.randrange(2_000, 180_000), "output_tokens": chars // 4}}
        return self.add(conversation, "assistant", self.text.assistant_message(chars), meta)

    def tool(self, conversation: str, low: int = 200, high: int = 6000) -> int:
        self.wait(0.5, 20.0)
        name = self.text.tool_name()
        body = self.text.code(int(log_uniform(self.rng, low, high))) if name in ("read_file", "edit_file") \
            else self.text.tool_output(int(log_uniform(self.rng, low, high)))
        return self.add(conversation, "tool", body, {"tool": name, "call": self.text.hexid(12)})

    def exchange(self, conversation: str, agent: bool) -> None:
        """One step of a conversation: a user turn and an answer (root), or an agent's tool round."""
        if agent:
            self.assistant(conversation, 200, 1500)
            self.tool(conversation)
        else:
            self.user(conversation)
            self.assistant(conversation)

    def grow_to(self, conversation: str, target: int, *, agent: bool = False) -> None:
        """Ordinary messages until the transcript holds at least ``target`` bytes."""
        while self.size(conversation) < target:
            self.exchange(conversation, agent)

    def fill_exact(self, conversation: str, target: int, *, agent: bool = False) -> None:
        """Grow to exactly ``target`` bytes: ordinary messages while far away, then plain assistant
        messages whose content is sized to the byte (their encoded length is known exactly)."""
        margin = 12_000  # an ordinary exchange is far smaller than this (tool output <= ~6.5 KB)
        while target - self.size(conversation) > margin:
            self.exchange(conversation, agent)
        remaining = target - self.size(conversation)
        if remaining < 0:
            raise PerfsuiteError(f"{conversation}: already {self.size(conversation)} bytes, over the "
                                 f"target of {target}")
        parts = max(1, remaining // 1500)
        for index in range(parts):
            share = remaining // (parts - index)
            self.wait(4.0, 40.0)
            stamp = round(self.clock.wall(), 3)
            overhead = len(Message("assistant", "", stamp).encode())
            if share - overhead < 1:
                raise PerfsuiteError(f"{conversation}: cannot place {share} bytes in one message")
            message = Message("assistant", self.text.plain(share - overhead), stamp)
            self.session.add_message(conversation, message)
            remaining -= len(message.encode())
        if self.size(conversation) != target:
            raise PerfsuiteError(f"{conversation}: exact fill reached {self.size(conversation)}, not {target}")

    def permission_pair(self, agent: str) -> None:
        """A permission decision: blocked, saved; running again, saved (observational, E7)."""
        self.session.set_activity(agent, "permission-blocked")
        self.session.save_registry()
        self.wait(0.5, 25.0)
        self.session.set_activity(agent, "running")
        self.session.save_registry()

    def result_body(self, low: int = 500, high: int = 4000) -> str:
        chars = int(log_uniform(self.rng, low, high))
        summary = self.text.plain(min(chars, 300))
        return f"{summary}\n\n{self.text.tool_output(max(0, chars - len(summary)))}"

    def retire_all(self) -> int:
        removed = 0
        while True:
            n, more = self.session.retire()
            removed += n
            if not more:
                return removed


def open_session(dest: Path, settings: Mapping[str, Any], wall_start: float, seed: int = 0
                 ) -> tuple[Session, VirtualClock]:
    """A new session in virtual time whose publication ids, session id and log salts are seeded (format 2
    records chain sha256 digests over them, so a build is deterministic only if they are)."""
    clock = VirtualClock(wall_start=wall_start)
    rng = random.Random(f"fixture:{seed}")
    ids = itertools.count(1)
    session = Session.open(dest, create=True, fs=OsFileSystem(), clock=clock,
                           settings=SessionSettings(**dict(settings)), id_source=lambda: f"{next(ids):06x}",
                           entropy=lambda: f"{rng.getrandbits(128):032x}")
    return session, clock


def _line(record: Mapping[str, Any]) -> bytes:
    """A diagnostic log line exactly as :class:`DiagnosticLog` encodes it (E8)."""
    return json.dumps(record, separators=(",", ":"), sort_keys=True).encode() + b"\n"


def _telemetry(text: TextGen, log: str, t: float, seq: int) -> dict[str, Any]:
    """One realistic telemetry record for the log called ``log``."""
    rng = text.rng
    base: dict[str, Any] = {"t": round(t, 3), "seq": seq, "pid": 41_000 + rng.randrange(8)}
    kind = log.split(".")[0].split("-")[0]
    if kind == "transport":
        base.update(kind="request", model=MODELS[rng.randrange(len(MODELS))], status=200 if rng.random() < 0.97
                    else 529, ms=round(log_uniform(rng, 300, 90_000), 1), bytes_in=rng.randrange(200, 400_000),
                    bytes_out=rng.randrange(100, 60_000), stream_chunks=rng.randrange(1, 900))
    elif kind == "permissions":
        base.update(kind="decision", agent=f"agent-{text.hexid(6)}", tool=text.tool_name(),
                    decision="allow" if rng.random() < 0.93 else "deny", wait_ms=round(log_uniform(rng, 40, 60_000), 1),
                    command=text.plain(rng.randrange(20, 160)))
    elif kind == "publications":
        phases = {p: round(log_uniform(rng, 0.01, 40.0), 3) for p in
                  ("freeze", "stage", "hash", "select", "commit", "adopt", "finish")}
        base.update(kind="publication", id=f"p1-{seq}-checkpoint-{text.hexid(6)}", phases_ms=phases,
                    bytes=rng.randrange(300, 1_400_000), chunks=rng.randrange(0, 24), outcome="adopted")
    elif kind == "render":
        base.update(kind="render", view=text.identifier(), lines=rng.randrange(1, 4000),
                    ms=round(log_uniform(rng, 0.05, 120.0), 3), reason=text.plain(rng.randrange(10, 60)))
    elif kind == "gc":
        base.update(kind="gc", generation=rng.randrange(3), ms=round(log_uniform(rng, 0.05, 60.0), 3),
                    collected=rng.randrange(0, 90_000), uncollectable=0)
    else:  # telemetry: heartbeat gaps and loop lag
        base.update(kind="heartbeat", gap_ms=round(5.0 + log_uniform(rng, 0.01, 80.0), 3),
                    lag_us=rng.randrange(0, 75_000), phase=("idle", "stream", "publish", "render")[rng.randrange(4)],
                    note=text.plain(rng.randrange(10, 80)))
    return base


def write_log_exact(text: TextGen, directory: str | os.PathLike[str], log: str, target: int, *,
                    start: float, end: float, flush_every: int = 500) -> int:
    """Write ``log`` in ``directory`` with :class:`DiagnosticLog` (delta appends, E8) until it holds
    exactly ``target`` bytes: ordinary records, then one record whose ``note`` is sized to the byte."""
    per = 260  # rough record size, only used to spread timestamps over [start, end]
    expected = max(1, target // per)
    written = seq = 0
    tail = 1200  # room kept for the last, exactly sized record
    with DiagnosticLog(directory) as dlog:
        while True:
            t = start + (end - start) * min(1.0, seq / expected)
            record = _telemetry(text, log, t, seq)
            size = len(_line(record))
            if target - written - size < tail:
                break
            dlog.log(log, record)
            written += size
            seq += 1
            if seq % flush_every == 0:
                dlog.flush()
        record = _telemetry(text, log, end, seq)
        record["note"] = ""
        need = target - written - len(_line(record))
        if need < 0:
            raise PerfsuiteError(f"{log}: cannot reach exactly {target} bytes")
        record["note"] = text.plain(need)
        dlog.log(log, record)
        written += len(_line(record))
    actual = os.path.getsize(os.path.join(directory, log))
    if actual != target:
        raise PerfsuiteError(f"{log}: wrote {actual} bytes, expected exactly {target}")
    return seq + 1
