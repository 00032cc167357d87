"""docs/whatif.md's "What-if for your own scheduler" section runs as written (rule 8), in a scratch directory
outside the repository: its debouncer module, trace, costs file, operation and recipe are the README's
own blocks, its commands run as a user would type them, and the figures the README quotes are asserted."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from perfsuite.whatif import read_costs, read_trace
from tests.docs.pages import page

ROOT = Path(__file__).resolve().parents[2]
README = page("whatif.md")
SECTION = README[README.index("### What-if for your own scheduler"):]
FENCES = re.findall(r"```(\w+)\n(.*?)```", SECTION, re.S)


def _block(language: str, marker: str) -> str:
    [block] = [text for lang, text in FENCES if lang == language and marker in text]
    return block


def _commands(marker: str) -> list[list[str]]:
    return [shlex.split(line) for line in _block("sh", marker).splitlines() if line.strip()]


@pytest.fixture
def user_dir(tmp_path: Path) -> Path:
    """What a user has after copying the README's files into a directory of their own."""
    home = tmp_path / "myproject"
    (home / "recipes").mkdir(parents=True)
    (home / "mydebounce.py").write_text(_block("python", "# mydebounce.py"))
    (home / "trace.jsonl").write_text(_block("jsonl", '"format": "perfsuite-trace"'))
    (home / "costs.json").write_text(_block("json", '"schema": 1'))
    (home / "benchops.py").write_text(_block("python", "# benchops.py"))
    (home / "recipes" / "edit.toml").write_text(_block("toml", 'operation = "benchops:Edit"'))
    return home


def _run(cwd: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    assert argv[0] == "perfsuite"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # perfsuite as if installed; the user's code from cwd
    env.pop("PERFSUITE_RECORD_TRACE", None)
    return subprocess.run([sys.executable, "-m", "perfsuite", *argv[1:]], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=180, check=False)


def test_the_blocks_are_valid_as_they_stand(user_dir: Path) -> None:
    trace = read_trace(user_dir / "trace.jsonl")
    assert trace.duration_s == 10.0 and {e.kind for e in trace.events} == {"x-edit"}
    assert set(read_costs(user_dir / "costs.json", required=None).kinds) == {"save"}


def test_the_debounce_sweep_and_its_validation_run_as_documented(user_dir: Path) -> None:
    sweep, check = _commands("--target mydebounce:Target --debounce 0.1,0.5,2,5")
    proc = _run(user_dir, [*sweep, "--json", "sweep.json"])
    assert proc.returncode == 0, proc.stderr
    assert (user_dir / "tradeoff.png").stat().st_size > 10_000
    rows = json.loads((user_dir / "sweep.json").read_text())["results"]
    # the figures the README quotes for this trace
    assert [r["publications"] for r in rows] == [5, 3, 3, 1]
    assert [round(r["loss_window_s"], 2) for r in rows] == [0.15, 0.90, 2.40, 12.00]
    assert [r["pareto"] for r in rows] == [True, True, False, True]
    assert [r["bytes_written"] for r in rows] == [5 * 4096, 3 * 4096, 3 * 4096, 4096]  # from the costs file
    for quoted in ("0.1 s publishes 5 times", "0.15 s window", "0.5 s 3 times with 0.90 s", "2.40 s (dominated",
                   "5 s once with 12.00 s"):
        assert quoted in " ".join(SECTION.split())
    proc = _run(user_dir, check)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "validate: PASS" in proc.stdout and "speed 10 (about 0.4 s)" in proc.stdout


def test_the_operation_records_its_events_and_the_target_replays_them(user_dir: Path) -> None:
    record, replay = _commands("--record-trace edits.jsonl")
    proc = _run(user_dir, record)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    trace = read_trace(user_dir / "edits.jsonl")
    assert trace.count("x-edit") == 3 + 1  # three samples and the default warm-up
    proc = _run(user_dir, [*replay, "--format", "json"])
    assert proc.returncode == 0, proc.stderr
    assert [r["debounce_s"] for r in json.loads(proc.stdout)["sweep"]["results"]] == [0.1, 1.0]
