"""A small asyncio program for `perfsuite watch` (issue 31 acceptance): every EVERY ms, one loop callback
busy-waits BLOCK ms (a planted stall; 0 = none), for DURATION seconds (default: until interrupted).

    python scripts/acceptance/watch_programs/plant.py --block-ms 8 --every-ms 100
"""

from __future__ import annotations

import argparse
import asyncio
import time


def block(ms: float) -> None:
    """The planted stall: hold the loop's thread for ``ms`` milliseconds."""
    end = time.perf_counter_ns() + int(ms * 1e6)
    while time.perf_counter_ns() < end:
        pass


async def main(block_ms: float, every_ms: float, duration_s: float | None) -> None:
    loop = asyncio.get_running_loop()
    stop = None if duration_s is None else loop.time() + duration_s
    while stop is None or loop.time() < stop:
        await asyncio.sleep(every_ms / 1e3)
        if block_ms > 0:
            block(block_ms)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--block-ms", type=float, default=8.0)
    parser.add_argument("--every-ms", type=float, default=100.0)
    parser.add_argument("--duration", type=float, default=None)
    args = parser.parse_args()
    asyncio.run(main(args.block_ms, args.every_ms, args.duration))
