"""M4 for several versions of the code under test: one run, their samples interleaved.

Between-run variance is larger than within-run variance, so two separate runs are not comparable
sample for sample. :func:`run_variants` measures one recipe for several :class:`CodeVariant` in **one
plan**:

* warm-ups: one per variant and mode, in a seeded random order;
* rounds: one latency sample per variant and mode, in a seeded random order per round, then one
  idle-control window shared by every variant (the same machine at the same moment: it measures the
  machine, not the code, so it runs without any variant's code);
* the allocation pass (M3), interleaved the same way;
* with ``instructions = true``, the instruction pass under valgrind, interleaved the same way:
  each variant's code loaded through the same fixed link (:func:`perfsuite.harness._pinning.pinned_code`),
  so two revisions count the same when their code is the same.

Every sample runs in a fresh worker process (``process`` isolation, required: one interpreter cannot hold
two versions of one package) that imports the variant's ``packages`` from its ``root`` before anything
else (:func:`perfsuite.harness._worker.load_code`); the harness, the operations and everything else are
the running interpreter's. All variants share the fixture (the same private copies, copied per sample).

Each variant gets its own results document (the schema of :func:`run_recipe`), whose ``order`` is its
own part of the plan, plus a ``variant`` section (its name, the others, the seed, the code it imported
and where from). :func:`probe_variant` checks, before measuring, that operations import against a variant.
:func:`extend_variants` adds rounds to finished documents (a sequential A/B's next look): the
same interleaving, indices after the last round, appended sample by sample.
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError
from perfsuite.harness._plan import SampleKind, VariantPlanEntry, plan_rounds
from perfsuite.harness._recipe import Recipe
from perfsuite.harness._results import collect_environment, describe_fixture, git_state, now_iso, write_json_atomic
from perfsuite.harness._runner import (
    DEFAULT_CONTROL_WINDOW_MS,
    RunResult,
    SampleEvent,
    _new_document,
    _one_line,
    _Run,
    _work_dir,
)
from perfsuite.harness._syspath import worker_sys_path
from perfsuite.harness._worker import worker_command

__all__ = [
    "CodeVariant",
    "VariantsResult",
    "extend_variants",
    "imported_modules",
    "imports_packages",
    "plan_variants",
    "probe_variant",
    "run_variants",
]

OnSample = Callable[[SampleEvent], None]


@dataclass(frozen=True, slots=True)
class CodeVariant:
    """One version of the code under test: ``packages`` (dotted names) imported from the directory ``root``.

    ``git`` replaces ``environment.git`` in this variant's document (the commit measured, not the
    harness's); ``info`` is recorded as is in its ``variant`` section (revision name, fallbacks...).
    ``python`` is the interpreter of the variant's own environment (``perfsuite ab`` builds one per
    revision when their dependencies differ); its workers run with it. ``None``: the running interpreter.
    """

    name: str
    root: Path
    packages: tuple[str, ...]
    git: Mapping[str, Any] | None = None
    info: Mapping[str, Any] = field(default_factory=dict)
    python: str | None = None

    def request(self) -> dict[str, Any]:
        """The ``code`` entry of a worker request."""
        entry: dict[str, Any] = {"root": str(self.root), "packages": list(self.packages)}
        if self.python is not None:
            entry["python"] = self.python
        return entry


@dataclass(frozen=True, slots=True)
class VariantsResult:
    """One recipe measured for every variant: a :class:`RunResult` per variant name, and the plan run."""

    results: Mapping[str, RunResult]
    plan: tuple[Mapping[str, Any], ...]
    seed: int


def plan_variants(recipe: Recipe, names: Sequence[str], seed: int) -> list[VariantPlanEntry]:
    """The interleaved plan: ``{"variant", "kind", "mode", "index"}`` entries (``variant`` is ``None`` for
    the shared control windows), each round's variant/mode pairs in a seeded random order."""
    rng = random.Random(seed)
    modes = [m.name for m in recipe.modes]

    def round_of(kind: SampleKind, index: int) -> list[VariantPlanEntry]:
        pairs: list[tuple[str | None, str | None]] = [(v, m) for v in names for m in modes]
        rng.shuffle(pairs)
        return [{"variant": v, "kind": kind, "mode": m, "index": index} for v, m in pairs]

    return plan_rounds(recipe, round_of, lambda i: {"variant": None, "kind": "control", "mode": None, "index": i})


def _worker(request: Mapping[str, Any], timeout: float, python: str | None = None) -> dict[str, Any]:
    try:
        proc = subprocess.run(worker_command({"python": python}), input=json.dumps(request),
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise PerfsuiteError(f"worker process did not finish within {timeout:g} s") from None
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    try:
        reply = json.loads(lines[-1]) if lines else None
    except ValueError:
        reply = None
    if isinstance(reply, dict) and "error" in reply:
        raise PerfsuiteError(str(reply["error"]))
    if proc.returncode != 0 or not isinstance(reply, dict):
        err = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        raise PerfsuiteError(f"worker process failed (exit {proc.returncode}): {err[-1] if err else 'no output'}")
    return reply


def probe_variant(variant: CodeVariant, operations: Sequence[str], *, timeout: float = 120.0) -> dict[str, str]:
    """Load ``variant`` in a worker and import ``operations`` against it; returns ``{package: file}``.
    Raises a one-line :class:`PerfsuiteError` saying what failed (the caller may try another variant)."""
    code = variant.request()
    request = {"kind": "probe", "operations": list(operations), "code": code, "sys_path": worker_sys_path(code)}
    return dict(_worker(request, timeout, variant.python).get("code") or {})


def imports_packages(operation: str, packages: Sequence[str], *, timeout: float = 120.0,
                     python: str | None = None) -> bool:
    """Whether importing ``operation`` (in a fresh worker, the running code; ``python``: another environment's
    interpreter) imports any of ``packages``: an operation that does not cannot tell two versions of them
    apart (it measures the machine)."""
    request = {"kind": "probe", "operations": [operation], "watch": list(packages),
               "sys_path": worker_sys_path({"python": python})}
    record = _worker(request, timeout, python).get("record") or {}
    return any((record.get("imported") or {}).values())


def imported_modules(operations: Sequence[str], under: Path, *, timeout: float = 120.0,
                     python: str | None = None) -> dict[str, str]:
    """``{module: file}`` of the modules that importing ``operations`` (in a fresh worker, the running code;
    ``python``: another environment's interpreter) imports from files below ``under``: what of a repository
    its operations use (the default code under test of ``perfsuite ab``)."""
    request = {"kind": "probe", "operations": list(operations), "under": str(under),
               "sys_path": worker_sys_path({"python": python})}
    record = _worker(request, timeout, python).get("record") or {}
    return {str(k): str(v) for k, v in (record.get("modules") or {}).items()}


def _document(recipe: Recipe, variant: CodeVariant, names: Sequence[str], plan: Sequence[Mapping[str, Any]],
              seed: int, fixture_doc: Mapping[str, Any], work_dir: Path, run_id: str | None) -> dict[str, Any]:
    # the revision measured, not the working directory's checkout (environment.measured)
    measured = {"dirty": None, "branch": None, "root": None, **dict(variant.git), "source": "revision"} \
        if variant.git is not None else None
    environment = collect_environment(work_dir, measured=measured)
    environment["git"] = dict(variant.git) if variant.git is not None else None
    doc = _new_document(recipe, fixture_doc, environment)
    order = [{"kind": e["kind"], "mode": e["mode"], "index": e["index"]}
             for e in plan if e["variant"] in (variant.name, None)]
    doc["order"] = order
    doc["progress"] = {"done": 0, "total": len(order)}
    doc["variant"] = {
        **dict(variant.info),  # the caller's notes first: the harness's own keys below win
        "name": variant.name,
        "of": list(names),
        "seed": seed,
        "interleaved": "one plan for all variants: each round's variant/mode pairs in a seeded random order, "
                       "one shared idle-control window per round",
        "code": {"root": str(variant.root), "packages": list(variant.packages), "imported": None},
        "instrument": git_state(),
    }
    if run_id is not None:
        doc["run_id"] = run_id
    return doc


def run_variants(
    recipe: Recipe,
    variants: Sequence[CodeVariant],
    *,
    outputs: Mapping[str, Path],
    fixture: Path | None = None,
    fixture_info: Mapping[str, Any] | None = None,
    work_root: Path | None = None,
    seed: int = 0,
    on_sample: OnSample | None = None,
    run_id: str | None = None,
    valgrind: str | None = None,
) -> VariantsResult:
    """Measure ``recipe`` for every variant in one interleaved plan (see the module docstring); each
    variant's document goes to ``outputs[variant.name]``; ``valgrind`` is the instruction pass's valgrind
    (default ``$PERFSUITE_VALGRIND``, else PATH; without one the pass is recorded as not measured). A failed
    sample raises a one-line :class:`PerfsuiteError`; every document then keeps what was measured, marked
    ``failed`` (with the reason in ``error``) or ``interrupted`` (SIGINT, SIGTERM)."""
    names = [v.name for v in variants]
    if len(set(names)) != len(names) or not names:
        raise PerfsuiteError(f"{recipe.name}: variants need distinct names, got {names}")
    if recipe.isolation != "process":
        raise PerfsuiteError(f"{recipe.name}: code variants need process isolation (one interpreter cannot hold two "
                             "versions of a package)")
    if recipe.fixture and fixture is None:
        raise PerfsuiteError(f"{recipe.name}: the recipe needs fixture {recipe.fixture!r}, none was given")
    info = dict(fixture_info or {})
    info.setdefault("name", recipe.fixture)
    fixture_doc = describe_fixture(Path(fixture) if fixture else None, info)
    plan = plan_variants(recipe, names, seed)
    work_dir = _work_dir(work_root)
    try:
        runs: dict[str, _Run] = {}
        for v in variants:
            run = _Run(recipe, {}, Path(outputs[v.name]), Path(fixture) if fixture else None, work_dir, None,
                       valgrind=valgrind, code=v.request())
            run.doc = _document(recipe, v, names, plan, seed, fixture_doc, work_dir, run_id)
            write_json_atomic(run.path, run.doc)
            runs[v.name] = run
        _execute(recipe, runs, plan, on_sample)
        return VariantsResult({name: run.finish() for name, run in runs.items()}, tuple(plan), seed)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def extend_variants(
    recipe: Recipe,
    variants: Sequence[CodeVariant],
    *,
    outputs: Mapping[str, Path],
    rounds: int,
    fixture: Path | None = None,
    work_root: Path | None = None,
    seed: int = 0,
    on_sample: OnSample | None = None,
    valgrind: str | None = None,
) -> VariantsResult:
    """Add ``rounds`` interleaved rounds (one sample per variant and mode, in a seeded random order, then one
    shared control window) to the finished documents of :func:`run_variants` at ``outputs``: indices follow
    the last round, each sample is written as it lands, the plan and progress grow, the recipe section
    records the new sample count and ``variant.extensions`` each extension. No warm-up and no allocation or
    instruction pass: those are deterministic costs, measured once."""
    from perfsuite.harness._results import load_results

    if rounds < 1:
        raise PerfsuiteError(f"{recipe.name}: rounds to add must be positive, got {rounds}")
    docs = {v.name: load_results(Path(outputs[v.name])) for v in variants}
    counts = {name: {m: len(body["samples"]) for m, body in doc["modes"].items()} for name, doc in docs.items()}
    done = {n for c in counts.values() for n in c.values()}
    if len(done) != 1 or any(doc.get("status") != "complete" for doc in docs.values()):
        raise PerfsuiteError(f"{recipe.name}: only complete documents with one sample count per mode can be "
                             f"extended, got {counts}")
    start = done.pop()
    names = [v.name for v in variants]
    rng = random.Random(seed)
    modes = [m.name for m in recipe.modes]
    plan: list[VariantPlanEntry] = []
    for index in range(start, start + rounds):
        pairs = [(v, m) for v in names for m in modes]
        rng.shuffle(pairs)
        plan += [{"variant": v, "kind": "sample", "mode": m, "index": index} for v, m in pairs]
        plan.append({"variant": None, "kind": "control", "mode": None, "index": index})
    grown = dataclasses.replace(recipe, samples=start + rounds, control_windows=start + rounds)
    work_dir = _work_dir(work_root)
    try:
        runs: dict[str, _Run] = {}
        for v in variants:
            doc = docs[v.name]
            own = [{"kind": e["kind"], "mode": e["mode"], "index": e["index"]}
                   for e in plan if e["variant"] in (v.name, None)]
            doc["order"] = [*doc["order"], *own]
            doc["progress"]["total"] = len(doc["order"])
            doc["status"] = "running"
            doc["recipe"] = {**doc["recipe"], "samples": start + rounds, "control_windows": start + rounds}
            doc["variant"]["extensions"] = [*doc["variant"].get("extensions", []),
                                            {"rounds": rounds, "first_index": start, "seed": seed}]
            run = _Run(grown, doc, Path(outputs[v.name]), Path(fixture) if fixture else None, work_dir, None,
                       valgrind=valgrind, code=v.request())
            write_json_atomic(run.path, run.doc)
            runs[v.name] = run
        _execute(grown, runs, plan, on_sample)
        return VariantsResult({name: run.finish() for name, run in runs.items()}, tuple(plan), seed)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def _execute(recipe: Recipe, runs: Mapping[str, _Run], plan: Sequence[Mapping[str, Any]],
             on_sample: OnSample | None) -> None:
    first = next(iter(runs.values()))
    try:
        for done, entry in enumerate(plan, start=1):
            own = {"kind": entry["kind"], "mode": entry["mode"], "index": entry["index"]}
            if entry["variant"] is None:  # the shared idle control: as long as the median sample window so far
                windows = [s["window_ms"] for r in runs.values() for b in r.doc["modes"].values() for s in b["samples"]]
                window = float(statistics.median(windows)) if windows else DEFAULT_CONTROL_WINDOW_MS
                record = _control(first, own, window)
                for run in runs.values():
                    run.complete(own, record)
            else:
                run = runs[entry["variant"]]
                run.before(own)  # the fixture has not changed since the first sample
                record = run._instructions(own) if entry["kind"] == "instructions" else run._in_worker(own)
                if run.doc["variant"]["code"]["imported"] is None and run.last_code:
                    run.doc["variant"]["code"]["imported"] = dict(run.last_code)
                run.complete(own, record)
            if on_sample is not None:
                on_sample(SampleEvent(recipe=recipe.name, kind=entry["kind"], mode=entry["mode"],
                                      index=int(entry["index"]), done=done, total=len(plan), path=first.path,
                                      record=record if entry["kind"] not in ("allocation", "instructions") else None,
                                      variant=entry["variant"]))
    except BaseException as exc:
        # keep what was measured; readers see it is not complete (M4): SIGINT/SIGTERM interrupt, anything
        # else fails every variant's document with its one-line reason, as run_recipe does
        interrupted = isinstance(exc, KeyboardInterrupt)
        for run in runs.values():
            run.doc["status"] = "interrupted" if interrupted else "failed"
            if not interrupted:
                run.doc["error"] = _one_line(exc)
            run.doc["updated_at"] = now_iso()
            try:
                run.write(run.path, run.doc)
            except OSError:
                pass
        raise


def _control(run: _Run, entry: Mapping[str, Any], window_ms: float) -> dict[str, Any]:
    spec = run.spec(entry)
    params = {"window_ms": max(window_ms - run.recipe.window_tail_ms, 0.0)}
    spec = dataclasses.replace(spec, params=params)
    request = {"kind": "sample", "spec": spec.to_dict(), "sys_path": [p for p in sys.path if p]}
    try:
        reply = _worker(request, run.recipe.ack_timeout_s + 120.0)
    except PerfsuiteError as exc:
        raise PerfsuiteError(f"{spec.label}: {exc}") from None
    if "record" not in reply:
        raise PerfsuiteError(f"{spec.label}: worker process gave no record")
    return dict(reply["record"])
