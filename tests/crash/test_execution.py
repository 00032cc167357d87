"""The crash campaigns' execution layer (issue 32) on its own: what a worker does with the client's choices."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfsuite.crash._execution import with_local_scratch

ROOT = Path(__file__).resolve().parents[2]


def test_a_worker_without_the_clients_scratch_directory_uses_its_own(tmp_path: Path) -> None:
    """The client picks ``/dev/shm`` (or a directory of its own); a worker on another machine may lack it."""
    assert with_local_scratch(lambda a, s: (a, s), 1, "x", str(tmp_path)) == ("x", str(tmp_path))
    _, used = with_local_scratch(lambda a, s: (a, s), 1, "x", str(tmp_path / "not-here"))
    assert used != str(tmp_path / "not-here") and (used is None or os.path.isdir(used))


@pytest.mark.parametrize("content", ["truncated", "from-another-perfsuite"])
def test_a_recorded_trace_this_perfsuite_cannot_read_is_refused_in_one_line(tmp_path: Path, content: str) -> None:
    """``--resume`` beside a trace that a crash truncated, or that an older perfsuite pickled (its classes
    have moved since), says which file and what to do, in one line and status 2, and leaves it alone."""
    checkpoint = tmp_path / "campaign"
    args = [sys.executable, "-m", "perfsuite", "crashcheck", "--workload", "transcript", "--max-states", "6",
            "--checkpoint", str(checkpoint), "-q"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.run(args, env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    trace = tmp_path / "campaign.traces" / "transcript.pickle"
    if content == "truncated":
        trace.write_bytes(trace.read_bytes()[:40])
    else:  # a pickle naming a class in a module this perfsuite does not have (GLOBAL, then STOP)
        trace.write_bytes(b"cperfsuite.crash._gone\nOpTrace\n.")
    before = trace.read_bytes()
    resumed = subprocess.run([*args, "--resume"], env=env, capture_output=True, text=True)
    assert resumed.returncode == 2
    lines = resumed.stderr.strip().splitlines()
    assert len(lines) == 1 and str(trace) in lines[0] and "unexpected" not in lines[0], lines
    assert "without --resume" in lines[0]
    assert trace.read_bytes() == before
