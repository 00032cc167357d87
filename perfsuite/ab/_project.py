"""What a repository declares to ``perfsuite ab``: its code under test, its default recipes.

Any git repository, perfsuite's own being one case of the rule. ``[tool.perfsuite]`` in the ``pyproject.toml``
at the root of the running checkout::

    [tool.perfsuite]
    code-under-test = ["myruntime"]   # dotted package (or module) names, imported from each revision's tree
    recipes = ["commit"]              # what `perfsuite ab` / `bisect` measure by default

Without ``code-under-test`` the default is **the top-level packages of the repository that the recipes'
operations import** (found by importing them in a fresh worker), less the operations' own packages (those
come from the running checkout, as the recipes do) unless the operations live inside the code. The
instrument itself (``perfsuite``) is never one of them: a revision's harness cannot replace the running one,
so perfsuite's repository declares ``perfsuite.engine``. A ``src/`` layout is found too.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError

__all__ = ["INSTRUMENT", "CodeUnderTest", "ProjectConfig", "code_layout", "default_code", "operation_packages",
           "read_config"]

#: the running instrument's package: never loaded from a revision (its harness measures both sides)
INSTRUMENT = "perfsuite"
_KEYS = ("code-under-test", "recipes")


@dataclass(frozen=True, slots=True)
class ProjectConfig:
    """``[tool.perfsuite]`` of a repository (``None``: not declared)."""

    code_under_test: tuple[str, ...] | None = None
    recipes: tuple[str, ...] | None = None
    source: Path | None = None  # the pyproject.toml read, if any


@dataclass(frozen=True, slots=True)
class CodeUnderTest:
    """The packages imported from each revision's tree, the directory below the tree they live in (``""`` or
    ``"src"``), and how they were chosen (for the notes)."""

    packages: tuple[str, ...]
    subdir: str
    how: str

    def root(self, tree: Path) -> Path:
        return tree / self.subdir if self.subdir else tree


def _names(value: Any, key: str, label: str) -> tuple[str, ...]:
    ok = isinstance(value, list) and value and all(isinstance(v, str) and v for v in value)
    if not ok:
        raise PerfsuiteError(f'{label}: [tool.perfsuite] {key}: expected a non-empty list of names, got {value!r}')
    return tuple(value)


def read_config(root: Path) -> ProjectConfig:
    """``[tool.perfsuite]`` of ``root/pyproject.toml``; an unknown key or a bad value is one line."""
    path = root / "pyproject.toml"
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        return ProjectConfig()
    except OSError as exc:
        raise PerfsuiteError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise PerfsuiteError(f"{path}: invalid TOML: {exc}") from None
    table = (data.get("tool") or {}).get("perfsuite")
    if table is None:
        return ProjectConfig(source=path)
    if not isinstance(table, Mapping):
        raise PerfsuiteError(f"{path}: [tool.perfsuite] must be a table")
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise PerfsuiteError(f"{path}: [tool.perfsuite]: unknown key {unknown[0]!r} (known: {', '.join(_KEYS)})")
    code = _names(table["code-under-test"], "code-under-test", str(path)) if "code-under-test" in table else None
    for name in code or ():
        if not all(part.isidentifier() for part in name.split(".")):
            raise PerfsuiteError(f"{path}: [tool.perfsuite] code-under-test: {name!r} is not a dotted name")
        if name == INSTRUMENT:
            raise PerfsuiteError(f"{path}: [tool.perfsuite] code-under-test: {INSTRUMENT!r} is the instrument "
                                 "itself; name the package under test (e.g. perfsuite.engine)")
    recipes = _names(table["recipes"], "recipes", str(path)) if "recipes" in table else None
    return ProjectConfig(code, recipes, path)


def _exists(tree: Path, name: str) -> bool:
    target = tree.joinpath(*name.split("."))
    return (target / "__init__.py").is_file() or target.with_name(target.name + ".py").is_file()


def code_layout(tree: Path, packages: Sequence[str]) -> str:
    """``""`` when ``packages`` are at the top of ``tree``, ``"src"`` when they are under ``tree/src``."""
    if all(_exists(tree, p) for p in packages):
        return ""
    if all(_exists(tree / "src", p) for p in packages):
        return "src"
    missing = [p for p in packages if not _exists(tree, p) and not _exists(tree / "src", p)]
    if missing:
        raise PerfsuiteError(f"code under test {', '.join(missing)}: no such package in {tree} (nor in src/); "
                             "check [tool.perfsuite] code-under-test in pyproject.toml")
    raise PerfsuiteError(f"code under test {', '.join(packages)}: some are in {tree}, some in {tree / 'src'}; "
                         "they must share one directory")


def _top_level(module: str) -> str | None:
    """The package below which a module is loaded from a revision: its top-level package, or for a module of
    the instrument, its second level (``perfsuite.workloads``)."""
    parts = module.split(".")
    if parts[0] != INSTRUMENT:
        return parts[0]
    return ".".join(parts[:2]) if len(parts) > 2 else None


def operation_packages(operations: Sequence[str]) -> tuple[str, ...]:
    """The packages holding the operations (``benchmarks.ops:Commit`` -> ``benchmarks``)."""
    found = {_top_level(op.partition(":")[0]) for op in operations}
    return tuple(sorted(p for p in found if p))


def default_code(tree: Path, operations: Sequence[str], modules: Mapping[str, str]) -> CodeUnderTest:
    """The default code under test: the top-level packages (or modules) of ``tree`` among ``modules`` (what
    importing the operations imported: ``{module: file}``, files below ``tree``), without the instrument and,
    when anything else is left, without the operations' own packages."""
    found: dict[str, str] = {}
    real = tree.resolve()
    for file in modules.values():
        try:
            parts = Path(file).resolve().relative_to(real).parts
        except ValueError:
            continue
        subdir = ""
        if parts and parts[0] == "src" and len(parts) > 1:
            subdir, parts = "src", parts[1:]
        if not parts or parts[0] == INSTRUMENT:
            continue
        name = parts[0][:-3] if len(parts) == 1 and parts[0].endswith(".py") else parts[0]
        if name.isidentifier():
            found.setdefault(name, subdir)
    own = set(operation_packages(operations))
    chosen = sorted(n for n in found if n not in own) or sorted(found)
    if not chosen:
        raise PerfsuiteError(f"the recipes' operations ({', '.join(operations)}) import no package of {tree}: "
                             "declare the code under test in pyproject.toml, [tool.perfsuite] code-under-test = "
                             '["yourpackage"]')
    subdirs = {found[n] for n in chosen}
    if len(subdirs) > 1:
        raise PerfsuiteError(f"code under test {', '.join(chosen)}: found both in {tree} and in src/; declare it "
                             "in pyproject.toml, [tool.perfsuite] code-under-test")
    inside = " (the operations live inside it: each revision's own are measured)" if set(chosen) & own else ""
    return CodeUnderTest(tuple(chosen), subdirs.pop(),
                         f"the repository's packages the operations import{inside}")
