"""The pytest plugin: measure your own callable or coroutine with the harness's method.

Registered as a ``pytest11`` entry point, so installing perfsuite makes it available. The
``perfsuite_bench`` fixture runs a one-mode recipe **inline** (in the test's process: a test's function
cannot be imported by a worker process) with everything else of the method: the 5 ms heartbeat and its
max gap (M1), GC accounting (M2), warm-up samples discarded and samples alternated with idle-control
windows (M4), the verdict against a target (M7), and a results document per call (M8)::

    import asyncio

    def test_checksum(perfsuite_bench):
        run = perfsuite_bench(lambda: sum(range(100_000)), target_ms=20)   # blocks the loop thread
        assert run.met                                                      # every sample under 20 ms

    def test_async_flush(perfsuite_bench):
        async def flush() -> dict[str, int]:
            await asyncio.sleep(0.002)
            return {"bytes_written": 4096}        # numbers returned become metrics (compared as costs)
        perfsuite_bench(flush, name="flush")

A plain callable runs on the event loop's thread (submission = acknowledgement = its duration); a
coroutine function is started as a task (submission = creating it, acknowledgement = its end). A
returned mapping's numbers are recorded as ``metrics.<name>``. ``fixture=DIR`` copies DIR privately
for every sample and passes the copy as the first argument.

Options: ``--perfsuite-dir DIR`` (where results documents go; default: a temporary directory),
``--perfsuite-samples N``, ``--perfsuite-warmup N``, and ``--perfsuite-compare BASE`` (a stored run: a
results directory or file), which compares every measurement against BASE with ``perfsuite compare``'s
gate at the end of the session; with ``--perfsuite-compare-fail`` a failing gate fails the session,
as pytest-benchmark's ``--benchmark-compare-fail`` does. Two separate sessions are two separate runs:
costs gate, timings are information (``--perfsuite-compare-timings gate``: they gate unless a
run is loaded). The paired path is ``--perfsuite-ab BASE`` (:mod:`perfsuite.pytest_plugin._ab`): BASE and
the working tree measured in alternating fresh sessions, round by round, compared as ``perfsuite ab`` does.
``--perfsuite-commit`` / ``--perfsuite-branch`` name the measured commit when the rootdir's git cannot.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.pytest_plugin._ab import (
    add_ab_options,
    deselect_for_round,
    pytest_runtestloop,
    write_imported,
)

__all__ = ["Measurement", "PerfsuiteBench", "pytest_collection_modifyitems", "pytest_runtestloop", "registry"]

_NAME = re.compile(r"[^A-Za-z0-9_-]+")


class _Registry:
    """The factories of this session's measurements, reachable as ``perfsuite.pytest_plugin:registry.<key>``:
    the harness resolves operations by ``module:attribute`` name, and this is the name it gets."""

    def __init__(self) -> None:
        self._factories: dict[str, Callable[..., Any]] = {}

    def add(self, key: str, factory: Callable[..., Any]) -> str:
        self._factories[key] = factory
        return f"{__name__}:registry.{key}"

    def remove(self, key: str) -> None:
        self._factories.pop(key, None)

    def __getattr__(self, key: str) -> Callable[..., Any]:
        try:
            return self.__dict__["_factories"][key]
        except KeyError:
            raise AttributeError(key) from None


#: where the harness finds the operations of the running measurements
registry = _Registry()


@dataclass(frozen=True, slots=True)
class Measurement:
    """One call of the fixture: its results document (written to ``path``) and the M7 verdict."""

    name: str
    path: Path
    document: Mapping[str, Any]

    @property
    def verdict(self) -> Mapping[str, Any]:
        """The mode's M7 verdict (``met``, ``target_ms``, ``missed``, ``worst_ms``...)."""
        return next(iter(self.document["modes"].values()))["verdict"]

    @property
    def met(self) -> bool:
        """True only if every sample's max heartbeat gap was under the target, GC samples included."""
        return bool(self.verdict.get("met"))

    def median(self, metric: str) -> float | None:
        """The median of a flattened metric (``max_gap_ms``, ``ack_ms``, ``metrics.bytes_written``...)."""
        summary = next(iter(self.document["modes"].values()))["summary"].get(metric)
        return None if summary is None else float(summary["median"])

    def line(self) -> str:
        """One line for the terminal summary."""
        v = self.verdict
        target = f"{float(v.get('target_ms') or 0):g} ms"
        verdict = f"met <= {target}" if v.get("met") else f"missed {target} in {v.get('missed')} of {v.get('samples')}"
        gap, ack = self.median("max_gap_ms"), self.median("ack_ms")
        figures = ", ".join(f"{label} {value:.3f} ms" for label, value in (("max gap", gap), ("ack", ack))
                            if value is not None)
        load = " [LOADED machine: its timings read high]" if _loaded(self.document) else ""
        return f"{self.name}: median {figures}; {verdict}; {self.path}{load}"


def _loaded(document: Mapping[str, Any]) -> bool:
    """Whether the run's idle control says the machine was loaded."""
    from perfsuite.harness import machine_load

    control = (document.get("control") or {}).get("samples") or []
    return bool(machine_load(control, float(document["recipe"].get("heartbeat_ms", 5.0))).loaded)


class _CallOperation:
    """The operation protocol around a plain callable or a coroutine function (SPEC M4)."""

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], workdir: Path | None) -> None:
        self._fn = fn
        self._args = (workdir, *args) if workdir is not None else args
        self._result: Any = None
        self._task: asyncio.Future[Any] | None = None

    def submit(self, ack: Callable[[BaseException | None], None]) -> None:
        if inspect.iscoroutinefunction(self._fn):
            self._task = asyncio.ensure_future(self._fn(*self._args))
            self._task.add_done_callback(lambda task: self._done(task, ack))
            return
        try:
            self._result = self._fn(*self._args)
        except Exception as exc:
            ack(exc)
            return
        ack(None)

    def _done(self, task: asyncio.Future[Any], ack: Callable[[BaseException | None], None]) -> None:
        if task.cancelled():
            ack(asyncio.CancelledError())
        elif task.exception() is not None:
            ack(task.exception())
        else:
            self._result = task.result()
            ack(None)

    def metrics(self) -> Mapping[str, object]:
        if not isinstance(self._result, Mapping):
            return {}
        return {k: v for k, v in self._result.items() if isinstance(v, int | float) and not isinstance(v, bool)}

    def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()


@dataclass
class _Session:
    """What the plugin keeps for one pytest session."""

    directory: Path | None  # None: a temporary directory, made on first use
    samples: int | None
    warmup: int | None
    compare: str | None
    compare_fail: bool
    measured: Mapping[str, Any] | None = None  # the measured repository (the rootdir's git, or options)
    timings: str = "info"  # what two separate runs' timings may do (--perfsuite-compare-timings)
    round: int | None = None  # a round of --perfsuite-ab (a sub-session): one sample, allocation in round 0
    measurements: list[Measurement] = field(default_factory=list)
    report: list[str] = field(default_factory=list)


class PerfsuiteBench:
    """The ``perfsuite_bench`` fixture: call it with the function to measure (see the module docstring)."""

    def __init__(self, session: _Session, test_name: str) -> None:
        self._session = session
        self._test = test_name
        self._names: set[str] = set()

    def __call__(
        self,
        fn: Callable[..., Any],
        *args: Any,
        name: str | None = None,
        target_ms: float = 20.0,
        samples: int | None = None,
        warmup: int | None = None,
        fixture: str | Path | None = None,
        allocation: bool = False,
    ) -> Measurement:
        """Measure ``fn(*args)`` (a callable or coroutine function); returns the :class:`Measurement`."""
        from perfsuite.harness import ModeSpec, Recipe, new_results_path, run_recipe

        if not callable(fn):
            raise TypeError(f"perfsuite_bench: expected a callable or a coroutine function, got {fn!r}")
        recipe_name = _NAME.sub("-", f"{self._test}-{name}" if name else self._test).strip("-") or "bench"
        if recipe_name in self._names:
            raise ValueError(f"perfsuite_bench: {recipe_name!r} is measured twice in one test: give each a name=")
        self._names.add(recipe_name)
        workdir = Path(fixture) if fixture is not None else None
        if workdir is not None and not workdir.is_dir():
            raise PerfsuiteError(f"perfsuite_bench: fixture directory not found: {workdir}")
        key = re.sub(r"\W", "_", recipe_name)
        if not key.isidentifier():
            key = f"op_{key}"
        operation = registry.add(key, lambda ctx: _CallOperation(fn, args, ctx.workdir))
        recipe = Recipe(
            name=recipe_name,
            description=f"pytest: {self._test}" + (f" ({name})" if name else ""),
            modes=(ModeSpec("call", operation),),
            fixture="pytest" if workdir is not None else None,
            isolation="inline",
            target_ms=target_ms,
            allocation=allocation,
        ).with_overrides(
            samples=samples if samples is not None else self._session.samples,
            warmup=warmup if warmup is not None else self._session.warmup,
        )
        if self._session.round is not None:  # an A/B round: one sample; the costs' allocation pass once
            recipe = dataclasses.replace(recipe.with_overrides(samples=1), allocation=allocation and
                                         self._session.round == 0)
        directory = self._session.directory or Path()
        try:
            result = run_recipe(recipe, output=new_results_path(directory, recipe_name),
                                fixture=workdir, fixture_info={"name": str(workdir)} if workdir else None,
                                measured=self._session.measured)
        finally:
            registry.remove(key)
        measurement = Measurement(recipe_name, result.path, result.document)
        self._session.measurements.append(measurement)
        return measurement


# -- hooks ------------------------------------------------------------------------------------------------


def _count(limit: str) -> Callable[[str], int]:
    """An option's integer inside ``perfsuite._limits.LIMITS[limit]``, refused when pytest parses it."""
    import argparse

    from perfsuite._limits import check_limit

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        problem = check_limit(limit, value)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value

    return parse


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("perfsuite", "perfsuite: heartbeat-gap measurements (the perfsuite_bench fixture)")
    group.addoption("--perfsuite-dir", metavar="DIR",
                    help="write perfsuite results documents here (default: a temporary directory)")
    group.addoption("--perfsuite-samples", type=_count("samples"), metavar="N",
                    help="samples per measurement (default: 6)")
    group.addoption("--perfsuite-warmup", type=_count("warmup"), metavar="N",
                    help="discarded warm-up samples (default: 1)")
    group.addoption("--perfsuite-compare", metavar="BASE",
                    help="compare every measurement with a stored run (results directory or file) at the end")
    group.addoption("--perfsuite-compare-fail", action="store_true",
                    help="with --perfsuite-compare: fail the session when the comparison gate fails "
                    "(a regression, or inconclusive: whatever makes `perfsuite compare` exit non-zero)")
    group.addoption("--perfsuite-compare-timings", choices=("info", "gate"), default="info",
                    help="with --perfsuite-compare (two separate runs): timings are information (default: costs "
                    "gate), or gate unless either run was measured on a loaded machine")
    group.addoption("--perfsuite-commit", metavar="SHA",
                    help="the commit measured (default: the git repository of the rootdir, else the CI's variables)")
    group.addoption("--perfsuite-branch", metavar="NAME", help="the branch measured (default: the checkout's)")
    add_ab_options(group)


_KEY = pytest.StashKey[_Session]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "perfsuite: a test that measures with the perfsuite_bench fixture")
    if config.getoption("perfsuite_compare_fail") and not config.getoption("perfsuite_compare"):
        raise pytest.UsageError("--perfsuite-compare-fail needs --perfsuite-compare BASE")
    if config.getoption("perfsuite_ab") and config.getoption("perfsuite_compare"):
        raise pytest.UsageError("--perfsuite-ab measures both sides itself: give no --perfsuite-compare")
    directory = config.getoption("perfsuite_dir")
    from perfsuite.harness import measured_repository

    try:  # the code measured is the rootdir's repository, whatever perfsuite's install is
        measured = measured_repository(config.rootpath, commit=config.getoption("perfsuite_commit"),
                                       branch=config.getoption("perfsuite_branch"))
    except PerfsuiteError as exc:
        raise pytest.UsageError(str(exc).replace("--commit", "--perfsuite-commit")) from None
    config.stash[_KEY] = _Session(
        directory=Path(directory) if directory else None,
        samples=config.getoption("perfsuite_samples"),
        warmup=config.getoption("perfsuite_warmup"),
        compare=config.getoption("perfsuite_compare"),
        compare_fail=config.getoption("perfsuite_compare_fail"),
        measured=measured,
        timings=config.getoption("perfsuite_compare_timings"),
        round=config.getoption("perfsuite_round"),
    )


@pytest.fixture
def perfsuite_bench(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> PerfsuiteBench:
    """Measure a callable or coroutine function under the heartbeat; see :mod:`perfsuite.pytest_plugin`."""
    session = request.config.stash[_KEY]
    if session.directory is None:
        session.directory = tmp_path_factory.mktemp("perfsuite")
    return PerfsuiteBench(session, request.node.name)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """--perfsuite-compare: run the gate per measurement; with --perfsuite-compare-fail, fail the session."""
    state = session.config.stash.get(_KEY, None)
    if state is not None and state.round is not None:
        write_imported(session.config, state.directory)  # an A/B round: which code this session imported
    if state is None or not state.compare or not state.measurements:
        return
    from perfsuite.report import compare

    worst = 0
    notes: set[str] = set()
    for m in state.measurements:
        try:
            gate = compare(state.compare, m.path, timings=state.timings)
        except PerfsuiteError as exc:
            if "absent from" in str(exc):  # a new measurement: nothing stored to compare with
                state.report.append(f"{m.name}: not in {state.compare} (new)")
                continue
            state.report.append(f"{m.name}: cannot compare: {exc}")
            worst = max(worst, 2)
            continue
        status = int(gate.exit_status)
        worst = max(worst, status)
        # compare's exit statuses: 1 a regression, 3 "cannot tell", which is never a pass
        named = [*gate.regressions, *getattr(gate, "inconclusive", ())]
        found = [f"{c.label} {c.ratio:.2f}x" for c in named]
        word = {0: "no regression", 1: "REGRESSION", 3: "INCONCLUSIVE"}.get(status, f"gate exit status {status}")
        loaded = f" [loaded machine: {'; '.join(gate.loaded)}]" if getattr(gate, "loaded", ()) else ""
        state.report.append(f"{m.name}: {word}" + (f": {', '.join(found)}" if found else "") + loaded)
        if getattr(gate, "timing_note", None):  # a loaded run: which metrics gated instead, and why
            notes.add(str(getattr(gate, "load_policy", None) or gate.timing_note))
    # what the comparison of two separate runs could judge, in the first line of its report
    state.report[:0] = sorted(notes)
    if worst and state.compare_fail and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        state.report.append(f"--perfsuite-compare-fail: the comparison with {state.compare} failed the session")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(_KEY, None)
    if state is None or not (state.measurements or state.report):
        return
    terminalreporter.section("perfsuite")
    if state.round is None and state.measurements and not config.getoption("perfsuite_ab"):
        loaded = [m.name for m in state.measurements if _loaded(m.document)]
        terminalreporter.write_line(  # a run says how loaded its machine was
            f"machine: LOADED during {len(loaded)} of {len(state.measurements)} measurement(s) ({', '.join(loaded)}): "
            "the idle control's median gap was more than 1 ms over the heartbeat period" if loaded else
            f"machine: quiet during all {len(state.measurements)} measurement(s) (idle control within 1 ms of the "
            "heartbeat period)")
    for m in state.measurements:
        terminalreporter.write_line(m.line())
    if state.compare:
        terminalreporter.write_line(f"compared with {state.compare}:")
        for line in state.report:
            terminalreporter.write_line(f"  {line}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """An A/B round (a sub-session of ``--perfsuite-ab``) runs only the tests that measure."""
    deselect_for_round(config, items)
