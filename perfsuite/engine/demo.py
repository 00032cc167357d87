"""A small tour of the engine: write a conversation, sync it, fork it, and show what is on disk.

Run ``python -m perfsuite.engine.demo [DIR]`` or ``perfsuite demo [DIR]``. Printing is allowed here:
this module is a command, not library code.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

from perfsuite.engine._fs import OsFileSystem
from perfsuite.engine._recording import RecordingFileSystem
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
        fsyncs = sum(op.kind in ("fsync", "fsync_dir") for op in ops)
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
