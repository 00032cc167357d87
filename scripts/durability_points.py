"""Durability points per publication and bytes per one-message checkpoint (issue 21, acceptance 1 and 3).

Counts, from the recording I/O layer (E1, ``RecordingFileSystem``), the ordered durability points of one
publication of each engine-level operation the recipes use: file fsyncs, directory fsyncs and renames,
from submission to acknowledgement, with the bytes written and the files they went to. Then, on
sessions built with the engine itself (messages of about 1 KB) of the requested sizes, one 1 KB message
appended to the root and a synchronous checkpoint, repeated: the median bytes written per checkpoint,
where they went, and the median checkpoint time (wall clock: preliminary on a loaded machine).

Usage: python scripts/durability_points.py [--sizes 1,10,100] [--checkpoints 7] [--format text|json]
Deterministic counts; only the times vary. Nothing is written outside a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from perfsuite.engine import FsOp, Message, OsFileSystem, RecordingFileSystem, Session, SessionSettings

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
    """Which part of the session layout a recorded path belongs to."""
    rel = os.path.relpath(path, root)
    if rel.startswith(".."):
        return "outside"
    parts = rel.split(os.sep)
    name = parts[-1]
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


def scale(tmp: str, megabytes: int, checkpoints: int) -> dict[str, Any]:
    """One-message synchronous checkpoints on an engine-built session of about ``megabytes`` MB."""
    path = os.path.join(tmp, f"scale-{megabytes}")
    messages = megabytes * 1000
    started = time.perf_counter()
    build(path, messages=messages)
    built_s = time.perf_counter() - started
    session, recorder = _open(path, asynchronous=False)
    per: list[dict[str, Any]] = []
    times: list[float] = []
    try:
        for i in range(checkpoints):
            session.add_message("root", _message(messages + i))
            mark = recorder.mark()
            t0 = time.perf_counter()
            session.checkpoint("root")
            times.append((time.perf_counter() - t0) * 1e3)
            per.append(summarise(recorder.since(mark), os.path.realpath(path)))
    finally:
        session.close()
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _s, fs in os.walk(path) for f in fs)
    median_bytes = statistics.median(p["bytes_written"] for p in per)
    keys = sorted({k for p in per for k in p["bytes_by_file"]})
    return {"megabytes": megabytes, "messages": messages, "session_bytes": size, "build_s": round(built_s, 1),
            "bytes_per_checkpoint": median_bytes, "checkpoint_ms": round(statistics.median(times), 2),
            "points": per[-1]["points"],
            "bytes_by_file": {k: statistics.median(p["bytes_by_file"].get(k, 0) for p in per) for k in keys}}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,100", help="session sizes in MB (comma-separated; '' for none)")
    parser.add_argument("--checkpoints", type=int, default=7, help="one-message checkpoints per size")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        print(f"durability_points: --sizes {args.sizes!r} is not a list of integers", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="durability-points-") as tmp:
        base = os.path.join(tmp, "base")
        build(base, messages=200, agent_messages=50)
        operations = [one_publication(base, os.path.join(tmp, "work"), name) for name in RECIPES]
        scales = [scale(tmp, mb, args.checkpoints) for mb in sizes]
    if args.format == "json":
        print(json.dumps({"operations": operations, "scale": scales}, indent=2))
        return 0
    print("durability points per publication (recording layer; submission to acknowledgement)")
    print(f"{'operation':24} {'fsync':>5} {'dir':>4} {'rename':>6} {'points':>6} {'bytes':>9}  recipes")
    for row in operations:
        print(f"{row['operation']:24} {row['fsyncs']:5} {row['dir_fsyncs']:4} {row['renames']:6} {row['points']:6} "
              f"{row['bytes_written']:9}  {row['recipes']}")
        print(f"{'':24} order: {' '.join(row['order'])}")
    if scales:
        print("\none 1 KB message + synchronous root checkpoint (medians; times are wall clock, preliminary)")
        print(f"{'MB':>4} {'messages':>8} {'session bytes':>13} {'bytes/ckpt':>10} {'ms':>7} {'points':>6}  by file")
        for row in scales:
            parts = ", ".join(f"{k} {int(v)}" for k, v in row["bytes_by_file"].items())
            print(f"{row['megabytes']:4} {row['messages']:8} {row['session_bytes']:13} "
                  f"{int(row['bytes_per_checkpoint']):10} {row['checkpoint_ms']:7} {row['points']:6}  {parts}")
        first, last = scales[0]["bytes_per_checkpoint"], scales[-1]["bytes_per_checkpoint"]
        print(f"bytes per checkpoint, largest / smallest: {last / first:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
