"""The arrows of SPEC section 1 for every pair of packages.

Every import in ``perfsuite/`` counts (module level, ``if TYPE_CHECKING:``, ``try``, and imports deferred
into functions): a package may import a package below it (the transitive closure of :data:`ARROWS`) and
nothing else, and never another package's private module. The README states the same list; a test
checks that the two agree, so the documented arrows are the checked ones.
"""

from __future__ import annotations

import importlib.util
import pathlib
import re
import sys
import types

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _load_script() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "dev" / "import_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("import_graph", module)
    spec.loader.exec_module(module)
    return module


graph = _load_script()

#: the floor: the root package (``__version__``) and its helper modules; everything but the engine may use it
BASE = {"perfsuite", "errors", "_extras", "_limits", "_paths", "_text"}
#: package -> the packages directly below it (README "Arrows"; what may be imported is the closure)
ARROWS: dict[str, set[str]] = {
    "__main__": {"cli"},
    "cli": {"ab", "crash", "profile", "watch", "whatif"},
    "ab": {"report"},
    "watch": {"report"},
    "pytest_plugin": {"report"},
    "profile": {"report", "workloads"},
    "crash": {"workloads"},
    "whatif": {"workloads"},
    "report": {"harness", "engine"},
    "workloads": {"engine", "harness", "cluster", "integrations"},
    "cluster": {"harness"},
    "integrations": {"engine", "base"},
    "harness": {"base"},
    "engine": set(),
    "base": set(),
}


def _node(package: str) -> str:
    return "base" if package in BASE else package


def below(arrows: dict[str, set[str]], package: str) -> set[str]:
    """Everything reachable from ``package`` along the arrows (what it may import)."""
    seen: set[str] = set()
    todo = list(arrows.get(package, ()))
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(arrows.get(name, ()))
    return seen


def violations(imports: list, arrows: dict[str, set[str]]) -> list[str]:
    """Each import that goes up or sideways, or into another package's private module."""
    found = []
    for imp in imports:
        source, target = _node(graph.package_of(imp.source)), _node(graph.package_of(imp.target))
        if source != target and target not in below(arrows, source):
            found.append(f"{imp.source}:{imp.line} imports {imp.target} ({source} -> {target} is no arrow)")
        if graph.private_reach(imp):
            found.append(f"{imp.source}:{imp.line} imports {imp.target}, a private module of another package")
    return found


def readme_arrows(text: str) -> dict[str, set[str]]:
    """The list between ``<!-- arrows`` and ``<!-- /arrows -->`` in the README."""
    block = text.split("<!-- arrows", 1)[1].split("<!-- /arrows -->", 1)[0]
    arrows: dict[str, set[str]] = {}
    for line in block.splitlines():
        match = re.match(r"- `([\w]+)` -> (.*)$", line.strip())
        if match:
            arrows[match.group(1)] = set(re.findall(r"`([\w]+)`", match.group(2)))
    return arrows


def test_the_check_can_fail() -> None:
    """An upward edge, a sideways edge and a private reach are each reported; a downward public one is not."""
    imp = graph.Import
    imports = [
        imp("perfsuite.engine._session", "perfsuite.errors", 1),  # the engine uses nothing else
        imp("perfsuite.harness._runner", "perfsuite.workloads.engine", 2),  # upward
        imp("perfsuite.whatif._simulate", "perfsuite.crash", 3),  # sideways
        imp("perfsuite.crash.bugs._seeded", "perfsuite.engine._fs", 4),  # private module of another package
        imp("perfsuite.cli._run", "perfsuite.engine", 5),  # downward, through the facade: fine
        imp("perfsuite.workloads.engine", "perfsuite.workloads._fixture_gen", 6),  # its own private: fine
    ]
    found = violations(imports, ARROWS)
    assert [line.split(":")[1].split()[0] for line in found] == ["1", "2", "3", "4"]


def test_the_reader_sees_deferred_imports() -> None:
    """A function-level import is an arrow too (``profile._driver`` imports the harness inside functions)."""
    imports = graph.all_imports()
    deferred = [i for i in imports if i.source == "perfsuite.profile._driver" and i.target == "perfsuite.harness"]
    assert len(deferred) >= 4


def test_the_arrows_are_acyclic_and_cover_every_package() -> None:
    for package in ARROWS:
        assert package not in below(ARROWS, package), package
    packages = {_node(graph.package_of(m)) for m in graph.modules()}
    assert packages == set(ARROWS), "a package without an arrow entry (add it to ARROWS and the README)"


def test_every_import_follows_an_arrow_and_uses_public_names() -> None:
    assert violations(graph.all_imports(), ARROWS) == []


def test_the_readme_states_the_checked_arrows() -> None:
    assert readme_arrows((ROOT / "docs" / "layout.md").read_text(encoding="utf-8")) == ARROWS


FACADES = ["engine", "engine.events", "engine.testing", "harness", "report", "whatif", "crash", "profile", "watch"]


@pytest.mark.parametrize("package", FACADES)
def test_each_facade_exports_exactly_its_public_names(package: str) -> None:
    """What ``__all__`` lists is what other packages may use; nothing public is left out of it."""
    module = importlib.import_module(f"perfsuite.{package}")
    public = {n for n in dir(module) if not n.startswith("_") and not isinstance(getattr(module, n), types.ModuleType)}
    assert set(module.__all__) == public
    assert len(set(module.__all__)) == len(module.__all__)


def test_scripts_use_public_names_only() -> None:
    """``scripts/`` sits outside every package: it imports no package's private module (the ``base`` helpers,
    ``perfsuite._paths``, are the project's own)."""
    found = []
    for path in sorted((ROOT / "scripts").rglob("*.py")):  # scripts/dev/ and scripts/acceptance/
        known = set(graph.modules())
        for imp in graph.imports_of(".".join(path.relative_to(ROOT).with_suffix("").parts), path, known):
            if any(part.startswith("_") for part in imp.target.split(".")[2:]):
                found.append(f"{path.name}:{imp.line} imports {imp.target}")
    assert found == []


#: tests that still reach into another package's private module, each with why (named so the list
#: cannot grow unseen). A test under tests/<package>/ may use its own package's privates.
TESTS_KNOWN = {
    "tests/ab/test_ab.py": "validates `perfsuite ab --format json` against the CLI's output schema (cli._formats)",
    "tests/crash/test_audit.py": "audits the engine's own I/O module file (perfsuite.engine._fs.__file__)",
    "tests/whatif/test_simulate.py": "checks the simulator runs the engine's own scheduler classes",
    "tests/profile/test_phases.py": "the phase breakdown's source labels (report._phases.SOURCE_*)",
    "tests/test_extras.py": "the harness's bootstrap constants, checked against scipy",
}


def _test_owner(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT / "tests")
    return rel.parts[0] if len(rel.parts) > 1 else ""


def test_tests_use_other_packages_public_names() -> None:
    known = set(graph.modules())
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in TESTS_KNOWN:
            continue
        owner = _test_owner(path)
        for imp in graph.imports_of("tests." + path.stem, path, known):
            parts = imp.target.split(".")
            if len(parts) > 2 and parts[1] != owner and any(p.startswith("_") for p in parts[2:]):
                found.append(f"{rel}:{imp.line} imports {imp.target}")
    assert found == []
    stale = [rel for rel in TESTS_KNOWN if not (ROOT / rel).is_file()]
    assert stale == []
