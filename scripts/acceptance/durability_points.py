"""Durability points per publication, amortized with consolidation, bytes per one-message checkpoint, open
time, space amplification and group commit (issue 21 acceptance 1 and 3; issue 29's acceptance).

Counts, from the recording I/O layer (E1, ``RecordingFileSystem``), the ordered durability points of one
publication of each engine-level operation the recipes use: file fsyncs, fdatasyncs, directory fsyncs and
renames, from submission to acknowledgement, with the bytes written and the files they went to. Format 2
(issue 29): one fdatasync of the session log on the steady path. Then:

- a stream of publications (root checkpoints, mail deliveries, registry saves) with consolidation
  (``Session.retire`` every ``--retire-every`` publications: roll-overs, compaction, whole logs deleted),
  every durability point counted, roll-overs and retirement included: the amortized points per publication;
- on sessions built with the engine itself (messages of about 1 KB) of the requested sizes, one 1 KB
  message appended to the root and a synchronous checkpoint, repeated: the median bytes written per
  checkpoint, where they went, the median checkpoint (acknowledgement) time and the part of it that is not
  the fdatasync (the engine's own work: on a loaded machine the sync's latency swamps it), then the median open time
  and the session's disk use (allocated, used, live bytes, space amplification);
- group commit: k mail deliveries submitted while the asynchronous job's fdatasync is held in flight (a
  blocking layer, not a timer): the fdatasyncs they cost and the group sizes the job reports.

Usage: python scripts/acceptance/durability_points.py [--sizes 1,10,100] [--checkpoints 7] [--stream 8000]
       [--retire-every 500] [--groups 1,4,16] [--format text|json]
Deterministic counts; only the times vary (wall clock: preliminary on a loaded machine). Nothing is written
outside a temporary directory. The figure before is main's copy of this script (format 1, issue 21):
the same operations, counted the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from perfsuite.engine import DelegatingFileSystem, Message, OsFileSystem, Session, SessionSettings
from perfsuite.engine.testing import FsOp, RecordingFileSystem

#: engine-level operation -> the recipes whose modes publish through it
RECIPES = {
    "mailbox-sync": "mailbox-delivery (sync), drain-after-submit, stalled-admission",
    "mailbox-async": "mailbox-delivery (async), drain-after-submit, stalled-admission, offload",
    "root-checkpoint-sync": "root-checkpoint (sync), chunking, peer-checkpoint (sync)",
    "root-checkpoint-async": "root-checkpoint (async), offload, peer-checkpoint (async)",
    "agent-checkpoint-sync": "agent-checkpoint (sync)",
    "registry-save": "registry-save (sidecar-only)",
    "full-save": "registry-save (full save)",
}
POINTS = ("fsync", "fdatasync", "fsync_dir", "replace")


def _message(i: int, size: int = 1000) -> Message:
    role = "user" if i % 2 == 0 else "assistant"
    head = f"message {i} "
    return Message(role, head + "x" * max(0, size - len(head)), float(i))


def build(path: str, *, messages: int, agent_messages: int = 0) -> None:
    """A portable session built with the engine: ``messages`` of about 1 KB in the root (and an agent)."""
    session = Session.open(path, create=True, settings=SessionSettings(asynchronous=False))
    if agent_messages:
        session.spawn_agent("a1")
    for i in range(messages):
        session.add_message("root", _message(i))
    for i in range(agent_messages):
        session.add_message("a1", _message(i))
    session.full_save()
    session.close()


def category(path: str, root: str) -> str:
    """Which part of the session layout a recorded path belongs to (format 2's log and HEAD; format 1's
    staging, objects and manifests, for the figure before)."""
    rel = os.path.relpath(path, root)
    if rel.startswith(".."):
        return "outside"
    parts = rel.split(os.sep)
    name = parts[-1]
    if parts[0] == "log":
        if len(parts) == 1:
            return "log/"
        return "log (new, temp)" if name.startswith(".") else "log"
    if parts[0] == "staging":
        if name == "batch.json":
            return "staging/batch.json"
        if len(parts) <= 2:
            return "staging/"
        return "staging/sidecar" if name.startswith("sidecar") else "staging/transcript"
    if parts[0] == "objects":
        if name.startswith("manifest-"):
            return "objects/manifest"
        return "objects/" if len(parts) == 1 else "objects/chunk"
    if name.startswith(".HEAD") or name == "HEAD":
        return "HEAD"
    if name.startswith(".LEASE") or name == "LEASE":
        return "LEASE"
    if name.startswith("pack-"):
        return "pack"
    if rel == ".":
        return "session dir"
    return parts[0]


def summarise(ops: Sequence[FsOp], root: str) -> dict[str, Any]:
    """Durability points and bytes of one publication's recorded operations."""
    counts = {kind: sum(1 for op in ops if op.kind == kind) for kind in POINTS}
    written: dict[str, int] = {}
    for op in ops:
        if op.kind in ("write", "pwrite"):
            key = category(op.path, root)
            written[key] = written.get(key, 0) + op.length
    order = [f"{op.kind}:{category(op.path if op.kind != 'replace' else op.dst, root)}" for op in ops
             if op.kind in POINTS]
    return {"fsyncs": counts["fsync"], "fdatasyncs": counts["fdatasync"], "dir_fsyncs": counts["fsync_dir"],
            "renames": counts["replace"],
            "points": sum(counts.values()), "bytes_written": sum(written.values()), "bytes_by_file": written,
            "order": order}


def _open(path: str, *, asynchronous: bool) -> tuple[Session, RecordingFileSystem]:
    recorder = RecordingFileSystem(OsFileSystem(), keep_data=False)
    session = Session.open(path, fs=recorder, settings=SessionSettings(asynchronous=asynchronous, offload="thread"))
    return session, recorder


async def _await_ack(submit: Callable[[Callable[[BaseException | None], None]], Any]) -> None:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[BaseException | None] = loop.create_future()

    def ack(error: BaseException | None) -> None:
        loop.call_soon_threadsafe(lambda: done.done() or done.set_result(error))

    submit(ack)
    error = await asyncio.wait_for(done, timeout=120)
    if error is not None:
        raise error


def one_publication(base: str, work: str, name: str) -> dict[str, Any]:
    """Copy ``base`` to ``work``, run operation ``name`` once on the recorder, summarise its publication."""
    import shutil

    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(base, work)
    asynchronous = name.endswith("-async")
    session, recorder = _open(work, asynchronous=asynchronous)
    try:
        body = "execution result: " + "r" * 4000
        if name.startswith("root-checkpoint") or name.startswith("agent-checkpoint"):
            conversation = "a1" if name.startswith("agent") else "root"
            session.add_message(conversation, _message(10**6))
        mark = recorder.mark()
        if name == "mailbox-sync":
            session.append_mail("root", body, sender="background", kind="completion")
        elif name == "mailbox-async":
            asyncio.run(_await_ack(lambda ack: session.deliver_background("root", body, sender="background", ack=ack)))
        elif name == "root-checkpoint-sync":
            session.checkpoint("root")
        elif name == "root-checkpoint-async":
            asyncio.run(_await_ack(lambda ack: session.request_checkpoint("root", ack=ack)))
        elif name == "agent-checkpoint-sync":
            session.checkpoint("a1")
        elif name == "registry-save":
            session.set_activity("a1", "permission-blocked")
            mark = recorder.mark()
            session.save_registry()
        elif name == "full-save":
            session.set_activity("a1", "running")
            mark = recorder.mark()
            session.full_save(rescan=True)
        else:
            raise SystemExit(f"unknown operation {name}")
        ops = recorder.since(mark)
    finally:
        session.close()
    return summarise(ops, os.path.realpath(work)) | {"operation": name, "recipes": RECIPES[name]}


def scale(tmp: str, sizes: Sequence[int], checkpoints: int, opens: int = 3, warmup: int = 3) -> list[dict[str, Any]]:
    """One-message synchronous checkpoints on engine-built sessions of about ``sizes`` MB, interleaved (one
    checkpoint of each session per round, so a machine whose load changes affects every size alike) after
    ``warmup`` rounds not counted; then each session's open time (median of ``opens``) and disk use."""
    rows: list[dict[str, Any]] = []
    sessions: list[tuple[str, Session, RecordingFileSystem]] = []
    for megabytes in sizes:
        path = tempfile.mkdtemp(prefix=f"scale-{megabytes}-", dir=tmp)
        started = time.perf_counter()
        build(path, messages=megabytes * 1000)
        rows.append({"megabytes": megabytes, "messages": megabytes * 1000,
                     "build_s": round(time.perf_counter() - started, 1)})
        sessions.append((path, *_open(path, asynchronous=False)))
    per: list[list[dict[str, Any]]] = [[] for _ in sizes]
    times: list[list[float]] = [[] for _ in sizes]
    work: list[list[float]] = [[] for _ in sizes]
    try:
        for i in range(warmup + checkpoints):
            for n, (path, session, recorder) in enumerate(sessions):
                session.add_message("root", _message(rows[n]["messages"] + i))
                mark = recorder.mark()
                t0 = time.perf_counter()
                report = session.checkpoint("root")
                elapsed = (time.perf_counter() - t0) * 1e3
                if i < warmup:
                    continue
                times[n].append(elapsed)
                per[n].append(summarise(recorder.since(mark), os.path.realpath(path)))
                # everything but the commit point's fdatasync (the adopt phase): the engine's own work
                work[n].append(sum(v for k, v in report.phases_ms.items() if k != "adopt"))
    finally:
        for _path, session, _recorder in sessions:
            session.close()
    for n, (path, _session, _recorder) in enumerate(sessions):
        open_ms: list[float] = []
        for _ in range(opens):
            t0 = time.perf_counter()
            reopened = Session.open(path, settings=SessionSettings(asynchronous=False))
            open_ms.append((time.perf_counter() - t0) * 1e3)
            storage = reopened.storage()
            reopened.close()
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _s, fs in os.walk(path) for f in fs)
        keys = sorted({k for p in per[n] for k in p["bytes_by_file"]})
        rows[n].update({
            "session_bytes": size, "bytes_per_checkpoint": statistics.median(p["bytes_written"] for p in per[n]),
            "checkpoint_ms": round(statistics.median(times[n]), 2), "work_ms": round(statistics.median(work[n]), 3),
            "points": per[n][-1]["points"], "open_ms": round(statistics.median(open_ms), 1),
            "logs": storage.logs, "allocated": storage.allocated, "used": storage.used, "live": storage.live,
            "artifacts": storage.artifacts, "amplification": round(storage.amplification or 0.0, 3),
            "bytes_by_file": {k: statistics.median(p["bytes_by_file"].get(k, 0) for p in per[n]) for k in keys}})
    return rows


def stream(tmp: str, base: str, publications: int, retire_every: int) -> dict[str, Any]:
    """``publications`` publications on a copy of ``base`` with the default log capacity: root checkpoints
    of one 1 KB message, mail deliveries of a 4 KB completion, a registry save every tenth; ``retire()``
    every ``retire_every`` publications (consolidation: roll-overs at 75 % full, compaction, whole logs
    deleted). Every durability point of the whole stream, roll-overs and retirement included."""
    import shutil

    work = os.path.join(tmp, "stream")
    shutil.copytree(base, work)
    session, recorder = _open(work, asynchronous=False)
    body = "execution result: " + "r" * 4000
    kinds = {"root-checkpoint": 0, "mailbox": 0, "registry-save": 0}
    retired = 0
    mark = recorder.mark()
    try:
        for i in range(publications):
            if i % 10 == 9:
                session.set_activity("a1", "running" if i % 20 == 9 else "permission-blocked")
                session.save_registry()
                kinds["registry-save"] += 1
            elif i % 2 == 0:
                session.add_message("root", _message(10**6 + i))
                session.checkpoint("root")
                kinds["root-checkpoint"] += 1
            else:
                session.append_mail("root", body, sender="background", kind="completion")
                kinds["mailbox"] += 1
            if (i + 1) % retire_every == 0:
                removed, _more = session.retire()
                retired += removed
        storage = session.storage()
        ops = recorder.since(mark)
    finally:
        session.close()
    summary = summarise(ops, os.path.realpath(work))
    return {"publications": publications, "by_kind": kinds, "retire_every": retire_every,
            "points": summary["points"], "fsyncs": summary["fsyncs"], "fdatasyncs": summary["fdatasyncs"],
            "dir_fsyncs": summary["dir_fsyncs"], "renames": summary["renames"],
            "amortized": round(summary["points"] / publications, 4), "roll_overs": storage.rolled,
            "logs_removed": retired, "logs": storage.logs, "amplification": round(storage.amplification or 0.0, 3),
            "bytes_written": summary["bytes_written"]}


class _HeldSync(DelegatingFileSystem):
    """The next fdatasync, once armed, blocks (on the job's offload thread) until released."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.armed = False
        self.entered = threading.Event()
        self.gate = threading.Event()

    def fdatasync(self, fd: int) -> None:
        if self.armed:
            self.armed = False
            self.entered.set()
            self.gate.wait(60)
        super().fdatasync(fd)


def group(tmp: str, k: int) -> dict[str, Any]:
    """Mail delivery 0 submitted, its fdatasync held in flight, k more submitted meanwhile, then released:
    the fdatasyncs the k + 1 publications cost (the recording layer) and the group sizes reported."""
    path = os.path.join(tmp, f"group-{k}")
    recorder = RecordingFileSystem(OsFileSystem(), keep_data=False)
    held = _HeldSync(recorder)
    session = Session.open(path, create=True, fs=held, settings=SessionSettings(offload="thread"))
    session.add_message("root", _message(0))
    session.checkpoint()

    async def run() -> list[FsOp]:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        acked: list[int] = []

        def ack(i: int) -> Callable[[BaseException | None], None]:
            def callback(error: BaseException | None) -> None:
                if error is not None:
                    loop.call_soon_threadsafe(lambda: done.done() or done.set_exception(error))
                acked.append(i)
                if len(acked) == k + 1:
                    loop.call_soon_threadsafe(lambda: done.done() or done.set_result(None))
            return callback

        mark = recorder.mark()
        held.armed = True
        session.deliver_background("root", "completion 0", sender="bg", ack=ack(0))
        while not held.entered.is_set():
            await asyncio.sleep(0.001)
        for i in range(1, k + 1):
            session.deliver_background("root", f"completion {i}", sender="bg", ack=ack(i))
        held.gate.set()
        await asyncio.wait_for(done, 60)
        return recorder.since(mark)

    try:
        ops = asyncio.run(run())
        groups = [r.group for r in list(session.reports)[-(k + 1):]]
    finally:
        session.close()
    summary = summarise(ops, os.path.realpath(path))
    return {"k": k, "publications": k + 1, "fdatasyncs": summary["fdatasyncs"], "points": summary["points"],
            "groups": groups}


def _ints(text: str, what: str) -> list[int]:
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise SystemExit(f"durability_points: {what} {text!r} is not a list of integers") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,100", help="session sizes in MB (comma-separated; '' for none)")
    parser.add_argument("--checkpoints", type=int, default=7, help="one-message checkpoints per size")
    parser.add_argument("--stream", type=int, default=8000, help="publications in the amortized stream (0: none)")
    parser.add_argument("--retire-every", type=int, default=500, help="publications between retire() calls")
    parser.add_argument("--groups", default="1,4,16", help="group commit: k publications pending during a sync")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
    try:
        sizes = _ints(args.sizes, "--sizes")
        groups = _ints(args.groups, "--groups")
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="durability-points-") as tmp:
        base = os.path.join(tmp, "base")
        build(base, messages=200, agent_messages=50)
        operations = [one_publication(base, os.path.join(tmp, "work"), name) for name in RECIPES]
        streamed = stream(tmp, base, args.stream, max(1, args.retire_every)) if args.stream > 0 else None
        grouped = [group(tmp, k) for k in groups]
        scales = scale(tmp, sizes, args.checkpoints) if sizes else []
    if args.format == "json":
        print(json.dumps({"operations": operations, "stream": streamed, "group_commit": grouped, "scale": scales},
                         indent=2))
        return 0
    print("durability points per publication (recording layer; submission to acknowledgement)")
    print(f"{'operation':24} {'fsync':>5} {'fdsync':>6} {'dir':>4} {'rename':>6} {'points':>6} {'bytes':>9}  recipes")
    for row in operations:
        print(f"{row['operation']:24} {row['fsyncs']:5} {row['fdatasyncs']:6} {row['dir_fsyncs']:4} {row['renames']:6} "
              f"{row['points']:6} {row['bytes_written']:9}  {row['recipes']}")
        print(f"{'':24} order: {' '.join(row['order'])}")
    if streamed is not None:
        kinds = ", ".join(f"{k} {v}" for k, v in streamed["by_kind"].items())
        row = streamed
        print(f"\nstream of {row['publications']} publications ({kinds}), retire() every {row['retire_every']}:")
        print(f"  {row['points']} durability points ({row['fsyncs']} fsync, {row['fdatasyncs']} fdatasync, "
              f"{row['dir_fsyncs']} dir fsync, {row['renames']} rename): {row['amortized']:.4f} per publication; "
              f"{row['roll_overs']} roll-overs, {row['logs_removed']} logs deleted, {row['logs']} left, space "
              f"amplification {row['amplification']} (allocated / session bytes)")
    if grouped:
        print("\ngroup commit: k mail deliveries submitted while the job's fdatasync is in flight")
        for row in grouped:
            print(f"  k={row['k']:<3} {row['publications']} publications, {row['fdatasyncs']} fdatasyncs, "
                  f"{row['points']} points; groups {row['groups']}")
    if scales:
        print("\none 1 KB message + synchronous root checkpoint, the sizes interleaved (medians; times are wall "
              "clock, preliminary)")
        print(f"{'MB':>4} {'messages':>8} {'session bytes':>13} {'bytes/ckpt':>10} {'ack ms':>7} {'work ms':>7} "
              f"{'points':>6} {'open ms':>8} {'allocated':>11} {'live':>11} {'amp':>6}  by file")
        for row in scales:
            parts = ", ".join(f"{k} {int(v)}" for k, v in row["bytes_by_file"].items())
            print(f"{row['megabytes']:4} {row['messages']:8} {row['session_bytes']:13} "
                  f"{int(row['bytes_per_checkpoint']):10} {row['checkpoint_ms']:7} {row['work_ms']:7} "
                  f"{row['points']:6} "
                  f"{row['open_ms']:8} {row['allocated']:11} {row['live']:11} {row['amplification']:6}  {parts}")
        byte_rows = [r["bytes_per_checkpoint"] for r in scales]
        ack_rows = [r["checkpoint_ms"] for r in scales]
        work_rows = [r["work_ms"] for r in scales]
        print(f"largest / smallest: bytes per checkpoint {max(byte_rows) / min(byte_rows):.2f}x, ack "
              f"{max(ack_rows) / max(min(ack_rows), 1e-9):.2f}x, work without the fdatasync "
              f"{max(work_rows) / max(min(work_rows), 1e-9):.2f}x")
        print("(work ms: the publication's phases but the commit point's fdatasync, the engine's own time)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
