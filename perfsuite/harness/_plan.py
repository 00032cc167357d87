"""M4 and M10: what a run will do, fixed before it starts: the plan of warm-ups, rounds, control windows and
passes, the seed of its random order, the run conditions every operation must apply, and the parameters
every operation declares. The runner and the variant sweeps execute it."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping
from typing import Literal, TypedDict, TypeVar

from perfsuite.errors import PerfsuiteError
from perfsuite.harness._operation import OperationFactory, resolve_operation
from perfsuite.harness._params import check_params
from perfsuite.harness._recipe import Recipe

__all__ = ["PlanEntry", "SampleKind", "VariantPlanEntry", "check_conditions", "check_parameters", "plan_order",
           "plan_rounds", "resolve_factories", "resolve_seed"]

#: what a plan entry measures (M4): a warm-up, a sample, a control window, an allocation or instruction pass
SampleKind = Literal["warmup", "sample", "control", "allocation", "instructions"]


class PlanEntry(TypedDict):
    """One entry of a run's plan, as the results document records it (``plan``): the sample ``index`` of
    ``mode`` (``None`` for a control window), of this ``kind``."""

    kind: SampleKind
    mode: str | None
    index: int


class VariantPlanEntry(PlanEntry):
    """An interleaved A/B plan's entry: also the variant it measures (``None`` for a shared control window)."""

    variant: str | None


_Entry = TypeVar("_Entry", PlanEntry, VariantPlanEntry)


def resolve_factories(recipe: Recipe) -> dict[str, OperationFactory]:
    """Every mode's factory (imported from ``sys.path``, then the recipe's own directories), by mode name;
    an import problem is one line naming the recipe and the mode."""
    factories = {}
    for mode in recipe.modes:
        try:
            factories[mode.name] = resolve_operation(mode.operation, recipe.import_roots)
        except PerfsuiteError as exc:
            raise PerfsuiteError(f"{recipe.path or recipe.name}: modes.{mode.name}.operation: {exc}") from None
    return factories


def check_parameters(recipe: Recipe, factories: Mapping[str, OperationFactory]) -> None:
    """Every mode's parameters against its operation's declaration (``factory.parameters``),
    before anything runs: an unknown key names the known ones, a bad value names what is allowed. Modes
    whose operation declares nothing pass as written (the old behaviour)."""
    for name, factory in factories.items():
        mode = recipe.mode(name)
        try:
            check_params(factory, mode.params, mode.operation)
        except PerfsuiteError as exc:
            raise PerfsuiteError(f"{recipe.path or recipe.name}: modes.{name}.{exc}") from None


def check_conditions(recipe: Recipe, factories: Mapping[str, OperationFactory]) -> None:
    """M10: a recipe that sets a run condition (``storage``) runs only operations that declare they apply
    it (``factory.conditions``), so a result never claims simulated latency an operation ignored."""
    if recipe.storage is None:
        return
    for name, factory in factories.items():
        if "storage" not in getattr(factory, "conditions", ()):
            operation = recipe.mode(name).operation
            raise PerfsuiteError(
                f"{recipe.name}: modes.{name}: operation {operation} does not apply storage profiles "
                "(it declares no 'storage' condition), so simulated storage latency would not be applied")


def plan_order(recipe: Recipe) -> list[PlanEntry]:
    """M4: the run's plan: warm-ups, rounds of one sample per mode with one control window per round, the
    allocation pass. Within every round the modes run in a random order drawn from ``recipe.seed``
    (``order = "random"``, the default) or in the recipe's order (``"fixed"``)."""
    modes = [m.name for m in recipe.modes]
    rng = random.Random(recipe.seed)

    def round_of(kind: SampleKind, index: int) -> list[PlanEntry]:
        names = list(modes)
        if recipe.order == "random":
            rng.shuffle(names)  # seeded: the same seed gives the same plan; the document records both
        return [{"kind": kind, "mode": m, "index": index} for m in names]

    return plan_rounds(recipe, round_of, lambda i: {"kind": "control", "mode": None, "index": i})


def plan_rounds(recipe: Recipe, round_of: Callable[[SampleKind, int], list[_Entry]],
                control: Callable[[int], _Entry]) -> list[_Entry]:
    """M4: the shape every plan shares (a run's and an interleaved A/B's): warm-up rounds, rounds of
    samples each followed by a control window, then the allocation and instruction passes. ``round_of``
    is called in that order, so a seeded shuffle inside it gives the same plan for the same seed."""
    order: list[_Entry] = []
    for w in range(recipe.warmup):
        order += round_of("warmup", w)
    for i in range(max(recipe.samples, recipe.control_windows)):
        if i < recipe.samples:
            order += round_of("sample", i)
        if i < recipe.control_windows:
            order.append(control(i))
    if recipe.allocation:
        for i in range(recipe.allocation_samples):
            order += round_of("allocation", i)
    if recipe.instructions:
        for i in range(recipe.instructions_samples):
            order += round_of("instructions", i)
    return order


def resolve_seed(recipe: Recipe) -> Recipe:
    """M4: a random-order recipe without a seed gets one drawn now (recorded in the results document)."""
    if recipe.order == "random" and recipe.seed is None:
        return dataclasses.replace(recipe, seed=random.SystemRandom().randrange(1 << 31))
    return recipe
