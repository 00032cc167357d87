"""Outside a git repository nothing names the code measured: `run` says so first, and the evidence paragraph
says "commit unknown" with the reason, never a guessed commit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TINY = ('samples = 1\nwarmup = 0\nisolation = "inline"\ncontrol_windows = 1\nsettle_ms = 0\n'
        '[modes.a]\noperation = "perfsuite.workloads.basic:idle"\nwindow_ms = 1\n')


def _outside_git(tmp_path: Path) -> dict[str, str]:
    probe = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=tmp_path, capture_output=True, text=True)
    if probe.returncode == 0:
        pytest.skip(f"the temporary directory is inside a git repository ({probe.stdout.strip()})")
    env = {k: v for k, v in os.environ.items() if k not in ("PERFSUITE_COMMIT", "PERFSUITE_BRANCH")}
    for name in ("GITHUB_SHA", "CI_COMMIT_SHA", "BUILDKITE_COMMIT", "CIRCLE_SHA1", "BUILD_SOURCEVERSION",
                 "BITBUCKET_COMMIT", "TRAVIS_COMMIT", "DRONE_COMMIT_SHA", "GIT_COMMIT"):
        env.pop(name, None)
    return env


def test_run_and_evidence_outside_git_say_the_commit_is_unknown(tmp_path: Path) -> None:
    env = _outside_git(tmp_path)
    (tmp_path / "tiny.toml").write_text(TINY)
    run = subprocess.run([sys.executable, "-m", "perfsuite", "run", "tiny.toml", "--output-dir", "out"],
                         cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    first = run.stdout.splitlines()[0]
    assert first.startswith("commit unknown (not a git repository)"), run.stdout
    assert not run.stderr.strip(), run.stderr  # stderr stays the one-line errors' (none here)
    (result,) = (tmp_path / "out").glob("tiny-*[0-9].json")
    evidence = subprocess.run([sys.executable, "-m", "perfsuite", "evidence", str(result)], cwd=tmp_path,
                              capture_output=True, text=True, env=env, timeout=300)
    assert evidence.returncode == 0, evidence.stderr
    assert "commit unknown (not a git repository" in evidence.stdout and "commit `unknown`" not in evidence.stdout
