"""The harness facade: grouped by concern in its docstring, and holding only what someone outside calls.

``perfsuite.harness`` exports what a user's code (docs/own-code.md, docs/run.md) or another package uses, and the
values those calls return or raise (:data:`HELD`); a name only the harness itself uses stays in its private
module, where the harness's own tests import it (SPEC section 1: packages use each other's public names only,
so a name another package needs is public, and nothing else is).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import perfsuite.harness

ROOT = Path(__file__).resolve().parents[2]

#: kept though nobody outside names them: what kept calls return or raise, so a caller can name what it holds
#: (``Heartbeat.window`` -> ``GapWindow``, ``find_valgrind`` -> ``Valgrind`` or ``ValgrindUnavailable``, ...)
HELD = {"AllocationRecord", "GapWindow", "GcWindow", "InstructionRecord", "PlanEntry", "ResultsBusy", "SampleFailed",
        "Valgrind", "ValgrindUnavailable", "VariantsResult"}


def test_the_docstring_lists_every_public_name_once_by_concern() -> None:
    """``__all__`` stays sorted (ruff RUF022); the docstring groups the same names by concern, and a name added
    to one and not the other fails here."""
    doc = perfsuite.harness.__doc__ or ""
    section = doc.split("Its names by concern", 1)[1]
    groups = re.findall(r"^- ([^:]+): (.*?)[;.]$", re.sub(r"\n  ", " ", section), flags=re.M)
    named = [name for _, names in groups for name in re.findall(r"``(\w+)``", names)]
    assert len(groups) >= 8
    assert sorted(named) == sorted(perfsuite.harness.__all__)


def _names_used_outside() -> set[str]:
    """Every harness name imported or reached as an attribute outside the harness and its tests: the package's
    other rooms, scripts, other rooms' tests, and the Python in the docs."""
    used: set[str] = set()
    own = (ROOT / "perfsuite" / "harness", ROOT / "tests" / "harness")
    sources = [p for d in ("perfsuite", "scripts", "tests") for p in (ROOT / d).rglob("*.py")
               if not any(p.is_relative_to(o) for o in own)]
    for path in sources:
        text = path.read_text(encoding="utf-8")
        if "harness" not in text:
            continue
        tree = ast.parse(text)
        aliases = {"perfsuite.harness"}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "perfsuite.harness":
                used.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module == "perfsuite":
                aliases.update(a.asname or a.name for a in node.names if a.name == "harness")
            elif isinstance(node, ast.Import):
                aliases.update(a.asname or a.name for a in node.names if a.name == "perfsuite.harness")
        used.update(node.attr for node in ast.walk(tree)
                    if isinstance(node, ast.Attribute) and ast.unparse(node.value) in aliases)
    for page in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]:
        text = page.read_text(encoding="utf-8")
        for names in re.findall(r"from perfsuite\.harness import ([\w, ]+)", text):
            used.update(n.strip() for n in names.split(","))
        used.update(re.findall(r"\b(?:run_recipe|load_recipe)\b", text))  # own-code.md's calls from Python
    return used


def test_every_name_is_used_outside_the_harness_or_held() -> None:
    """A name nobody outside uses leaves the facade (its private module keeps it); ``HELD`` names what stays
    because a kept call returns or raises it."""
    exported = set(perfsuite.harness.__all__)
    assert exported - HELD <= _names_used_outside(), "not used outside the harness: leave __all__, or add to HELD"
    assert exported >= HELD
