"""Put latency of the engine's LangGraph checkpointers beside LangGraph's SQLite savers, interleaved.

Each round puts one checkpoint into each saver in turn (the order rotates every round): a thread growing by
one checkpoint a round whose ``messages`` channel changed (a list of 8 messages of ~250 bytes each) and
whose ``meta`` channel did not. Durability like for like: every put returns after its record is durable
(ours: one pwrite and one fdatasync of the session log; SQLite: WAL mode, ``synchronous=FULL``, the WAL
fsynced at each commit). Prints the median and p90 of each saver's put, in milliseconds, wall time.

    python scripts/acceptance/langgraph_put_latency.py [-n 300] [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiosqlite
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from perfsuite.integrations.langgraph import AsyncEngineSaver, EngineSaver


def _checkpoint(n: int) -> tuple[Any, dict[str, int]]:
    cp = empty_checkpoint()
    cp["id"] = f"1ef{n:020d}"
    cp["channel_values"] = {"messages": [{"role": "user" if i % 2 else "assistant", "content": f"turn {n} " + "x" * 240}
                                         for i in range(8)], "meta": {"model": "m", "pinned": "y" * 2000}}
    cp["channel_versions"] = {"messages": n + 1, "meta": 1}
    return cp, ({"messages": n + 1, "meta": 1} if n == 0 else {"messages": n + 1})


def _config(parent: str | None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": "t", "checkpoint_ns": ""}
    if parent:
        configurable["checkpoint_id"] = parent
    return {"configurable": configurable}


def _summary(name: str, ms: list[float]) -> str:
    ms = sorted(ms)
    p90 = ms[int(0.9 * (len(ms) - 1))]
    return f"{name:18s} median {statistics.median(ms):7.3f} ms   p90 {p90:7.3f} ms   n={len(ms)}"


def run_sync(root: Path, n: int) -> dict[str, list[float]]:
    conn = sqlite3.connect(root / "sync.sqlite", check_same_thread=False, isolation_level=None)
    sqlite = SqliteSaver(conn)
    sqlite.setup()
    conn.execute("PRAGMA synchronous=FULL")
    savers: dict[str, Any] = {"EngineSaver": EngineSaver(root / "sync-engine"), "SqliteSaver": sqlite}
    parents: dict[str, str | None] = dict.fromkeys(savers)
    times: dict[str, list[float]] = {name: [] for name in savers}
    names = list(savers)
    for i in range(n):
        cp, versions = _checkpoint(i)
        for name in names[i % 2:] + names[:i % 2]:
            started = time.perf_counter()
            stored = savers[name].put(_config(parents[name]), cp, {"source": "loop", "step": i}, versions)
            times[name].append((time.perf_counter() - started) * 1e3)
            parents[name] = stored["configurable"]["checkpoint_id"]
    savers["EngineSaver"].close()
    conn.close()
    return times


async def run_async(root: Path, n: int) -> dict[str, list[float]]:
    conn = await aiosqlite.connect(root / "async.sqlite", isolation_level=None)
    sqlite = AsyncSqliteSaver(conn)
    await sqlite.setup()
    await conn.execute("PRAGMA synchronous=FULL")
    engine = await AsyncEngineSaver.open(root / "async-engine")
    puts: dict[str, Callable[..., Awaitable[Any]]] = {"AsyncEngineSaver": engine.aput, "AsyncSqliteSaver": sqlite.aput}
    parents: dict[str, str | None] = dict.fromkeys(puts)
    times: dict[str, list[float]] = {name: [] for name in puts}
    names = list(puts)
    for i in range(n):
        cp, versions = _checkpoint(i)
        for name in names[i % 2:] + names[:i % 2]:
            started = time.perf_counter()
            stored = await puts[name](_config(parents[name]), cp, {"source": "loop", "step": i}, versions)
            times[name].append((time.perf_counter() - started) * 1e3)
            parents[name] = stored["configurable"]["checkpoint_id"]
    await engine.aclose()
    await conn.close()
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("-n", type=int, default=300, help="puts per saver (default 300)")
    parser.add_argument("--dir", type=Path, default=None, help="where the stores go (default: a temporary directory)")
    args = parser.parse_args(argv)
    if args.n < 1:
        print("langgraph_put_latency: -n: give at least 1", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="langgraph-put-", dir=args.dir) as tmp:
        root = Path(tmp)
        for name, ms in {**run_sync(root, args.n), **asyncio.run(run_async(root, args.n))}.items():
            print(_summary(name, ms[10:] if len(ms) > 20 else ms))  # the first ten rounds warm up
    return 0


if __name__ == "__main__":
    sys.exit(main())
