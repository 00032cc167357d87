"""A file-backed session's transcripts (E1) are followed through a symbolic link by design, but what they
lead to must be a regular file of a bounded size: a transcript linked to /dev/zero, or replaced by a FIFO,
is refused in one line, in bounded memory and without blocking, instead of being read without end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from perfsuite.engine import ROOT, FileSession, Message

#: address space of the child: an open of a small session fits in it; a read of /dev/zero does not
ADDRESS_SPACE = 1 << 30
#: turns a hang (a FIFO opened for reading without a writer) into a failure; no timing is asserted
HANG_GUARD_S = 120

_CHILD = textwrap.dedent("""
    import json, resource, sys, tracemalloc
    resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
    tracemalloc.start()
    from perfsuite.engine import FileSession
    try:
        session = FileSession.open(sys.argv[1])
        outcome = {{"error": None, "messages": len(session.buffers["root"].messages())}}
        session.close()
    except BaseException as exc:
        outcome = {{"error": type(exc).__name__, "message": str(exc)}}
    outcome["peak"] = tracemalloc.get_traced_memory()[1]
    print(json.dumps(outcome))
""")


def _session(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "s"
    session = FileSession.open(str(root), create=True)
    session.add_message(ROOT, Message("user", "a question", 1.0))
    session.checkpoint(ROOT)
    session.close()
    (transcript,) = (root / "conversations").rglob("*.jsonl")
    return root, transcript


def _open_in_child(root: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", _CHILD.format(limit=ADDRESS_SPACE), str(root)],
                          capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("kind", ["dev-zero", "fifo"])
def test_a_transcript_that_is_not_a_regular_file_is_refused_in_one_line(tmp_path, kind):
    """Before: MemoryError from FileSession.open (/dev/zero read to the memory cap), or a hang (the FIFO)."""
    root, transcript = _session(tmp_path)
    transcript.unlink()
    if kind == "dev-zero":
        transcript.symlink_to("/dev/zero")
    else:
        os.mkfifo(transcript)
    outcome = _open_in_child(root)
    assert outcome["error"] in ("SessionError", "TranscriptError"), outcome
    assert "\n" not in outcome["message"] and "not a regular file" in outcome["message"], outcome
    assert outcome["peak"] < 64 << 20, outcome


def test_a_transcript_linked_to_a_regular_file_outside_still_opens(tmp_path):
    """E1: a symlinked transcript is written and read through its link."""
    root, transcript = _session(tmp_path)
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_bytes(transcript.read_bytes())
    transcript.unlink()
    transcript.symlink_to(outside)
    outcome = _open_in_child(root)
    assert (outcome["error"], outcome["messages"]) == (None, 1), outcome
