"""U, checked operation parameters: operation parameters are declared and checked before anything runs.

Unit level: :class:`Param`, the declaration a factory carries (class attribute, ``@accepts``, bare types,
the ``storage`` condition), the check and its "did you mean", the backstop in ``create_operation``; every
operation of ``perfsuite.workloads`` declares its parameters and every committed recipe passes the check;
a run with a bad parameter writes nothing; an operation that declares nothing keeps the old behaviour.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import math
from pathlib import Path
from typing import Any, ClassVar

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.harness import (
    ModeSpec,
    OperationContext,
    Param,
    Recipe,
    accepts,
    check_parameters,
    check_params,
    create_operation,
    declared_parameters,
    load_recipe,
    param_value,
    resolve_factories,
    run_recipe,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("param", "value", "problem"), [
    (Param(int, 1, minimum=1, maximum=10), 0, "expected an integer from 1 to 10, got 0 (at least 1)"),
    (Param(int, 1, minimum=1, maximum=10), 11, "expected an integer from 1 to 10, got 11 (at most 10)"),
    (Param(int), 2.0, "expected an integer, got 2"),
    (Param(int), True, "expected an integer, got true"),
    (Param(float, minimum=0), math.nan, "expected a number >= 0, got nan"),
    (Param(float, maximum=5), math.inf, "expected a number <= 5, got inf"),
    (Param(bool), 1, "expected true or false, got 1"),
    (Param(str, choices=("a", "b")), "c", 'expected one of "a", "b", got "c"'),
    (Param(str), {"x": 1}, "expected a string, got a table"),
])
def test_a_param_names_the_value_and_what_is_allowed(param: Param, value: object, problem: str) -> None:
    assert param.problem(value) == problem


def test_a_param_accepts_what_it_declares() -> None:
    assert Param(float, minimum=0, maximum=1).problem(1) is None  # an integer is a number
    assert Param(object).problem({"any": "table"}) is None
    assert Param(str, choices=("a",)).problem("a") is None
    with pytest.raises(TypeError):
        Param(list)  # type: ignore[arg-type]


class _Declared:
    parameters: ClassVar[dict[str, Any]] = {"records": Param(int, 10, minimum=1), "label": str}

    def __init__(self, ctx: OperationContext) -> None:
        self.records = param_value(ctx, self.parameters, "records")  # type: ignore[arg-type]

    def submit(self, ack: Any) -> None:
        ack(None)


@accepts(window_ms=Param(float, 1.0, minimum=0))
def _function(ctx: OperationContext) -> _Declared:
    return _Declared(ctx)


def _undeclared(ctx: OperationContext) -> _Declared:
    return _Declared(ctx)


def test_declarations_come_from_a_class_attribute_a_decorator_or_nothing() -> None:
    assert set(declared_parameters(_Declared) or {}) == {"records", "label"}
    assert declared_parameters(_Declared)["label"] == Param(str)  # type: ignore[index]  # a bare type
    assert set(declared_parameters(_function) or {}) == {"window_ms"}
    assert declared_parameters(_undeclared) is None  # declares nothing: unchecked, as before
    _function.conditions = frozenset({"storage"})  # type: ignore[attr-defined]
    try:
        assert "storage" in (declared_parameters(_function) or {})  # the run condition it applies (M10)
    finally:
        del _function.conditions  # type: ignore[attr-defined]

    class Broken:
        parameters: ClassVar[list[str]] = ["records"]

    with pytest.raises(PerfsuiteError, match="parameters: expected a mapping of names to Param"):
        declared_parameters(Broken)


def test_an_unknown_key_names_the_known_ones_and_the_closest() -> None:
    with pytest.raises(PerfsuiteError) as info:
        check_params(_Declared, {"recrods": 3}, "mine:Commit")
    assert str(info.value) == ("recrods: unknown parameter of mine:Commit (known: label, records; "
                               "did you mean records?)")
    with pytest.raises(PerfsuiteError, match=r"^zzz: unknown parameter of mine:Commit \(known: label, records\)$"):
        check_params(_Declared, {"zzz": 3}, "mine:Commit")
    with pytest.raises(PerfsuiteError, match="records: expected an integer >= 1, got 0"):
        check_params(_Declared, {"records": 0}, "mine:Commit")
    assert check_params(_undeclared, {"anything": object()}, "mine:raw") is None


def test_create_operation_checks_the_declaration_for_every_caller() -> None:
    ctx = OperationContext(workdir=None, params={"recrods": 2}, mode="m", sample=0)
    with pytest.raises(PerfsuiteError, match=r"mode m: recrods: unknown parameter of .*did you mean records"):
        asyncio.run(create_operation(_Declared, ctx))
    ok = OperationContext(workdir=None, params={"records": 2}, mode="m", sample=0)
    assert asyncio.run(create_operation(_Declared, ok)).records == 2
    assert asyncio.run(create_operation(_Declared, OperationContext(None, {}, "m", 0))).records == 10  # default


def _workload_factories() -> dict[str, Any]:
    """Every operation factory perfsuite.workloads offers a recipe (the names recipes can use)."""
    found = {}
    for module_name in ("perfsuite.workloads.basic", "perfsuite.workloads.engine", "perfsuite.workloads.floors",
                        "perfsuite.workloads.peers.gptme_log", "perfsuite.workloads.peers.langgraph_sqlite"):
        module = importlib.import_module(module_name)
        for name in module.__all__:
            factory = getattr(module, name)
            if inspect.isfunction(factory) and list(inspect.signature(factory).parameters) == ["ctx"]:
                found[f"{module_name}:{name}"] = factory
    return found


def test_every_workloads_operation_declares_its_parameters() -> None:
    factories = _workload_factories()
    assert len(factories) >= 18
    undeclared = [spec for spec, factory in factories.items() if declared_parameters(factory, spec) is None]
    assert undeclared == []
    for spec, factory in factories.items():
        for name, param in (declared_parameters(factory, spec) or {}).items():
            assert param.default is None or param.problem(param.default) is None, (spec, name)  # defaults allowed


def test_every_committed_recipe_passes_the_check() -> None:
    for path in sorted((ROOT / "recipes").glob("*.toml")):
        recipe = load_recipe(path)
        check_parameters(recipe, resolve_factories(recipe))


def test_a_run_with_a_misspelled_parameter_measures_and_writes_nothing(tmp_path: Path) -> None:
    recipe = Recipe(name="typo", modes=(ModeSpec("a", "perfsuite.workloads.basic:idle", {"windw_ms": 5}),),
                    samples=1, warmup=0, isolation="inline", control_windows=1, settle_ms=0.0)
    with pytest.raises(PerfsuiteError, match=r"typo: modes\.a\.windw_ms: unknown parameter .*did you mean window_ms"):
        run_recipe(recipe, output_dir=tmp_path / "out", work_root=tmp_path / "w")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_an_operation_that_declares_nothing_gets_its_keys_as_written(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "rawops.py").write_text(
        "seen = []\n"
        "class Raw:\n"
        "    def __init__(self, ctx):\n        seen.append(dict(ctx.params))\n"
        "    def submit(self, ack):\n        ack(None)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    recipe = Recipe(name="raw", modes=(ModeSpec("a", "rawops:Raw", {"windw_ms": 5, "anything": "goes"}),),
                    samples=1, warmup=0, isolation="inline", control_windows=1, settle_ms=0.0)
    result = run_recipe(recipe, output_dir=tmp_path / "out", work_root=tmp_path / "w")
    assert result.document["modes"]["a"]["params"] == {"windw_ms": 5, "anything": "goes"}
    assert importlib.import_module("rawops").seen[-1] == {"windw_ms": 5, "anything": "goes"}


def test_the_publication_floor_checks_the_parameters_of_the_publication_it_names(tmp_path: Path) -> None:
    """The floor's declaration is the union of what its modelled publications accept (checked before the
    run); the publication it records checks its own when the floor records it."""
    from perfsuite.workloads.floors import FLOOR, record_publication

    assert {"publication", "path", "save", "conversation", "to"} <= set(FLOOR)
    ctx = OperationContext(workdir=tmp_path, params={}, mode="floor", sample=0, scratch=tmp_path)
    with pytest.raises(PerfsuiteError, match=r"mode floor: path: unknown parameter of perfsuite.workloads.engine:"
                                             r"registry_save"):
        asyncio.run(record_publication(ctx, "registry_save", {"path": "async"}))


def test_an_operations_non_finite_metrics_are_not_measured(tmp_path: Path, monkeypatch) -> None:
    """M8, bad values never written: a NaN or infinite metric is recorded as null ("not measured"), never written as NaN
    (the results hold finite numbers only; it used to fail the write with an "unexpected" ValueError)."""
    (tmp_path / "nanops.py").write_text(
        "class Nan:\n"
        "    def __init__(self, ctx):\n        pass\n"
        "    def submit(self, ack):\n        ack(None)\n"
        "    def metrics(self):\n"
        "        return {'x': float('nan'), 'y': float('inf'), 'z': 10 ** 400, 'ok': 3,\n"
        "                'phases_ms': {'a': float('nan'), 'b': 1.0}, 'drain_ms': float('inf')}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    recipe = Recipe(name="nan", modes=(ModeSpec("a", "nanops:Nan"),), samples=1, warmup=0, isolation="inline",
                    control_windows=1, settle_ms=0.0)
    result = run_recipe(recipe, output_dir=tmp_path / "out", work_root=tmp_path / "w")
    [sample] = result.document["modes"]["a"]["samples"]
    assert {k: sample["metrics"][k] for k in ("x", "y", "z", "ok")} == {"x": None, "y": None, "z": None, "ok": 3}
    assert sample["phases_ms"] == {"b": 1.0} and sample.get("drain_ms") is None
    from perfsuite.harness import load_results

    assert load_results(result.path)["modes"]["a"]["samples"][0]["metrics"]["x"] is None  # reads back strictly
