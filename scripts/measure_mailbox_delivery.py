"""Throwaway measurement for issue 4 (not a timed test): mailbox delivery on a 6000-turn session.

Builds a portable session holding 6000 saved turns in a temporary directory, then alternates six
samples per mode of delivering one 4000-character execution result to the root mailbox:
  sync  - Session.append_mail (the synchronous writer, returns after adoption)
  async - Session.deliver_background (the asynchronous job; acknowledged after adoption)
and reports submission time, acknowledgement time and the largest 5 ms heartbeat gap from just before
submission to 12 ms after the acknowledgement (SPEC M1). GC is collected before each sample.
Usage: python scripts/measure_mailbox_delivery.py [--turns 6000] [--samples 6]
The mailbox-delivery recipe supersedes this script once the recipe catalogue exists.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import tempfile
import time

from perfsuite.engine import Message, Session, SessionSettings
from perfsuite.harness import Heartbeat


def build(path: str, turns: int) -> None:
    rng = random.Random(6000)
    session = Session.open(path, create=True)
    for i in range(turns):
        role = "user" if i % 2 == 0 else "assistant"
        session.add_message("root", Message(role, "q" * rng.randint(300, 2000), float(i)))
    session.checkpoint()
    session.close()


async def sample(session: Session, mode: str, hb: Heartbeat, index: int) -> tuple[float, float, float]:
    gc.collect()
    await asyncio.sleep(0.05)
    body = f"execution result {index}: " + "r" * 4000
    acked = asyncio.get_running_loop().create_future()
    ack_ns: list[int] = []

    def ack(error: BaseException | None) -> None:
        ack_ns.append(time.perf_counter_ns())
        if not acked.done():
            acked.set_result(error)

    start = time.perf_counter_ns()
    if mode == "sync":
        session.append_mail("root", body, sender="bg", ack=ack)
    else:
        session.deliver_background("root", body, sender="bg", ack=ack)
    submitted = time.perf_counter_ns()
    await acked
    end = ack_ns[0] + 12_000_000
    await hb.wait_past(end)
    window = hb.window(start, end)
    return (submitted - start) / 1e6, (ack_ns[0] - start) / 1e6, window.max_gap_ms


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=6000)
    parser.add_argument("--samples", type=int, default=6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        build(f"{tmp}/s", args.turns)
        session = Session.open(f"{tmp}/s", settings=SessionSettings())
        results: dict[str, list[tuple[float, float, float]]] = {"sync": [], "async": []}
        async with Heartbeat(5.0) as hb:
            for mode in ("sync", "async"):  # warm-up, discarded
                await sample(session, mode, hb, -1)
            for i in range(args.samples):
                for mode in ("sync", "async"):
                    results[mode].append(await sample(session, mode, hb, i))
            idle_start = time.perf_counter_ns()
            await asyncio.sleep(0.2)
            idle = hb.window(idle_start, time.perf_counter_ns()).max_gap_ms
        session.shutdown()
    for mode, rows in results.items():
        sub = [r[0] for r in rows]
        ack = [r[1] for r in rows]
        gap = [r[2] for r in rows]
        print(f"{mode:>5}: submission {min(sub):.3f}-{max(sub):.3f} ms, ack {min(ack):.3f}-{max(ack):.3f} ms, "
              f"max heartbeat gap {min(gap):.3f}-{max(gap):.3f} ms ({len(rows)} samples)")
    print(f"idle control (200 ms window): max heartbeat gap {idle:.3f} ms")


if __name__ == "__main__":
    asyncio.run(main())
