"""Where recipe names are found (a user's recipes first): your folder (``--recipes DIR``, ``$PERFSUITE_RECIPES`` or
``./recipes``) first, then the built-in recipes, in a checkout as from a wheel."""

from __future__ import annotations

from pathlib import Path

import pytest

import perfsuite.cli
from perfsuite._paths import builtin_dir
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import list_recipes, load_recipe, recipe_dirs

MINE = """
name = "mine"
samples = 1
warmup = 0
isolation = "inline"
control_windows = 1
settle_ms = 0.0
[modes.idle]
operation = "perfsuite.workloads.basic:idle"
"""


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PERFSUITE_RECIPES", raising=False)


def _folder(root: Path, text: str = MINE, name: str = "mine") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{name}.toml").write_text(text)
    return root


def test_the_working_directorys_recipes_come_first_then_the_built_ins(tmp_path: Path, monkeypatch) -> None:
    _folder(tmp_path / "recipes")
    _folder(tmp_path / "recipes", MINE.replace('"mine"', '"idle-control"'), "idle-control")  # shadows a built-in
    monkeypatch.chdir(tmp_path)
    assert [d.resolve() for d in recipe_dirs()] == [(tmp_path / "recipes").resolve(), builtin_dir("recipes").resolve()]
    assert load_recipe("mine").path == "recipes/mine.toml"  # recorded relative to the project
    assert load_recipe("idle-control").path == "recipes/idle-control.toml"
    assert load_recipe("fsync-floor").mode("raw-os").operation.endswith(":fsync_floor")  # built-in
    assert {"mine", "idle-control", "fsync-floor"} <= set(list_recipes())


def test_recipes_dir_option_and_environment(tmp_path: Path, monkeypatch) -> None:
    mine = _folder(tmp_path / "elsewhere")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PerfsuiteError, match="unknown recipe 'mine'"):
        load_recipe("mine")
    assert load_recipe("mine", recipe_dirs(mine)).name == "mine"
    monkeypatch.setenv("PERFSUITE_RECIPES", str(mine))
    assert load_recipe("mine").name == "mine"
    with pytest.raises(PerfsuiteError, match=r"^--recipes: no such directory: .*nope$"):
        recipe_dirs(tmp_path / "nope")


def test_without_a_folder_only_the_built_ins_are_searched(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert recipe_dirs() == [builtin_dir("recipes")]
    with pytest.raises(PerfsuiteError) as info:
        load_recipe("nope")
    assert "looked in" in str(info.value) and "idle-control" in str(info.value)


def test_run_recipes_option(tmp_path: Path, monkeypatch, capsys) -> None:
    mine = _folder(tmp_path / "mine-recipes")
    monkeypatch.chdir(tmp_path)
    status = perfsuite.cli.main(["run", "mine", "--recipes", str(mine), "--output-dir", str(tmp_path / "out")])
    assert status == 0
    assert list((tmp_path / "out").glob("mine-*.json"))
    assert perfsuite.cli.main(["run", "mine", "--recipes", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.strip().endswith("--recipes: no such directory: " + str(tmp_path / "nope"))
