"""The report facade: exactly its public names, of the engine only its phase names, no printing, and `report`
prints the table."""

from __future__ import annotations

import ast
import re
import types
from pathlib import Path
from typing import Any

import pytest

import perfsuite.report
from perfsuite import cli

PACKAGE = Path(perfsuite.report.__file__).parent


def test_all_is_exactly_the_public_names() -> None:
    public = {
        n
        for n in dir(perfsuite.report)
        if not n.startswith("_") and not isinstance(getattr(perfsuite.report, n), types.ModuleType)
    }
    assert set(perfsuite.report.__all__) == public
    assert len(set(perfsuite.report.__all__)) == len(perfsuite.report.__all__)


def test_the_docstring_lists_every_public_name_once_by_concern() -> None:
    """SPEC section 1, public names: ``__all__`` stays sorted (ruff RUF022); the facade's docstring groups the same
    names by concern, and a name added to one and not the other fails here."""
    doc = perfsuite.report.__doc__ or ""
    section = doc.split("Its names by concern", 1)[1]
    groups = re.findall(r"^- ([^:]+): (.*?)[;.]$", re.sub(r"\n  ", " ", section), flags=re.M)
    named = [name for _, names in groups for name in re.findall(r"``(\w+)``", names)]
    assert len(groups) >= 10
    assert sorted(named) == sorted(perfsuite.report.__all__)


def test_report_never_imports_the_engine_and_never_prints() -> None:
    """Of the engine, the report takes one name: its publication phases, ``PHASES`` (E4), declared there once
    (declared once); never a session, never a workload."""
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "perfsuite.engine":
                assert [a.name for a in node.names] == ["PHASES"], path.name
            elif isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(("perfsuite.engine", "perfsuite.workloads")), path.name
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("perfsuite.engine") for a in node.names), path.name
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id != "print", f"{path.name}:{node.lineno} prints"


def test_report_prints_the_run_table_with_the_floor_ratio(
    tmp_path: Path, docs: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    docs.write(tmp_path / "mailbox-delivery-1.json", docs.make())
    docs.write(tmp_path / "fsync-floor-1.json", docs.floor(epoch=1_795_000_050.0))
    assert cli.main(["report", str(tmp_path / "mailbox-delivery-1.json")]) == 0
    out = capsys.readouterr().out
    assert "mailbox-delivery: process, gc collect-before, heartbeat 5 ms (medians; times in ms)" in out
    assert "ack/fsync floor" in out and "fsync floor 1." in out
    assert "(median ack of fsync-floor-1.json, raw-os; column ack/fsync floor)" in out
    (sync,) = [ln for ln in out.splitlines() if ln.strip().startswith("sync ")]
    assert "missed 6/6, 0 GC" in sync and sync.split()[7].endswith("x")  # ack / floor, e.g. 46.8x
    assert sync.split()[4] == "n/m" and "n/m: not measured" in out  # an older document: no loop stalls
    assert "ack/pub floor" not in out  # nor a publication floor
    assert "idle control" in out and "noise floor" in out


def test_report_names_both_floors_stalls_and_references(
    tmp_path: Path, docs: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """M9, the floors and reference modes in the table: the longest loop callback, the acknowledgement against both
    floors by name, and a reference mode shown as "reference: why", never as missed."""
    monkeypatch.setenv("COLUMNS", "200")  # wide enough that no mode name is shortened (one console for every command)
    docs.write(tmp_path / "mailbox-delivery-1.json", docs.make(modes=docs.new_modes, mode_order="random"))
    docs.write(tmp_path / "fsync-floor-1.json", docs.floor(epoch=1_795_000_050.0))
    assert cli.main(["report", str(tmp_path / "mailbox-delivery-1.json")]) == 0
    out = capsys.readouterr().out
    header = next(ln for ln in out.splitlines() if ln.strip().startswith("mode "))
    assert header.split()[:7] == ["mode", "n", "max", "gap", "gap", "range", "stall"]
    above = out.splitlines()[out.splitlines().index(header) - 1]  # the ratio headers take two lines
    assert above.split() == ["ack/fsync", "ack/pub"] and "ack floor floor GC verdict" in " ".join(header.split())
    assert "publication floor 2." in out
    assert "(median ack of mode publication-floor; column ack/pub floor)" in out
    (sync,) = [ln for ln in out.splitlines() if ln.strip().startswith("sync ")]
    (floor,) = [ln for ln in out.splitlines()
                if ln.strip().startswith("publication-floor ") and " is a reference: " not in ln]
    assert float(sync.split()[4]) > 60 and sync.split()[7].endswith("x") and sync.split()[8].endswith("x")
    # the verdict cell says "reference"; its reason is under the table (a sentence made the table too wide)
    assert floor.split()[-1] == "reference" and "missed" not in floor and "met" not in floor
    assert "publication-floor is a reference: the publication floor" in out
    assert "n/m" not in sync


def test_report_of_a_real_run_matches_what_run_printed(real_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", str(real_run)]) == 0
    out = capsys.readouterr().out
    for recipe in ("idle-control", "fsync-floor"):
        assert f"{recipe}: inline, gc collect-before, heartbeat 5 ms (medians; times in ms)" in out
    assert "met <= 20 ms" in out and "ack/fsync floor" not in out  # neither recipe is set against the floor


def test_report_of_a_missing_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"perfsuite: error: {tmp_path / 'missing.json'}: no such results file or directory"]


def test_report_of_a_run_with_both_floors_fits_a_ci_log(
    tmp_path: Path, docs: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One console: piped (100 columns), a table with both floor columns and a reference mode wraps no cell:
    the ratio headers take two lines and a reference's reason is printed under the table."""
    monkeypatch.delenv("COLUMNS", raising=False)
    docs.write(tmp_path / "mailbox-delivery-1.json", docs.make(modes=docs.new_modes, mode_order="random"))
    docs.write(tmp_path / "fsync-floor-1.json", docs.floor(epoch=1_795_000_050.0))
    assert cli.main(["report", str(tmp_path / "mailbox-delivery-1.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert any(line.startswith("publication-floor is a reference: ") for line in lines)
