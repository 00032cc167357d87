"""U: a user's own operation says its trace events (``perfsuite.whatif.emit``), so
``perfsuite run RECIPE --record-trace FILE`` records them and ``whatif`` accepts the file; a recording
with no events is said in one line and leaves no unusable file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.whatif import emit, read_trace, recording

ROOT = Path(__file__).resolve().parents[2]

OPERATION = '''\
import asyncio

from perfsuite.whatif import emit


class Edit:
    """myruntime's edit: say it happened, then write the document in a thread."""

    def __init__(self, ctx):
        self.path = ctx.scratch / "doc.txt"

    def submit(self, ack):
        emit("x-edit", session="main", size=5)

        def write():
            self.path.write_text("hello")
            emit("x-saved", session="main", size=5, path=str(self.path.name))

        job = asyncio.get_running_loop().run_in_executor(None, write)
        job.add_done_callback(lambda f: ack(f.exception()))
'''

SILENT = '''\
class Nothing:
    def __init__(self, ctx):
        pass

    def submit(self, ack):
        ack(None)
'''

TARGET = '''\
class Target:
    def __init__(self, ctx):
        self.ctx = ctx

    def on_event(self, event):
        if event.kind == "x-saved":
            self.ctx.publish("doc", bytes_written=event.size)
'''


@pytest.fixture
def team(tmp_path: Path) -> Path:
    repo = tmp_path / "team"
    (repo / "recipes").mkdir(parents=True)
    (repo / "benchops.py").write_text(OPERATION)
    (repo / "silent.py").write_text(SILENT)
    (repo / "replay.py").write_text(TARGET)
    for name, operation in (("edit", "benchops:Edit"), ("silent", "silent:Nothing")):
        (repo / "recipes" / f"{name}.toml").write_text(f'name = "{name}"\n[modes.{name}]\noperation = "{operation}"\n')
    return repo


def _perfsuite(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PERFSUITE_RECORD_TRACE", None)
    return subprocess.run([sys.executable, "-m", "perfsuite", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=180, check=False)


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_record_trace_records_a_users_operation_and_whatif_accepts_the_file(team: Path, isolation: str) -> None:
    proc = _perfsuite(team, "run", "edit", "--samples", "3", "--warmup", "0", "--isolation", isolation,
                      "--output-dir", "out", "--record-trace", "t.jsonl")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "trace: t.jsonl (6 events, 1 sessions" in proc.stdout
    trace = read_trace(team / "t.jsonl")
    assert [e.kind for e in trace.events] == ["x-edit", "x-saved"] * 3
    assert trace.events[1].extra == {"path": "doc.txt"} and trace.meta["generator"] == "recorded"
    # through the team's own target, and through the engine's sessions (which say what they left out)
    proc = _perfsuite(team, "whatif", "--trace", "t.jsonl", "--target", "replay:Target", "--debounce", "1",
                      "--format", "json")
    assert proc.returncode == 0, proc.stderr
    [result] = json.loads(proc.stdout)["sweep"]["results"]
    assert result["publications"] == 3 and result["bytes_written"] == 15
    proc = _perfsuite(team, "whatif", "--trace", "t.jsonl", "--no-costs", "--debounce", "1")
    assert proc.returncode == 0, proc.stderr
    assert "6 event(s) of your own x- kinds were not replayed" in proc.stdout


def test_an_empty_recording_is_one_line_and_leaves_no_unusable_file(team: Path) -> None:
    proc = _perfsuite(team, "run", "silent", "--samples", "2", "--warmup", "0", "--isolation", "inline",
                      "--output-dir", "out", "--record-trace", "empty.jsonl")
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stderr.splitlines() if "empty.jsonl" in line]
    assert len(said) == 1 and "no events recorded, no file written" in said[0] and "perfsuite.whatif.emit" in said[0]
    assert not (team / "empty.jsonl").exists()
    # a header-only recording made some other way: whatif's refusal says why
    (team / "old.jsonl").write_text(json.dumps({"format": "perfsuite-trace", "version": 1, "duration_s": 0.0,
                                                "meta": {"generator": "recorded"}}) + "\n")
    proc = _perfsuite(team, "whatif", "--trace", "old.jsonl", "--no-costs")
    assert proc.returncode == 2 and "the trace has no events; it was recorded from a run" in proc.stderr


def test_emit_writes_only_while_recording_and_checks_every_event(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PERFSUITE_RECORD_TRACE", raising=False)
    assert emit("x-edit") is False  # no recording: nothing written, nothing fails
    with recording(tmp_path / "t.jsonl", workers=False):
        assert emit("x-edit", session="s1", size=3, who="me") is True
        assert emit("activity", session="s1", conversation="agent-1", flavour="waiting") is True
    trace = read_trace(tmp_path / "t.jsonl")
    assert [(e.session, e.conversation, e.kind, e.size, dict(e.extra)) for e in trace.events] == [
        ("s1", "root", "x-edit", 3, {"who": "me"}), ("s1", "agent-1", "activity", 0, {"flavour": "waiting"})]
    assert emit("x-edit") is False  # the recording ended


@pytest.mark.parametrize(("call", "message"), [
    (lambda: emit("edit"), r"emit: kind: unknown 'edit'; expected one of .*x-NAME"),
    (lambda: emit("x-"), r"unknown 'x-'"),
    (lambda: emit("activity", conversation="agent-1", flavour="dancing"), r"activity: flavour must be one of"),
    (lambda: emit("x-edit", size=-1), r"size: expected bytes"),
    (lambda: emit("x-edit", session=""), r"session: expected a non-empty string"),
    (lambda: emit("x-edit", time=3.0), r"'time' is set by emit itself"),
    (lambda: emit("x-edit", payload=object()), r"emit: x-edit: an extra field is not JSON"),
])
def test_a_malformed_event_is_one_line_recording_or_not(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PerfsuiteError, match=message):
        call()
