"""Recipes: one measured comparison per TOML file (SPEC section 4, M4, M7), strictly validated.

Every problem is one line that names the file, the key and what was expected, e.g.
``recipes/x.toml: samples: expected a positive integer, got "six"``. A recipe is given as a path, or
by name: looked up first in the user's folder (``--recipes DIR``, else ``$PERFSUITE_RECIPES``, else
``./recipes/`` of the working directory when it exists), then among the built-in recipes (the
checkout's ``recipes/``, or the copy a wheel ships: :func:`perfsuite._paths.builtin_dir`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite._paths import builtin_dir, portable_path
from perfsuite.errors import PerfsuiteError
from perfsuite.harness._gc import GC_POLICIES
from perfsuite.harness._operation import check_operation_spec

__all__ = [
    "ISOLATIONS",
    "ORDERS",
    "ModeSpec",
    "Recipe",
    "find_recipe",
    "list_recipes",
    "load_recipe",
    "parse_recipe",
    "recipe_dirs",
    "recipes_dir",
]

ISOLATIONS: tuple[str, ...] = ("process", "inline")
#: M4: modes in a seeded random order per round (recorded), or today's fixed recipe order
ORDERS: tuple[str, ...] = ("random", "fixed")
_MODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_RESERVED_MODES = frozenset({"control"})


@dataclass(frozen=True, slots=True)
class ModeSpec:
    """One mode of a recipe: the operation to measure and its free parameters.

    ``reference`` (``reference = "why"`` in the mode's table) declares a by-design reference, such as the
    rejected design a recipe compares against: it gets no verdict and is shown as "reference: why".
    """

    name: str
    operation: str
    params: Mapping[str, Any] = field(default_factory=dict)
    reference: str | None = None


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
    instructions: bool = False
    instructions_samples: int = 3
    window_tail_ms: float = 12.0
    ack_timeout_s: float = 30.0
    settle_ms: float = 20.0
    control_windows: int = 6
    sync_after_copy: bool = True
    order: str = "random"  # M4: "random" (seeded, per round) or "fixed" (recipe order every round)
    seed: int | None = None  # the order's seed; None: drawn when the run starts, then recorded
    catalogue: bool = True  # false: run only when named (e.g. peers: not in `run --all`)
    # M10 run conditions. ``storage``: a storage profile (a name, or a table: opaque here) passed to every
    # mode's operation as ``params["storage"]``; every mode's operation must declare it applies it.
    # ``heap``: live objects held through every latency sample (perfsuite.harness._heap).
    storage: Any = None
    heap: int = 0
    path: str | None = None
    # issue 28 item 9: a real session directory of the team's, copied privately for every sample (``--session``
    # in a file): an absolute path once loaded (a relative one is resolved against the recipe file)
    session: str | None = None

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
        data["modes"] = {
            m.name: {"operation": m.operation, **dict(m.params), **({"reference": m.reference} if m.reference else {})}
            for m in self.modes
        }
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
        order: str | None = None,
        seed: int | None = None,
        instructions: bool | None = None,
        storage: Any = None,
        heap: int | None = None,
        mode_params: Mapping[str, Any] | None = None,
        allocation_samples: int | None = None,
    ) -> Recipe:
        """Command-line overrides, validated like recipe keys (errors name the option). ``mode_params``
        are merged into every mode's parameters (e.g. an engine setting such as ``freeze_loaded``)."""
        changes: dict[str, Any] = {}
        check = _Checker("command line")
        if storage is not None:
            changes["storage"] = check.storage("--storage", storage)
        if heap is not None:
            changes["heap"] = check.non_negative_int("--heap", heap)
        if mode_params:
            changes["modes"] = tuple(
                dataclasses.replace(m, params={**dict(m.params), **dict(mode_params)}) for m in self.modes)
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
        if order is not None:
            changes["order"] = check.choice("--order", order, ORDERS)
        if seed is not None:
            changes["seed"] = check.non_negative_int("--seed", seed)
        if instructions is not None:
            changes["instructions"] = check.boolean("--instructions", instructions)
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

    def storage(self, key: str, value: object) -> str | dict[str, Any]:
        """A storage profile: a name, or a table (validated by whoever resolves it, not here)."""
        if isinstance(value, Mapping):
            return json.loads(json.dumps(value))  # a plain JSON-able copy (it is recorded in results)
        return self.string(key, value)

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
    "instructions": ("boolean", False),
    "instructions_samples": ("positive_int", 3),
    "window_tail_ms": ("non_negative_number", 12.0),
    "ack_timeout_s": ("positive_number", 30.0),
    "settle_ms": ("non_negative_number", 20.0),
    "sync_after_copy": ("boolean", True),
    "catalogue": ("boolean", True),
    "order": ("order", "random"),
    "seed": ("non_negative_int", None),
    "storage": ("storage", None),
    "heap": ("non_negative_int", 0),
    "session": ("string", None),
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
        elif kind == "order":
            values[key] = check.choice(key, raw, ORDERS)
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
        reference = table.get("reference")
        if reference is not None:
            reference = check.string(f"{key}.reference", reference)  # why this mode is a by-design reference
        params = {k: v for k, v in table.items() if k not in ("operation", "reference")}
        modes.append(ModeSpec(name=name, operation=table["operation"], params=params, reference=reference))
    return tuple(modes)


def recipe_dirs(user: str | os.PathLike[str] | None = None) -> list[Path]:
    """Where recipe names are looked up, first match wins: the user's folder (``user``, i.e. ``--recipes
    DIR``, else ``$PERFSUITE_RECIPES``, else ``./recipes`` when it exists), then the built-in recipes."""
    if user is not None and not Path(user).is_dir():
        raise PerfsuiteError(f"--recipes: no such directory: {os.fspath(user)}")
    chosen = user if user is not None else os.environ.get("PERFSUITE_RECIPES")
    first = Path(chosen) if chosen else Path("recipes")
    dirs: list[Path] = []
    for directory in (first, builtin_dir("recipes")):
        if directory.is_dir() and not any(_same(directory, d) for d in dirs):
            dirs.append(directory)
    return dirs


def _same(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


def recipes_dir() -> Path:
    """The first directory of :func:`recipe_dirs` (where a recipe name is looked up first)."""
    dirs = recipe_dirs()
    return dirs[0] if dirs else builtin_dir("recipes")


def list_recipes(*, catalogue_only: bool = False, dirs: Sequence[Path] | None = None) -> list[str]:
    """Names of the recipes on the search path (with ``catalogue_only``, those `run --all` runs)."""
    search = recipe_dirs() if dirs is None else list(dirs)
    names = sorted({p.stem for d in search if d.is_dir() for p in d.glob("*.toml")})
    if catalogue_only:
        names = [n for n in names if load_recipe(n, dirs=search).catalogue]
    return names


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def find_recipe(ref: str | os.PathLike[str], dirs: Sequence[Path] | None = None) -> Path:
    """A recipe file from a name (``idle-control``, looked up on ``dirs``, default :func:`recipe_dirs`)
    or a path (``recipes/x.toml``, ``./mine.toml``)."""
    text = os.fspath(ref)
    candidate = Path(text)
    looks_like_path = text.endswith(".toml") or os.sep in text or "/" in text
    if candidate.is_file():
        return candidate
    if looks_like_path:
        raise PerfsuiteError(f"{text}: recipe file not found")
    search = recipe_dirs() if dirs is None else list(dirs)
    for directory in search:
        named = directory / f"{text}.toml"
        if named.is_file():
            return named
    known = ", ".join(list_recipes(dirs=search)) or "none"
    where = ", ".join(_display(d) for d in search) or "no recipe directory"
    raise PerfsuiteError(f"unknown recipe {text!r} (looked in {where}; available: {known})")


def load_recipe(ref: str | os.PathLike[str], dirs: Sequence[Path] | None = None) -> Recipe:
    """Find, parse and validate a recipe; every error is one :class:`PerfsuiteError` line.

    ``path`` records where it came from without this machine's absolute paths (:func:`portable_path`).
    """
    path = find_recipe(ref, dirs)
    label = _display(path)
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise PerfsuiteError(f"{label}: invalid TOML: {exc}") from None
    except OSError as exc:
        raise PerfsuiteError(f"{label}: cannot read: {exc.strerror or exc}") from None
    recipe = parse_recipe(data, label, default_name=path.stem)
    if recipe.session is not None:  # relative to the recipe file, as a team's repository lays it out
        session = (path.resolve().parent / Path(recipe.session).expanduser()).resolve()
        if not session.is_dir():
            raise PerfsuiteError(f"{label}: session: no such directory: {recipe.session} ({session})")
        recipe = dataclasses.replace(recipe, session=str(session))
    return dataclasses.replace(recipe, path=portable_path(path.resolve()))
