"""The pytest plugin (SPEC section 5), run with pytester: behaviour only, never timing.

The regression is planted in a cost (a metric the measured coroutine returns), which is deterministic;
the session outcome for each gate status is checked with a stubbed comparison.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy  # noqa: F401 - loaded once, outside pytester's in-process runs (see below)
import pytest

import perfsuite.harness
import perfsuite.report
from tests.docs.pages import page

pytest_plugins = ("pytester",)

ROOT = Path(__file__).resolve().parents[1]
#: the plugin explicitly, entry-point autoloading off: the same whether or not perfsuite is installed
PLUGIN = ("-p", "perfsuite.pytest_plugin", "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning")
FAST = ("--perfsuite-samples", "4", "--perfsuite-warmup", "0")

PLANTED = """
import asyncio, os

def test_flush(perfsuite_bench):
    async def flush():
        await asyncio.sleep(0)
        return {"bytes_written": int(os.environ["PLANTED_BYTES"])}
    run = perfsuite_bench(flush)
    assert run.verdict["samples"] == 4 and run.median("metrics.bytes_written") == int(os.environ["PLANTED_BYTES"])
"""


@pytest.fixture(autouse=True)
def _no_autoload(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


def _documents(directory: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(directory.glob("*.json")) if not p.name.endswith(".pyperf.json")]


def test_the_entry_point_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"perfsuite": "perfsuite.pytest_plugin"}


def test_the_readme_example_runs_and_writes_results(pytester: pytest.Pytester) -> None:
    readme = page("own-code.md")
    section = readme.split("## pytest: measure your own code", 1)[1]
    example = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert len([ln for ln in example.splitlines() if ln.strip()]) <= 10
    pytester.makepyfile(test_perf=example)
    result = pytester.runpytest(*PLUGIN, *FAST, "--perfsuite-dir", "out")
    result.assert_outcomes(passed=2)
    docs = _documents(pytester.path / "out")
    assert sorted(d["recipe"]["name"] for d in docs) == ["test_checksum", "test_flush"]
    for doc in docs:
        [mode] = doc["modes"].values()
        assert doc["status"] == "complete" and doc["recipe"]["isolation"] == "inline"
        assert len(mode["samples"]) == 4 and len(doc["control"]["samples"]) == 4  # idle control interleaved
        assert set(mode["verdict"]) >= {"met", "target_ms", "missed", "missed_with_gc"}
        assert all("gc" in s and "max_gap_ms" in s for s in mode["samples"])  # M1, M2 per sample
    flush = next(d for d in docs if d["recipe"]["name"] == "test_flush")
    assert flush["modes"]["call"]["summary"]["metrics.bytes_written"]["median"] == 4096
    # a loaded machine is said: a line ends [LOADED machine: ...] when the machine was loaded
    result.stdout.fnmatch_lines(["*perfsuite*", "test_checksum: median max gap *; *; out/test_checksum-*.json*"])


def test_a_planted_regression_fails_the_session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # the gate needs the report extra; imported here, outside the in-process runs, because pytester drops
    # the modules an inner run imported and numpy's C extensions cannot be loaded twice in one process
    pytest.importorskip("scipy.stats")
    pytester.makepyfile(test_planted=PLANTED)
    monkeypatch.setenv("PLANTED_BYTES", "1000")
    pytester.runpytest(*PLUGIN, *FAST, "--perfsuite-dir", "base").assert_outcomes(passed=1)
    monkeypatch.setenv("PLANTED_BYTES", "5000")  # five times the bytes: a cost regression
    result = pytester.runpytest(*PLUGIN, *FAST, "--perfsuite-dir", "new", "--perfsuite-compare", "base",
                                "--perfsuite-compare-fail")
    result.assert_outcomes(passed=1)  # the test itself passed: the session fails on the comparison
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["compared with base:", "*test_flush: REGRESSION*metrics.bytes_written 5.00x*",
                                 "*--perfsuite-compare-fail*failed the session*"])
    # without --perfsuite-compare-fail the comparison is reported and the session passes
    report_only = pytester.runpytest(*PLUGIN, *FAST, "--perfsuite-dir", "new", "--perfsuite-compare", "base")
    assert report_only.ret == pytest.ExitCode.OK
    report_only.stdout.fnmatch_lines(["*test_flush: REGRESSION*metrics.bytes_written*"])


@dataclass(frozen=True)
class _Gate:
    exit_status: int
    regressions: tuple = ()
    inconclusive: tuple = ()


@dataclass(frozen=True)
class _Change:
    label: str
    ratio: float


@pytest.mark.parametrize(("status", "outcome", "word"), [
    (0, pytest.ExitCode.OK, "no regression"),
    (1, pytest.ExitCode.TESTS_FAILED, "REGRESSION"),
    (3, pytest.ExitCode.TESTS_FAILED, "INCONCLUSIVE: test_flush/call ack_ms 1.50x"),  # cannot tell: not a pass
    (2, pytest.ExitCode.TESTS_FAILED, "gate exit status 2"),
])
def test_the_session_follows_the_gates_exit_status(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                   status: int, outcome: pytest.ExitCode, word: str) -> None:
    calls: list[tuple[str, Path]] = []

    def stub(base: str, new: Path, **_: object) -> _Gate:
        calls.append((base, Path(new)))
        return _Gate(status, inconclusive=(_Change("test_flush/call ack_ms", 1.5),) if status == 3 else ())

    monkeypatch.setattr(perfsuite.report, "compare", stub)
    monkeypatch.setenv("PLANTED_BYTES", "1")
    pytester.makepyfile(test_planted=PLANTED)
    result = pytester.runpytest(*PLUGIN, *FAST, "--perfsuite-dir", "new", "--perfsuite-compare", "stored",
                                "--perfsuite-compare-fail")
    assert result.ret == outcome
    result.stdout.fnmatch_lines([f"*test_flush: {word}*"])
    [(base, new)] = calls
    assert base == "stored" and new.parent.name == "new" and new.name.startswith("test_flush-")


def test_a_measurement_missing_from_the_stored_run_is_new_not_a_failure(pytester: pytest.Pytester,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANTED_BYTES", "1")
    pytester.makepyfile(test_planted=PLANTED)
    (pytester.path / "empty").mkdir()
    pytester.makepyfile(test_other="def test_other(perfsuite_bench):\n    perfsuite_bench(lambda: None)\n")
    pytester.runpytest(*PLUGIN, *FAST, "--perfsuite-dir", "base", "test_other.py").assert_outcomes(passed=1)
    result = pytester.runpytest(*PLUGIN, *FAST, "--perfsuite-dir", "new", "--perfsuite-compare", "base",
                                "--perfsuite-compare-fail", "test_planted.py")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*test_flush: not in base (new)*"])


def test_compare_fail_needs_compare(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*PLUGIN, "--perfsuite-compare-fail")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--perfsuite-compare-fail needs --perfsuite-compare BASE*"])


def test_bad_calls_are_errors(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bad="""
        import pytest
        def test_twice(perfsuite_bench):
            perfsuite_bench(lambda: None)
            with pytest.raises(ValueError, match="measured twice"):
                perfsuite_bench(lambda: None)
        def test_not_callable(perfsuite_bench):
            with pytest.raises(TypeError):
                perfsuite_bench(42)
        def test_failing_callable(perfsuite_bench):
            def boom():
                raise RuntimeError("boom")
            with pytest.raises(Exception, match="boom"):
                perfsuite_bench(boom)
    """)
    pytester.runpytest(*PLUGIN, *FAST, "--perfsuite-dir", "out").assert_outcomes(passed=3)


@pytest.mark.parametrize("option", ["--perfsuite-samples=1000000000000", "--perfsuite-warmup=-1",
                                    "--perfsuite-samples=six"])
def test_an_unbounded_or_bad_count_is_a_usage_error(pytester: pytest.Pytester, option: str) -> None:
    """Bad input is one line: the counts are bounded by perfsuite._limits when pytest parses them, not when a test
    runs."""
    pytester.makepyfile(test_perf="def test_nothing():\n    pass\n")
    result = pytester.runpytest(*PLUGIN, option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*argument {option.split('=')[0]}: expected an integer*"])
