"""Recipes: one measured comparison per TOML file (SPEC section 4, M4, M7), strictly validated.

Every problem is one line that names the file, the key and what was expected, e.g.
``recipes/x.toml: samples: expected a positive integer, got "six"``. Recipes are looked up by
name in the repository's ``recipes/`` directory (``PERFSUITE_RECIPES`` overrides it), or given
as a path.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError
from perfsuite.harness._gc import GC_POLICIES
from perfsuite.harness._operation import check_operation_spec

__all__ = [
    "ISOLATIONS",
    "ModeSpec",
    "Recipe",
    "find_recipe",
    "list_recipes",
    "load_recipe",
    "parse_recipe",
    "recipes_dir",
]

ISOLATIONS: tuple[str, ...] = ("process", "inline")
_MODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_RESERVED_MODES = frozenset({"control"})


@dataclass(frozen=True, slots=True)
class ModeSpec:
    """One mode of a recipe: the operation to measure and its free parameters."""

    name: str
    operation: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Recipe:
    """A validated recipe, with every default resolved (what the results file records, M8)."""

    name: str
    modes: tuple[ModeSpec, ...]
    description: str = ""
    fixture: str | None = None
    samples: int = 6
    warmup: int = 1
    heartbeat_ms: float = 5.0
    gc: str = "collect-before"
    isolation: str = "process"
    target_ms: float = 20.0
    allocation: bool = False
    allocation_samples: int = 3
    window_tail_ms: float = 12.0
    ack_timeout_s: float = 30.0
    settle_ms: float = 20.0
    control_windows: int = 6
    sync_after_copy: bool = True
    catalogue: bool = True  # false: run only when named (e.g. peers: not in `run --all`)
    path: str | None = None

    def mode(self, name: str) -> ModeSpec:
        """The mode called ``name``."""
        for m in self.modes:
            if m.name == name:
                return m
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """The resolved recipe, TOML-shaped (``modes.<name>.operation`` plus params) and JSON-able."""
        data: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name != "modes":
                data[f.name] = getattr(self, f.name)
        data["modes"] = {m.name: {"operation": m.operation, **dict(m.params)} for m in self.modes}
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "results file recipe") -> Recipe:
        """Rebuild a recipe recorded by :meth:`to_dict` (used by ``--resume``), validating it again."""
        body = {k: v for k, v in data.items() if v is not None}  # TOML has no null: absent means default
        path = body.pop("path", None)
        recipe = parse_recipe(body, source, default_name=str(body.get("name", "recipe")))
        return dataclasses.replace(recipe, path=path)

    def with_overrides(
        self,
        *,
        samples: int | None = None,
        warmup: int | None = None,
        isolation: str | None = None,
        gc: str | None = None,
        allocation_samples: int | None = None,
    ) -> Recipe:
        """Command-line overrides, validated like recipe keys (errors name the option)."""
        changes: dict[str, Any] = {}
        check = _Checker("command line")
        if samples is not None:
            changes["samples"] = check.positive_int("--samples", samples)
            if self.control_windows == self.samples:
                changes["control_windows"] = changes["samples"]
        if warmup is not None:
            changes["warmup"] = check.non_negative_int("--warmup", warmup)
        if isolation is not None:
            changes["isolation"] = check.choice("--isolation", isolation, ISOLATIONS)
        if gc is not None:
            changes["gc"] = check.choice("--gc", gc, GC_POLICIES)
        if allocation_samples is not None:
            changes["allocation_samples"] = check.positive_int("--allocation-samples", allocation_samples)
        return dataclasses.replace(self, **changes)


def _show(value: object) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return repr(value)


class _Checker:
    """One-line validation errors: ``<file>: <key>: expected <what>, got <value>``."""

    def __init__(self, label: str) -> None:
        self.label = label

    def fail(self, key: str, expected: str, value: object) -> PerfsuiteError:
        return PerfsuiteError(f"{self.label}: {key}: expected {expected}, got {_show(value)}")

    def positive_int(self, key: str, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.fail(key, "a positive integer", value)
        return value

    def non_negative_int(self, key: str, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(key, "a non-negative integer", value)
        return value

    def positive_number(self, key: str, value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise self.fail(key, "a positive number", value)
        return float(value)

    def non_negative_number(self, key: str, value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
            raise self.fail(key, "a non-negative number", value)
        return float(value)

    def boolean(self, key: str, value: object) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, "true or false", value)
        return value

    def string(self, key: str, value: object, *, nonempty: bool = True) -> str:
        if not isinstance(value, str) or (nonempty and not value.strip()):
            raise self.fail(key, "a non-empty string" if nonempty else "a string", value)
        return value

    def choice(self, key: str, value: object, choices: tuple[str, ...]) -> str:
        if not isinstance(value, str) or value not in choices:
            raise self.fail(key, "one of " + ", ".join(f'"{c}"' for c in choices), value)
        return value


# key -> (checker method, default); "name", "modes", "control_windows" are handled separately
_SCALARS: dict[str, tuple[str, Any]] = {
    "description": ("string_or_empty", ""),
    "fixture": ("string", None),
    "samples": ("positive_int", 6),
    "warmup": ("non_negative_int", 1),
    "heartbeat_ms": ("positive_number", 5.0),
    "gc": ("gc", "collect-before"),
    "isolation": ("isolation", "process"),
    "target_ms": ("positive_number", 20.0),
    "allocation": ("boolean", False),
    "allocation_samples": ("positive_int", 3),
    "window_tail_ms": ("non_negative_number", 12.0),
    "ack_timeout_s": ("positive_number", 30.0),
    "settle_ms": ("non_negative_number", 20.0),
    "sync_after_copy": ("boolean", True),
    "catalogue": ("boolean", True),
}
_KNOWN = frozenset(_SCALARS) | {"name", "modes", "control_windows"}


def parse_recipe(data: Mapping[str, Any], label: str, *, default_name: str) -> Recipe:
    """Validate a recipe table (as ``tomllib`` returns it); ``label`` prefixes every error."""
    check = _Checker(label)
    for key in data:
        if key not in _KNOWN:
            raise PerfsuiteError(f"{label}: {key}: unknown key (expected one of {', '.join(sorted(_KNOWN))})")
    values: dict[str, Any] = {}
    name = data.get("name", default_name)
    values["name"] = check.string("name", name)
    for key, (kind, default) in _SCALARS.items():
        if key not in data:
            values[key] = default
            continue
        raw = data[key]
        if kind == "string_or_empty":
            values[key] = check.string(key, raw, nonempty=False)
        elif kind == "gc":
            values[key] = check.choice(key, raw, GC_POLICIES)
        elif kind == "isolation":
            values[key] = check.choice(key, raw, ISOLATIONS)
        else:
            values[key] = getattr(check, kind)(key, raw)
    control = data.get("control_windows", values["samples"])
    values["control_windows"] = check.positive_int("control_windows", control)
    values["modes"] = _parse_modes(data.get("modes"), check)
    return Recipe(**values)


def _parse_modes(raw: object, check: _Checker) -> tuple[ModeSpec, ...]:
    if raw is None:
        raise PerfsuiteError(f"{check.label}: modes: missing (expected at least one [modes.<name>] table)")
    if not isinstance(raw, Mapping) or not raw:
        raise check.fail("modes", "at least one [modes.<name>] table", raw)
    modes = []
    for name, table in raw.items():
        key = f"modes.{name}"
        if not _MODE_NAME.match(name) or name in _RESERVED_MODES:
            raise PerfsuiteError(
                f"{check.label}: {key}: invalid mode name (letters, digits, '-' and '_'; "
                f"not {', '.join(sorted(_RESERVED_MODES))})"
            )
        if not isinstance(table, Mapping):
            raise check.fail(key, "a table", table)
        if "operation" not in table:
            raise PerfsuiteError(f'{check.label}: {key}.operation: missing (expected "module:function")')
        problem = check_operation_spec(table["operation"])
        if problem:
            raise PerfsuiteError(f"{check.label}: {key}.operation: {problem}")
        params = {k: v for k, v in table.items() if k != "operation"}
        modes.append(ModeSpec(name=name, operation=table["operation"], params=params))
    return tuple(modes)


def recipes_dir() -> Path:
    """The recipe directory: ``$PERFSUITE_RECIPES`` or the repository's ``recipes/`` beside the package."""
    env = os.environ.get("PERFSUITE_RECIPES")
    if env:
        return Path(env)
    import perfsuite

    return Path(perfsuite.__file__).resolve().parent.parent / "recipes"


def list_recipes(*, catalogue_only: bool = False) -> list[str]:
    """Names of the recipes in :func:`recipes_dir` (with ``catalogue_only``, those `run --all` runs)."""
    directory = recipes_dir()
    names = sorted(p.stem for p in directory.glob("*.toml")) if directory.is_dir() else []
    if catalogue_only:
        names = [n for n in names if load_recipe(n).catalogue]
    return names


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def find_recipe(ref: str | os.PathLike[str]) -> Path:
    """A recipe file from a name (``idle-control``) or a path (``recipes/x.toml``, ``./mine.toml``)."""
    text = os.fspath(ref)
    candidate = Path(text)
    looks_like_path = text.endswith(".toml") or os.sep in text or "/" in text
    if candidate.is_file():
        return candidate
    if looks_like_path:
        raise PerfsuiteError(f"{text}: recipe file not found")
    named = recipes_dir() / f"{text}.toml"
    if named.is_file():
        return named
    known = ", ".join(list_recipes()) or "none"
    raise PerfsuiteError(f"unknown recipe {text!r} (looked in {_display(recipes_dir())}; available: {known})")


def load_recipe(ref: str | os.PathLike[str]) -> Recipe:
    """Find, parse and validate a recipe; every error is one :class:`PerfsuiteError` line."""
    path = find_recipe(ref)
    label = _display(path)
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise PerfsuiteError(f"{label}: invalid TOML: {exc}") from None
    except OSError as exc:
        raise PerfsuiteError(f"{label}: cannot read: {exc.strerror or exc}") from None
    recipe = parse_recipe(data, label, default_name=path.stem)
    return dataclasses.replace(recipe, path=str(path.resolve()))
