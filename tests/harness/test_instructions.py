"""Instructions as a cost: the instruction pass under valgrind (callgrind), and its "not measured" path without
valgrind.

No timing anywhere: instruction counts. The runs under valgrind are few and tiny (``basic:count``) and
skip when valgrind is absent; the absent path is tested by pointing the valgrind path at a missing file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from perfsuite import cli
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import (
    ModeSpec,
    Recipe,
    ValgrindUnavailable,
    find_valgrind,
    instructions_unavailable,
    run_recipe,
    validate_results,
)
from perfsuite.harness._callgrind import callgrind_totals, interpreter
from perfsuite.harness._pinning import (
    code_links,
    code_roots,
    mapped_sys_path,
    padded_request,
    pinned_code,
    pinned_environment,
)
from perfsuite.harness._recipe import parse_recipe

COUNT = "perfsuite.workloads.basic:count"
MISSING = "/nonexistent/valgrind"
needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")


def _recipe(*modes: ModeSpec, passes: int = 1) -> Recipe:
    return Recipe(name="instr", modes=modes, samples=1, warmup=0, isolation="inline", control_windows=1,
                  settle_ms=0.0, instructions=True, instructions_samples=passes)


# -- without valgrind ---------------------------------------------------------------------------------------


def test_a_missing_valgrind_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValgrindUnavailable, match=r"^valgrind not found: /nonexistent/valgrind \(--valgrind\)"):
        find_valgrind(MISSING)
    monkeypatch.setenv("PERFSUITE_VALGRIND", MISSING)
    assert instructions_unavailable() == (
        "valgrind not found: /nonexistent/valgrind ($PERFSUITE_VALGRIND) is not an executable file")
    monkeypatch.delenv("PERFSUITE_VALGRIND")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert "valgrind not found on PATH" in str(instructions_unavailable())


def test_something_that_is_not_valgrind_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "valgrind"
    fake.write_text("#!/bin/sh\necho not-it\n")
    fake.chmod(0o755)
    with pytest.raises(ValgrindUnavailable, match="is not valgrind"):
        find_valgrind(str(fake))


def test_the_interpreter_must_be_an_elf_binary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert interpreter() == sys.executable  # the venv's link: valgrind loads its target, the venv stays
    shim = tmp_path / "python3"
    shim.write_text("#!/usr/bin/env bash\nexec python3 \"$@\"\n")  # what a pyenv shim looks like
    monkeypatch.setattr(sys, "executable", str(shim))
    with pytest.raises(ValgrindUnavailable, match="is not an ELF binary"):
        interpreter()


def test_without_valgrind_the_pass_is_not_measured_never_zero(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFSUITE_VALGRIND", MISSING)
    result = run_recipe(_recipe(ModeSpec("a", COUNT, {"loop": 10})), output_dir=tmp_path, work_root=tmp_path / "w")
    section = result.document["modes"]["a"]["instructions"]
    assert section["total"] is None and section["loop_thread"] is None and section["samples"] == []
    assert "valgrind not found" in section["not_measured"]
    assert [e["kind"] for e in result.document["order"]][-1] == "instructions"
    assert result.document["progress"]["done"] == result.document["progress"]["total"]
    assert len(result.document["modes"]["a"]["samples"]) == 1  # the latency sample is unaffected
    validate_results(json.loads(result.path.read_text()))


def test_the_command_line_says_so_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    recipe = tmp_path / "tiny.toml"
    recipe.write_text(f'name = "tiny"\nsamples = 1\nwarmup = 0\nisolation = "inline"\nsettle_ms = 0\n'
                      f'[modes.a]\noperation = "{COUNT}"\nloop = 10\n')
    code = cli.main(["run", str(recipe), "--instructions", "--valgrind", MISSING, "--output-dir", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0
    lines = [ln for ln in err.splitlines() if "not measured" in ln]
    assert lines == ["perfsuite: instructions not measured: valgrind not found: /nonexistent/valgrind (--valgrind) "
                     "is not an executable file"]
    assert "n/m" in out  # the table's instruction columns: not measured
    (path,) = [p for p in tmp_path.glob("tiny-*.json") if not p.name.endswith(".pyperf.json")]
    assert json.loads(path.read_text())["modes"]["a"]["instructions"]["total"] is None


def test_recipe_keys_and_the_option_are_validated(tmp_path: Path) -> None:
    body = {"modes": {"a": {"operation": COUNT}}}
    recipe = parse_recipe({**body, "instructions": True, "instructions_samples": 5}, "r.toml", default_name="r")
    assert recipe.instructions and recipe.instructions_samples == 5
    with pytest.raises(PerfsuiteError, match='instructions: expected true or false, got "yes"'):
        parse_recipe({**body, "instructions": "yes"}, "r.toml", default_name="r")
    with pytest.raises(PerfsuiteError, match="instructions_samples: expected an integer from 1 to 1000, got 0"):
        parse_recipe({**body, "instructions_samples": 0}, "r.toml", default_name="r")
    assert parse_recipe(body, "r.toml", default_name="r").with_overrides(instructions=True).instructions


# -- pinning and reading, without valgrind ------------------------------------------------------------------


def test_the_worker_environment_is_pinned() -> None:
    env = pinned_environment({"PATH": "/bin", "HOME": "/h", "EXTRA": "x" * 3000, "PERFSUITE_CACHE": "/c",
                              "PYTHONHASHSEED": "random"})
    assert env == {"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=4096:glibc.malloc.arena_max=1", "HOME": "/h",
                   "LD_BIND_NOW": "1", "PATH": "/bin", "PERFSUITE_CACHE": "/c", "PYTHONHASHSEED": "0",
                   "PYTHONNOUSERSITE": "1"}
    assert list(env) == sorted(env)


def test_the_code_under_test_is_seen_through_fixed_links(tmp_path: Path) -> None:
    import perfsuite

    tree = str(Path(perfsuite.__file__).resolve().parent.parent)
    assert code_roots("perfsuite.workloads.basic:count") == [tree]
    links = code_links(tmp_path, [tree])
    assert links == {tree: str(tmp_path / ".perfsuite-code" / "0")}
    assert Path(links[tree]).resolve() == Path(tree)
    assert mapped_sys_path(["", tree, "/usr/lib/python3.11"], links) == [links[tree], "/usr/lib/python3.11"]
    env = pinned_environment({"PYTHONPATH": f"{tree}:/other"}, paths=links)
    assert env["PYTHONPATH"] == f"{links[tree]}:/other"


def test_every_revision_of_a_code_variant_is_loaded_from_the_same_path(tmp_path: Path) -> None:
    """perfsuite ab: BASE in a temporary worktree and HEAD in the checkout, at paths of different lengths,
    load their engine through one link: the hashed and copied module paths are the same strings."""
    seen = []
    for tree in (tmp_path / "base-worktree-with-a-long-name", tmp_path / "head"):
        (tree / "perfsuite" / "engine").mkdir(parents=True)
        code_links(tmp_path / "base", [])  # clears the link directory, as each pass does
        code = pinned_code(tmp_path / "base", {"root": str(tree), "packages": ["perfsuite.engine"]})
        assert code["packages"] == ["perfsuite.engine"]
        assert Path(code["root"]).resolve() == tree.resolve()
        seen.append(code["root"])
    assert seen[0] == seen[1] == str(tmp_path / "base" / ".perfsuite-code" / "v")


def test_requests_of_different_sizes_are_padded_to_the_same_size() -> None:
    short, longer = padded_request({"p": "/a"}), padded_request({"p": "/a" * 300})
    assert len(short) == len(longer) == 16384
    assert json.loads(longer)["p"] == "/a" * 300


def test_callgrind_totals_per_thread(tmp_path: Path) -> None:
    (tmp_path / "callgrind.out").write_text("")  # created at start-up, empty
    for tid, total in ((1, 1200), (3, 3400)):
        (tmp_path / f"callgrind.out-{tid:02d}").write_text(
            f"# callgrind format\nthread: {tid}\nevents: Ir\nsummary: 0\nfn=(1) f\n0 {total}\ntotals: {total}\n")
    (tmp_path / "valgrind.log").write_text("==1== log")
    assert callgrind_totals(tmp_path) == {1: 1200, 3: 3400}


# -- under valgrind (skipped without it) --------------------------------------------------------------------


@needs_valgrind
def test_the_pass_counts_the_window_per_thread(tmp_path: Path) -> None:
    small, big = ModeSpec("small", COUNT, {"loop": 2000}), ModeSpec("big", COUNT, {"loop": 3000})
    setup = ModeSpec("setup", COUNT, {"loop": 2000, "setup": 20000})  # heavy work in the factory: not counted
    offloaded = ModeSpec("offloaded", COUNT, {"loop": 2000, "offloaded": 1000})
    result = run_recipe(_recipe(small, big, setup, offloaded), output_dir=tmp_path, work_root=tmp_path / "w")
    doc: dict[str, Any] = result.document
    validate_results(doc)
    one = {m: doc["modes"][m]["instructions"]["samples"][0] for m in ("small", "big", "setup", "offloaded")}
    assert all(s["mechanism"] == "client requests" and s["tool"] == "callgrind" for s in one.values())
    assert one["small"]["total"] == one["small"]["loop_thread"] and list(one["small"]["threads"]) == ["1"]
    # 1000 more additions cost more than 100 instructions each; the setup's 20000 are not in the window
    assert one["big"]["total"] - one["small"]["total"] > 100 * 1000
    # (the setup's 20000 additions would be about ten times the window; what differs is the allocator's state
    # after them, which moves a window of small ints by up to a few percent: 1.8% seen in one checkout)
    assert abs(one["setup"]["total"] - one["small"]["total"]) < 0.05 * one["small"]["total"]
    assert one["setup"]["total"] < one["big"]["total"]
    # offloaded work is counted on its own thread; the loop thread's share excludes it
    assert len(one["offloaded"]["threads"]) == 2
    assert one["offloaded"]["loop_thread"] < one["offloaded"]["total"]
    other = sum(v for k, v in one["offloaded"]["threads"].items() if k != "1")
    assert other > 100 * 1000 and one["offloaded"]["loop_thread"] + other == one["offloaded"]["total"]
    assert doc["modes"]["small"]["instructions"]["total"]["median"] == one["small"]["total"]
    assert list((tmp_path / "w").iterdir()) == [tmp_path / "w" / ".perfsuite-instructions.lock"]


@needs_valgrind
@pytest.mark.skipif(os.uname().machine not in ("x86_64", "amd64"), reason="the fallback is x86-64 machine code")
def test_without_a_compiler_the_requests_are_machine_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFSUITE_CACHE", str(tmp_path / "empty-cache"))  # no cached helper
    monkeypatch.setenv("CC", "/nonexistent/cc")  # CC names the only compiler tried
    result = run_recipe(_recipe(ModeSpec("a", COUNT, {"loop": 200})), output_dir=tmp_path, work_root=tmp_path / "w")
    (sample,) = result.document["modes"]["a"]["instructions"]["samples"]
    assert sample["mechanism"] == "client requests (machine code)"
    assert 100 * 200 < sample["total"] < 10_000_000
    assert not re.search(r"perfsuite-callgrind-.*\.so", " ".join(map(str, (tmp_path / "empty-cache").rglob("*"))))
