"""The command line: version, help, the demo, and one-line errors."""

from __future__ import annotations

import subprocess
import sys

from perfsuite import __version__
from perfsuite.cli import main


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "perfsuite", *args], capture_output=True, text=True,
                          timeout=120)


def test_version():
    proc = run("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"perfsuite {__version__}"


def test_help_lists_commands():
    proc = run("--help")
    assert proc.returncode == 0 and "demo" in proc.stdout


def test_demo_writes_forks_and_reloads(tmp_path, capsys):
    assert main(["demo", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "completed=True" in out and "branches/what-if.jsonl" in out
    assert (tmp_path / "conversations" / "demo" / "conversation.jsonl").exists()


def test_unknown_command_exits_2():
    proc = run("no-such-command")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
