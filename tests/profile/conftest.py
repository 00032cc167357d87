"""Shared helpers for the profile tests: the real command line, and a small real results file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def perfsuite_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m perfsuite ARGS`` as a subprocess: exit status, stdout, stderr."""
    return subprocess.run(
        [sys.executable, "-m", "perfsuite", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )


@pytest.fixture(scope="session")
def cli():
    """:func:`perfsuite_cli`, for the tests (their modules cannot import this conftest)."""
    return perfsuite_cli


@pytest.fixture(scope="session")
def mailbox_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """A real ``perfsuite run mailbox-delivery --phase`` (2 samples, inline): (its directory, the process)."""
    out = tmp_path_factory.mktemp("mailbox-run")
    proc = perfsuite_cli(
        "run",
        "mailbox-delivery",
        "--samples",
        "2",
        "--warmup",
        "0",
        "--isolation",
        "inline",
        "--output-dir",
        str(out),
        "--phase",
    )
    assert proc.returncode == 0, proc.stderr
    return out, proc
