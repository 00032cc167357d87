"""`perfsuite run --storage/--storage-file/--heap/--gc-freeze` and `perfsuite sweep` on the command line:
the conditions reach the results and the table, and bad input is one line with exit status 2."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from perfsuite import cli

BASIC = "perfsuite.workloads.basic"


@pytest.fixture
def floor_recipe(tmp_path: Path) -> Path:
    path = tmp_path / "floor.toml"
    path.write_text(textwrap.dedent(f"""
        name = "floor"
        samples = 1
        warmup = 0
        isolation = "inline"
        control_windows = 1
        [modes.raw]
        operation = "{BASIC}:fsync_floor"
    """))
    return path


def _one_line_error(capsys: Any, status: int, needle: str) -> None:
    err = capsys.readouterr().err.strip()
    assert status == 2, err
    assert needle in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_run_records_every_condition(tmp_path: Path, floor_recipe: Path, capsys: Any) -> None:
    out = tmp_path / "out"
    status = cli.main(["run", str(floor_recipe), "--storage", "nvme", "--heap", "2e3", "--gc-freeze",
                       "--output-dir", str(out)])
    text = " ".join(capsys.readouterr().out.split())
    assert status == 0
    assert "simulated storage latency: nvme (fio --fdatasync=1" in text and "live heap: 2000 objects" in text
    (path,) = out.glob("floor-*[0-9].json")
    doc = json.loads(path.read_text())
    assert doc["recipe"]["storage"]["name"] == "nvme" and doc["recipe"]["heap"] == 2000
    assert doc["recipe"]["gc"] == "natural" and doc["recipe"]["modes"]["raw"]["freeze_loaded"] is True
    assert doc["modes"]["raw"]["samples"][0]["heap"]["objects"] >= 2000


def test_run_with_a_users_profile_file(tmp_path: Path, floor_recipe: Path, capsys: Any) -> None:
    profile = tmp_path / "laptop.toml"
    profile.write_text(textwrap.dedent("""
        name = "laptop"
        source = "pg_test_fsync on my laptop"
        [operations.fsync]
        kind = "fixed"
        ms = 1.25
        source = "pg_test_fsync fsync 1250 usecs/op"
    """))
    assert cli.main(["run", str(floor_recipe), "--storage-file", str(profile),
                     "--output-dir", str(tmp_path / "o")]) == 0
    assert "simulated storage latency: laptop (pg_test_fsync on my laptop)" in capsys.readouterr().out


@pytest.mark.parametrize(("args", "needle"), [
    (["--storage", "floppy"], "unknown storage profile 'floppy'"),
    (["--storage-file", "/nonexistent/p.toml"], "/nonexistent/p.toml: no such storage profile"),
    (["--storage", "nvme", "--storage-file", "x.toml"], "not both"),
    (["--heap", "lots"], "--heap: expected"),
    (["--heap", "0,1e6"], "`run` takes one size"),
])
def test_run_bad_conditions_are_one_line(tmp_path: Path, floor_recipe: Path, capsys: Any, args: list[str],
                                         needle: str) -> None:
    status = cli.main(["run", str(floor_recipe), *args, "--output-dir", str(tmp_path / "o")])
    _one_line_error(capsys, status, needle)
    assert not (tmp_path / "o").exists()


def test_run_refuses_storage_for_an_operation_that_would_ignore_it(tmp_path: Path, capsys: Any) -> None:
    recipe = tmp_path / "busy.toml"
    recipe.write_text(f'name = "busy"\nsamples = 1\n[modes.b]\noperation = "{BASIC}:busy"\nms = 1\n')
    status = cli.main(["run", str(recipe), "--storage", "hdd", "--output-dir", str(tmp_path / "o")])
    _one_line_error(capsys, status, "modes.b: operation perfsuite.workloads.basic:busy does not apply storage")


def test_resume_refuses_new_conditions(tmp_path: Path, capsys: Any) -> None:
    status = cli.main(["run", "--resume", str(tmp_path / "x.json"), "--storage", "nvme"])
    _one_line_error(capsys, status, "--resume continues the recorded recipe")


@pytest.mark.parametrize(("args", "needle"), [
    (["--storage", "nvme,floppy"], "unknown storage profile 'floppy'"),
    (["--heap", "0,-5"], "--heap"),
    (["--storage", "nvme,,hdd"], "--storage: expected profile names"),
    (["--storage-file", "oops"], "--storage-file: expected NAME=FILE.toml"),
])
def test_sweep_bad_input_is_one_line(tmp_path: Path, floor_recipe: Path, capsys: Any, args: list[str],
                                     needle: str) -> None:
    status = cli.main(["sweep", str(floor_recipe), *args, "--output-dir", str(tmp_path / "o")])
    _one_line_error(capsys, status, needle)


def test_sweep_runs_the_grid_and_prints_its_table(tmp_path: Path, floor_recipe: Path, capsys: Any) -> None:
    status = cli.main(["sweep", str(floor_recipe), "--storage", "nvme,none", "--heap", "0,1e3", "--freeze", "on",
                       "--output-dir", str(tmp_path / "o")])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    out = " ".join(captured.out.split())
    assert "against the 20 ms target" in out and "not measured" in out
    (directory,) = (tmp_path / "o").iterdir()
    docs = sorted(p for p in directory.glob("floor-*.json") if not p.name.endswith(".pyperf.json"))
    assert len(docs) == 4 and (directory / f"{directory.name}.png").is_file()
    last = json.loads(docs[-1].read_text())
    assert last["sweep"]["setting"] == {"index": 3, "storage": None, "heap": 1000, "freeze": True}
    assert last["recipe"]["storage"] is None
