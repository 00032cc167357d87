"""Every mode of every shipped recipe runs once (SPEC M4): the built-in recipes, the ones `run --all` leaves
out (peers, typing), floors and references. One sample, no warm-up, each mode acknowledged and its document
valid. The recipes are enumerated, so a mode added later is covered without editing this file.

A mode only a benchmark runs rots unseen: a callback that shadowed the sample's ``ack`` left the x8
asynchronous peer-checkpoint mode waiting out its deadline for 85 commits. A recipe whose extra is not
installed is a skip with its reason; with ``PERFSUITE_REQUIRE_EXTRAS=1`` (set by `make test`, which installs
every extra) it is a failure instead.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from perfsuite._paths import builtin_dir
from perfsuite.harness import (
    Recipe,
    declared_parameters,
    list_recipes,
    load_recipe,
    resolve_operation,
    run_recipe,
    validate_results,
)
from perfsuite.workloads.fixtures import build_fixture
from perfsuite.workloads.plan import unavailable

SHIPPED = builtin_dir("recipes")
RECIPES = list_recipes(dirs=[SHIPPED])
#: a size parameter a recipe's operation declares, and the smallest value that still runs every code path
#: (the transcript's barrier every 100 appends and its rewrite points need a few hundred messages; 12 keys still
#: type past every publication and one plant of every 10th key)
SMALLER = {"messages": 400, "keys": 12}


def _smallest(recipe: Recipe) -> Recipe:
    """``recipe`` with one sample per mode, no warm-up, one idle control and its size parameters cut down."""
    modes = tuple(dataclasses.replace(m, params={**m.params, **{k: v for k, v in SMALLER.items()
                                                                if k in m.params or _declares(m.operation, k)}})
                  for m in recipe.modes)
    return dataclasses.replace(recipe, modes=modes, samples=1, warmup=0, worker_warmup=0, control_windows=1,
                               settle_ms=0.0, allocation_samples=1, instructions=False)


def _declares(operation: str, name: str) -> bool:
    return name in (declared_parameters(resolve_operation(operation)) or {})


@pytest.fixture
def cache(run_fixture_cache: Path) -> Path:
    """One fixture cache for the run, whatever worker runs a recipe: each fixture is built once."""
    return run_fixture_cache


def test_the_shipped_recipes_are_enumerated() -> None:
    assert len(RECIPES) >= 18 and {"peer-checkpoint", "peer-transcript", "typing-floor"} <= set(RECIPES)
    assert any(not load_recipe(name, dirs=[SHIPPED]).catalogue for name in RECIPES)


@pytest.mark.parametrize("name", RECIPES)
def test_every_mode_runs_once_and_is_acknowledged(name: str, cache: Path, tmp_path: Path) -> None:
    recipe = _smallest(load_recipe(name, dirs=[SHIPPED]))
    reason = unavailable(recipe)
    if reason:
        if os.environ.get("PERFSUITE_REQUIRE_EXTRAS") == "1":
            pytest.fail(f"{name}: cannot run although every extra is installed: {reason}")
        pytest.skip(f"{name}: {reason}")
    fixture = build_fixture(recipe.fixture, cache_dir=cache) if recipe.fixture else None
    result = run_recipe(recipe, output_dir=tmp_path / "out", fixture=fixture.path if fixture else None,
                        fixture_info=dict(fixture.info) if fixture else {})
    document = result.document
    validate_results(document)
    assert document["status"] == "complete"
    assert set(document["modes"]) == {m.name for m in recipe.modes}
    for mode in recipe.modes:
        (sample,) = document["modes"][mode.name]["samples"]
        assert sample.get("ack_ms") is not None or sample.get("latency_ms") is not None, (mode.name, sample)
