"""U, the measured commit in every result: results record the MEASURED repository (a team's own, outside perfsuite),
apart from perfsuite's own checkout; evidence, history, the store and the dashboard name its commit."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.report import Result
from tests.team.teamrepo import SOURCE, commit_all, git, perfsuite

try:  # the provenance names; the end-to-end tests below run (and fail) without them, on the code before it
    from perfsuite.harness import CI_VARIABLES, measured_repository
except ImportError:  # pragma: no cover - the old code
    CI_VARIABLES, measured_repository = (("github", "GITHUB_SHA", ("GITHUB_REF_NAME",)),), None


def _documents(directory: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(directory.rglob("*.json")) if not p.name.endswith("pyperf.json")]


def test_the_measured_repository_is_the_working_directorys(team_repo: Path) -> None:
    head = git(team_repo, "rev-parse", "HEAD")
    got = measured_repository(team_repo, environ={})
    assert got is not None
    assert (got["commit"], got["dirty"], got["branch"], got["source"]) == (head, False, "main", "git")
    (team_repo / "untracked.txt").write_text("x")  # untracked files are not a change to the measured code
    assert measured_repository(team_repo, environ={})["dirty"] is False
    (team_repo / "myruntime" / "store.py").write_text("# edited\n")
    assert measured_repository(team_repo / "myruntime", environ={})["dirty"] is True  # from a subdirectory too


def test_a_detached_ci_checkout_takes_its_branch_from_the_ci(team_repo: Path) -> None:
    head = git(team_repo, "rev-parse", "HEAD")
    git(team_repo, "checkout", "-q", "--detach")
    got = measured_repository(team_repo, environ={"GITHUB_SHA": head, "GITHUB_REF_NAME": "feature/x"})
    assert (got["commit"], got["branch"], got["source"]) == (head, "feature/x", "git")
    assert got["ci"] == {"provider": "github", "variable": "GITHUB_SHA", "commit": head, "branch": "feature/x"}


@pytest.mark.parametrize(("provider", "variable", "branches"), CI_VARIABLES)
def test_without_git_the_ci_variables_name_the_commit(tmp_path: Path, provider: str, variable: str,
                                                      branches: tuple[str, ...]) -> None:
    sha = "ab" * 20
    got = measured_repository(tmp_path, environ={variable: sha.upper(), branches[-1]: "refs/heads/release"})
    assert (got["commit"], got["branch"], got["source"], got["dirty"]) == (sha, "release", f"ci:{provider}", None)


def test_nothing_known_is_none_never_perfsuites_own_commit(tmp_path: Path) -> None:
    assert measured_repository(tmp_path, environ={}) is None


def test_the_command_line_and_the_environment_override(team_repo: Path, tmp_path: Path) -> None:
    head = git(team_repo, "rev-parse", "HEAD")
    prefix = measured_repository(team_repo, commit=head[:8].upper(), environ={})
    assert (prefix["commit"], prefix["dirty"], prefix["source"]) == (head, False, "option")  # the checkout's state
    other = measured_repository(team_repo, commit="1234abcd", branch="rel", environ={})
    assert (other["commit"], other["dirty"], other["branch"], other["source"]) == ("1234abcd", None, "rel", "option")
    env = measured_repository(tmp_path, environ={"PERFSUITE_COMMIT": "beef" * 10, "PERFSUITE_BRANCH": "b"})
    assert (env["commit"], env["branch"], env["source"]) == ("beef" * 10, "b", "environment")
    with pytest.raises(PerfsuiteError, match="PERFSUITE_COMMIT: expected a commit id"):
        measured_repository(tmp_path, environ={"PERFSUITE_COMMIT": "main"})


def test_an_old_document_without_the_field_reads_its_git_field(tmp_path: Path) -> None:
    old = {"environment": {"git": {"commit": "c0ffee" * 6 + "c0ff", "dirty": True}}}
    assert (Result(None, old).commit, Result(None, old).dirty, Result(None, old).branch) == ("c0ffee" * 6 + "c0ff",
                                                                                              True, None)
    new = {"environment": {"git": {"commit": "1" * 40, "dirty": False}, "measured": None}}
    assert Result(None, new).commit is None  # a new document that knows nothing does not fall back


def test_run_evidence_history_store_and_dashboard_name_the_teams_commit(team_repo: Path) -> None:
    """The acceptance point: a team's repository outside perfsuite, measured twice at two commits."""
    pytest.importorskip("scipy.stats")  # the dashboard's comparison (the report extra)
    first = git(team_repo, "rev-parse", "HEAD")
    ran = perfsuite(team_repo, "run", "commit", "--output-dir", "results/local")
    assert ran.returncode == 0, ran.stderr
    (doc_path,) = [p for p in (team_repo / "results" / "local").glob("commit-*.json") if "pyperf" not in p.name]
    evidence = perfsuite(team_repo, "evidence", str(doc_path))
    assert evidence.returncode == 0, evidence.stderr
    # before U's provenance this named perfsuite's own checkout (or `unknown` from a wheel)
    measured = f"Measured at commit `{first[:7]}` of the measured repository on branch `main` with perfsuite `"
    assert measured in evidence.stdout
    (team_repo / "NOTES.md").write_text("a second commit\n")
    second = commit_all(team_repo, "notes")
    ran = perfsuite(team_repo, "run", "commit", "--output-dir", "results/local")
    assert ran.returncode == 0, ran.stderr
    docs = _documents(team_repo / "results" / "local")
    measured = sorted((d["environment"]["measured"]["commit"], d["environment"]["measured"]["branch"]) for d in docs)
    assert measured == sorted([(first, "main"), (second, "main")])
    ours = subprocess.run(["git", "-C", str(SOURCE), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    for doc in docs:  # perfsuite's own checkout is recorded apart, never as the measured commit
        assert doc["environment"]["git"]["commit"] in (first, second)
        assert (doc["environment"]["perfsuite_git"] or {}).get("commit") in (ours or None, None)
    store = perfsuite(team_repo, "store", "ingest", "results/local", "--store", "results/s.sqlite3")
    assert store.returncode == 0, store.stderr
    site = perfsuite(team_repo, "dashboard", "results/s.sqlite3", "-o", "results/site")
    assert site.returncode == 0, site.stderr
    index = (team_repo / "results" / "site" / "index.html").read_text()
    assert f"{first[:7]}</code>" in index and f"{second[:7]}</code>" in index and "unknown" not in index
    report = perfsuite(team_repo, "report", "results/local", "--format", "json")
    assert report.returncode == 0, report.stderr
    assert {r["commit"] for r in json.loads(report.stdout)["results"]} == {first, second}


def test_run_commit_and_branch_options(team_repo: Path) -> None:
    bad = perfsuite(team_repo, "run", "commit", "--commit", "not-a-sha")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "expected a commit id" in bad.stderr
    ran = perfsuite(team_repo, "run", "commit", "--commit", "ABCDEF1234", "--branch", "release/2",
                    "--output-dir", "results/o")
    assert ran.returncode == 0, ran.stderr
    (doc,) = _documents(team_repo / "results" / "o")
    assert doc["environment"]["measured"]["commit"] == "abcdef1234"
    assert doc["environment"]["measured"]["branch"] == "release/2"
    assert doc["environment"]["measured"]["source"] == "option"
    from_ci = perfsuite(team_repo, "run", "commit", "--output-dir", "results/ci",
                        env={"GITHUB_SHA": "f" * 40, "GITHUB_REF_NAME": "main"})
    assert from_ci.returncode == 0, from_ci.stderr
    (doc,) = _documents(team_repo / "results" / "ci")
    assert doc["environment"]["measured"]["source"] == "git"  # the checkout itself wins: it is what ran
    assert doc["environment"]["measured"]["ci"]["commit"] == "f" * 40
