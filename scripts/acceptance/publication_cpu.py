"""Per-publication CPU and wall time of the engine's steady path beside a raw pwrite + fdatasync (issue 29).

Opens a private copy of the synthetic-6000 fixture (built on first use), warms up, then interleaves N
publications (a mailbox append and its discard, or a one-message root checkpoint) with N raw 4,464-byte
pwrites + fdatasyncs of a file in the same directory, and prints the medians of ``time.thread_time`` (CPU,
kernel time in the calls included) and ``time.perf_counter`` (wall). Recipes measure
latency (``perfsuite run mailbox-delivery``), this shows where the steady path's CPU goes between revisions.

    python scripts/acceptance/publication_cpu.py [mail|checkpoint] [-n 300]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

from perfsuite.engine import Message, OsFileSystem, Session

try:
    from perfsuite.engine.testing import RecordingFileSystem
except ImportError:  # a revision before the engine's testing module: compare revisions with the same script
    from perfsuite.engine import RecordingFileSystem  # type: ignore[attr-defined,no-redef]
from perfsuite.workloads.fixtures import build_fixture

RAW_BYTES = 4464  # one mail publication's record on format 2 (the floor's pwrite)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="?", choices=("mail", "checkpoint"), default="mail")
    parser.add_argument("-n", type=int, default=300, help="publications measured (default 300)")
    args = parser.parse_args(argv)
    if args.n < 1:
        print("publication_cpu: -n: give at least 1", file=sys.stderr)
        return 2
    fixture = build_fixture("synthetic-6000")
    with tempfile.TemporaryDirectory(prefix="publication-cpu-") as tmp:
        root = os.path.join(tmp, "s")
        shutil.copytree(fixture.path, root)
        session = Session.open(root, fs=RecordingFileSystem(OsFileSystem(), keep_data=False))
        body = "x" * 4000

        def publish(i: int) -> None:
            if args.what == "mail":
                record = session.append_mail("root", body, sender="background")
                session.discard_mail("root", record.id)  # the mailbox stays small: its capture is O(pending mail)
            else:
                session.add_message("root", Message("assistant", "hello " * 20, 1.8e9 + i))
                session.checkpoint("root")

        for i in range(20):
            publish(i)
        fd = os.open(os.path.join(tmp, "raw"), os.O_RDWR | os.O_CREAT)
        os.write(fd, bytes(RAW_BYTES * (args.n + 1)))
        os.fsync(fd)
        payload = os.urandom(RAW_BYTES)
        cpu, wall, raw_cpu, raw_wall = [], [], [], []
        for i in range(args.n):
            c, w = time.thread_time(), time.perf_counter()
            publish(i)
            cpu.append(time.thread_time() - c)
            wall.append(time.perf_counter() - w)
            c, w = time.thread_time(), time.perf_counter()
            os.pwrite(fd, payload, RAW_BYTES * i)
            os.fdatasync(fd)
            raw_cpu.append(time.thread_time() - c)
            raw_wall.append(time.perf_counter() - w)
        os.close(fd)
        session.close()
    m = statistics.median
    print(f"{args.what}: {args.n} publications, medians: cpu {m(cpu) * 1e6:.0f} us (raw {m(raw_cpu) * 1e6:.0f}), "
          f"wall {m(wall) * 1e6:.0f} us (raw {m(raw_wall) * 1e6:.0f}), wall ratio {m(wall) / m(raw_wall):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
