"""`perfsuite run`'s plan in the library (the CLI only parses and prints): the CLI parses and prints, this decides."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.workloads.plan import DEFAULT_RUN_RECIPES, RunOptions, plan_resume, plan_run, unavailable

MODULE = '''
def ready(ctx):
    """Runs anywhere."""

def missing(ctx):
    """A peer whose package is not installed."""

missing.unavailable = lambda: "nope is not installed"
'''


def _recipes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "planmod_ops.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    for name, op in (("here", "ready"), ("peerish", "missing")):
        (recipes / f"{name}.toml").write_text(
            f'name = "{name}"\ndescription = "x"\n[modes.a]\noperation = "planmod_ops:ready"\n'
            f'[modes.b]\noperation = "planmod_ops:{op}"\n')
    return recipes


def test_a_recipe_that_cannot_run_here_is_set_aside_with_its_reason(tmp_path, monkeypatch) -> None:
    recipes = _recipes(tmp_path, monkeypatch)
    plan = plan_run(["here", "peerish"], RunOptions(samples=2), recipes_dir=recipes)
    assert [r.name for r in plan.recipes] == ["here"]
    assert plan.recipes[0].samples == 2
    assert [(s.recipe, s.reason) for s in plan.skipped] == [("peerish", "modes.b: nope is not installed")]
    assert unavailable(plan.recipes[0]) is None


def test_bad_requests_fail_in_one_line_before_anything_is_measured(tmp_path, monkeypatch) -> None:
    recipes = _recipes(tmp_path, monkeypatch)
    with pytest.raises(PerfsuiteError, match="--all runs the whole catalogue"):
        plan_run(["here"], all_recipes=True, recipes_dir=recipes)
    with pytest.raises(PerfsuiteError, match="--heap: `run` takes one size"):
        plan_run(["here"], RunOptions(heap="0,1e6"), recipes_dir=recipes)
    (recipes / "typo.toml").write_text('name = "typo"\ndescription = "x"\n[modes.a]\noperation = "planmod_ops:nah"\n')
    with pytest.raises(PerfsuiteError, match="unknown operation planmod_ops:nah"):
        plan_run(["typo"], recipes_dir=recipes)
    with pytest.raises(PerfsuiteError, match="--resume continues the recorded recipe"):
        plan_resume(tmp_path / "x.json", options=RunOptions(seed=1))
    assert not RunOptions().given() and RunOptions(gc_freeze=True).given()


def test_the_quick_set_is_the_default() -> None:
    assert "idle-control" in DEFAULT_RUN_RECIPES
