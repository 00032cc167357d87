"""Throwaway measurement for issue 2 (not a timed test): does append cost grow with transcript length?

Appends 6000 messages of 1-4 KB to a fresh transcript log in a temporary directory and prints the
append latency p50/p99 over messages 1-100 and over messages 5901-6000, and the barrier p50 (a barrier
after every 100th append). Usage: python scripts/measure_transcript_append.py [--messages 6000]
The transcript-barrier recipe supersedes this script once the recipe catalogue exists.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time

import numpy as np

from perfsuite.engine import Message, TranscriptLog


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=6000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    appends_ns: list[int] = []
    barriers_ns: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        log = TranscriptLog.open(f"{tmp}/conv")
        for i in range(args.messages):
            message = Message("user" if i % 2 else "assistant", "z" * rng.randint(1024, 4096), float(i))
            t0 = time.perf_counter_ns()
            log.append(message)
            appends_ns.append(time.perf_counter_ns() - t0)
            if i % 100 == 99:
                t0 = time.perf_counter_ns()
                log.write(sync=True)
                barriers_ns.append(time.perf_counter_ns() - t0)
        log.close()
    first = np.array(appends_ns[:100]) / 1e3
    last = np.array(appends_ns[-100:]) / 1e3
    barrier = np.array(barriers_ns) / 1e3
    print(f"append at    1-100:  p50 {np.percentile(first, 50):.1f} us  p99 {np.percentile(first, 99):.1f} us")
    print(f"append at {args.messages - 99}-{args.messages}: p50 {np.percentile(last, 50):.1f} us  "
          f"p99 {np.percentile(last, 99):.1f} us")
    print(f"barrier (every 100 appends): p50 {np.percentile(barrier, 50):.1f} us over {len(barrier)} barriers")


if __name__ == "__main__":
    main()
