"""No import circle among perfsuite modules (SPEC section 1: arrows point one way).

Read from the source (the AST), not from ``sys.modules``: a module-level import counts wherever it sits at
the top of a module, inside ``if TYPE_CHECKING:``, ``if``/``try`` blocks included (a typing-only import
is still an arrow). Inside a room (``perfsuite.engine``, ``perfsuite.harness``, ``perfsuite.report``, ...),
imports deferred into functions count too: a deferred import is a circle hidden from the interpreter, not
removed.
"""

from __future__ import annotations

import ast

from tests.test_arrows import graph

TOOL = graph  # the project's import-graph tool (scripts/dev/import_graph.py), loaded once
cycles = TOOL.cycles
top_level = TOOL.top_level


def import_graph(*, deferred: bool) -> dict[str, set[str]]:
    return TOOL.module_graph(deferred=deferred)  # type: ignore[no-any-return]


def test_the_detector_finds_a_circle():
    """The check can fail: a two-module circle and a three-module one are both reported."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a"}}
    assert sorted(cycles(graph)) == [["a", "b"], ["c", "d", "e"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_typing_only_imports_count_and_deferred_ones_only_when_asked():
    """``if TYPE_CHECKING:`` and ``try`` imports are module-level arrows; a function's import is deferred."""
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\ntry:\n    import b\n"
              "except ImportError:\n    import c\ndef f():\n    import d\n")
    names = {alias.name for node in top_level(ast.parse(source).body) for alias in node.names}
    assert names == {"TYPE_CHECKING", "a", "b", "c"}
    graph = import_graph(deferred=False)
    assert "perfsuite.engine._session" in graph["perfsuite.engine._filesession"]  # the reader is not blind


def test_no_import_circle_among_perfsuite_modules():
    assert cycles(import_graph(deferred=False)) == []


def test_no_import_circle_inside_the_engine_even_deferred():
    graph = import_graph(deferred=True)
    engine = {m: {t for t in targets if t.startswith("perfsuite.engine")}
              for m, targets in graph.items() if m.startswith("perfsuite.engine")}
    assert cycles(engine) == []


def test_no_import_circle_inside_a_room_even_deferred():
    """The machine-load probe runs a recipe, so it sits above the runner, not inside the load rule the runner
    reads; a comparison's value and verdict line sit below the gate that builds it and the renderers that
    print it; a kill child's I/O layer sits below both children. None may close a circle again, not even
    through a function's deferred import."""
    assert TOOL.circles()["rooms"] == []


def test_the_tool_reports_no_circle_of_any_kind(capsys):
    """What ``python scripts/dev/import_graph.py`` prints is what is checked: no circle between modules,
    inside a room (deferred imports counted) or between rooms (every import counted)."""
    assert TOOL.circles() == {"modules": [], "rooms": [], "packages": []}
    assert TOOL.main([]) == 0
    assert "import circles: none" in capsys.readouterr().out


def test_the_tool_finds_a_deferred_circle_inside_a_room(tmp_path):
    """The check can fail: two modules of one room importing each other inside functions are a circle, and
    a package importing back the package that imports it is one between rooms."""
    package = tmp_path / "perfsuite"
    for room in ("a", "b"):
        (package / room).mkdir(parents=True)
        (package / room / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "a" / "_x.py").write_text("def f():\n    from perfsuite.a import _y\n")
    (package / "a" / "_y.py").write_text("def g():\n    from perfsuite.a import _x\n")
    (package / "b" / "_z.py").write_text("import perfsuite.a._x\n")
    (package / "a" / "_w.py").write_text("def h():\n    import perfsuite.b._z\n")
    found = TOOL.circles(package)
    assert found["modules"] == [] and found["rooms"] == [["perfsuite.a._x", "perfsuite.a._y"]]
    assert found["packages"] == [["a", "b"]]
