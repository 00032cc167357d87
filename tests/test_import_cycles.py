"""No import circle among perfsuite modules (SPEC section 1: arrows point one way).

Read from the source (the AST), not from ``sys.modules``: a module-level import counts wherever it sits at
the top of a module, inside ``if TYPE_CHECKING:``, ``if``/``try`` blocks included (a typing-only import
is still an arrow). Inside a room (``perfsuite.engine``, ``perfsuite.harness``, ``perfsuite.report``, ...),
imports deferred into functions count too: a deferred import is a circle hidden from the interpreter, not
removed.
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterator

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "perfsuite"


def _modules() -> dict[str, pathlib.Path]:
    found: dict[str, pathlib.Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _top_level(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Import statements that run when the module is imported: not those inside functions or classes."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _top_level(block)


def _targets(module: str, path: pathlib.Path, node: ast.Import | ast.ImportFrom, known: set[str]) -> set[str]:
    """The perfsuite modules one import statement names (``from pkg import sub`` names ``pkg.sub``)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in known}
    base = node.module or ""
    if node.level:
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
    found = set()
    for alias in node.names:
        if f"{base}.{alias.name}" in known:
            found.add(f"{base}.{alias.name}")
        elif base in known:
            found.add(base)
    return found


def import_graph(*, deferred: bool) -> dict[str, set[str]]:
    """Module -> the perfsuite modules it imports (``deferred``: imports inside functions count too)."""
    modules = _modules()
    known = set(modules)
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text())
        nodes = ([n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)] if deferred
                 else list(_top_level(tree.body)))
        graph[module] = set().union(*(_targets(module, path, n, known) for n in nodes)) - {module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_detector_finds_a_circle():
    """The check can fail: a two-module circle and a three-module one are both reported."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a"}}
    assert sorted(cycles(graph)) == [["a", "b"], ["c", "d", "e"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_typing_only_imports_count_and_deferred_ones_only_when_asked():
    """``if TYPE_CHECKING:`` and ``try`` imports are module-level arrows; a function's import is deferred."""
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\ntry:\n    import b\n"
              "except ImportError:\n    import c\ndef f():\n    import d\n")
    names = {alias.name for node in _top_level(ast.parse(source).body) for alias in node.names}
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


def _room(module: str) -> str:
    """``perfsuite.report._compare`` -> ``perfsuite.report``; ``perfsuite.crash.kill._child`` -> ``perfsuite.crash``."""
    return ".".join(module.split(".")[:2])


def test_no_import_circle_inside_a_room_even_deferred():
    """The machine-load probe runs a recipe, so it sits above the runner, not inside the load rule the runner
    reads; a comparison's value and verdict line sit below the gate that builds it and the renderers that
    print it; a kill child's I/O layer sits below both children. None may close a circle again, not even
    through a function's deferred import."""
    graph = import_graph(deferred=True)
    found = []
    for room in sorted({_room(m) for m in graph}):
        inside = {m: {t for t in targets if _room(t) == room} for m, targets in graph.items() if _room(m) == room}
        found += cycles(inside)
    assert sorted(found) == []
