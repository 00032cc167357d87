"""The README is a front door: at most 10 KB, it starts with the two commands (`.ci/run`
runs the second), and its ten-line example for a user's own code runs as a user would, in a directory of
their own with the README's module and recipe."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.docs.pages import ROOT, page

README = page("README.md")


def test_the_readme_is_at_most_10_kb() -> None:
    assert len(README.encode("utf-8")) <= 10 * 1024


def test_the_readme_starts_with_the_two_commands_and_ci_runs_the_test_one() -> None:
    first = re.search(r"```sh\n(.*?)```", README, re.S)
    assert first is not None and README.index("```sh") < README.index("\n## ")
    commands = [line.split("#", 1)[0].strip() for line in first.group(1).splitlines()]
    assert commands == ["make run", "make test"]
    assert "exec make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_readme_example_is_the_protocol_example_of_the_docs() -> None:
    [example] = re.findall(r"```python\n(.*?)```", README, re.S)
    assert example in page("own-code.md")
    assert len([line for line in example.splitlines() if line.strip()]) <= 10


def test_the_readme_example_runs_in_a_users_directory(tmp_path: Path) -> None:
    home = tmp_path / "myproject"
    (home / "recipes").mkdir(parents=True)
    section = README.split("## Measure your own code", 1)[1].split("\n## ", 1)[0]
    [module] = re.findall(r"```python\n(.*?)```", section, re.S)
    [recipe] = re.findall(r"```toml\n(.*?)```", section, re.S)
    [command] = re.findall(r"```sh\n(.*?)```", section, re.S)
    (home / "mybench.py").write_text(module)
    (home / "recipes" / "mine.toml").write_text(recipe)
    argv = command.split()
    assert argv[:3] == ["perfsuite", "run", "mine"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # perfsuite as if installed; the user's code from cwd
    env.pop("PERFSUITE_RECORD_TRACE", None)
    # as written, but a test and not a measurement: one sample, no warm-up
    ran = subprocess.run([sys.executable, "-m", "perfsuite", *argv[1:], "--samples", "1", "--warmup", "0"], cwd=home,
                         env=env, capture_output=True, text=True, timeout=300, check=False)
    assert ran.returncode in (0, 1), ran.stdout + ran.stderr  # 1: the machine missed a target, still measured
    [document] = [p for p in (home / "results" / "local").glob("mine-*.json") if ".pyperf." not in p.name]
    result = json.loads(document.read_text())
    [sample] = result["modes"]["mine"]["samples"]
    assert result["status"] == "complete" and sample["ack_ms"] >= sample["submission_ms"] >= 0
    assert (home / "results" / "local").is_dir() and "mine" in ran.stdout
