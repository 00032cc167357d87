"""Helpers for the watch tests (M11): run `perfsuite watch` as a user would, in a subprocess, on small programs.

Every assertion is about behaviour: windows exist and validate, callbacks are named, a planted block reads at least
its planted length (the stall monitor reads the same clock the block spins on; no tick can land inside the block),
a planted collection is attributed. No upper bound on any time: the machine may be loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "scripts" / "acceptance" / "watch_programs"


def child_env() -> dict[str, str]:
    """This checkout first on the children's path (the program's interpreter imports the agent from it)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def perfsuite(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "perfsuite", *args], capture_output=True, text=True,
                          timeout=timeout, env=child_env(), cwd=cwd)


def watch(tmp_path: Path, program: list[str], *options: str, name: str = "w") -> tuple[subprocess.CompletedProcess[str],
                                                                                      dict[str, Any] | None]:
    out = tmp_path / f"{name}.json"
    proc = perfsuite("watch", "--output", str(out), *options, "--", sys.executable, *program)
    doc = json.loads(out.read_text()) if out.exists() else None
    return proc, doc


@pytest.fixture
def write_program(tmp_path: Path):
    """Write a small program into the test's directory and return its path."""

    def write(name: str, source: str) -> str:
        path = tmp_path / name
        path.write_text(textwrap.dedent(source))
        return str(path)

    return write
