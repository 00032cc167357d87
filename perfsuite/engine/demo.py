"""A small tour of the engine: write a conversation, sync it, fork it, and show what is on disk.

Run ``python -m perfsuite.engine.demo [DIR]`` or ``perfsuite demo [DIR]``. Printing is allowed here:
this module is a command, not library code.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

from perfsuite.engine._fs import OsFileSystem
from perfsuite.engine._recording import RecordingFileSystem
from perfsuite.engine._session import Session
from perfsuite.engine._transcript import Message, TranscriptLog, commit_turn


def _show_tree(root: str) -> None:
    for directory, subdirs, files in sorted(os.walk(root)):
        subdirs.sort()
        for name in sorted(files):
            path = os.path.join(directory, name)
            rel = os.path.relpath(path, root)
            with open(path, "rb") as handle:
                lines = sum(1 for _ in handle)
            print(f"  {rel:<40} {os.path.getsize(path):>7} bytes  {lines:>3} lines")


def main(directory: str | None = None) -> None:
    root = directory or tempfile.mkdtemp(prefix="perfsuite-demo-")
    print("== a transcript log (E2) ==")
    transcript_demo(root)
    print("\n== a portable session (E3, E4, E7) ==")
    session_demo(root)


def session_demo(root: str) -> None:
    path = os.path.join(root, "sessions", "demo")
    fs = RecordingFileSystem(OsFileSystem())
    session = Session.open(path, create=True, fs=fs)
    for i, text in enumerate(["Plan the migration.", "Here is a plan in three steps.", "Start step one."]):
        session.add_message("root", Message("user" if i % 2 == 0 else "assistant", text, time.time()))
    report = session.checkpoint()
    print(f"root checkpoint: generation {report.seq}, changed {', '.join(report.changed)}")
    session.spawn_agent("researcher", prompt="Find the fsync rules for directories.")
    print(f"spawned agent 'researcher' (acknowledged after generation {session.head.seq if session.head else '?'})")
    record = session.append_mail("root", "researcher finished: directory fsync after rename", sender="researcher",
                                 kind="RESULT")
    print(f"mail {record.id} appended and acknowledged; deliverable: {[m.id for m in session.mailbox('root')]}")
    delivered = session.deliver_mail("root")
    print(f"delivered {[m.id for m in delivered]} into the root transcript with a hidden receipt")
    mark = fs.mark()
    report = session.checkpoint()
    ops = fs.since(mark)
    syncs = sum(op.kind in ("fsync", "fdatasync", "fsync_dir") for op in ops)
    print(f"checkpoint: generation {report.seq}, {report.new_chunks} new chunk(s), "
          f"{sum(op.nbytes for op in ops)} bytes written, {syncs} syncs; "
          f"phases (ms): " + ", ".join(f"{k} {v:.2f}" for k, v in report.phases_ms.items()))
    session.set_activity("researcher", "permission-blocked")
    registry = session.save_registry()
    print(f"sidecar-only registry save: generation {registry.seq}, changed {', '.join(registry.changed)}")
    with open(os.path.join(path, "HEAD"), encoding="utf-8") as handle:
        head = json.loads(handle.read())
    storage = session.storage()
    print(f"HEAD names {head['log']} (format 2: moved only at roll-over; its BASE is generation "
          f"{head['generation']}, the records after it go up to generation {registry.seq}); "
          f"{storage.logs} log, {storage.used} of {storage.allocated} preallocated bytes used")
    session.close()
    reopened = Session.open(path)
    print(f"reopened in epoch {reopened.epoch}: root has {len(reopened.buffers['root'])} messages, "
          f"agents {sorted(reopened.sidecar.agents)}, pending mail {reopened.mailbox('root')}")
    reopened.close()


def transcript_demo(root: str) -> None:
    logdir = os.path.join(root, "conversations", "demo")
    fs = RecordingFileSystem(OsFileSystem())
    log = TranscriptLog.open(logdir, fs=fs)
    turns = [
        [Message("user", "Summarise the fsync literature in one line.", time.time())],
        [Message("assistant", "fsync can fail once and then lie; never retry it and trust it.", time.time())],
        [Message("user", "And directories?", time.time()),
         Message("assistant", "A new file's name is durable only after its directory is synced.", time.time())],
    ]
    for turn in turns:
        mark = fs.mark()
        outcome = commit_turn(log, turn)
        ops = fs.since(mark)
        fsyncs = sum(op.kind in ("fsync", "fdatasync", "fsync_dir") for op in ops)
        print(f"turn of {len(turn)} message(s): completed={outcome.completed}, "
              f"{sum(op.nbytes for op in ops)} bytes written, {fsyncs} fsyncs")
    log.record_model_selection(model="demo-model", reason="default")
    log.fork("what-if", upto=2)
    log.append(Message("user", "A different question on the branch.", time.time()), branch="what-if")
    log.edit(0, Message("user", "Summarise the fsync literature, briefly.", time.time()))
    log.write(sync=True)
    log.close()
    print(f"\nOn disk under {logdir}:")
    _show_tree(logdir)
    reloaded = TranscriptLog.open(logdir)
    print(f"\nreloaded: main has {len(reloaded.messages())} messages, branches {reloaded.branches()}, "
          f"{len(reloaded.events())} recovery events")
    reloaded.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
