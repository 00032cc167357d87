"""A ``perfsuite`` start-up imports only what its command needs: the parser is built from light modules.

Every command line, ``--help`` and every ``perfsuite`` subprocess the suite starts builds the whole parser;
the rooms (crash, A/B, profile, report, the harness, the engine, the cluster) and the libraries they use
(numpy, scipy, rich) are imported by a command's handler when it runs, never to build the parser or print
its help. A fresh interpreter reports the modules each step added (building the parser, the top-level
``--help``, each subcommand's ``--help``, a bad option): none may be a room or a heavy library. The parser's
choices and defaults are copies (:mod:`perfsuite.cli._names`) of the rooms' values: each must equal its
room's, in order.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

import pytest

from perfsuite.cli import build_parser

#: what no parser, help page or argument error may import: the rooms and their heavy libraries, and
#: importlib.metadata (the version is read only for --version)
HEAVY = ("numpy", "scipy", "rich", "perfsuite.crash", "perfsuite.report", "perfsuite.profile", "perfsuite.ab",
         "perfsuite.harness", "perfsuite.engine", "perfsuite.cluster", "perfsuite.whatif", "perfsuite.watch",
         "perfsuite.workloads.fixtures", "perfsuite.workloads.runs", "importlib.metadata")

#: bad command lines the parser itself refuses (an unknown option, a choice no room has)
BAD = [["run", "--no-such-option"], ["crashcheck", "--workload", "nope"], ["ab", "main", "--env", "nope"]]
#: run in a fresh interpreter (argv[1]: BAD as JSON): for each step, the modules it added (to what the steps
#: before it had, the first to the bare interpreter's), its exit status and its stderr, as JSON
#: ``{step: [modules, status, stderr]}``
_PROBE = r"""
import argparse, contextlib, io, json, sys
seen = set(sys.modules)
BAD = json.loads(sys.argv[1])
steps = {}
def record(step, status, err):
    global seen
    steps[step] = (sorted(set(sys.modules) - seen), status, err)
    seen = set(sys.modules)
import perfsuite.cli
parser = perfsuite.cli.build_parser()
record("build_parser", 0, "")
names = [n for a in parser._actions if isinstance(a, argparse._SubParsersAction) for n in a.choices]
for argv in [["--help"]] + [[name, "--help"] for name in names] + BAD:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = perfsuite.cli.main(argv)
    record(" ".join(argv), status, err.getvalue())
print(json.dumps(steps))
"""


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


@pytest.fixture(scope="module")
def steps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What a fresh interpreter imported for each step (one interpreter runs them all, in order)."""
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(BAD)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path_factory.mktemp("startup"), check=False)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def test_building_the_parser_imports_no_room_and_no_heavy_library(steps: dict[str, Any]) -> None:
    modules, _status, _err = steps["build_parser"]
    assert _heavy(modules) == []
    assert "perfsuite.cli._names" in modules  # the parser's choices come from the light copies


def test_every_help_page_imports_no_room_and_no_heavy_library(steps: dict[str, Any]) -> None:
    helps = {step: value for step, value in steps.items() if step.endswith("--help")}
    parser = build_parser()
    names = [n for a in parser._actions if isinstance(a, argparse._SubParsersAction) for n in a.choices]
    assert set(helps) == {"--help"} | {f"{name} --help" for name in names}
    assert {step: _heavy(modules) for step, (modules, _status, _err) in helps.items() if _heavy(modules)} == {}
    assert {step: status for step, (_modules, status, _err) in helps.items()} == dict.fromkeys(helps, 0)


@pytest.mark.parametrize("step", [" ".join(argv) for argv in BAD])
def test_a_bad_option_is_one_line_and_exit_2_without_importing_a_room(steps: dict[str, Any], step: str) -> None:
    modules, status, err = steps[step]
    assert status == 2 and len(err.splitlines()) == 1 and err.startswith("perfsuite: error: "), err
    assert _heavy(modules) == []


def test_the_parsers_copies_equal_the_rooms_values() -> None:
    from perfsuite.ab import AB_LOOKS, AB_SAMPLES, ENV_MODES, INSTALLERS
    from perfsuite.cli import _names
    from perfsuite.crash import MODELS, SEEDED_BUGS, WORKLOADS
    from perfsuite.profile import DEFAULT_REPEAT, PROFILERS

    hint = "update perfsuite/cli/_names.py (and run scripts/dev/gen_cli_reference.py)"
    assert (AB_SAMPLES, AB_LOOKS) == (_names.AB_SAMPLES, _names.AB_LOOKS), hint
    assert (tuple(ENV_MODES), tuple(INSTALLERS)) == (_names.ENV_MODES, _names.INSTALLERS), hint
    assert (tuple(PROFILERS), DEFAULT_REPEAT) == (_names.PROFILERS, _names.PROFILE_REPEAT), hint
    assert tuple(MODELS) == _names.CRASH_MODELS, hint
    assert tuple(WORKLOADS) == _names.CRASH_WORKLOADS, hint
    assert tuple(SEEDED_BUGS) == _names.SEEDED_BUGS, hint
