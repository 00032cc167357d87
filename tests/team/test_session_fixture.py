"""U and M6: a fixture from the team's own data. A recipe names a real session directory of theirs
(``session = "PATH"``, relative to the recipe file), or ``--session PATH`` gives one; every sample works on a
private ``cp -a``-style copy (metadata and symlinks kept); its size, file count and digest are recorded; a
directory that changes between samples is refused in one line."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.harness import ModeSpec, Recipe, load_recipe, run_recipe
from perfsuite.workloads.fixtures import content_digest, resolve_fixture
from tests.team.teamrepo import perfsuite


def _document(directory: Path) -> dict:
    (path,) = [p for p in directory.glob("*.json") if not p.name.endswith("pyperf.json")]
    return json.loads(path.read_text())


def test_a_recipe_names_the_teams_session_relative_to_its_file(team_repo: Path, tmp_path: Path) -> None:
    session = team_repo / "data" / "session"
    before = content_digest(session, normalize=False)
    ran = perfsuite(tmp_path, "run", str(team_repo / "recipes" / "commit-session.toml"), "--output-dir",
                    str(tmp_path / "out"), env={"PYTHONPATH": f"{Path(__file__).resolve().parents[2]}:{team_repo}"})
    assert ran.returncode == 0, ran.stderr
    doc = _document(tmp_path / "out")
    fixture = doc["fixture"]
    assert fixture["session"] == str(session.resolve()) and fixture["kind"] == "directory"
    # regular files as `find -type f` counts them (the symlink is in the digest, not the count)
    assert (fixture["files"], fixture["digest"]) == (2, before)
    assert fixture["bytes"] == sum(p.stat().st_size for p in session.rglob("*") if p.is_file() and not p.is_symlink())
    assert doc["recipe"]["session"] == str(session.resolve())
    samples = doc["modes"]["commit"]["samples"]
    assert [s["metrics"]["link_kept"] for s in samples] == [1, 1]  # every private copy kept the symlink
    assert content_digest(session, normalize=False) == before  # the team's data was never written


def test_session_on_the_command_line_gives_a_recipe_without_fixture_its_fixture(team_repo: Path) -> None:
    """A bad input once passed silently: ``--session`` was ignored for a recipe without a ``fixture`` key."""
    ran = perfsuite(team_repo, "run", "commit", "--session", "data/session", "--output-dir", "results/o")
    assert ran.returncode == 0, ran.stderr
    doc = _document(team_repo / "results" / "o")
    assert doc["fixture"]["source"] == "session" and doc["fixture"]["files"] == 2
    assert [s["metrics"]["link_kept"] for s in doc["modes"]["commit"]["samples"]] == [1, 1]


def test_a_missing_session_named_by_a_recipe_is_one_line(team_repo: Path) -> None:
    recipe = team_repo / "recipes" / "commit-session.toml"
    recipe.write_text(recipe.read_text().replace("../data/session", "../data/nowhere"))
    with pytest.raises(PerfsuiteError, match=r"commit-session.toml: session: no such directory: \.\./data/nowhere"):
        load_recipe(recipe)
    ran = perfsuite(team_repo, "run", "commit-session")
    assert ran.returncode == 2 and ran.stderr.count("\n") == 1 and "session: no such directory" in ran.stderr


CHANGER = textwrap.dedent("""
    import os

    class Append:
        '''Appends to the ORIGINAL session while the run goes on: what a live program would do.'''
        def __init__(self, ctx):
            with open(os.environ["TEAM_SESSION_FILE"], "a") as fh:
                fh.write("more\\n")

        def submit(self, ack):
            ack(None)
""")


def test_a_session_that_changes_between_samples_is_refused_in_one_line(
        team_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = team_repo / "data" / "session"
    (tmp_path / "changer_ops.py").write_text(CHANGER)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TEAM_SESSION_FILE", str(session / "transcript.jsonl"))
    fixture, info = resolve_fixture(None, session)
    recipe = Recipe(name="changer", modes=(ModeSpec("append", "changer_ops:Append"),), samples=3, warmup=0,
                    isolation="inline", settle_ms=5.0, sync_after_copy=False)
    with pytest.raises(PerfsuiteError) as caught:
        run_recipe(recipe, output=tmp_path / "out" / "changer.json", fixture=fixture, fixture_info=info)
    line = str(caught.value)
    assert "\n" not in line
    assert f"fixture {session.resolve()} changed before append sample 1: modified transcript.jsonl" in line
    assert "refusing to measure on a moving directory" in line
    doc = json.loads((tmp_path / "out" / "changer.json").read_text())
    assert doc["status"] == "failed" and len(doc["modes"]["append"]["samples"]) == 1  # the first one is kept


def test_any_non_empty_directory_of_the_team_is_a_session(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "store.sqlite").write_bytes(b"\0" * 100)
    _, info = resolve_fixture(None, tmp_path / "s")
    assert (info["kind"], info["files"], info["bytes"]) == ("directory", 1, 100)
