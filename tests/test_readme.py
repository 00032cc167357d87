"""The Python examples of the README and docs/ run as written (examples that run): the operation protocol's
example with and without a fixture, in both isolations; the pytest example (run by tests/test_pytest_plugin.py); the
declared-parameters example (run by tests/test_operation_lookup.py, from a scratch repository)."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfsuite.harness import ModeSpec, Recipe, run_recipe
from tests.docs.pages import python_blocks
from tests.docs.test_engine_guide import guide_blocks

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = python_blocks()  # the README's own example is the protocol's block of docs/own-code.md, once


def _block(marker: str) -> str:
    [block] = [b for b in BLOCKS if marker in b]
    return block


def test_every_python_block_of_the_readme_is_run_by_a_test() -> None:
    kinds = {"operation protocol": "class Append", "pytest plugin": "def test_flush(perfsuite_bench)",
             "declared parameters (tests/test_operation_lookup.py)": "class Commit:  # records appended",
             "whatif --target (tests/whatif/test_readme_whatif.py)": "# mydebounce.py",
             "whatif emit (tests/whatif/test_readme_whatif.py)": "# benchops.py",
             "LangGraph (tests/integrations/test_langgraph_docs.py)": "builder.compile(checkpointer=saver)"}
    guide = {code for language, code in guide_blocks() if language == "python"}  # tests/docs/test_engine_guide.py
    assert BLOCKS and all(b in guide or any(marker in b for marker in kinds.values()) for b in BLOCKS)
    assert all(_block(marker) for marker in kinds.values())


@pytest.mark.parametrize("isolation", ["inline", "process"])
@pytest.mark.parametrize("with_fixture", [True, False])
def test_the_operation_example_runs_with_and_without_a_fixture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolation: str, with_fixture: bool
) -> None:
    modules = tmp_path / "mods"
    modules.mkdir()
    (modules / "mybench.py").write_text(_block("class Append"))
    monkeypatch.syspath_prepend(str(modules))
    fixture = None
    if with_fixture:
        fixture = tmp_path / "fixture"
        fixture.mkdir()
        (fixture / "existing").write_text("keep")
    recipe = Recipe(name="mine", fixture="mine" if with_fixture else None, modes=(ModeSpec("mine", "mybench:Append"),),
                    samples=1, warmup=0, isolation=isolation, control_windows=1, settle_ms=0.0)
    result = run_recipe(recipe, output_dir=tmp_path / "out", fixture=fixture, work_root=tmp_path / "w")
    [sample] = result.document["modes"]["mine"]["samples"]
    assert sample["ack_ms"] >= sample["submission_ms"] >= 0
    if fixture is not None:
        assert sorted(p.name for p in fixture.iterdir()) == ["existing"]  # written to the private copy only
