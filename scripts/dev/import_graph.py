"""The package import graph of perfsuite, read from the source (SPEC section 1: arrows point one way).

Every import counts: module level, ``if TYPE_CHECKING:``, ``try`` blocks and imports deferred into functions.
``python scripts/dev/import_graph.py`` prints package -> packages (with how many imports carry each edge), the
imports of another package's private modules, every import circle (module-level anywhere, deferred ones inside
a room, and between rooms), and the modules with their line counts (``--layout``). ``tests/test_arrows.py``
and ``tests/test_import_cycles.py`` use the same reader, so what this prints is what the tests check.
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "perfsuite"


@dataclass(frozen=True, slots=True)
class Import:
    """One import statement's target: who imports (module), what (a perfsuite module), where (line)."""

    source: str
    target: str
    line: int


def modules(package: pathlib.Path = PACKAGE) -> dict[str, pathlib.Path]:
    """Dotted module name -> file, for every ``.py`` under ``package``."""
    found: dict[str, pathlib.Path] = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _resolve(module: str, path: pathlib.Path, node: ast.ImportFrom) -> str:
    base = node.module or ""
    if node.level:
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
    return base


def imports_of(module: str, path: pathlib.Path, known: set[str]) -> Iterator[Import]:
    """The perfsuite modules each import statement in ``path`` names (``from pkg import sub`` names
    ``pkg.sub``; ``from pkg._mod import x`` names ``pkg._mod``)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "perfsuite":
                    yield Import(module, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, path, node)
            if base.split(".")[0] != "perfsuite":
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield Import(module, sub if sub in known else base, node.lineno)


def all_imports(package: pathlib.Path = PACKAGE) -> list[Import]:
    found = modules(package)
    known = set(found)
    return [imp for module, path in found.items() for imp in imports_of(module, path, known)]


def package_of(module: str) -> str:
    """``perfsuite.engine._fs`` -> ``engine``; a top-level module (``perfsuite._paths``) is its own package; every
    ``__main__`` module (``perfsuite.__main__``, ``perfsuite.watch.__main__``) is the ``__main__`` front door, which
    may only call the CLI (``python -m perfsuite.watch`` is ``perfsuite watch``)."""
    parts = module.split(".")
    if parts[-1] == "__main__":
        return "__main__"
    return parts[1] if len(parts) > 1 else "perfsuite"


def private_reach(imp: Import) -> bool:
    """True when ``imp`` reaches into another package's private module (``perfsuite.engine._fs`` from crash)."""
    parts = imp.target.split(".")
    if len(parts) < 3 or package_of(imp.source) == package_of(imp.target):
        return False
    return any(part.startswith("_") for part in parts[2:])


def package_edges(imports: list[Import]) -> dict[tuple[str, str], int]:
    """(importing package, imported package) -> how many import statements carry that edge."""
    edges: dict[tuple[str, str], int] = {}
    for imp in imports:
        pair = (package_of(imp.source), package_of(imp.target))
        if pair[0] != pair[1]:
            edges[pair] = edges.get(pair, 0) + 1
    return edges


def top_level(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Import statements that run when the module is imported: not those inside functions or classes."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            yield from top_level(node.body)
            yield from top_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from top_level(block)


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


def module_graph(*, deferred: bool, package: pathlib.Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the perfsuite modules it imports (``deferred``: imports inside functions count too)."""
    found = modules(package)
    known = set(found)
    graph: dict[str, set[str]] = {}
    for module, path in found.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        nodes = ([n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)] if deferred
                 else list(top_level(tree.body)))
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


def room_of(module: str) -> str:
    """``perfsuite.report._compare`` -> ``perfsuite.report``; ``perfsuite.crash.kill._child`` -> ``perfsuite.crash``."""
    return ".".join(module.split(".")[:2])


def circles(package: pathlib.Path = PACKAGE) -> dict[str, list[list[str]]]:
    """Every import circle, by kind: ``modules`` (module-level imports, anywhere in the package), ``rooms``
    (inside one room, imports deferred into functions included: a deferred import hides a circle from the
    interpreter, it does not remove it) and ``packages`` (between rooms, every import counted)."""
    deferred = module_graph(deferred=True, package=package)
    inside: list[list[str]] = []
    for room in sorted({room_of(m) for m in deferred}):
        graph = {m: {t for t in targets if room_of(t) == room} for m, targets in deferred.items() if room_of(m) == room}
        inside += cycles(graph)
    rooms: dict[str, set[str]] = {}
    for (source, target) in package_edges(all_imports(package)):
        rooms.setdefault(source, set()).add(target)
        rooms.setdefault(target, set())
    return {"modules": cycles(module_graph(deferred=False, package=package)), "rooms": sorted(inside),
            "packages": cycles(rooms)}


def layout(package: pathlib.Path = PACKAGE) -> dict[str, list[tuple[str, int]]]:
    """Package -> its modules with line counts (the 500-line rule)."""
    found: dict[str, list[tuple[str, int]]] = {}
    for module, path in modules(package).items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        found.setdefault(package_of(module), []).append((path.relative_to(package).as_posix(), lines))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layout", action="store_true", help="also list every module with its line count")
    parser.add_argument("--max-lines", type=int, default=500, help="name the modules longer than this (500)")
    args = parser.parse_args(argv)
    imports = all_imports()
    edges = package_edges(imports)
    print("package import graph (importer -> imported: import statements)")
    for source in sorted({s for s, _ in edges}):
        targets = ", ".join(f"{t} ({n})" for (s, t), n in sorted(edges.items()) if s == source)
        print(f"  {source:14} -> {targets}")
    private = sorted({imp for imp in imports if private_reach(imp)}, key=lambda i: (i.source, i.line, i.target))
    print(f"imports of another package's private module: {len(private)}")
    for imp in private:
        print(f"  {imp.source}:{imp.line} -> {imp.target}")
    if args.layout:
        print("layout (package: module lines)")
        for name, entries in sorted(layout().items()):
            total = sum(n for _, n in entries)
            print(f"  {name} ({total} lines)")
            for path, lines in entries:
                print(f"    {path:45} {lines:5}")
    found = circles()
    print(f"import circles: {sum(len(v) for v in found.values()) or 'none'}")
    for kind, label in (("modules", "module-level"), ("rooms", "inside a room, deferred imports counted"),
                        ("packages", "between rooms")):
        for circle in found[kind]:
            print(f"  {label}: {' <-> '.join(circle)}")
    long = [(path, n) for entries in layout().values() for path, n in entries if n > args.max_lines]
    print(f"modules over {args.max_lines} lines: {', '.join(f'{p} ({n})' for p, n in long) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
