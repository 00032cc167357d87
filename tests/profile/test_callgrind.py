"""Instructions under callgrind: `perfsuite profile --profiler callgrind` names Python functions, and `--diff` the one
that gained.

Reading callgrind output, the function table, folded stacks, flame graphs and the diff are tested on
small synthetic callgrind files; one end-to-end test (skipped without valgrind or a compiler) profiles a
tiny operation twice and checks the diff names the function whose work grew.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from perfsuite import cli
from perfsuite.profile import diff_profiles, svg_ok
from perfsuite.profile._callgrind import OUTSIDE, function_table, named_stacks, parse_callgrind
from perfsuite.profile._flame import folded_lines, read_folded, write_flame_graph
from perfsuite.profile._trampolines import skip_options

# Q_0 = loop step (root), Q_1 = the job, Q_2 = a helper called by the job (also recursively)
CALLGRIND = """\
# callgrind format
version: 1
creator: callgrind-3.19.0
cmd:  python -m perfsuite.harness._worker
part: 1
thread: 1
positions: line
events: Ir
summary: 0

ob=(1) /lib/libpython3.11.so
fl=(1) ???
fn=(10) _PyEval_EvalFrameDefault'perfsuite_eval
0 40
fn=(1) Q_0'perfsuite_eval
0 1000
cfn=(2) Q_1'Q_0'perfsuite_eval
calls=2 0
0 5500
fn=(2)
0 3000
+2 500
cfn=(3) Q_2'Q_1'Q_0'perfsuite_eval
calls=3 0
0 2000
fn=(3)
0 1500
fn=(4) Q_2'2'Q_2'Q_1'Q_0'perfsuite_eval
0 500
totals: 6540
"""
NAMES = {
    "Q_0": ("asyncio/base_events.py:BaseEventLoop._run_once", "asyncio/base_events.py", 1845),
    "Q_1": ("perfsuite/engine/_job.py:PublicationJob._run", "perfsuite/engine/_job.py", 100),
    "Q_2": ("perfsuite/engine/_pipeline.py:select_changes", "perfsuite/engine/_pipeline.py", 199),
}
needs_tools = pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("cc") is None,
                                 reason="needs valgrind and a C compiler")


def _counts(tmp_path: Path, text: str = CALLGRIND) -> object:
    path = tmp_path / "callgrind.out-01"
    path.write_text(text)
    return parse_callgrind(path)


def test_contexts_become_python_stacks(tmp_path: Path) -> None:
    counts = _counts(tmp_path)
    assert counts.thread == 1 and counts.total == 6540  # type: ignore[attr-defined]
    assert counts.stacks == {  # type: ignore[attr-defined]
        (OUTSIDE,): 40,
        ("Q_0",): 1000,
        ("Q_0", "Q_1"): 3500,  # two cost lines; the call's inclusive 5500 is not self cost
        ("Q_0", "Q_1", "Q_2"): 1500,
        ("Q_0", "Q_1", "Q_2", "Q_2"): 500,  # callgrind's recursion mark '2 is not a frame
    }
    assert counts.calls == {"Q_1": 2, "Q_2": 3}  # type: ignore[attr-defined]


def test_function_table_self_and_inclusive(tmp_path: Path) -> None:
    table = {f.function: f for f in function_table([_counts(tmp_path)], NAMES)}  # type: ignore[list-item]
    select = table["perfsuite/engine/_pipeline.py:select_changes"]
    assert select.self == {"1": 2000} and select.inclusive == {"1": 2000}  # recursion counted once per stack
    assert select.line == 199 and select.calls == 3
    job = table["perfsuite/engine/_job.py:PublicationJob._run"]
    assert job.self_total == 3500 and job.inclusive_total == 5500
    loop = table["asyncio/base_events.py:BaseEventLoop._run_once"]
    assert loop.inclusive_total == 6500 and table[OUTSIDE].self_total == 40
    assert sum(f.self_total for f in table.values()) == 6540  # every instruction charged exactly once


def test_folded_stacks_and_flame_graph(tmp_path: Path) -> None:
    stacks = named_stacks(_counts(tmp_path), NAMES)  # type: ignore[arg-type]
    lines = folded_lines(stacks)
    assert ("thread 1 (loop);asyncio/base_events.py:BaseEventLoop._run_once;perfsuite/engine/_job.py:"
            "PublicationJob._run;perfsuite/engine/_pipeline.py:select_changes 1500") in lines
    folded = tmp_path / "x.folded"
    folded.write_text("\n".join(lines) + "\n")
    assert read_folded(folded) == stacks
    svg = write_flame_graph(tmp_path / "x.svg", stacks, title="t")
    assert svg_ok(svg)
    titles = [t.text for t in ET.parse(svg).getroot().iter("{http://www.w3.org/2000/svg}title")]
    assert "perfsuite/engine/_pipeline.py:select_changes (2,000 instructions, 30.58%)" in titles


def test_skip_patterns_cover_every_name_but_the_trampolines() -> None:
    import re

    def matches(pattern: str, name: str) -> bool:  # callgrind's wildcards: * and ? only
        regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
        return re.fullmatch(regex, name) is not None

    patterns = [o.removeprefix("--fn-skip=") for o in skip_options()]
    for name in ("_PyEval_EvalFrameDefault", "perfsuite_eval", "Q", "QX_1", "main", "0x0000000000006f7a",
                 "(below main)", "operator new(unsigned long)", "q_1"):
        assert any(matches(p, name) for p in patterns), name
    for name in ("Q_0", "Q_4095", "Q_other"):
        assert not any(matches(p, name) for p in patterns), name


def _record(path: Path, functions: dict[str, int], folded: dict[tuple[str, ...], int]) -> Path:
    (path.parent / f"{path.stem}.folded").write_text("\n".join(folded_lines(folded)) + "\n")
    body = {"total": sum(functions.values()), "loop_thread": sum(functions.values()),
            "artifacts": {"folded": str(path.parent / f"{path.stem}.folded")},
            "functions": [{"function": k, "self_total": v, "self": {"1": v}} for k, v in functions.items()]}
    path.write_text(json.dumps({"kind": "perfsuite-profile", "profiler": "callgrind",
                                "recipe": {"name": "mailbox-delivery"}, "modes": {"sync": body}}))
    return path


def test_diff_names_the_function_that_gained(tmp_path: Path) -> None:
    base = {"a.py:f": 1000, "b.py:select_changes": 400, "c.py:g": 300}
    new = {"a.py:f": 990, "b.py:select_changes": 560, "c.py:g": 300, "d.py:new": 5}
    a = _record(tmp_path / "a.callgrind.profile.json", base, {("thread 1 (loop)", k): v for k, v in base.items()})
    b = _record(tmp_path / "b.callgrind.profile.json", new, {("thread 1 (loop)", k): v for k, v in new.items()})
    diff = diff_profiles(a, b, output_prefix=tmp_path / "out" / "d")
    (mode,) = diff.modes
    assert mode.gained[0].function == "b.py:select_changes" and mode.gained[0].delta == 160
    assert [c.function for c in mode.lost] == ["a.py:f"]
    assert "d.py:new" in [c.function for c in mode.gained]
    text = diff.text()
    assert "sync: 1,700 -> 1,855 instructions (+9.12%)" in text
    assert "+160  +9.41%  b.py:select_changes  (400 -> 560" in text
    (graph,) = diff.graphs
    assert svg_ok(graph) and "rgb(255," in graph.read_text()  # grown frames are red


def test_diff_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "x.json"
    other.write_text(json.dumps({"kind": "perfsuite-profile", "profiler": "py-spy"}))
    assert cli.main(["profile", "--diff", str(other), str(other)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("perfsuite: error: ") and "not a callgrind profile record" in err and "\n" not in err
    assert cli.main(["profile"]) == 2
    assert "give RECIPE and --profiler" in capsys.readouterr().err
    assert cli.main(["profile", "idle-control", "--profiler", "callgrind", "--profiler-path", "/nonexistent/vg"]) == 2
    assert "valgrind not found: /nonexistent/vg (--profiler-path)" in capsys.readouterr().err


@needs_tools
def test_profile_and_diff_name_the_function(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def recipe(loop: int) -> Path:
        path = tmp_path / f"count{loop}.toml"
        path.write_text(f'name = "count"\nwarmup = 0\nsettle_ms = 0\n[modes.a]\n'
                        f'operation = "perfsuite.workloads.basic:count"\nloop = {loop}\n')
        return path

    records: list[Path] = []
    for loop in (200, 1200):
        baseline = ["--baseline", str(records[0])] if records else []
        assert cli.main(["profile", str(recipe(loop)), "--profiler", "callgrind", "--output-dir",
                         str(tmp_path / f"out{loop}"), "--work-dir", str(tmp_path / "w"), *baseline]) == 0
        out = capsys.readouterr().out
        assert "perfsuite/workloads/basic.py:_Count._add" in out.split("function\n", 1)[1].splitlines()[0]
        records.append(next((tmp_path / f"out{loop}").glob("*.callgrind.profile.json")))
    assert "gained" in out and "_Count._add" in out.split("gained", 1)[1].splitlines()[1]  # --baseline
    body = json.loads(records[1].read_text())["modes"]["a"]
    assert svg_ok(Path(body["artifacts"]["svg"])) and Path(body["artifacts"]["out-01"]).is_file()
    assert "perfsuite/workloads/basic.py:" in Path(body["artifacts"]["out-01"]).read_text()  # Python names
    assert cli.main(["profile", "--diff", str(records[0]), str(records[1]), "--output-dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    first_gain = text.split("gained", 1)[1].splitlines()[1]
    assert "perfsuite/workloads/basic.py:_Count._add" in first_gain
