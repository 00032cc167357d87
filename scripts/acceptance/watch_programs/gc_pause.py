"""An asyncio program with a planted garbage-collection pause, for `perfsuite watch` (issue 31 acceptance).

It keeps OBJECTS live container objects (dicts of lists, like loaded session state) and every EVERY ms a loop
callback named `collect_now` runs a full collection (`gc.collect()`): the pause a generation-2 collection costs
with that heap, planted where `perfsuite watch` must attribute it (the window's GC record, and `gc_ms` on the
callback that was collecting).

    python scripts/acceptance/watch_programs/gc_pause.py --objects 300000 --every-ms 500
"""

from __future__ import annotations

import argparse
import asyncio
import gc


def build_heap(objects: int) -> list[dict[str, list[int]]]:
    return [{"turn": [i, i + 1], "text": [i]} for i in range(objects)]


def collect_now() -> None:
    """The planted pause: a full collection of every live object."""
    gc.collect()


async def main(objects: int, every_ms: float, duration_s: float | None) -> None:
    heap = build_heap(objects)
    loop = asyncio.get_running_loop()
    stop = None if duration_s is None else loop.time() + duration_s
    while stop is None or loop.time() < stop:
        await asyncio.sleep(every_ms / 1e3)
        loop.call_soon(collect_now)
    del heap


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=300_000)
    parser.add_argument("--every-ms", type=float, default=500.0)
    parser.add_argument("--duration", type=float, default=None)
    args = parser.parse_args()
    asyncio.run(main(args.objects, args.every_ms, args.duration))
