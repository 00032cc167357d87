"""`perfsuite ab BASE [HEAD]` on a scratch copy of the project (the CI gate, SPEC 8): a planted deterministic cost
(an extra fsync per barrier) committed on top of the base fails the gate; each side imported its own engine;
the output is a pair of documents plus a pairing that compare, report, evidence and the dashboard read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema

from perfsuite.cli._formats import output_schema

from .conftest import FSYNC_FILE, FSYNC_OLD, commit, edit, env_for, git, plant_fsync

TINY = ["-r", "ci-tiny", "--samples", "2", "--warmup", "0", "--allocation-samples", "1", "--gate", "costs"]


def _docs(out: Path) -> dict[str, dict[str, Any]]:
    pairing = json.loads((out / "ab.json").read_text())
    (entry,) = pairing["recipes"]
    return {side: json.loads((out / entry[side]).read_text()) for side in ("base", "head")}


def test_a_planted_fsync_fails_the_gate_and_every_reader_reads_the_pair(scratch_repo: Path, run_perfsuite: Any,
                                                                         tmp_path: Path) -> None:
    base_commit = git(scratch_repo, "rev-parse", "HEAD")
    planted = plant_fsync(scratch_repo)
    out = tmp_path / "ab"
    proc = run_perfsuite(scratch_repo, "ab", "HEAD~1", *TINY, "--output-dir", str(out), "--seed", "7", "--explain")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith("perfsuite ab: ") and " regression" in first, first
    assert "ci-tiny/barrier metrics.fsyncs +5 (2.00x)" in first, first
    # --explain: why each cost passed or gated, one line each (the count is steady: gated exactly)
    assert ("  ci-tiny/barrier metrics.fsyncs: median 5 -> 10 per operation (+5, steady samples gate exactly on "
            "their median, tolerance 1): regressed") in proc.stdout.splitlines(), proc.stdout
    assert "costs-only gate" in first and "Traceback" not in proc.stderr
    # the pull request's comment and the job summary name the command that gated, with the same verdict
    for name in ("summary.md", "compare.md"):
        head = (out / name).read_text().splitlines()[0]
        assert head.startswith("### perfsuite ab: ") and "metrics.fsyncs +5" in head, head
    docs = _docs(out)
    assert docs["base"]["environment"]["git"] == {"commit": base_commit, "dirty": False}
    assert docs["head"]["environment"]["git"] == {"commit": planted, "dirty": False}
    base_engine = docs["base"]["variant"]["code"]["imported"]["perfsuite.engine"]
    head_engine = docs["head"]["variant"]["code"]["imported"]["perfsuite.engine"]
    assert head_engine == str(scratch_repo / "perfsuite" / "engine" / "__init__.py")
    assert "perfsuite-ab-" in base_engine and not base_engine.startswith(str(scratch_repo))  # a worktree
    assert docs["base"]["variant"]["seed"] == docs["head"]["variant"]["seed"] == 7
    fsyncs = {side: [s["metrics"]["fsyncs"] for s in doc["modes"]["barrier"]["samples"]]
              for side, doc in docs.items()}
    assert fsyncs == {"base": [5, 5], "head": [10, 10]}
    assert git(scratch_repo, "worktree", "list").count("\n") == 0  # the temporary worktree is gone
    # the pairing and the documents are what the other commands read
    same = run_perfsuite(scratch_repo, "compare", str(out))  # the pairing's own thresholds and gate
    assert same.returncode == 1 and same.stdout.splitlines()[0].replace("perfsuite compare:", "perfsuite ab:") == first
    again = run_perfsuite(scratch_repo, "compare", str(out / "base"), str(out / "head"), "--gate", "costs")
    assert again.returncode == 1 and "metrics.fsyncs" in again.stdout.splitlines()[0]
    assert run_perfsuite(scratch_repo, "report", str(out)).returncode == 0
    pair = json.loads((out / "ab.json").read_text())["recipes"][0]
    evidence = run_perfsuite(scratch_repo, "evidence", str(out / pair["head"]), "--baseline", str(out / pair["base"]))
    assert evidence.returncode == 0 and "Against the baseline" in evidence.stdout
    site = run_perfsuite(scratch_repo, "dashboard", str(out), "-o", str(tmp_path / "site"))
    assert site.returncode == 0 and (tmp_path / "site" / "index.html").is_file()


def test_head_defaults_to_the_working_tree_with_its_uncommitted_changes(scratch_repo: Path, run_perfsuite: Any,
                                                                          tmp_path: Path) -> None:
    planted = plant_fsync(scratch_repo)
    edit(scratch_repo, FSYNC_FILE, FSYNC_OLD + FSYNC_OLD, FSYNC_OLD)  # the fix, not committed yet
    out = tmp_path / "ab"
    proc = run_perfsuite(scratch_repo, "ab", "HEAD", *TINY, "--output-dir", str(out), "--format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # --format json (main's output convention): one document on stdout, valid against the packaged schema
    document = json.loads(proc.stdout)
    jsonschema.Draft202012Validator(output_schema()).validate(document)
    assert document["command"] == "ab" and document["exit_status"] == 0
    assert document["verdict"].startswith("no regression")
    (fsync,) = [c for c in document["changes"] if c["metric"] == "metrics.fsyncs"]
    assert fsync["kind"] == "cost" and fsync["status"] == "improved" and fsync["new"]["median"] == 5
    assert "the working tree" in proc.stderr and "Traceback" not in proc.stderr  # the closing line: stderr
    docs = _docs(out)
    assert docs["head"]["environment"]["git"] == {"commit": planted, "dirty": True}
    assert [s["metrics"]["fsyncs"] for s in docs["head"]["modes"]["barrier"]["samples"]] == [5, 5]


def test_a_base_whose_engine_lacks_a_new_name_runs_with_its_own_operations(scratch_repo: Path, run_perfsuite: Any,
                                                                             tmp_path: Path) -> None:
    edit(scratch_repo, "perfsuite/engine/__init__.py", "__all__ = [\n",
         'NEW_ENGINE_NAME = 1\n\n__all__ = [\n    "NEW_ENGINE_NAME",\n')
    edit(scratch_repo, "perfsuite/workloads/engine.py", "from perfsuite.engine import (\n",
         "from perfsuite.engine import NEW_ENGINE_NAME  # noqa: F401\nfrom perfsuite.engine import (\n")
    commit(scratch_repo, "HEAD's operations need a name BASE's engine does not have")
    out = tmp_path / "ab"
    proc = run_perfsuite(scratch_repo, "ab", "HEAD~1", *TINY, "--output-dir", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[0]
    assert "BASE ran with its own operations" in first and "NEW_ENGINE_NAME" in first
    docs = _docs(out)
    assert set(docs["base"]["variant"]["code"]["imported"]) == {"perfsuite.engine", "perfsuite.workloads"}
    assert set(docs["head"]["variant"]["code"]["imported"]) == {"perfsuite.engine"}


def test_unusable_input_is_one_line_and_exit_2(scratch_repo: Path, run_perfsuite: Any, tmp_path: Path) -> None:
    edit(scratch_repo, "pyproject.toml", '    "pyperf>=2.6",',
         '    "left-pad>=1",\n    "pyperf>=2.6",')
    commit(scratch_repo, "a new dependency")
    cases = [
        (["ab", "no-such-rev", *TINY], ("unknown revision 'no-such-rev'",)),
        # the revisions' dependencies differ: HEAD's environment cannot be built (no index, no such wheel);
        # one run (it builds an environment), its one line holding both
        (["ab", "HEAD~1", *TINY, "-q"], ("HEAD the working tree", "cannot install left-pad>=1: ")),
        (["ab", "HEAD", "-r", "no-such-recipe"], ("unknown recipe 'no-such-recipe'",)),
        (["ab", "HEAD", *TINY, "--output-dir", str(scratch_repo / "recipes")], ("not an empty directory",)),
        (["ab", "HEAD", *TINY, "--factor", "0.9"], ("--factor above 1",)),  # said before measuring, not after
    ]
    offline = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path / "no-wheels"), "PERFSUITE_CACHE": str(tmp_path)}
    for args, fragments in cases:
        proc = run_perfsuite(scratch_repo, *args, env=offline)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 2 and len(lines) == 1, (args, proc.stderr)
        assert all(fragment in lines[0] for fragment in fragments), (args, proc.stderr)
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    proc = subprocess.run([sys.executable, "-m", "perfsuite", "ab", "HEAD", *TINY], cwd=outside,
                          env=env_for(scratch_repo), capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "not in a git repository" in proc.stderr


def test_the_default_set_leaves_out_recipes_that_measure_only_the_machine() -> None:
    from perfsuite.ab._run import _code_recipes
    from perfsuite.harness import load_recipe

    recipes = [load_recipe(n) for n in ("idle-control", "fsync-floor", "diagnostic-append")]
    kept, skipped = _code_recipes(recipes, ("perfsuite.engine",))  # what pyproject.toml declares
    assert [r.name for r in kept] == ["diagnostic-append"] and skipped == ["idle-control", "fsync-floor"]
    # they import the engine (its storage delay model, M10) but declare they measure the machine
    from perfsuite.workloads import basic

    assert basic.idle.measures == basic.fsync_floor.measures == "machine"
