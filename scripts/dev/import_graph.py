"""The package import graph of perfsuite, read from the source (issue 19, SPEC section 1: arrows point one way).

Every import counts: module level, ``if TYPE_CHECKING:``, ``try`` blocks and imports deferred into functions.
``python scripts/dev/import_graph.py`` prints package -> packages (with how many imports carry each edge), the
imports of another package's private modules, and the modules with their line counts (``--layout``).
``tests/test_arrows.py`` uses the same reader, so what this prints is what the test checks.
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


def layout(package: pathlib.Path = PACKAGE) -> dict[str, list[tuple[str, int]]]:
    """Package -> its modules with line counts, for the closing note of issue 19."""
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
    long = [(path, n) for entries in layout().values() for path, n in entries if n > args.max_lines]
    print(f"modules over {args.max_lines} lines: {', '.join(f'{p} ({n})' for p, n in long) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
