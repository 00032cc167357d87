"""Observation goes through published seams (engine events, the I/O layer, fault hooks),
never by patching a class. An AST scan of perfsuite outside the engine: nothing assigns attributes on
an engine name (``Session.publish = ...``, ``setattr(Session, ...)``, ``_pipeline.x = ...``), no generic
``setattr`` helper patches arbitrary targets, and nothing writes a ``sitecustomize``."""

from __future__ import annotations

import ast
from pathlib import Path

import perfsuite

ROOT = Path(perfsuite.__file__).parent
#: remaining patching, named so it cannot grow unseen: none (the open-path seeded bugs are
#: fault hooks on the I/O layer now, ``with_fault_hooks``)
KNOWN: set[str] = set()
#: not patching: binding a freshly imported submodule to its parent package is what the import system
#: itself does (``perfsuite ab`` loads each revision's copy of the code under test by hand)
BINDS_A_SUBMODULE = {("harness/_worker.py", "setattr(parent, ...)")}


def _engine_names(tree: ast.AST) -> set[str]:
    """Names bound to something imported from the engine (classes, functions or its modules)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("perfsuite.engine"):
            names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.asname for a in node.names if a.name.startswith("perfsuite.engine") and a.asname)
    return names


def patches(source: str) -> list[str]:
    """Every place in ``source`` that assigns attributes on engine names or setattr's a foreign target."""
    tree = ast.parse(source)
    engine = _engine_names(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                    and target.value.id in engine:
                found.append(f"line {node.lineno}: {target.value.id}.{target.attr} = ...")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
            first = node.args[0] if node.args else None
            if not (isinstance(first, ast.Name) and first.id == "self"):
                found.append(f"line {node.lineno}: {node.func.id}({ast.unparse(first) if first else ''}, ...)")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "sitecustomize.py" in node.value:
            found.append(f"line {node.lineno}: writes a sitecustomize")
    return found


def test_the_scan_finds_what_it_looks_for() -> None:
    source = ("from perfsuite.engine import Session\nfrom perfsuite.engine import _pipeline\n"
              "Session.publish = None\n_pipeline.commit_selection = None\nsetattr(Session, 'x', 1)\n"
              "def f(target):\n    setattr(target, 'y', 2)\nPath('sitecustomize.py')\n")
    assert len(patches(source)) == 5
    assert patches("from perfsuite.engine import Session\ns = Session()\ns.root = 'x'\nsetattr(self, 'a', 1)\n") == []


def test_nothing_outside_the_engine_patches_engine_classes() -> None:
    offenders = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("engine/") or rel in KNOWN:
            continue
        found = [f for f in patches(path.read_text(encoding="utf-8"))
                 if (rel, f.split(": ", 1)[1]) not in BINDS_A_SUBMODULE]
        if found:
            offenders[rel] = found
    assert offenders == {}
