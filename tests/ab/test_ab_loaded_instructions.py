"""A loaded A/B gates on the loop thread's instructions (docs/gates.md, "Exit status and loaded runners"): on a
loaded machine timings are reported, not gated, and the counts decide, the callgrind pass's
``instructions.loop_thread`` among them (a cost: 1% of BASE's median, at least 1 instruction).

Deterministic, never timing luck: one real ``perfsuite ab`` of the user's repository (two rounds, one look, no
callgrind), whose published output (the two results documents) the test then rewrites as a planted result, as
tests/team/test_ab_strict.py does: every idle-control window at 8.9 ms (a loaded machine: over 6 ms), and an
instruction pass of three samples a side, unchanged (a few instructions apart, as two passes of the same code
read) or with HEAD's loop thread ~96x BASE's (a 3 ms synchronous step of fixed work). ``perfsuite compare DIR``
then gives the gate's verdict from the pairing, as ``ab`` would have."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from perfsuite.harness import instructions_section

from .userrepo import make_repo, perfsuite

#: three instruction passes per side (total, loop thread): BASE, an unchanged HEAD, a HEAD with the step
BASE = ((508_249, 448_272), (507_973, 448_172), (506_876, 448_411))
SAME = ((507_460, 448_301), (508_012, 448_190), (507_101, 448_388))
STEP = ((43_152_700, 43_093_222), (43_152_431, 43_093_090), (43_151_822, 43_093_500))


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real A/B of an unchanged working tree (the documents the test rewrites)."""
    repo = tmp_path_factory.mktemp("loaded") / "myruntime"
    make_repo(repo)
    proc = perfsuite(repo, "ab", "main", "-r", "commit", "--samples", "2", "--looks", "1", "--output-dir",
                     str(repo.parent / "ab"))
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return repo.parent / "ab"


def _pass(samples: tuple[tuple[int, int], ...]) -> dict[str, Any]:
    """The mode's instruction section after three passes, built by the harness's own reducer."""
    section: dict[str, Any] | None = None
    for i, (total, loop) in enumerate(samples):
        section = instructions_section(section, {
            "index": i, "total": total, "loop_thread": loop, "threads": {"1": loop, "2": total - loop},
            "mechanism": "client requests", "tool": "callgrind", "valgrind": "valgrind-3.19.0",
            "metrics": {"fsyncs": 1}})
    assert section is not None
    return section


def _plant(source: Path, into: Path, head: tuple[tuple[int, int], ...]) -> Path:
    """A copy of the A/B's output, loaded, with the instruction passes planted."""
    into.mkdir()
    (into / "ab.json").write_text((source / "ab.json").read_text())
    for side, samples in (("base", BASE), ("head", head)):
        (into / side).mkdir()
        for path in (source / side).glob("*.json"):
            doc = json.loads(path.read_text())
            if "modes" not in doc:
                continue  # pyperf's export: not read by compare
            for window in doc["control"]["samples"]:
                window["max_gap_ms"] = 8.9  # loaded: the idle control's median over the 6 ms rule
            gap = doc["control"]["summary"].get("max_gap_ms")
            if isinstance(gap, dict):  # the summary the tables show, as the windows now read
                gap.update({k: 8.9 for k in gap if k in ("min", "median", "max", "ci_low", "ci_high", "mean")})
            for mode in doc["modes"].values():
                mode["instructions"] = _pass(samples)
            (into / side / path.name).write_text(json.dumps(doc))
    return into


def _compare(directory: Path) -> tuple[int, str]:
    proc = perfsuite(directory.parent, "compare", str(directory))
    return proc.returncode, (proc.stdout.splitlines() or [proc.stderr])[0]


def test_a_loaded_ab_whose_loop_thread_instructions_rose_fails_naming_them(measured: Path, tmp_path: Path) -> None:
    code, first = _compare(_plant(measured, tmp_path / "step", STEP))
    assert code == 1, first
    assert first.startswith("perfsuite compare: machine loaded (idle control"), first
    assert "timings reported, not gated; gated on: " in first and "instructions.loop_thread" in first
    assert "regression" in first and "commit/commit instructions.loop_thread +" in first, first


def test_a_loaded_ab_whose_instructions_are_unchanged_passes(measured: Path, tmp_path: Path) -> None:
    code, first = _compare(_plant(measured, tmp_path / "same", SAME))
    assert code == 0, first
    assert first.startswith("perfsuite compare: machine loaded (idle control"), first
    assert "instructions.loop_thread" in first.split("gated on: ", 1)[1] and first.endswith("no regression"), first
