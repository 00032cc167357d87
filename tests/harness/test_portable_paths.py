"""Results record paths relative to the project, never this machine's absolute ones (results portable between machines);
documents written before that (absolute paths) still load everywhere."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import pytest

from perfsuite._paths import portable_path
from perfsuite.harness import ModeSpec, Recipe, load_recipe, run_recipe
from perfsuite.report import evidence_for, read_result, summary_table

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "results" / "baseline"


def test_portable_path_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    (project / ".venv" / "bin").mkdir(parents=True)
    monkeypatch.chdir(project)
    assert portable_path(project / "recipes" / "x.toml") == "recipes/x.toml"
    assert portable_path(project / ".venv" / "bin" / "python3") == ".venv/bin/python3"
    assert portable_path(project) == "."
    assert portable_path("relative/stays.toml") == "relative/stays.toml"
    assert portable_path(None) is None
    assert portable_path("/nowhere/else/python3") == "/nowhere/else/python3"  # not ours to hide
    assert portable_path("/h/u/.cache/x", project="/p", home="/h/u", tmp="/t") == "~/.cache/x"
    assert portable_path("/t/perfsuite-run-1", project="/p", home="/h/u", tmp="/t") == "<tmp>/perfsuite-run-1"
    assert portable_path("/p/recipes/a.toml", project="/p", home="/h/u", tmp="/t") == "recipes/a.toml"


def test_a_new_document_holds_no_absolute_path_of_ours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    fixture = tmp_path / "fixture"
    fixture.mkdir()
    (fixture / "f").write_text("x")
    recipe = Recipe(name="p", modes=(ModeSpec("idle", "perfsuite.workloads.basic:idle"),), samples=1, warmup=0,
                    isolation="inline", control_windows=1, settle_ms=0.0, path=load_recipe("idle-control").path)
    result = run_recipe(recipe, output=tmp_path / "out" / "p.json", fixture=fixture,
                        work_root=Path(tempfile.gettempdir()))
    doc = json.loads((tmp_path / "out" / "p.json").read_text())
    assert doc["fixture"]["path"] == "fixture"
    assert doc["environment"]["work_dir"]["path"].startswith("<tmp>/perfsuite-run-")
    assert doc["environment"]["python"]["executable"] == portable_path(sys.executable)
    assert result.document["recipe"]["path"] == load_recipe("idle-control").path
    assert not os.path.isabs(load_recipe("idle-control").path)


def test_the_committed_documents_hold_no_absolute_path_of_the_machine() -> None:
    for path in sorted((ROOT / "results").rglob("*.json")):
        if path.name.endswith(".pyperf.json"):
            continue
        doc = json.loads(path.read_text())
        fields = [doc["recipe"].get("path"), doc["environment"]["python"]["executable"],
                  doc["environment"]["work_dir"]["path"], (doc.get("fixture") or {}).get("path")]
        assert not [f for f in fields if isinstance(f, str) and os.path.isabs(f)], path


def test_old_documents_with_absolute_paths_still_load(tmp_path: Path) -> None:
    source = next(p for p in BASELINE.glob("mailbox-delivery-*.json") if not p.name.endswith(".pyperf.json"))
    doc = json.loads(source.read_text())
    doc["recipe"]["path"] = "/work/main/recipes/mailbox-delivery.toml"
    doc["environment"]["python"]["executable"] = "/work/main/.venv/bin/python3"
    doc["environment"]["work_dir"]["path"] = "/tmp/perfsuite-run-mhyti3kj"
    doc["fixture"]["path"] = "/root/.cache/perfsuite/fixtures/synthetic-6000-2cbeedf47e86/synthetic-6000"
    old = tmp_path / source.name
    old.write_text(json.dumps(doc))
    result = read_result(old)  # validated against the schema
    assert result.recipe == "mailbox-delivery"
    assert summary_table(result.data) is not None
    assert "mailbox-delivery" in evidence_for(old).markdown or evidence_for(old).markdown
    assert Recipe.from_dict(doc["recipe"]).path == "/work/main/recipes/mailbox-delivery.toml"
