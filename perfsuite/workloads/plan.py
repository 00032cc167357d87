"""What ``perfsuite run`` measures, decided before anything is measured (planning lives in
the library; the CLI parses and prints).

:func:`plan_run` loads the named recipes (or the quick set, or the catalogue), applies the run conditions
(SPEC M10), resolves every mode's operation and checks its declared parameters (a typo fails before any
fixture is built: check all, then run) and sets aside
recipes whose operation says it cannot run here (a peer whose package is not installed: skipped with the
reason, never a failure). :func:`plan_resume` checks an interrupted results file for ``--resume`` (M8).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perfsuite.errors import PerfsuiteError

if TYPE_CHECKING:
    from perfsuite.harness import Recipe

# The harness and the conditions (which load the engine) are imported where they are used: the CLI reads
# DEFAULT_RUN_RECIPES for its help text, and `perfsuite --help` must not load the engine.

__all__ = ["DEFAULT_RUN_RECIPES", "RunOptions", "RunPlan", "Skipped", "plan_resume", "plan_run", "unavailable"]

#: what `perfsuite run` measures when no RECIPE is named (the quick set)
DEFAULT_RUN_RECIPES: tuple[str, ...] = (
    "idle-control", "fsync-floor", "mailbox-delivery", "root-checkpoint", "diagnostic-append")


@dataclass(frozen=True, slots=True)
class RunOptions:
    """The command line's overrides of every recipe's plan and its run conditions; ``None``: the recipe's."""

    samples: int | None = None
    warmup: int | None = None
    worker_warmup: int | None = None
    isolation: str | None = None
    gc: str | None = None
    order: str | None = None
    seed: int | None = None
    storage: str | None = None
    storage_file: str | None = None
    heap: str | None = None  # one size, as typed ("1e6")
    gc_freeze: bool | None = None
    instructions: bool | None = None  # --instructions: the instruction pass; None: the recipe's

    def given(self) -> bool:
        """Whether any override was given (``--resume`` takes none: it continues the recorded plan)."""
        return any(getattr(self, name) is not None for name in self.__slots__)


@dataclass(frozen=True, slots=True)
class Skipped:
    """A recipe that cannot run on this machine, and why (``modes.<name>: <reason>``)."""

    recipe: str
    reason: str


@dataclass(frozen=True, slots=True)
class RunPlan:
    """The recipes to measure, in order, and those set aside."""

    recipes: tuple[Recipe, ...]
    skipped: tuple[Skipped, ...]


def unavailable(recipe: Recipe, ref: str | os.PathLike[str] | None = None) -> str | None:
    """Resolve every mode's operation and check its parameters against the operation's declaration (issue
    28 item 6; one-line error naming the recipe), then return the first mode's reason it cannot run here
    (its factory's ``unavailable()`` hook), or ``None``."""
    from perfsuite.harness import check_parameters, resolve_factories

    factories = resolve_factories(recipe)
    check_parameters(recipe, factories)
    reason = None
    for mode in recipe.modes:
        factory = factories[mode.name]
        hook = getattr(factory, "unavailable", None)  # e.g. a peer whose package is not installed
        why = hook() if callable(hook) else None
        if why and reason is None:
            reason = f"modes.{mode.name}: {why}"
    return reason


def plan_run(refs: Sequence[str], options: RunOptions = RunOptions(), *, all_recipes: bool = False,
             recipes_dir: str | os.PathLike[str] | None = None) -> RunPlan:
    """Load, condition and check every recipe; nothing is measured or written here."""
    from perfsuite.harness import list_recipes, load_recipe, recipe_dirs
    from perfsuite.workloads.conditions import apply_conditions, parse_heaps

    heap = None
    if options.heap is not None:
        heaps = parse_heaps(options.heap)
        if len(heaps) != 1:
            raise PerfsuiteError("--heap: `run` takes one size (a grid of sizes is `perfsuite sweep`)")
        heap = heaps[0]
    if all_recipes and refs:
        raise PerfsuiteError("--all runs the whole catalogue: give no RECIPE with it")
    dirs = recipe_dirs(recipes_dir)
    recipes: list[Recipe] = []
    skipped: list[Skipped] = []
    for ref in (list_recipes(catalogue_only=True, dirs=dirs) if all_recipes else refs or DEFAULT_RUN_RECIPES):
        recipe = apply_conditions(
            load_recipe(ref, dirs).with_overrides(samples=options.samples, warmup=options.warmup,
                                                  worker_warmup=options.worker_warmup,
                                                  isolation=options.isolation, order=options.order,
                                                  seed=options.seed, instructions=options.instructions),
            storage=options.storage, storage_file=options.storage_file, heap=heap, freeze=options.gc_freeze,
            gc=options.gc)
        reason = unavailable(recipe, ref)
        if reason:
            skipped.append(Skipped(recipe.name, reason))
        else:
            recipes.append(recipe)
    return RunPlan(tuple(recipes), tuple(skipped))


def plan_resume(path: str | os.PathLike[str], refs: Sequence[str] = (), options: RunOptions = RunOptions()) -> Recipe:
    """The recorded recipe of an interrupted results file, checked (schema, plan, progress, no live writer)
    with every operation resolved. Overrides are refused: resume continues the plan."""
    from perfsuite.harness import check_resumable, resolve_operation

    if refs or options.given():
        raise PerfsuiteError(
            "--resume continues the recorded recipe and plan: give no RECIPE, --samples, --warmup, --worker-warmup, "
            "--isolation, --gc, --order, --seed, --instructions or run conditions (--storage, --storage-file, --heap, "
            "--gc-freeze)"
        )
    _, recipe = check_resumable(Path(path))
    for mode in recipe.modes:
        resolve_operation(mode.operation)
    return recipe
