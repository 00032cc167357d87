"""`perfsuite ab` on a user's own git repository outside perfsuite (U).

The repository (:mod:`.userrepo`) holds a JSONL transcript store, its own operation and recipe; perfsuite runs
as an installed tool from that repository. Plants are deterministic costs (an extra fsync, counted by the
store), so the verdicts never depend on timing; the gate is costs-only and the sample counts tiny.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from perfsuite.ab._envs import find_uv

from .userrepo import commit_all, depend_on_tinydep, git, make_repo, perfsuite, plant, pyproject, tinydep, wheel, write

TINY = ["--samples", "2", "--warmup", "0", "--gate", "costs", "-r", "commit"]


def _pairing(out: Path) -> dict[str, Any]:
    return json.loads((out / "ab.json").read_text())


def _docs(out: Path) -> dict[str, dict[str, Any]]:
    (entry,) = _pairing(out)["recipes"]
    return {side: json.loads((out / entry[side]).read_text()) for side in ("base", "head")}


def _errors(proc: Any) -> list[str]:
    return [ln for ln in proc.stderr.splitlines() if ln.startswith("perfsuite: error:")]


def test_a_planted_fsync_fails_the_gate_of_a_users_repository(tmp_path: Path) -> None:
    repo = tmp_path / "myruntime"
    base = make_repo(repo)
    planted = plant(repo, "fsync")
    out = tmp_path / "ab"
    proc = perfsuite(repo, "ab", "HEAD~1", *TINY, "--output-dir", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[0]
    assert "1 regression: commit/commit metrics.fsyncs +1 (2.00x)" in first, first
    assert "Traceback" not in proc.stderr
    docs = _docs(out)
    assert docs["base"]["environment"]["git"] == {"commit": base, "dirty": False}
    assert docs["head"]["environment"]["git"] == {"commit": planted, "dirty": False}
    base_code = docs["base"]["variant"]["code"]["imported"]["myruntime"]
    head_code = docs["head"]["variant"]["code"]["imported"]["myruntime"]
    assert "perfsuite-ab-" in base_code and not base_code.startswith(str(repo))  # BASE's own worktree
    assert head_code == str(repo / "myruntime" / "__init__.py")
    fsyncs = {side: [s["metrics"]["fsyncs"] for s in doc["modes"]["commit"]["samples"]] for side, doc in docs.items()}
    assert fsyncs == {"base": [1, 1], "head": [2, 2]}
    pairing = _pairing(out)
    assert pairing["code_under_test"]["packages"] == ["myruntime"]
    assert "declared in" in pairing["code_under_test"]["how"]
    assert pairing["flags"] == []  # nothing about perfsuite's own tree: it is not part of this repository
    assert git(repo, "worktree", "list").count("\n") == 0
    # A/A: the same revision on both sides
    same = perfsuite(repo, "ab", "HEAD", "HEAD", *TINY, "--output-dir", str(tmp_path / "aa"))
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.startswith("perfsuite ab: no regression")


def test_the_default_code_under_test_is_what_the_operations_import_of_the_repository(tmp_path: Path) -> None:
    repo = tmp_path / "myruntime"
    make_repo(repo, code_under_test=None)
    plant(repo, "fsync")
    out = tmp_path / "ab"
    proc = perfsuite(repo, "ab", "HEAD~1", *TINY, "--output-dir", str(out))  # -r commit: ./recipes/commit.toml
    assert proc.returncode == 1 and "metrics.fsyncs +1" in proc.stdout.splitlines()[0], proc.stdout + proc.stderr
    code = _pairing(out)["code_under_test"]
    assert code["packages"] == ["myruntime"] and "the operations import" in code["how"]  # not benchmarks
    # without -r: the repository's own recipes (./recipes), not perfsuite's quick set
    default = perfsuite(repo, "ab", "HEAD~1", "--samples", "2", "--warmup", "0", "--gate", "costs",
                        "--output-dir", str(tmp_path / "default"))
    assert default.returncode == 1, default.stdout + default.stderr
    assert [e["recipe"] for e in _pairing(tmp_path / "default")["recipes"]] == ["commit"]


def test_operations_that_need_a_new_name_fall_back_to_bases_own_operations(tmp_path: Path) -> None:
    repo = tmp_path / "myruntime"
    make_repo(repo)
    init = repo / "myruntime" / "__init__.py"
    init.write_text(init.read_text() + "\nNEW_NAME = 1\n")
    ops = repo / "benchmarks" / "ops.py"
    ops.write_text(ops.read_text().replace("from myruntime import TranscriptStore",
                                           "from myruntime import NEW_NAME, TranscriptStore  # noqa: F401"))
    commit_all(repo, "the operations use a name BASE's code lacks")
    out = tmp_path / "ab"
    proc = perfsuite(repo, "ab", "HEAD~1", *TINY, "--output-dir", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "BASE ran with its own operations (benchmarks from HEAD~1" in proc.stdout
    docs = _docs(out)
    assert set(docs["base"]["variant"]["code"]["imported"]) == {"myruntime", "benchmarks"}
    assert set(docs["head"]["variant"]["code"]["imported"]) == {"myruntime"}


def test_a_base_without_the_code_under_test_is_one_line_naming_the_reason_once(tmp_path: Path) -> None:
    repo = tmp_path / "myruntime"
    make_repo(repo)
    write(repo, {"extra/__init__.py": "VALUE = 1\n",
                 "pyproject.toml": pyproject(code_under_test=["myruntime", "extra"])})
    commit_all(repo, "a second package under test")
    proc = perfsuite(repo, "ab", "HEAD~1", *TINY, "--output-dir", str(tmp_path / "ab"))
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and line.startswith("perfsuite: error: BASE HEAD~1 ("), proc.stderr
    assert line.count("extra: no package at") == 1, line  # the reason once, not once per attempt
    assert "perfsuite.engine" not in line


@pytest.mark.parametrize(("table", "fragment"), [
    ("[tool.perfsuite]\ncode-under-tset = ['myruntime']\n",
     "[tool.perfsuite]: unknown key 'code-under-tset' (known: code-under-test, recipes)"),
    ("[tool.perfsuite]\ncode-under-test = 'myruntime'\n", "code-under-test: expected a non-empty list of names"),
    ("[tool.perfsuite]\ncode-under-test = ['nosuchpkg']\n", "code under test nosuchpkg: no such package"),
])
def test_a_bad_tool_perfsuite_table_is_one_line(tmp_path: Path, table: str, fragment: str) -> None:
    repo = tmp_path / "myruntime"
    make_repo(repo, code_under_test=None)
    (repo / "pyproject.toml").write_text(pyproject(code_under_test=None) + "\n" + table)
    commit_all(repo, "bad table")
    proc = perfsuite(repo, "ab", "HEAD", "HEAD", *TINY, "--output-dir", str(tmp_path / "ab"))
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and fragment in lines[0], proc.stderr


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_a_dependency_bump_is_measured_in_an_environment_per_revision(tmp_path: Path, installer: str) -> None:
    if installer == "uv" and find_uv() is None:
        pytest.skip("uv is not installed (the test extra installs it; the pip case covers the fallback)")
    wheels = tmp_path / "wheels"
    for version in ("1.0", "2.0"):
        wheel(wheels, "tinydep", version, tinydep(version))  # a local dependency, two versions: no network
    offline = {"PIP_FIND_LINKS": str(wheels), "PIP_NO_INDEX": "1", "PERFSUITE_CACHE": str(tmp_path / "cache")}
    repo = tmp_path / "myruntime"
    make_repo(repo)
    depend_on_tinydep(repo, "tinydep==1.0")
    depend_on_tinydep(repo, "tinydep==2.0")  # the bump: 2.0 syncs twice
    out = tmp_path / "ab"
    args = ["ab", "HEAD~1", *TINY, "--installer", installer, "--output-dir", str(out)]
    proc = perfsuite(repo, *args, env=offline)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "commit/commit metrics.fsyncs +1 (2.00x)" in proc.stdout.splitlines()[0]
    assert "building the environment of BASE HEAD~1 (" in proc.stderr
    assert f"with {installer}: tinydep==1.0 ..." in proc.stderr
    pairing = _pairing(out)
    envs = {side: pairing[side]["environment"] for side in ("base", "head")}
    assert envs["base"]["requirements"] == ["tinydep==1.0"] and envs["base"]["installed"] == {"tinydep": "1.0"}
    assert envs["head"]["requirements"] == ["tinydep==2.0"] and envs["head"]["installed"] == {"tinydep": "2.0"}
    assert envs["base"]["digest"] != envs["head"]["digest"] and not envs["base"]["cached"]
    assert all(e["installer"] == installer and e["build_seconds"] > 0 for e in envs.values())
    assert all(Path(e["path"]).is_relative_to(tmp_path / "cache" / "envs") for e in envs.values())  # outside git
    assert any("an environment per revision (their dependencies differ" in n for n in pairing["notes"])
    docs = _docs(out)
    assert docs["head"]["variant"]["environment"]["installed"] == {"tinydep": "2.0"}
    assert [s["metrics"]["fsyncs"] for s in docs["base"]["modes"]["commit"]["samples"]] == [1, 1]
    # the second run reuses both environments (cached by the digest of the specification), and its
    # instruction pass runs each revision's operation under valgrind in that revision's environment
    counted = ["--instructions"] if shutil.which("valgrind") else []
    again = perfsuite(repo, *args[:-1], str(tmp_path / "again"), *counted, env=offline)
    assert again.returncode == 1 and "building" not in again.stderr, again.stdout + again.stderr
    assert all(_pairing(tmp_path / "again")[side]["environment"]["cached"] for side in ("base", "head"))
    if counted:
        passes = {side: doc["modes"]["commit"]["instructions"]["samples"]
                  for side, doc in _docs(tmp_path / "again").items()}
        assert {side: [p["metrics"]["fsyncs"] for p in ps] for side, ps in passes.items()} == {
            "base": [1] * len(passes["base"]), "head": [2] * len(passes["head"])}, passes  # tinydep 1.0 and 2.0
        assert all(p["total"] > 0 for ps in passes.values() for p in ps)
    # a revision that cannot be installed: one line naming the requirement
    depend_on_tinydep(repo, "tinydep==3.0")
    bad = perfsuite(repo, *args[:-1], str(tmp_path / "bad"), env=offline)
    (error,) = _errors(bad)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
    assert error.startswith("perfsuite: error: HEAD the working tree (") and "cannot install tinydep==3.0: " in error
