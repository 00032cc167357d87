"""A real third-party asyncio workload for `perfsuite watch`: LangGraph's `AsyncSqliteSaver` (langgraph-checkpoint-
sqlite on aiosqlite, which runs SQLite on its own thread) storing a growing conversation checkpoint every EVERY ms,
as an agent runtime's checkpointer would after each turn. Nothing here is perfsuite: the program only drives the
library; `perfsuite watch` shows what its event loop went through.

    python scripts/acceptance/watch_programs/sqlite_saver.py --every-ms 100 --turn-chars 2000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile


async def main(every_ms: float, turn_chars: int, duration_s: float | None, db: str) -> None:
    import aiosqlite
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with aiosqlite.connect(db) as conn:
        saver = AsyncSqliteSaver(conn)
        await saver.setup()
        config = {"configurable": {"thread_id": "watched", "checkpoint_ns": ""}}
        loop = asyncio.get_running_loop()
        stop = None if duration_s is None else loop.time() + duration_s
        transcript, version, step = b"", None, 0
        while stop is None or loop.time() < stop:
            step += 1
            transcript += (f"turn {step}: " + "x" * turn_chars + "\n").encode()
            version = saver.get_next_version(version, None)
            checkpoint = dict(empty_checkpoint())
            checkpoint["channel_values"] = {"transcript": transcript}
            checkpoint["channel_versions"] = {"transcript": version}
            checkpoint["versions_seen"] = {"checkpoint": {"transcript": version}}
            config = await saver.aput(config, checkpoint, {"source": "loop", "step": step, "parents": {}},
                                      {"transcript": version})
            await asyncio.sleep(every_ms / 1e3)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every-ms", type=float, default=100.0)
    parser.add_argument("--turn-chars", type=int, default=2000)
    parser.add_argument("--duration", type=float, default=None)
    parser.add_argument("--db", default=None, help="the SQLite file (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(args.every_ms, args.turn_chars, args.duration, args.db or os.path.join(tmp, "ck.sqlite")))
