"""Where an acknowledgement's time goes beyond the publication floor, one fresh process per sample (issue 29).

Each round runs four child processes, in this order, each on its own copy of the synthetic-6000 fixture
(copied, then ``os.sync``, then 50 ms on a running loop with a 5 ms heartbeat, as a recipe sample):

- ``sync``: the engine's synchronous publication (a 4000-character mail, or a 2000-character turn then a
  root checkpoint), then a second one on the same session;
- ``async``: the asynchronous job's (``deliver_background``, ``request_checkpoint``), then a second one;
- ``floor``: a raw ``pwrite`` of the sync child's first record size into the copied log, then
  ``fdatasync``, on the loop thread (what the recipes' publication floor replays);
- ``floor-thread``: the same raw calls on a worker thread, acknowledged on the loop
  (``call_soon_threadsafe``): the hand-off any asynchronous acknowledgement pays, with no engine code; its
  row also shows the hand-off's two legs (submission to the worker's first instruction, the durable calls'
  return to the loop's wake-up).

The engine's own ``fdatasync`` is timed by a thin I/O layer under the recording one, so each engine row
also shows its acknowledgement minus its own sync: the engine's code on the acknowledgement path. Medians
over the rounds; ratios against the floor's median. Recipes measure latency under the harness
(``perfsuite run mailbox-delivery root-checkpoint``); this splits it. ``--pin-cpu N`` (Linux) runs every
child on CPU ``N`` only, so the job's worker thread shares the loop thread's core and caches: the difference
to an unpinned run is what the hand-off to another core costs the asynchronous path.

    python scripts/acceptance/ack_overhead.py [mail|checkpoint] [-n 10] [--pin-cpu N]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures as cf
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from perfsuite.engine import DelegatingFileSystem, FileSystem, Message, OsFileSystem, Session
from perfsuite.engine.testing import RecordingFileSystem
from perfsuite.workloads.fixtures import build_fixture

KINDS = ("sync", "async", "floor", "floor-thread")


class TimedSyncs(DelegatingFileSystem):
    """Times each fdatasync the engine makes (the only durable call of format 2's steady path)."""

    def __init__(self, inner: FileSystem) -> None:
        super().__init__(inner)
        self.spent_ns = 0

    def fdatasync(self, fd: int) -> None:
        started = time.perf_counter_ns()
        try:
            self.inner.fdatasync(fd)
        finally:
            self.spent_ns += time.perf_counter_ns() - started


def _copy(tmp: str) -> str:
    root = os.path.join(tmp, "s")
    shutil.copytree(build_fixture("synthetic-6000").path, root)
    os.sync()  # as the harness after copying a fixture (M4)
    return root


async def _idle() -> asyncio.Task[None]:
    async def heartbeat() -> None:
        while True:
            await asyncio.sleep(0.005)

    task = asyncio.ensure_future(heartbeat())
    await asyncio.sleep(0.05)
    return task


async def _engine(what: str, asynchronous: bool, root: str) -> dict[str, Any]:
    timed = TimedSyncs(OsFileSystem())
    recorder = RecordingFileSystem(timed, keep_data=False)
    session = Session.open(root, fs=recorder)
    session.offload()  # a long-lived session's worker is already running (the recipes start it in setup)
    beat = await _idle()
    loop = asyncio.get_running_loop()
    rows = []
    for i in range(2):
        done: asyncio.Future[None] = loop.create_future()

        def ack(error: BaseException | None = None, done: asyncio.Future[None] = done) -> None:
            if not done.done():
                done.set_result(None)

        if what == "checkpoint":
            session.add_message("root", Message("assistant", "y" * 2000, 1.8e9 + i))
        timed.spent_ns, written = 0, recorder.bytes_written
        started = time.perf_counter_ns()
        if what == "mail" and asynchronous:
            session.deliver_background("root", "x" * 4000, sender="background", ack=ack)
        elif what == "mail":
            session.append_mail("root", "x" * 4000, sender="background", kind="completion", ack=ack)
        elif asynchronous:
            session.request_checkpoint("root", ack=ack)
        else:
            session.checkpoint("root")
            ack()
        await done
        elapsed = time.perf_counter_ns() - started
        rows.append({"ack_ms": elapsed / 1e6, "sync_ms": timed.spent_ns / 1e6,
                     "bytes": recorder.bytes_written - written})
        await asyncio.sleep(0.05)
    beat.cancel()
    session.close()
    return {"first": rows[0], "second": rows[1]}


async def _floor(threaded: bool, root: str, nbytes: int) -> dict[str, Any]:
    logs = sorted(os.listdir(os.path.join(root, "log")))
    path = os.path.join(root, "log", logs[-1])
    fd = os.open(path, os.O_WRONLY)
    offset = (os.path.getsize(path) // 2) // 4096 * 4096  # inside the copied log: written bytes, in the cache
    payload = os.urandom(nbytes)
    pool = cf.ThreadPoolExecutor(max_workers=1)
    pool.submit(int, 0).result()  # the worker is running, as the engine's is
    beat = await _idle()
    loop = asyncio.get_running_loop()

    marks: list[int] = []

    def raw() -> None:
        os.pwrite(fd, payload, offset)
        os.fdatasync(fd)

    def on_worker() -> None:
        marks.append(time.perf_counter_ns())  # the worker woke
        raw()
        marks.append(time.perf_counter_ns())  # the durable calls returned: wake the loop
        loop.call_soon_threadsafe(woke.set_result, None)

    woke: asyncio.Future[None] = loop.create_future()
    started = time.perf_counter_ns()
    if threaded:
        pool.submit(on_worker)
        await woke
    else:
        raw()
    elapsed = time.perf_counter_ns() - started
    beat.cancel()
    pool.shutdown()
    os.close(fd)
    row: dict[str, Any] = {"ack_ms": elapsed / 1e6}
    if threaded:  # the hand-off to the worker, and the loop's wake-up after the durable calls
        row["there_ms"] = (marks[0] - started) / 1e6
        row["back_ms"] = (started + elapsed - marks[1]) / 1e6
    return {"first": row}


def _child(kind: str, what: str, nbytes: int, cpu: int | None) -> int:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    with tempfile.TemporaryDirectory(prefix="ack-overhead-") as tmp:
        root = _copy(tmp)
        if kind in ("sync", "async"):
            out = asyncio.run(_engine(what, kind == "async", root))
        else:
            out = asyncio.run(_floor(kind == "floor-thread", root, nbytes))
    print(json.dumps(out))
    return 0


def _run(kind: str, what: str, nbytes: int, cpu: int | None) -> dict[str, Any]:
    pin = [] if cpu is None else ["--pin-cpu", str(cpu)]
    done = subprocess.run([sys.executable, __file__, what, "--child", kind, "--bytes", str(nbytes), *pin],
                          capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"ack_overhead: the {kind} child failed: {tail}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("what", nargs="?", choices=("mail", "checkpoint"), default="mail")
    parser.add_argument("-n", type=int, default=10, help="rounds, one fresh process per kind each (default 10)")
    parser.add_argument("--pin-cpu", type=int, metavar="N", help="run every child on CPU N only (Linux)")
    parser.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--bytes", type=int, default=4464, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.n < 1:
        print("ack_overhead: -n: give at least 1", file=sys.stderr)
        return 2
    if args.pin_cpu is not None:
        allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
        if args.pin_cpu not in allowed:
            print(f"ack_overhead: --pin-cpu: CPU {args.pin_cpu} is not one this process may run on "
                  f"({', '.join(map(str, sorted(allowed))) or 'no CPU affinity on this system'})", file=sys.stderr)
            return 2
    if args.child:
        return _child(args.child, args.what, args.bytes, args.pin_cpu)
    build_fixture("synthetic-6000")  # built once, before the first child
    rows: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    for _ in range(args.n):
        engine = _run("sync", args.what, 0, args.pin_cpu)
        rows["sync"].append(engine)
        rows["async"].append(_run("async", args.what, 0, args.pin_cpu))
        nbytes = max(1, int(engine["first"]["bytes"]))
        rows["floor"].append(_run("floor", args.what, nbytes, args.pin_cpu))
        rows["floor-thread"].append(_run("floor-thread", args.what, nbytes, args.pin_cpu))
    m = statistics.median
    floor = m(r["first"]["ack_ms"] for r in rows["floor"])
    pinned = "" if args.pin_cpu is None else f", every child on CPU {args.pin_cpu}"
    print(f"{args.what}: {args.n} rounds{pinned}, medians (ms); x: against the floor's ack")
    for kind in KINDS:
        for which in ("first", "second"):
            found = [r[which] for r in rows[kind] if which in r]
            if not found:
                continue
            ack = m(r["ack_ms"] for r in found)
            line = f"  {kind + (' (second)' if which == 'second' else ''):<16} ack {ack:7.3f}  {ack / floor:5.2f}x"
            if "there_ms" in found[0]:
                line += (f"  hand-off there {m(r['there_ms'] for r in found):6.3f}"
                         f"  and back {m(r['back_ms'] for r in found):6.3f}")
            if "sync_ms" in found[0]:
                line += (f"  its fdatasync {m(r['sync_ms'] for r in found):6.3f}"
                         f"  ack minus its fdatasync {m(r['ack_ms'] - r['sync_ms'] for r in found):6.3f}")
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
