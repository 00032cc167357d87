"""The crash campaigns' execution layer (local pool or cluster) on its own: what a worker does with the client's
choices."""

from __future__ import annotations

import json
import os
import pickle
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


def _campaign(tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    checkpoint = tmp_path / "campaign"
    args = [sys.executable, "-m", "perfsuite", "crashcheck", "--workload", "transcript", "--max-states", "6",
            "--checkpoint", str(checkpoint), "-q"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.run(args, env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    return args, env


@pytest.mark.parametrize("content", ["truncated", "unknown-class", "not-json"])
def test_a_recorded_trace_this_perfsuite_cannot_read_is_refused_in_one_line(tmp_path: Path, content: str) -> None:
    """``--resume`` beside a trace that a crash truncated, that names a value class this perfsuite does not
    rebuild, or that is not JSON, says which file and what to do, in one line and status 2, and leaves it."""
    args, env = _campaign(tmp_path)
    trace = tmp_path / "campaign.traces" / "transcript.json"
    if content == "truncated":
        trace.write_bytes(trace.read_bytes()[:40])
    elif content == "unknown-class":
        trace.write_text(json.dumps({"trace": {"__class__": "Popen", "args": ["true"]}, "tree": None}))
    else:
        trace.write_bytes(b"\x80\x04cos\nsystem\n.")
    before = trace.read_bytes()
    resumed = subprocess.run([*args, "--resume"], env=env, capture_output=True, text=True)
    assert resumed.returncode == 2
    lines = resumed.stderr.strip().splitlines()
    assert len(lines) == 1 and str(trace) in lines[0] and "unexpected" not in lines[0], lines
    assert "without --resume" in lines[0]
    assert trace.read_bytes() == before


class _Marker:
    """Unpickling this writes a file: what a crafted pickle in a pull request could do."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (Path.write_text, (Path(self.path), "ran"))  # type: ignore[return-value]


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_trace_that_is_not_a_regular_file_is_refused_before_it_is_read(tmp_path: Path, kind: str) -> None:
    """A FIFO (which would block the read) or a link to /dev/zero (which would never end) where a trace lived
    is refused in one line, status 2, before a byte of it is read; the link stays as it was."""
    args, env = _campaign(tmp_path)
    trace = tmp_path / "campaign.traces" / "transcript.json"
    trace.unlink()
    if kind == "fifo":
        os.mkfifo(trace)
    else:
        trace.symlink_to("/dev/zero")
    resumed = subprocess.run([*args, "--resume"], env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 2
    lines = resumed.stderr.strip().splitlines()
    assert len(lines) == 1 and str(trace) in lines[0] and "not a regular file" in lines[0], lines
    assert trace.is_fifo() if kind == "fifo" else os.readlink(trace) == "/dev/zero"


def test_a_crafted_pickle_beside_a_checkpoint_is_never_loaded(tmp_path: Path) -> None:
    """Resume files are data: a pickle planted where traces lived is not unpickled (no code runs)."""
    args, env = _campaign(tmp_path)
    marker = tmp_path / "marker"
    (tmp_path / "campaign.traces" / "transcript.pickle").write_bytes(pickle.dumps(_Marker(str(marker))))
    (tmp_path / "campaign.traces" / "transcript.json").unlink()
    resumed = subprocess.run([*args, "--resume"], env=env, capture_output=True, text=True)
    assert not marker.exists() and "Traceback" not in resumed.stderr


def test_a_trace_naming_a_directory_outside_its_recording_is_refused_and_nothing_is_deleted(tmp_path: Path) -> None:
    """The trace names the directory it was recorded in; a crafted one naming any other directory is refused
    before anything is removed or written there."""
    args, env = _campaign(tmp_path)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("precious")
    path = tmp_path / "campaign.traces" / "transcript.json"
    document = json.loads(path.read_text())
    old_root = document["trace"]["root"]
    text = json.dumps(document).replace(json.dumps(old_root)[1:-1], str(victim))
    path.write_text(text)
    resumed = subprocess.run([*args, "--resume"], env=env, capture_output=True, text=True)
    assert resumed.returncode == 2 and "recording directory" in resumed.stderr, resumed.stderr
    assert (victim / "keep.txt").read_text() == "precious" and sorted(p.name for p in victim.iterdir()) == ["keep.txt"]
