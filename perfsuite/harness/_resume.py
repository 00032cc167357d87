"""M8: continuing an interrupted run (``perfsuite run --resume``): the recorded document is checked (schema,
plan, progress against the recipe, no live writer), then the run goes on from its last
sample.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError
from perfsuite.harness._lock import ResultsLock, check_not_busy
from perfsuite.harness._recipe import Recipe
from perfsuite.harness._results import (
    ResultsWriter,
    describe_fixture,
    load_results,
    now_iso,
    validate_results,
)
from perfsuite.harness._runner import OnSample, RunResult, _drive, _Run, _work_dir, plan_order

__all__ = ["check_resumable", "resume_run"]


def _resume_problem(doc: Mapping[str, Any], recipe: Recipe) -> str | None:
    """Why ``doc``'s plan and progress cannot be continued with ``recipe``, or ``None`` (an edited
    ``progress.done = -3`` used to run the wrong plan entries)."""
    order, progress = doc["order"], doc["progress"]
    done, total = progress["done"], progress["total"]
    if order != plan_order(recipe):
        return "order is not the plan of the recorded recipe"
    if total != len(order):
        return f"progress.total is {total}, the plan has {len(order)} entries"
    if not 0 <= done <= total:
        return f"progress.done is {done}, expected 0..{total}"
    if sorted(doc["modes"]) != sorted(m.name for m in recipe.modes):
        return f"modes {sorted(doc['modes'])} are not the recipe's {sorted(m.name for m in recipe.modes)}"
    finished = order[:done]

    def count(kind: str, mode: str | None) -> int:
        return sum(1 for e in finished if e["kind"] == kind and e["mode"] == mode)

    for mode, body in doc["modes"].items():
        instr = body.get("instructions") or {}
        passes, want = len(instr.get("samples") or []), count("instructions", mode)
        if not instr.get("not_measured") and passes != want:
            return f"mode {mode} records {passes} instruction passes, but progress.done = {done} means {want}"
        alloc = (body.get("allocation") or {}).get("samples") or []
        for what, have, want in (("samples", len(body["samples"]), count("sample", mode)),
                                 ("warm-ups", int(body.get("warmups", 0)), count("warmup", mode)),
                                 ("allocation samples", len(alloc), count("allocation", mode))):
            if have != want:
                return f"mode {mode} records {have} {what}, but progress.done = {done} means {want}"
    controls = len(doc["control"]["samples"])
    if controls != count("control", None):
        return f"the control records {controls} windows, but progress.done = {done} means {count('control', None)}"
    return None


def check_resumable(path: Path | str) -> tuple[dict[str, Any], Recipe]:
    """Load a results document for ``--resume`` and check it first: the schema, the recorded recipe,
    the plan and progress against what was recorded, and that no live process is writing it. Every
    problem is one :class:`PerfsuiteError` line naming the file."""
    doc, recipe = _resumable_document(Path(path))
    check_not_busy(path)
    return doc, recipe


def _resumable_document(path: Path) -> tuple[dict[str, Any], Recipe]:
    doc = load_results(path)
    if doc.get("variant"):
        raise PerfsuiteError(
            f"{path}: cannot resume: measured interleaved with other code variants (perfsuite ab); it cannot be "
            "resumed alone: run the comparison again"
        )
    if doc.get("live"):  # M11: windows of a program that has ended
        raise PerfsuiteError(f"{path}: cannot resume: a live watch (perfsuite watch) measured a running program; its "
                             "windows are kept as they are: watch the program again for more")
    try:
        validate_results(doc)
    except PerfsuiteError as exc:
        raise PerfsuiteError(f"{path}: cannot resume: {exc}") from None
    recipe = Recipe.from_dict(doc["recipe"], source=f"{path}: recipe")
    problem = _resume_problem(doc, recipe)
    if problem:
        raise PerfsuiteError(f"{path}: cannot resume: {problem}")
    return doc, recipe


def resume_run(
    path: Path,
    *,
    fixture: Path | None = None,
    fixture_info: Mapping[str, Any] | None = None,
    work_root: Path | None = None,
    on_sample: OnSample | None = None,
    writer: ResultsWriter | None = None,
    valgrind: str | None = None,
) -> RunResult:
    """M4: continue an interrupted or failed run file, keeping its samples, recorded recipe and plan.

    The document is checked first (:func:`check_resumable`) and locked while it is written: a second
    ``--resume`` of a document whose run is alive is refused (:class:`~perfsuite.harness.ResultsBusy`).
    """
    path = Path(path)
    check_resumable(path)  # one-line errors for a missing or bad file before any lock file is made
    with ResultsLock.acquire(path):
        doc, recipe = _resumable_document(path)  # again, under the lock: the one this run continues
        done, total = doc["progress"]["done"], doc["progress"]["total"]
        if recipe.fixture and fixture is None:
            raise PerfsuiteError(f"{path}: the run needs fixture {recipe.fixture!r}, none was given")
        recorded = (doc.get("fixture") or {}).get("digest")
        if fixture is not None:
            info = dict(fixture_info or {})
            info.setdefault("name", recipe.fixture)
            now = describe_fixture(Path(fixture), info).get("digest")
            if recorded and now and recorded != now:
                raise PerfsuiteError(f"{path}: the fixture changed since the run started ({recorded} != {now})")
        work_dir = _work_dir(work_root)
        try:
            run = _Run(recipe, doc, path, Path(fixture) if fixture else None, work_dir, on_sample, writer, valgrind)
            if done >= total:
                if doc.get("status") == "complete":
                    raise PerfsuiteError(f"{path}: the run is already complete")
                return _drive(run, rewarm=False)  # measured, but exports or the final write failed
            doc["status"] = "running"
            doc.pop("error", None)
            doc.setdefault("resumed_at", []).append(now_iso())
            return _drive(run, rewarm=True)
        finally:
            shutil.rmtree(work_dir, ignore_errors=True)
