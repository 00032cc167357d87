"""A mode key the operation never reads is a typo measured as if applied: one line, exit 2, for operations
that declare their parameters (checked before the run) and for those that declare none (noted while the
operation is built and runs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from perfsuite.harness._params import ReadRecorder, unread_keys

SAVE = '''
class Save:
    """Declares nothing; reads ``records`` while it is built and ``fsync`` when it submits."""

    def __init__(self, ctx):
        self.params = ctx.params
        self.records = int(ctx.params.get("records", 1))

    def submit(self, ack):
        if self.params.get("fsync", True):
            pass
        ack(None)
'''

HEAD = 'samples = 1\nwarmup = 0\nisolation = "{isolation}"\ncontrol_windows = 1\nsettle_ms = 0\n[modes.save]\n'


def _run(tmp_path: Path, keys: str, isolation: str = "inline") -> subprocess.CompletedProcess[str]:
    (tmp_path / "snapbench.py").write_text(SAVE)
    (tmp_path / "r.toml").write_text(HEAD.format(isolation=isolation) + 'operation = "snapbench:Save"\n' + keys)
    return subprocess.run([sys.executable, "-m", "perfsuite", "run", "r.toml", "--output-dir", "out"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_a_key_an_undeclaring_operation_never_reads_is_one_line_and_exit_2(tmp_path: Path, isolation: str) -> None:
    proc = _run(tmp_path, 'records = 3\nofload = true\nsystem = "snapbench"\n', isolation)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and lines[-1].startswith("perfsuite: error: ")
    assert "modes.save.ofload" in lines[-1] and "records" not in lines[-1].split("modes.save.ofload")[1][:1]
    assert "modes.save.records" not in lines[-1] and "system" not in lines[-1]  # read, or a label


def test_keys_read_while_building_or_submitting_pass(tmp_path: Path) -> None:
    proc = _run(tmp_path, 'records = 3\nfsync = false\ndurability = "none"\n')
    assert proc.returncode == 0, proc.stderr


def test_the_recorder_counts_lookups_and_iteration_as_reads() -> None:
    class Undeclared:
        pass

    params = ReadRecorder({"a": 1, "b": 2, "c": 3})
    assert params["a"] == 1 and "b" in params and params.get("zz") is None
    assert unread_keys(Undeclared, params) == ["c"]
    assert dict(params) == {"a": 1, "b": 2, "c": 3} and unread_keys(Undeclared, params) == []
