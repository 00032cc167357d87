"""The facades export exactly their public names (httpx style), and the arrows of SPEC section 1 hold."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys
import types

import pytest

import perfsuite.engine
import perfsuite.engine.events
import perfsuite.engine.testing

ROOT = pathlib.Path(__file__).resolve().parents[1] / "perfsuite"


def public_names(module: types.ModuleType) -> set[str]:
    """Names a user can reach without an underscore, submodules excluded."""
    return {n for n in dir(module) if not n.startswith("_") and not isinstance(getattr(module, n), types.ModuleType)}


@pytest.mark.parametrize("module", [perfsuite.engine, perfsuite.engine.events, perfsuite.engine.testing],
                         ids=lambda m: m.__name__)
def test_engine_all_is_exactly_its_public_names(module: types.ModuleType) -> None:
    assert set(module.__all__) == public_names(module)
    assert len(set(module.__all__)) == len(module.__all__)


def test_the_engine_facade_is_the_session_api_alone() -> None:
    """SPEC section 1, public names: the events and the test doubles live in their own public modules, each name in one
    place; the facade does not re-export them (that would not narrow it)."""
    facade = set(perfsuite.engine.__all__)
    assert facade.isdisjoint(perfsuite.engine.events.__all__)
    assert facade.isdisjoint(perfsuite.engine.testing.__all__)
    assert set(perfsuite.engine.events.__all__).isdisjoint(perfsuite.engine.testing.__all__)
    assert {"Session", "SessionSettings", "OsFileSystem", "SystemClock", "Message"} <= facade


def _imports(package: str) -> set[str]:
    found: set[str] = set()
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
    return found


def test_engine_imports_nothing_from_the_rest_of_perfsuite():
    bad = {m for m in _imports("engine") if m.startswith("perfsuite") and not m.startswith("perfsuite.engine")}
    assert bad == set()


def test_harness_knows_nothing_about_the_engine():
    bad = {m for m in _imports("harness") if m.startswith("perfsuite.engine") or m.startswith("perfsuite.workloads")}
    assert bad == set()


def test_phases_are_declared_once_by_the_engine_and_the_report_stays_off_its_import() -> None:
    """``PHASES`` has one home (E4's phases): the report orders its breakdown by the engine's name, and imports it
    only when it orders one, so ``import perfsuite.report`` (the CI gate, the pytest plugin) loads no engine."""
    declared = sorted(path.relative_to(ROOT).as_posix() for path in ROOT.rglob("*.py")
                      for node in ast.parse(path.read_text()).body
                      if isinstance(node, ast.Assign | ast.AnnAssign)
                      and "PHASES" in {t.id for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                                       if isinstance(t, ast.Name)})
    assert declared == ["engine/_pipeline.py"]
    code = "import sys, perfsuite.report; print('perfsuite.engine' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"


def _defined_here(module: types.ModuleType) -> set[str]:
    """The public classes and functions ``module`` defines itself (not what it imports)."""
    return {n for n, v in vars(module).items() if not n.startswith("_") and getattr(v, "__module__", None)
            == module.__name__ and (isinstance(v, type) or callable(v))}


def test_the_run_modules_of_workloads_export_what_they_define():
    """``perfsuite.workloads.plan`` and ``.runs`` are public modules (the workloads facade is its modules): their
    ``__all__`` names exist, and every class and function they define is in it (public names only)."""
    import perfsuite.workloads.plan
    import perfsuite.workloads.runs

    for module in (perfsuite.workloads.plan, perfsuite.workloads.runs):
        assert all(hasattr(module, name) for name in module.__all__), module.__name__
        assert _defined_here(module) <= set(module.__all__), module.__name__
        assert len(set(module.__all__)) == len(module.__all__)
    assert {"prepare_runs", "run_plans", "RunBatch", "RunOutcome", "RunStarted", "Stopped"} <= set(
        perfsuite.workloads.runs.__all__)


def test_the_cli_exports_its_entry_points_and_no_mutable_hooks():
    """``perfsuite.cli`` exports the command line's entry points; what tests replace is injected through
    ``main(argv, services=CliServices(...))``, a frozen value, never a module global (tests inject, never patch)."""
    import dataclasses
    import inspect

    import perfsuite.cli

    assert perfsuite.cli.__all__ == ["DEFAULT_RUN_RECIPES", "CliServices", "build_parser", "main"]
    assert all(hasattr(perfsuite.cli, name) for name in perfsuite.cli.__all__)
    assert [n for n in dir(perfsuite.cli) if n.endswith("_hook")] == []
    parameter = inspect.signature(perfsuite.cli.main).parameters["services"]
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is None
    services = perfsuite.cli.CliServices()
    assert {f.name for f in dataclasses.fields(services)} == {"resolve_fixture", "writer", "load_probe"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        services.writer = print  # type: ignore[misc]
