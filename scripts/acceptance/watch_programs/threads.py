"""An asyncio program with two event loops, for `perfsuite watch`: the main thread's, and a worker thread's
(`worker`, its own `asyncio.run`) that blocks its loop BLOCK ms every EVERY ms. Each loop is instrumented and
reported by its thread (modes `live` and `live@worker`).

    python scripts/acceptance/watch_programs/threads.py --block-ms 8
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time


def block(ms: float) -> None:
    end = time.perf_counter_ns() + int(ms * 1e6)
    while time.perf_counter_ns() < end:
        pass


async def worker_main(block_ms: float, every_ms: float, stop: threading.Event) -> None:
    while not stop.is_set():
        await asyncio.sleep(every_ms / 1e3)
        block(block_ms)


async def main(block_ms: float, every_ms: float, duration_s: float | None) -> None:
    stop = threading.Event()
    worker = threading.Thread(target=lambda: asyncio.run(worker_main(block_ms, every_ms, stop)), name="worker")
    worker.start()
    try:
        loop = asyncio.get_running_loop()
        end = None if duration_s is None else loop.time() + duration_s
        while end is None or loop.time() < end:
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.to_thread(worker.join)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--block-ms", type=float, default=8.0)
    parser.add_argument("--every-ms", type=float, default=100.0)
    parser.add_argument("--duration", type=float, default=None)
    args = parser.parse_args()
    asyncio.run(main(args.block_ms, args.every_ms, args.duration))
