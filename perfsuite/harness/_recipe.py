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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite._limits import LIMITS, check_limit
from perfsuite._paths import builtin_dir, portable_path
from perfsuite.errors import PerfsuiteError
from perfsuite.harness._documents import parse_toml, read_text
from perfsuite.harness._gc import GC_POLICIES
from perfsuite.harness._operation import check_operation_spec, import_roots
from perfsuite.harness._params import did_you_mean

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
#: a recipe's name is the stem of its results files (``<name>-<stamp>.json``): no "/", no "..", no spaces
_RECIPE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
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
    # M4 in the worker (process isolation): discarded samples of the same mode, each on its own fresh copy, in
    # the sample's worker process before the measured one, so the measured publication is not the process's
    # first (pyperf's warm-up runs in the worker too); inline runs already warm up in their one process
    worker_warmup: int = 0
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
    # a real session directory of the team's, copied privately for every sample (``--session``
    # in a file): an absolute path once loaded (a relative one is resolved against the recipe file)
    session: str | None = None
    # where operation modules are looked up after sys.path (the recipe file's directory and its git root, so
    # a recipe finds its repository's operations from any directory); absolute paths of this machine, so never
    # recorded (not in to_dict)
    import_roots: tuple[str, ...] = field(default=(), compare=False, repr=False)

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
            if f.name not in ("modes", "import_roots"):
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
        roots = import_roots(path) if isinstance(path, str) and Path(path).is_file() else ()
        return dataclasses.replace(recipe, path=path, import_roots=roots)

    def with_overrides(
        self,
        *,
        samples: int | None = None,
        warmup: int | None = None,
        worker_warmup: int | None = None,
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
            changes["heap"] = check.count("--heap", heap, "heap")
        if mode_params:
            changes["modes"] = tuple(
                dataclasses.replace(m, params={**dict(m.params), **dict(mode_params)}) for m in self.modes)
        if samples is not None:
            changes["samples"] = check.count("--samples", samples, "samples")
            if self.control_windows == self.samples:
                changes["control_windows"] = changes["samples"]
        if warmup is not None:
            changes["warmup"] = check.count("--warmup", warmup, "warmup")
        if worker_warmup is not None:
            changes["worker_warmup"] = check.count("--worker-warmup", worker_warmup, "worker_warmup")
        if isolation is not None:
            changes["isolation"] = check.choice("--isolation", isolation, ISOLATIONS)
        if gc is not None:
            changes["gc"] = check.choice("--gc", gc, GC_POLICIES)
        if order is not None:
            changes["order"] = check.choice("--order", order, ORDERS)
        if seed is not None:
            changes["seed"] = check.count("--seed", seed, "seed")
        if instructions is not None:
            changes["instructions"] = check.boolean("--instructions", instructions)
        if allocation_samples is not None:
            changes["allocation_samples"] = check.count("--allocation-samples", allocation_samples,
                                                        "allocation_samples")
        return _check_plan_size(dataclasses.replace(self, **changes), check)


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

    def count(self, key: str, value: object, limit: str) -> int:
        """An integer in ``LIMITS[limit]`` (every count a recipe or flag takes is bounded)."""
        problem = check_limit(limit, value)
        if problem:
            raise PerfsuiteError(f"{self.label}: {key}: {problem}")
        return int(value)  # type: ignore[call-overload]

    def number(self, key: str, value: object, limit: str) -> float:
        """A finite number in ``LIMITS[limit]`` (an integer is fine: TOML's ``5`` for ``5.0``)."""
        problem = check_limit(limit, value)
        if problem:
            raise PerfsuiteError(f"{self.label}: {key}: {problem}")
        return float(value)  # type: ignore[arg-type]

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


# key -> (checker method, default); "name", "modes", "control_windows" are handled separately. "count" and
# "number" keys are bounded by perfsuite._limits.LIMITS[key]
_SCALARS: dict[str, tuple[str, Any]] = {
    "description": ("string_or_empty", ""),
    "fixture": ("string", None),
    "samples": ("count", 6),
    "warmup": ("count", 1),
    "heartbeat_ms": ("number", 5.0),
    "gc": ("gc", "collect-before"),
    "isolation": ("isolation", "process"),
    "target_ms": ("number", 20.0),
    "allocation": ("boolean", False),
    "allocation_samples": ("count", 3),
    "instructions": ("boolean", False),
    "instructions_samples": ("count", 3),
    "window_tail_ms": ("number", 12.0),
    "ack_timeout_s": ("number", 30.0),
    "settle_ms": ("number", 20.0),
    "sync_after_copy": ("boolean", True),
    "catalogue": ("boolean", True),
    "order": ("order", "random"),
    "seed": ("count", None),
    "storage": ("storage", None),
    "heap": ("count", 0),
    "worker_warmup": ("count", 0),
    "session": ("string", None),
}
assert all(key in LIMITS for key, (kind, _) in _SCALARS.items() if kind in ("count", "number"))
_KNOWN = frozenset(_SCALARS) | {"name", "modes", "control_windows"}


def parse_recipe(data: Mapping[str, Any], label: str, *, default_name: str) -> Recipe:
    """Validate a recipe table (as ``tomllib`` returns it); ``label`` prefixes every error."""
    check = _Checker(label)
    for key in data:
        if key not in _KNOWN:
            raise PerfsuiteError(f"{label}: {key}: unknown key (expected one of {', '.join(sorted(_KNOWN))}"
                                 f"{did_you_mean(key, _KNOWN)})")
    values: dict[str, Any] = {}
    name = data.get("name", default_name)
    values["name"] = check.string("name", name)
    if not _RECIPE_NAME.fullmatch(values["name"]):  # it names the results files: never a path
        where = "" if "name" in data else " (the file's name: give name = \"...\")"
        raise check.fail("name", "letters, digits, '.', '_' and '-', starting with a letter or digit, at most 200 "
                         f"characters{where}", name)
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
        elif kind in ("count", "number"):
            values[key] = getattr(check, kind)(key, raw, key)
        else:
            values[key] = getattr(check, kind)(key, raw)
    control = data.get("control_windows", values["samples"])
    values["control_windows"] = check.count("control_windows", control, "control_windows")
    values["modes"] = _parse_modes(data.get("modes"), check)
    return _check_plan_size(Recipe(**values), check)


def plan_entries(recipe: Recipe) -> int:
    """How many entries the run's plan holds (warm-ups, samples, control windows, passes: M4)."""
    per_mode = recipe.warmup + recipe.samples + (recipe.allocation_samples if recipe.allocation else 0) + (
        recipe.instructions_samples if recipe.instructions else 0)
    return len(recipe.modes) * per_mode + recipe.control_windows


def _check_plan_size(recipe: Recipe, check: _Checker) -> Recipe:
    """The plan is built in memory (and written after every sample) before the run starts, so its
    size is bounded too: modes x (warm-ups + samples + passes) + control windows."""
    problem = check_limit("modes", len(recipe.modes))
    if problem:
        raise PerfsuiteError(f"{check.label}: modes: {problem.replace('expected an integer', 'expected a count')}")
    entries = plan_entries(recipe)
    problem = check_limit("plan_entries", entries)
    if problem:
        raise PerfsuiteError(f"{check.label}: the plan would hold {entries} entries ({len(recipe.modes)} modes x "
                             f"(warmup {recipe.warmup} + samples {recipe.samples} + passes) + {recipe.control_windows} "
                             f"control windows); at most {LIMITS['plan_entries'].high:g}: lower samples or warmup")
    return recipe


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
    if user is None and chosen and not Path(chosen).is_dir():  # never silently fall back to the built-ins
        raise PerfsuiteError(f"$PERFSUITE_RECIPES: no such directory: {chosen}")
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
        text = read_text(path, "recipe file")
    except PerfsuiteError as exc:  # name it as the rest of the messages do (relative to the working directory)
        raise PerfsuiteError(str(exc).replace(str(path), label, 1)) from None
    recipe = parse_recipe(parse_toml(text, label), label, default_name=path.stem)
    if recipe.session is not None:  # relative to the recipe file, as a team's repository lays it out
        session = (path.resolve().parent / Path(recipe.session).expanduser()).resolve()
        if not session.is_dir():
            raise PerfsuiteError(f"{label}: session: no such directory: {recipe.session} ({session})")
        recipe = dataclasses.replace(recipe, session=str(session))
    return dataclasses.replace(recipe, path=portable_path(path.resolve()), import_roots=import_roots(path))
