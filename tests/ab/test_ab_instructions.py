"""Instructions through `perfsuite ab --instructions` (the CI gate): instructions are a cost with a 1% tolerance.

A scratch copy of the project (see conftest); a tiny recipe with one instruction pass per mode and revision.
Nothing here is timed: instruction counts under callgrind, and the gate's verdict on them (``--gate costs``,
timings are the machine's). Skipped without valgrind.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest

from .conftest import commit, edit

needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")

#: five appends with a barrier each; one latency sample, one instruction pass per revision
RECIPE = textwrap.dedent("""
    name = "ci-instr"
    description = "five appends with a barrier each, one instruction pass: a test of the gate"
    samples = 1
    warmup = 0
    isolation = "process"
    instructions = true
    instructions_samples = 1
    settle_ms = 10

    [modes.barrier]
    operation = "perfsuite.workloads.engine:transcript_barrier"
    operation_kind = "append+barrier"
    messages = 5
""")
#: where the CPU cost is planted: the transcript's write, which every barrier runs
PLANT_FILE = "perfsuite/engine/_transcript.py"
PLANT_AT = "    def write(self, sync: bool = True) -> None:\n"
PLANT = "        _planted = 0\n        for _i in range(2000):  # PLANTED CPU cost (test)\n            _planted += _i\n"
ARGS = ["-r", "ci-instr", "--samples", "1", "--warmup", "0", "--gate", "costs", "--format", "json"]


def _prepare(repo: Path) -> None:
    (repo / "recipes" / "ci-instr.toml").write_text(RECIPE)
    commit(repo, "the instruction recipe")


def _counts(out: Path) -> dict[str, int]:
    pairing = json.loads((out / "ab.json").read_text())
    (entry,) = pairing["recipes"]
    docs = {side: json.loads((out / entry[side]).read_text()) for side in ("base", "head")}
    return {side: doc["modes"]["barrier"]["instructions"]["total"]["median"] for side, doc in docs.items()}


def _instruction_changes(document: dict[str, Any]) -> dict[str, str]:
    return {c["metric"]: c["status"] for c in document["changes"] if c["metric"].startswith("instructions.")}


@needs_valgrind
def test_an_unchanged_revision_counts_the_same_and_passes(scratch_repo: Path, run_perfsuite: Any,
                                                          tmp_path: Path) -> None:
    """BASE from a temporary worktree, HEAD from the checkout: the same code, loaded through the same link."""
    _prepare(scratch_repo)
    out = tmp_path / "ab"
    proc = run_perfsuite(scratch_repo, "ab", "HEAD", *ARGS, "--instructions", "--output-dir", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    document = json.loads(proc.stdout)
    assert _instruction_changes(document) == {"instructions.total": "unchanged",
                                              "instructions.loop_thread": "unchanged"}
    counts = _counts(out)
    assert abs(counts["head"] - counts["base"]) < 0.01 * counts["base"]


@needs_valgrind
def test_a_planted_cpu_cost_fails_the_gate_on_instructions(scratch_repo: Path, run_perfsuite: Any,
                                                           tmp_path: Path) -> None:
    _prepare(scratch_repo)
    edit(scratch_repo, PLANT_FILE, PLANT_AT, PLANT_AT + PLANT)
    commit(scratch_repo, "plant: a loop in every transcript write", PLANT_FILE)
    out = tmp_path / "ab"
    proc = run_perfsuite(scratch_repo, "ab", "HEAD~1", *ARGS, "--output-dir", str(out))  # the recipe asks
    assert proc.returncode == 1, proc.stdout + proc.stderr
    document = json.loads(proc.stdout)
    assert "instructions.total" in document["verdict"]
    assert _instruction_changes(document)["instructions.total"] == "regressed"
    regressed = {c["metric"] for c in document["changes"] if c["status"] == "regressed" and c["gating"]}
    assert regressed <= {"instructions.total", "instructions.loop_thread"}  # nothing else was planted
    counts = _counts(out)
    assert counts["head"] > 1.01 * counts["base"]
