"""Issue 14 (house rule 4): bad input to EVERY command is one line on stderr and exit 2, never a traceback.

The real ``python -m perfsuite`` runs a table of bad inputs across all commands: bad numbers (zero,
negative, NaN, words), empty strings, missing files, a directory where a file is expected, a regular
file where a directory is expected, a path under a regular file, and unwritable outputs. The tests run
as root, for whom ``chmod`` does not make a directory read-only: "unwritable" here is a regular file in
place of a directory, a path under a regular file, or (where the kernel refuses even root) ``/sys``.
Every case runs through :func:`perfsuite.cli.main` in-process (cheap); a subset with at least one case
per command and every kind of OSError also runs as the real ``python -m perfsuite``, four at a time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from perfsuite.harness import ModeSpec, Recipe, run_recipe

#: placeholders replaced per test directory
FILE, DIR, EMPTY, GARBAGE, RESULT, MISSING = "@FILE", "@DIR", "@EMPTY", "@GARBAGE", "@RESULT", "@MISSING"
#: where even root cannot create anything (sysfs): a genuinely unwritable directory
SYS = "/sys/perfsuite-cannot-write-here"

CASES: list[tuple[str, list[str]]] = [
    # run (SPEC M4, M7, M8)
    ("run-samples-0", ["run", "idle-control", "--samples", "0"]),
    ("run-samples-negative", ["run", "idle-control", "--samples", "-1"]),
    ("run-samples-word", ["run", "idle-control", "--samples", "six"]),
    ("run-samples-nan", ["run", "idle-control", "--samples", "nan"]),
    ("run-warmup-negative", ["run", "idle-control", "--warmup", "-1"]),
    ("run-isolation-bogus", ["run", "idle-control", "--isolation", "bogus"]),
    ("run-empty-recipe", ["run", ""]),
    ("run-unknown-recipe", ["run", "no-such-recipe"]),
    ("run-output-dir-empty", ["run", "idle-control", "--output-dir", ""]),
    ("run-output-dir-file", ["run", "idle-control", "--output-dir", FILE]),
    ("run-output-dir-under-file", ["run", "idle-control", "--output-dir", f"{FILE}/sub"]),
    ("run-output-dir-sysfs", ["run", "idle-control", "--samples", "1", "--output-dir", SYS]),
    ("run-work-dir-file", ["run", "idle-control", "--work-dir", FILE]),
    ("run-work-dir-sysfs", ["run", "idle-control", "--samples", "1", "--work-dir", SYS]),
    ("run-phase-dir-file", ["run", "idle-control", "--phase", "--phase-dir", FILE]),
    ("run-record-trace-dir", ["run", "idle-control", "--record-trace", DIR]),
    ("run-session-file", ["run", "idle-control", "--session", FILE]),
    ("run-resume-empty", ["run", "--resume", ""]),
    ("run-resume-missing", ["run", "--resume", MISSING]),
    ("run-resume-dir", ["run", "--resume", DIR]),
    ("run-resume-garbage", ["run", "--resume", GARBAGE]),
    # demo
    ("demo-onto-file", ["demo", FILE]),
    ("demo-under-file", ["demo", f"{FILE}/sub"]),
    ("demo-sysfs", ["demo", SYS]),
    ("demo-record-trace-dir", ["demo", "--record-trace", DIR]),
    # fixtures (SPEC M6)
    ("fixtures-no-action", ["fixtures"]),
    ("fixtures-bad-action", ["fixtures", "bogus"]),
    ("fixtures-unknown", ["fixtures", "build", "no-such-fixture"]),
    ("fixtures-path-no-name", ["fixtures", "path"]),
    ("fixtures-info-empty", ["fixtures", "info", ""]),
    ("fixtures-cache-is-file", ["@ENV:PERFSUITE_CACHE=@FILE", "fixtures", "build", "synthetic-6000"]),
    ("fixtures-cache-sysfs", [f"@ENV:PERFSUITE_CACHE={SYS}", "fixtures", "path", "synthetic-6000"]),
    # crashcheck (SPEC section 7)
    ("crashcheck-jobs-0", ["crashcheck", "--jobs", "0"]),
    ("crashcheck-jobs-negative", ["crashcheck", "--jobs", "-2"]),
    ("crashcheck-max-states-0", ["crashcheck", "--max-states", "0"]),
    ("crashcheck-show-negative", ["crashcheck", "--show", "-1"]),
    ("crashcheck-kill-0", ["crashcheck", "--kill", "0"]),
    ("crashcheck-seed-word", ["crashcheck", "--seed", "x"]),
    ("crashcheck-keep-file", ["crashcheck", "--keep", FILE]),
    ("crashcheck-workload-bogus", ["crashcheck", "--workload", "bogus"]),
    ("crashcheck-corrupt-max-cases-0", ["crashcheck", "--corrupt", "--max-cases", "0"]),
    ("crashcheck-corrupt-and-kill", ["crashcheck", "--corrupt", "--kill", "3"]),
    ("crashcheck-corrupt-not-a-session", ["crashcheck", "--corrupt", "--workload", "transcript"]),
    # session repair (issue 14)
    ("session-no-action", ["session"]),
    ("session-repair-missing", ["session", "repair", MISSING]),
    ("session-repair-file", ["session", "repair", FILE]),
    ("session-repair-empty-dir", ["session", "repair", EMPTY]),
    ("session-repair-garbage", ["session", "repair", GARBAGE]),
    ("session-repair-generation-of-nothing", ["session", "repair", EMPTY, "--generation", "7"]),
    # report, evidence, compare, history, bars, dashboard (SPEC section 5)
    ("report-nothing", ["report"]),
    ("report-missing", ["report", MISSING]),
    ("report-empty-string", ["report", ""]),
    ("report-garbage", ["report", GARBAGE]),
    ("report-empty-dir", ["report", EMPTY]),
    ("report-phase-dir-file", ["report", RESULT, "--phase", "--phase-dir", FILE]),
    ("evidence-missing", ["evidence", MISSING]),
    ("evidence-dir", ["evidence", EMPTY]),
    ("evidence-garbage", ["evidence", GARBAGE]),
    ("evidence-alpha-nan", ["evidence", RESULT, "--alpha", "nan"]),
    ("evidence-alpha-2", ["evidence", RESULT, "--baseline", RESULT, "--alpha", "2"]),
    ("evidence-factor-0", ["evidence", RESULT, "--baseline", RESULT, "--factor", "0"]),
    ("compare-missing", ["compare", MISSING, MISSING]),
    ("compare-garbage", ["compare", GARBAGE, RESULT]),
    ("compare-factor-nan", ["compare", RESULT, RESULT, "--factor", "nan"]),
    ("compare-alpha-negative", ["compare", RESULT, RESULT, "--alpha", "-1"]),
    ("compare-pairing-missing", ["compare", DIR]),  # one argument: an A/B output directory (issue 15)
    ("compare-gate-bogus", ["compare", RESULT, RESULT, "--gate", "bogus"]),
    # ab (issue 15): the cwd of these cases is not a git repository
    ("ab-samples-0", ["ab", "HEAD", "--samples", "0"]),
    ("ab-seed-word", ["ab", "HEAD", "--seed", "x"]),
    ("ab-empty-base", ["ab", ""]),
    ("ab-unknown-recipe", ["ab", "HEAD", "-r", "no-such-recipe"]),
    ("ab-factor-nan", ["ab", "HEAD", "--factor", "nan"]),
    ("ab-output-dir-file", ["ab", "HEAD", "--output-dir", FILE]),
    ("ab-not-a-repository", ["ab", "HEAD", "-r", "idle-control"]),
    ("ab-env-bogus", ["ab", "HEAD", "--env", "bogus"]),
    # bisect and init (issue 28): the same cwd, no repository and no package
    ("bisect-not-a-repository", ["bisect", "HEAD~1", "HEAD", "-r", "idle-control"]),
    ("bisect-empty-good", ["bisect", "", "HEAD"]),
    ("bisect-samples-0", ["bisect", "HEAD~1", "HEAD", "--samples", "0"]),
    ("init-no-package", ["init"]),
    ("init-bad-package", ["init", "--package", "not-a-name"]),
    ("init-dir-file", ["init", "--dir", FILE]),
    ("history-missing", ["history", MISSING]),
    ("history-file", ["history", FILE]),
    ("history-penalty-negative", ["history", DIR, "--penalty", "-1"]),
    ("history-penalty-nan", ["history", DIR, "--penalty", "nan"]),
    ("history-min-change-negative", ["history", DIR, "--min-change", "-0.1"]),
    ("history-min-change-nan", ["history", DIR, "--min-change", "nan"]),
    ("history-metric-empty", ["history", DIR, "--metric", ""]),
    ("bars-missing", ["bars", MISSING]),
    ("bars-garbage", ["bars", GARBAGE]),
    ("dashboard-missing", ["dashboard", MISSING, "-o", "site"]),
    ("dashboard-no-output", ["dashboard", DIR]),
    ("dashboard-output-file", ["dashboard", DIR, "-o", FILE]),
    ("dashboard-output-empty", ["dashboard", DIR, "-o", ""]),
    ("dashboard-output-sysfs", ["dashboard", DIR, "-o", SYS]),
    ("dashboard-store-missing", ["dashboard", "--store", MISSING, "-o", "site"]),
    ("dashboard-commit-url-no-field", ["dashboard", DIR, "-o", "site", "--commit-url", "https://x/"]),
    ("history-store-not-sqlite", ["history", "--store", GARBAGE]),
    ("history-source-and-store", ["history", DIR, "--store", GARBAGE]),
    ("history-no-source-no-store", ["history"]),
    ("history-machine-unknown", ["history", DIR, "--machine", "no-such-box"]),
    ("compare-store-missing", ["compare", "previous", "latest", "--store", MISSING]),
    # store (issue 16): the results store and the results branch
    ("store-no-action", ["store"]),
    ("store-ingest-nothing", ["store", "ingest"]),
    ("store-ingest-missing", ["store", "ingest", MISSING, "--store", "s.sqlite3"]),
    ("store-ingest-garbage", ["store", "ingest", GARBAGE, "--store", "s.sqlite3"]),
    ("store-ingest-empty-dir", ["store", "ingest", EMPTY, "--store", "s.sqlite3"]),
    ("store-ingest-store-is-file", ["store", "ingest", DIR, "--store", FILE]),
    ("store-ingest-store-under-file", ["store", "ingest", DIR, "--store", f"{FILE}/s.sqlite3"]),
    ("store-ingest-store-sysfs", ["store", "ingest", DIR, "--store", f"{SYS}/s.sqlite3"]),
    ("store-info-missing", ["store", "info", "--store", MISSING]),
    ("store-info-not-sqlite", ["store", "info", "--store", FILE]),
    ("store-push-not-a-repo", ["store", "push", DIR, "--repo", EMPTY]),
    ("store-push-branch-empty", ["store", "push", DIR, "--branch", ""]),
    ("store-pull-into-file", ["store", "pull", "--into", FILE]),
    ("store-pull-not-a-repo", ["store", "pull", "--repo", EMPTY, "--into", "h"]),
    # whatif (SPEC section 6)
    ("whatif-no-source", ["whatif"]),
    ("whatif-two-sources", ["whatif", "--storm", "--unattended"]),
    ("whatif-debounce-empty", ["whatif", "--storm", "--no-costs", "--debounce", ""]),
    ("whatif-debounce-negative", ["whatif", "--storm", "--no-costs", "--debounce", "1,-1"]),
    ("whatif-debounce-nan", ["whatif", "--storm", "--no-costs", "--debounce", "nan"]),
    ("whatif-checkpoint-0", ["whatif", "--storm", "--no-costs", "--checkpoint-interval", "0"]),
    ("whatif-notify-word", ["whatif", "--storm", "--no-costs", "--notify-max", "soon"]),
    ("whatif-speed-0", ["whatif", "--storm", "--validate", "--speed", "0"]),
    ("whatif-speed-negative", ["whatif", "--storm", "--validate", "--speed", "-1"]),
    ("whatif-speed-nan", ["whatif", "--storm", "--validate", "--speed", "nan"]),
    ("whatif-validate-seconds-0", ["whatif", "--storm", "--validate", "--validate-seconds", "0"]),
    ("whatif-validate-seconds-negative", ["whatif", "--storm", "--validate", "--validate-seconds", "-5"]),
    ("whatif-seed-negative", ["whatif", "--storm", "--seed", "-1"]),
    ("whatif-trace-missing", ["whatif", "--trace", MISSING, "--no-costs"]),
    ("whatif-trace-dir", ["whatif", "--trace", DIR, "--no-costs"]),
    ("whatif-trace-garbage", ["whatif", "--trace", GARBAGE, "--no-costs"]),
    ("whatif-costs-missing", ["whatif", "--storm", "--costs", MISSING]),
    ("whatif-costs-dir", ["whatif", "--storm", "--costs", DIR]),
    ("whatif-csv-dir", ["whatif", "--storm", "--no-costs", "--csv", DIR]),
    ("whatif-csv-under-file", ["whatif", "--storm", "--no-costs", "--csv", f"{FILE}/x.csv"]),
    ("whatif-csv-sysfs", ["whatif", "--storm", "--no-costs", "--csv", f"{SYS}.csv"]),
    ("whatif-json-empty", ["whatif", "--storm", "--no-costs", "--json", ""]),
    ("whatif-plot-under-file", ["whatif", "--storm", "--no-costs", "--plot", f"{FILE}/x.png"]),
    ("whatif-save-trace-dir", ["whatif", "--storm", "--no-costs", "--save-trace", DIR]),
    # profile (SPEC section 5)
    ("profile-no-recipe", ["profile"]),
    ("profile-bad-profiler", ["profile", "idle-control", "--profiler", "nope"]),
    ("profile-repeat-0", ["profile", "idle-control", "--profiler", "py-spy", "--repeat", "0"]),
    ("profile-rate-negative", ["profile", "idle-control", "--profiler", "py-spy", "--rate", "-250"]),
    ("profile-output-dir-file", ["profile", "idle-control", "--profiler", "py-spy", "--output-dir", FILE]),
    ("profile-work-dir-file", ["profile", "idle-control", "--profiler", "py-spy", "--work-dir", FILE]),
    ("profile-empty-recipe", ["profile", "", "--profiler", "py-spy"]),
    # run conditions and sweep (SPEC M10, issue 20)
    ("run-storage-unknown", ["run", "idle-control", "--storage", "floppy"]),
    ("run-storage-file-missing", ["run", "idle-control", "--storage-file", MISSING]),
    ("run-storage-file-dir", ["run", "idle-control", "--storage-file", DIR]),
    ("run-storage-file-garbage", ["run", "idle-control", "--storage-file", GARBAGE]),
    ("run-heap-word", ["run", "idle-control", "--heap", "lots"]),
    ("run-heap-negative", ["run", "idle-control", "--heap", "-1"]),
    ("sweep-no-recipe", ["sweep"]),
    ("sweep-unknown-recipe", ["sweep", "no-such-recipe"]),
    ("sweep-samples-0", ["sweep", "idle-control", "--samples", "0"]),
    ("sweep-heap-nan", ["sweep", "idle-control", "--heap", "nan"]),
    ("sweep-storage-unknown", ["sweep", "idle-control", "--storage", "nvme,floppy"]),
    ("sweep-storage-file-missing", ["sweep", "idle-control", "--storage-file", f"mine={MISSING}"]),
    ("sweep-freeze-bogus", ["sweep", "idle-control", "--freeze", "maybe"]),
    ("sweep-output-dir-file", ["sweep", "idle-control", "--output-dir", FILE]),
    ("sweep-plot-dir", ["sweep", "--report", DIR, "--plot", DIR]),
    ("sweep-report-garbage", ["sweep", "--report", GARBAGE]),
    ("sweep-report-no-sweep", ["sweep", "--report", RESULT]),
    ("evidence-dir-without-sweep", ["evidence", EMPTY]),
    # the command itself
    ("unknown-command", ["no-such-command"]),
    ("unknown-option", ["run", "--no-such-option"]),
]


def _materialise(root: Path, args: list[str]) -> tuple[list[str], dict[str, str]]:
    names = {FILE: root / "a-file", DIR: root / "results", EMPTY: root / "empty", GARBAGE: root / "garbage.json",
             RESULT: root / "results" / "tiny.json", MISSING: root / "missing.json"}
    env: dict[str, str] = {}
    out = []
    for arg in args:
        for key, path in names.items():
            arg = arg.replace(key, str(path))
        if arg.startswith("@ENV:"):
            name, _, value = arg[5:].partition("=")
            env[name] = value
            continue
        out.append(arg)
    return out, env


#: the cases also run as the real ``python -m perfsuite`` (one or more per command, and every OSError kind)
REAL = (
    "run-samples-0", "run-output-dir-file", "run-output-dir-sysfs", "run-resume-garbage", "demo-onto-file",
    "demo-sysfs", "fixtures-cache-is-file", "crashcheck-jobs-0", "report-garbage", "evidence-alpha-nan",
    "compare-missing", "ab-not-a-repository", "bisect-not-a-repository", "init-no-package",
    "history-penalty-nan", "bars-garbage", "dashboard-output-sysfs",
    "whatif-speed-0", "store-info-not-sqlite", "store-ingest-store-sysfs", "sweep-samples-0", "run-storage-unknown",
    "whatif-validate-seconds-0", "whatif-debounce-empty", "whatif-csv-sysfs", "profile-repeat-0", "unknown-command",
    "session-repair-file",
)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A regular file, an empty directory, a truncated document and a directory with one valid document."""
    root = tmp_path_factory.mktemp("bad-input")
    (root / "a-file").write_text("a regular file, not a directory\n")
    (root / "empty").mkdir()
    (root / "garbage.json").write_text('{"schema": 1, "status": "comp')  # truncated mid-write
    recipe = Recipe(name="tiny", modes=(ModeSpec("a", "perfsuite.workloads.basic:idle", {"window_ms": 1}),),
                    samples=2, warmup=0, isolation="inline", control_windows=1, settle_ms=0.0)
    run_recipe(recipe, output=root / "results" / "tiny.json", work_root=root / "work")
    (root / "home").mkdir()
    return root


def _check(returncode: int, stderr: str) -> None:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert returncode == 2, (returncode, stderr[-3000:])
    assert len(lines) == 1, stderr[-3000:]
    assert lines[0].startswith("perfsuite: error: ") and len(lines[0]) < 1000, lines[0][:2000]


@pytest.mark.parametrize("name", [name for name, _ in CASES])
def test_bad_input_is_one_line_and_exit_2(
    name: str, workspace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every case through :func:`perfsuite.cli.main` in this process (cheap: no interpreter start)."""
    from perfsuite.cli import main

    args, env = _materialise(workspace, dict(CASES)[name])
    monkeypatch.setenv("PERFSUITE_CACHE", str(workspace / "cache"))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    cwd = workspace / "cwd" / name
    cwd.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "path", list(sys.path))
    status = main(args)
    _check(status, capsys.readouterr().err)


@pytest.fixture(scope="module")
def real_outcomes(workspace: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    home = workspace / "home"
    base = dict(os.environ, HOME=str(home), MPLCONFIGDIR=str(home / "mpl"), PERFSUITE_CACHE=str(workspace / "cache"))

    def run(name: str) -> tuple[str, subprocess.CompletedProcess[str]]:
        args, env = _materialise(workspace, dict(CASES)[name])
        cwd = workspace / "real" / name
        cwd.mkdir(parents=True)
        proc = subprocess.run([sys.executable, "-m", "perfsuite", *args], cwd=cwd, env={**base, **env},
                              capture_output=True, text=True, timeout=300, check=False)
        return name, proc

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(pool.map(run, REAL))


@pytest.mark.parametrize("name", REAL)
def test_real_command_bad_input_is_one_line_and_exit_2(
    name: str, real_outcomes: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    """The same, through the real ``python -m perfsuite`` (a subset: one or more per command)."""
    proc = real_outcomes[name]
    _check(proc.returncode, proc.stderr)


def test_the_tables_cover_every_command() -> None:
    from perfsuite.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices

    def command(name: str) -> str:
        return next(arg for arg in dict(CASES)[name] if not arg.startswith("@ENV:"))

    assert set(commands) <= {command(name) for name, _ in CASES}
    assert set(commands) <= {command(name) for name in REAL}  # the real entry point, every command



def test_an_unexpected_exception_is_one_line_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The last resort of house rule 4: a bug's exception is one line (PERFSUITE_DEBUG=1: the traceback)."""
    from perfsuite import cli

    def broken(name: str | None, session: str | None) -> Any:
        raise ValueError("a bug\nwith a second line")

    monkeypatch.setattr(cli, "resolve_fixture_hook", broken)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delenv("PERFSUITE_DEBUG", raising=False)
    assert cli.main(["run", "idle-control", "--samples", "1"]) == 2
    err = capsys.readouterr().err
    assert _lines(err) == ["perfsuite: error: unexpected ValueError: a bug with a second line "
                           "(PERFSUITE_DEBUG=1 shows the traceback)"]


def test_a_shutil_error_list_becomes_its_first_entry_and_a_count() -> None:
    from perfsuite.cli._common import describe_error

    entries = [(f"/src/f{i}", f"/dst/f{i}", "[Errno 28] No space left on device") for i in range(500)]
    text = describe_error(shutil.Error(entries))
    assert text == "/dst/f0: [Errno 28] No space left on device (and 499 more)"
    assert describe_error(PermissionError(13, "Permission denied", "/x/y")) == "/x/y: Permission denied"


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]
