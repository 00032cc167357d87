"""Recipes: strict validation with one-line errors naming file, key and expectation; lookup."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.harness import Recipe, list_recipes, load_recipe

GOOD = """
name = "demo"
samples = 3
[modes.a]
operation = "perfsuite.workloads.basic:idle"
window_ms = 10
[modes.b]
operation = "perfsuite.workloads.basic:busy"
ms = 5
"""


def _write(tmp_path: Path, text: str, name: str = "r.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_good_recipe_resolves_defaults(tmp_path: Path) -> None:
    r = load_recipe(_write(tmp_path, GOOD))
    assert r.name == "demo" and r.samples == 3 and r.warmup == 1
    assert r.heartbeat_ms == 5.0 and r.gc == "collect-before" and r.isolation == "process"
    assert r.target_ms == 20.0 and r.window_tail_ms == 12.0 and r.allocation is False
    assert r.control_windows == 3
    assert [m.name for m in r.modes] == ["a", "b"]
    assert r.mode("a").params == {"window_ms": 10}
    assert Recipe.from_dict(r.to_dict()) == r


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('samples = "six"\n[modes.a]\noperation = "m:f"\n',
         'r.toml: samples: expected an integer from 1 to 10000, got "six"'),
        ('samples = 0\n[modes.a]\noperation = "m:f"\n',
         "r.toml: samples: expected an integer from 1 to 10000, got 0 (at least 1)"),
        ('samples = true\n[modes.a]\noperation = "m:f"\n', "samples: expected an integer from 1 to 10000, got true"),
        (
            'gc = "sometimes"\n[modes.a]\noperation = "m:f"\n',
            'r.toml: gc: expected one of "collect-before", "natural", got "sometimes"',
        ),
        ('isolation = 3\n[modes.a]\noperation = "m:f"\n', 'isolation: expected one of "process", "inline"'),
        ('heartbeat_ms = -5\n[modes.a]\noperation = "m:f"\n',
         "heartbeat_ms: expected a finite number from 0.1 to 1000 (ms), got -5 (at least 0.1)"),
        ('allocation = "yes"\n[modes.a]\noperation = "m:f"\n', 'allocation: expected true or false, got "yes"'),
        ('sampels = 6\n[modes.a]\noperation = "m:f"\n', "r.toml: sampels: unknown key"),
        ("samples = 6\n", "r.toml: modes: missing"),
        ("[modes.a]\nwindow_ms = 3\n", 'r.toml: modes.a.operation: missing (expected "module:function")'),
        ('[modes.a]\noperation = "nocolon"\n', 'r.toml: modes.a.operation: expected "module:function", got "nocolon"'),
        ('[modes.control]\noperation = "m:f"\n', "r.toml: modes.control: invalid mode name"),
        ("samples = = 3\n", "r.toml: invalid TOML:"),
        ('order = "sorted"\n[modes.a]\noperation = "m:f"\n', 'r.toml: order: expected one of "random", "fixed"'),
        ('seed = -1\n[modes.a]\noperation = "m:f"\n', "r.toml: seed: expected an integer from 0 to 4294967295, got -1"),
        ('[modes.a]\noperation = "m:f"\nreference = ""\n', "r.toml: modes.a.reference: expected a non-empty string"),
        ('[modes.a]\noperation = "m:f"\nreference = 1\n', "r.toml: modes.a.reference: expected a non-empty string"),
    ],
)
def test_bad_recipes_give_one_line_errors(tmp_path: Path, text: str, expected: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(PerfsuiteError) as info:
        load_recipe(path)
    message = str(info.value)
    assert expected in message
    assert "\n" not in message


def test_lookup_by_name_and_unknown_name() -> None:
    assert {"idle-control", "fsync-floor"} <= set(list_recipes())
    idle = load_recipe("idle-control")
    assert idle.name == "idle-control" and idle.fixture is None
    assert idle.mode("idle").operation == "perfsuite.workloads.basic:idle"
    assert load_recipe("fsync-floor").mode("raw-os").operation == "perfsuite.workloads.basic:fsync_floor"
    with pytest.raises(PerfsuiteError, match=r"unknown recipe 'nope'.*available: .*idle-control"):
        load_recipe("nope")
    with pytest.raises(PerfsuiteError, match="recipe file not found"):
        load_recipe("missing/file.toml")


def test_overrides_are_validated(tmp_path: Path) -> None:
    r = load_recipe(_write(tmp_path, GOOD)).with_overrides(samples=2, isolation="inline", gc="natural")
    assert (r.samples, r.control_windows, r.isolation, r.gc) == (2, 2, "inline", "natural")
    with pytest.raises(PerfsuiteError, match=r"--samples: expected an integer from 1 to 10000, got 0 \(at least 1\)"):
        r.with_overrides(samples=0)


def test_order_seed_and_reference_modes(tmp_path: Path) -> None:
    """M4 (and reference modes): the order defaults to random with no seed until a run draws one; a mode
    can be a by-design reference, with its reason, and that is not one of the operation's params."""
    r = load_recipe(_write(tmp_path, GOOD + 'reference = "the rejected design"\n'))
    assert r.order == "random" and r.seed is None
    assert r.mode("b").reference == "the rejected design" and "reference" not in r.mode("b").params
    assert r.mode("a").reference is None
    assert r.to_dict()["modes"]["b"]["reference"] == "the rejected design"
    assert Recipe.from_dict(r.to_dict()) == r
    fixed = r.with_overrides(order="fixed", seed=5)
    assert (fixed.order, fixed.seed) == ("fixed", 5)
    with pytest.raises(PerfsuiteError, match='--order: expected one of "random", "fixed", got "up"'):
        r.with_overrides(order="up")


@pytest.mark.parametrize(("recipe", "mode"), [("registry-save", "full"), ("transcript-barrier", "rewrite"),
                                              ("diagnostic-append", "rewrite"), ("chunking", "whole-artifact"),
                                              ("stalled-admission", "async-stalled")])
def test_the_by_design_baselines_are_references(recipe: str, mode: str) -> None:
    assert load_recipe(recipe).mode(mode).reference
