"""Run conditions (SPEC M10) applied to recipes, and the crossover sweep's plan (``perfsuite sweep``).

:func:`apply_conditions` turns command-line conditions into a recipe: a storage profile (resolved to
its sourced table, so the results record where every figure came from), a live heap, and the engine's
``freeze_loaded`` setting passed to every mode. :func:`plan_sweep` lays out the grid (storage x heap x
freeze, in that nesting, the order "first setting that misses" reads along) and :func:`run_sweep` runs
it, one results document per setting, all carrying the same ``sweep`` annotation.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite._limits import LIMITS, check_limit
from perfsuite.cluster import ATTEMPTS, Runner, Task, WorkerLost
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import (
    Recipe,
    RunResult,
    SampleEvent,
    check_conditions,
    check_parameters,
    declared_parameters,
    resolve_factories,
    run_recipe,
)
from perfsuite.workloads.storage import StorageProfile, load_profile, load_profile_file, resolve_storage

__all__ = [
    "FREEZE_CHOICES",
    "SweepPlan",
    "SweepSetting",
    "apply_conditions",
    "measure_setting",
    "parse_heaps",
    "plan_sweep",
    "run_sweep",
    "run_sweep_on",
]

#: ``--freeze``: run each setting without the engine's gc.freeze(), with it, or both
FREEZE_CHOICES = ("off", "on", "both")


def parse_heaps(text: str) -> list[int]:
    """``"0,1e5,1e6"`` -> ``[0, 100000, 1000000]``; one-line error for anything else."""
    heaps = []
    for part in text.split(","):
        part = part.strip()
        try:
            value = float(part)
        except ValueError:
            raise PerfsuiteError(f"--heap: expected non-negative object counts like 0,1e5,1e6, got {part!r}") from None
        whole = value.is_integer()  # False for NaN and infinity too (int() of them raised)
        if not whole or check_limit("heap", int(value)):
            raise PerfsuiteError(f"--heap: expected a whole number of objects from 0 to "
                                 f"{LIMITS['heap'].high:.0e}, got {part!r}")
        heaps.append(int(value))
    if not heaps:
        raise PerfsuiteError("--heap: no sizes given")
    return heaps


def _profile(storage: str | Mapping[str, Any] | None, storage_file: str | None) -> StorageProfile | None:
    if storage is not None and storage_file is not None:
        raise PerfsuiteError("give --storage PROFILE or --storage-file FILE, not both")
    if storage_file is not None:
        return load_profile_file(storage_file)
    if storage is not None:
        return resolve_storage(storage)
    return None


def apply_conditions(
    recipe: Recipe,
    *,
    storage: str | Mapping[str, Any] | None = None,
    storage_file: str | None = None,
    heap: int | None = None,
    freeze: bool | None = None,
    gc: str | None = None,
) -> Recipe:
    """``recipe`` under the given conditions. A storage profile named by the recipe itself is resolved
    too, so the results always record the profile's table with its sources. A heap > 0 implies natural
    GC (M10: collections land where they would) unless ``gc`` says otherwise."""
    profile = _profile(storage, storage_file)
    if profile is None and recipe.storage is not None:
        profile = resolve_storage(recipe.storage)
    heap_value = recipe.heap if heap is None else heap
    policy = gc if gc is not None else ("natural" if heap_value and heap is not None else None)
    factories = resolve_factories(recipe)
    if freeze:  # an operation that declares its parameters must accept the engine setting it is given
        for mode in recipe.modes:
            declared = declared_parameters(factories[mode.name], mode.operation)
            if declared is not None and "freeze_loaded" not in declared:
                raise PerfsuiteError(f"--gc-freeze: {recipe.path or recipe.name}: modes.{mode.name}: operation "
                                     f"{mode.operation} does not accept freeze_loaded (it declares "
                                     f"{', '.join(sorted(declared)) or 'no parameters'})")
    conditioned = recipe.with_overrides(
        storage=profile.to_dict() if profile is not None else None,
        heap=heap,
        gc=policy,
        mode_params={"freeze_loaded": True} if freeze else None,
    )
    check_conditions(conditioned, factories)
    check_parameters(conditioned, factories)
    return conditioned


@dataclass(frozen=True, slots=True)
class SweepSetting:
    """One point of the grid and the recipe that measures it."""

    index: int
    storage: str | None
    heap: int
    freeze: bool
    recipe: Recipe

    @property
    def label(self) -> str:
        """``nvme, heap 1000000, freeze on``."""
        return f"{self.storage or 'no simulated storage'}, heap {self.heap}, freeze {'on' if self.freeze else 'off'}"

    def to_dict(self) -> dict[str, Any]:
        """The ``setting`` of the document's ``sweep`` annotation."""
        return {"index": self.index, "storage": self.storage, "heap": self.heap, "freeze": self.freeze}


@dataclass(frozen=True, slots=True)
class SweepPlan:
    """The grid of one sweep, in reading order, with its id."""

    id: str
    recipe: str
    settings: tuple[SweepSetting, ...]
    storages: tuple[str | None, ...]
    heaps: tuple[int, ...]
    freeze: str

    def annotation(self, setting: SweepSetting) -> dict[str, Any]:
        """The ``sweep`` key of one setting's results document."""
        return {
            "id": self.id,
            "recipe": self.recipe,
            "grid": {"storage": list(self.storages), "heap": list(self.heaps), "freeze": self.freeze},
            "setting": setting.to_dict(),
            "of": len(self.settings),
        }


def plan_sweep(
    recipe: Recipe,
    *,
    storages: Sequence[str | None] = (None,),
    heaps: Sequence[int] = (0,),
    freeze: str = "off",
    storage_files: Mapping[str, str] | None = None,
    sweep_id: str | None = None,
) -> SweepPlan:
    """The grid storage x heap x freeze (storage outermost, in the given order; heaps as given; freeze off
    before on). Every setting runs with natural GC (M10), so settings differ only in their conditions,
    and without the allocation pass (M3: allocation does not depend on these conditions).
    ``storage_files`` maps a name used in ``storages`` to a user's profile file."""
    if freeze not in FREEZE_CHOICES:
        raise PerfsuiteError(f"--freeze: expected one of {', '.join(FREEZE_CHOICES)}, got {freeze!r}")
    if not storages or not heaps:
        raise PerfsuiteError("a sweep needs at least one storage profile and one heap size")
    if len(set(storages)) != len(storages) or len(set(heaps)) != len(heaps):
        raise PerfsuiteError("a sweep's --storage and --heap values must not repeat")
    freezes = {"off": (False,), "on": (True,), "both": (False, True)}[freeze]
    size = len(storages) * len(heaps) * len(freezes)
    if check_limit("grid_settings", size):  # every setting is a whole run
        raise PerfsuiteError(f"a sweep of {size} settings ({len(storages)} storage x {len(heaps)} heap x "
                             f"{len(freezes)} freeze); at most {LIMITS['grid_settings'].high:g}")
    recipe = dataclasses.replace(recipe, allocation=False)  # the sweep measures latency: no M3 pass per setting
    files = dict(storage_files or {})
    profiles: dict[str | None, StorageProfile | None] = {}
    for name in storages:  # resolve every profile before anything runs: a bad name fails at once
        if name is None:
            profiles[name] = None
        elif name in files:
            profiles[name] = load_profile_file(files[name])
        else:
            profiles[name] = load_profile(name)
    settings: list[SweepSetting] = []
    for name in storages:
        for heap in heaps:
            for frozen in freezes:
                profile = profiles[name]
                conditioned = apply_conditions(
                    recipe, storage=profile.to_dict() if profile is not None else None, heap=heap,
                    freeze=frozen, gc="natural")
                label = conditioned.storage.get("name") if isinstance(conditioned.storage, Mapping) else None
                settings.append(SweepSetting(len(settings), label, heap, frozen, conditioned))
    sid = sweep_id or f"{recipe.name}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    return SweepPlan(sid, recipe.name, tuple(settings), tuple(storages), tuple(heaps), freeze)


OnSetting = Callable[[SweepSetting, int], Callable[[SampleEvent], None] | None]


def run_sweep(
    plan: SweepPlan,
    *,
    output_dir: Path | str,
    fixture: Path | None = None,
    fixture_info: Mapping[str, Any] | None = None,
    work_root: Path | None = None,
    on_setting: OnSetting | None = None,
    only: Iterable[int] | None = None,
) -> list[RunResult]:
    """Run every setting of ``plan`` (or the indices in ``only``); one results document per setting under
    ``output_dir/<sweep id>/``. ``on_setting(setting, total)`` may return an ``on_sample`` callback."""
    directory = Path(output_dir) / plan.id
    chosen = set(only) if only is not None else None
    results = []
    for setting in plan.settings:
        if chosen is not None and setting.index not in chosen:
            continue
        on_sample = on_setting(setting, len(plan.settings)) if on_setting is not None else None
        path = directory / f"{plan.recipe}-{setting.index:02d}.json"
        results.append(run_recipe(
            setting.recipe, output=path, fixture=fixture, fixture_info=fixture_info, work_root=work_root,
            on_sample=on_sample, run_id=plan.id, annotations={"sweep": plan.annotation(setting)}))
    return results


# -- the sweep on a cluster --------------------------------------------------------------------------------
def measure_setting(recipe: Recipe, name: str, run_id: str, annotations: Mapping[str, Any], fixture: str | None,
                    fixture_info: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Worker task: one setting's whole run (every sample, warm-up and idle control) on this worker, into a
    scratch directory; returns the document and the bytes of every file written (document and exports).
    ``fixture`` is the client's fixture directory; a worker that cannot see it (another machine) builds the
    named fixture from its spec (fixtures are deterministic, cached by digest)."""
    import tempfile

    where = Path(fixture) if fixture else None
    info = dict(fixture_info)
    if where is not None and not where.is_dir():
        if info.get("source") == "session":
            raise PerfsuiteError(f"{fixture}: the --session directory is not visible on worker host "
                                 f"{annotations.get('placement', {}).get('host')}; put it on a shared path")
        from perfsuite.workloads.fixtures import resolve_fixture

        where, info = resolve_fixture(recipe.fixture)
    with tempfile.TemporaryDirectory(prefix="perfsuite-sweep-cell-") as scratch:
        result = run_recipe(recipe, output=Path(scratch) / name, fixture=where, fixture_info=info,
                            run_id=run_id, annotations=annotations)
        files = {p.name: p.read_bytes() for p in (result.path, *result.exports)}
        return dict(result.document), files


def _write_file(path: Path, data: bytes) -> None:
    """Atomically (temp file, fsync, replace): a cell's files arrive whole from its worker."""
    temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(temp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


OnCell = Callable[[SweepSetting, str], None]


def run_sweep_on(
    runner: Runner,
    plan: SweepPlan,
    *,
    output_dir: Path | str,
    fixture: Path | None = None,
    fixture_info: Mapping[str, Any] | None = None,
    on_start: OnCell | None = None,
    on_done: Callable[[SweepSetting, RunResult], None] | None = None,
    only: Iterable[int] | None = None,
) -> list[RunResult]:
    """:func:`run_sweep` on ``runner``: each setting is one task, so all its samples (and its
    idle control) run on one worker, and at most one setting runs on a host at a time, so a measurement
    never shares its machine with another one of the sweep. The host is recorded in the document
    (``placement``) beside the worker's own environment; no figure pairs samples of two settings.
    ``on_start(setting, host)`` when a setting is handed to a host, ``on_done`` when its files are written."""
    directory = Path(output_dir) / plan.id
    directory.mkdir(parents=True, exist_ok=True)
    chosen = set(only) if only is not None else None
    queue = [s for s in plan.settings if chosen is None or s.index in chosen]
    hosts = sorted(runner.hosts())
    pinned = len(hosts) > 1  # (one host: the runner's own placement is that host)
    busy: dict[Any, tuple[SweepSetting, str, int]] = {}
    results: list[RunResult] = []

    def submit(setting: SweepSetting, host: str, attempt: int) -> None:
        name = f"{plan.recipe}-{setting.index:02d}.json"
        annotations = {"sweep": plan.annotation(setting), "placement": {"host": host, "backend": runner.kind}}
        task = Task(setting.index, measure_setting, (setting.recipe, name, plan.id, annotations,
                                                     str(fixture) if fixture else None, dict(fixture_info or {})),
                    host=host if pinned else None)
        busy[runner.submit(task)] = (setting, host, attempt)
        if on_start is not None:
            on_start(setting, host)

    try:
        for host in hosts:
            if queue:
                submit(queue.pop(0), host, 1)
        while busy:
            for handle in runner.wait(list(busy)):
                setting, host, attempt = busy.pop(handle)
                try:
                    document, files = runner.result(handle)
                except WorkerLost:
                    if attempt >= ATTEMPTS:
                        raise
                    submit(setting, host, attempt + 1)  # the whole setting again: never half on another worker
                    continue
                for file_name, data in files.items():
                    _write_file(directory / file_name, data)
                result = RunResult(directory / f"{plan.recipe}-{setting.index:02d}.json", document,
                                   tuple(directory / n for n in files if not n.endswith(f"{setting.index:02d}.json")))
                results.append(result)
                if on_done is not None:
                    on_done(setting, result)
                if queue:
                    submit(queue.pop(0), host, 1)
    finally:
        if busy:
            runner.cancel(busy)
    return sorted(results, key=lambda r: int(r.document["sweep"]["setting"]["index"]))
