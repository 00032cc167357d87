"""The operation protocol's ten-line example (README and module docstring) really runs, in both isolations."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from perfsuite.harness import ModeSpec, Recipe, _operation, run_recipe


def _example() -> str:
    doc = _operation.__doc__ or ""
    block = doc.split("Example, ten lines", 1)[1].split("::\n", 1)[1]
    return textwrap.dedent(block)


def test_example_is_ten_lines() -> None:
    lines = [ln for ln in _example().strip().splitlines() if ln.strip()]
    assert 5 <= len(lines) <= 10


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_example_measures_on_a_private_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolation: str) -> None:
    module_dir = tmp_path / "mods"
    module_dir.mkdir()
    (module_dir / "mybench_example.py").write_text(_example())
    monkeypatch.syspath_prepend(str(module_dir))
    fixture = tmp_path / "fixture"
    fixture.mkdir()
    (fixture / "existing").write_text("keep")
    recipe = Recipe(
        name="example",
        fixture="mine",
        modes=(ModeSpec("append", "mybench_example:Append"),),
        samples=1,
        warmup=0,
        isolation=isolation,
        control_windows=1,
        settle_ms=0.0,
    )
    result = run_recipe(recipe, output_dir=tmp_path / "out", fixture=fixture, work_root=tmp_path / "w")
    sample = result.document["modes"]["append"]["samples"][0]
    assert sample["ack_ms"] >= sample["submission_ms"] >= 0
    assert sorted(p.name for p in fixture.iterdir()) == ["existing"]  # log.txt went to the copy only
