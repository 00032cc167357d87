"""`perfsuite run` (SPEC M4, M7, M8) and `perfsuite demo`: parsing and printing only."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfsuite.cli._common import add_phase_options, fixture_hook, phase_outputs, traced
from perfsuite.errors import PerfsuiteError


def add_condition_options(parser: argparse.ArgumentParser) -> None:
    """M10 run conditions: simulated storage latency, a live heap, the engine's gc.freeze() setting."""
    parser.add_argument("--storage", metavar="PROFILE",
                        help="simulate a storage device's latency (built-in: nvme, sata-ssd, hdd, nfs, ebs-gp3): "
                        "every fsync, directory fsync, rename and create pays a delay drawn from the profile's "
                        "sourced distribution; never presented as a device measurement")
    parser.add_argument("--storage-file", metavar="FILE.toml",
                        help="your own storage profile (same format as the built-in ones; every distribution "
                        "needs its source)")
    parser.add_argument("--heap", metavar="N",
                        help="keep N live objects shaped like loaded session state through every sample "
                        "(e.g. 1e6), with natural GC unless --gc says otherwise")
    parser.add_argument("--gc-freeze", action="store_true", default=None,
                        help="open sessions with SessionSettings(freeze_loaded=True): gc.freeze() after open, "
                        "the mitigation for full collections over a large live heap")


def _cmd_demo(args: argparse.Namespace) -> int:
    from perfsuite.engine import demo

    demo.main(args.directory)
    return 0


# -- perfsuite run (issue 5; SPEC M4, M7, M8) -------------------------------------------------------

#: what `perfsuite run` measures when no RECIPE is named (later: the quick set)
DEFAULT_RUN_RECIPES: tuple[str, ...] = (
    "idle-control", "fsync-floor", "mailbox-delivery", "root-checkpoint", "diagnostic-append")


def _run_table(doc: Mapping[str, Any], floor: Any = None) -> Any:
    """The summary table (:func:`perfsuite.report.summary_table`); ``floor`` adds the ack/floor column."""
    from perfsuite.report import summary_table

    return summary_table(doc, floor)


def _cmd_run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from perfsuite.harness import (
        SampleEvent,
        list_recipes,
        load_recipe,
        load_results,
        new_results_path,
        resolve_operation,
        resume_run,
        run_recipe,
    )
    from perfsuite.harness._recipe import Recipe
    from perfsuite.harness._runner import plan_order

    if os.getcwd() not in sys.path:  # operations import like `python -m` would (workers get the same)
        sys.path.insert(0, os.getcwd())
    work_root = Path(args.work_dir) if args.work_dir else None
    skipped: list[str] = []
    err, out = Console(stderr=True), Console()
    if args.resume:
        given = (args.samples, args.warmup, args.isolation, args.gc, args.storage, args.storage_file, args.heap,
                 args.gc_freeze or None)
        if args.recipes or any(v is not None for v in given):
            raise PerfsuiteError(
                "--resume continues the recorded recipe: give no RECIPE, --samples, --warmup, --isolation, --gc "
                "or run conditions (--storage, --storage-file, --heap, --gc-freeze)"
            )
        path = Path(args.resume)
        doc = load_results(path)
        recipe = Recipe.from_dict(doc["recipe"], source=f"{path}: recipe")
        for mode in recipe.modes:
            resolve_operation(mode.operation)
        plans: list[tuple[Recipe, Path, Path | None, dict[str, Any], int]] = [
            (recipe, path, *fixture_hook()(recipe.fixture, args.session), doc["progress"]["done"])
        ]
    else:
        from perfsuite.workloads.conditions import apply_conditions, parse_heaps

        heap = None
        if args.heap is not None:
            heaps = parse_heaps(args.heap)
            if len(heaps) != 1:
                raise PerfsuiteError("--heap: `run` takes one size (a grid of sizes is `perfsuite sweep`)")
            heap = heaps[0]
        plans = []
        if args.all and args.recipes:
            raise PerfsuiteError("--all runs the whole catalogue: give no RECIPE with it")
        for ref in (list_recipes(catalogue_only=True) if args.all else args.recipes or DEFAULT_RUN_RECIPES):
            recipe = apply_conditions(
                load_recipe(ref).with_overrides(samples=args.samples, warmup=args.warmup, isolation=args.isolation),
                storage=args.storage, storage_file=args.storage_file, heap=heap, freeze=args.gc_freeze, gc=args.gc)
            reason = None
            for mode in recipe.modes:  # fail before measuring anything
                try:
                    factory = resolve_operation(mode.operation)
                except PerfsuiteError as exc:
                    raise PerfsuiteError(f"{recipe.path or ref}: modes.{mode.name}.operation: {exc}") from None
                hook = getattr(factory, "unavailable", None)  # e.g. a peer whose package is not installed
                why = hook() if callable(hook) else None
                if why and reason is None:
                    reason = f"modes.{mode.name}: {why}"
            if reason:
                skipped.append(f"skipped: {recipe.name}: {reason}")
                continue
            fixture, info = fixture_hook()(recipe.fixture, args.session)
            plans.append((recipe, new_results_path(args.output_dir, recipe.name), fixture, info, 0))
    documents, paths = [], []
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[gap]}"),
    )
    run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"  # one invocation, many documents
    with Progress(*columns, console=err) as progress:
        for recipe, path, fixture, info, done in plans:
            task = progress.add_task(recipe.name, total=len(plan_order(recipe)), completed=done, gap="")

            def on_sample(event: SampleEvent, task: Any = task) -> None:
                what = event.kind if event.mode is None else f"{event.mode} {event.kind} {event.index}"
                gap = f"max gap {event.max_gap_ms:.2f} ms" if event.max_gap_ms is not None else ""
                progress.update(
                    task, completed=event.done, total=event.total, description=f"{event.recipe}: {what}", gap=gap
                )

            try:
                if args.resume:
                    result = resume_run(
                        path, fixture=fixture, fixture_info=info, work_root=work_root, on_sample=on_sample
                    )
                else:
                    result = run_recipe(
                        recipe,
                        output=path,
                        fixture=fixture,
                        fixture_info=info,
                        work_root=work_root,
                        on_sample=on_sample,
                        run_id=run_id,
                    )
            except KeyboardInterrupt:
                progress.stop()
                print(
                    f"perfsuite: interrupted; measured samples kept in {path}; "
                    f"continue with: perfsuite run --resume {path}",
                    file=sys.stderr,
                )
                return 130
            documents.append(result.document)
            paths.append((result.path, result.exports))
    from perfsuite.report import Result, find_floor

    measured = [Result(path, document) for document, (path, _) in zip(documents, paths)]
    for result in measured:
        out.print(_run_table(result.data, find_floor(result, measured, same_run=True)))
    for path, exports in paths:  # plain lines, never wrapped: scripts read them
        print(f"results: {path}")
        for extra in exports:
            print(f"  {extra}")
    for line in skipped:  # one line per recipe that could not run here, with the reason
        print(line)
    if getattr(args, "phase", False):
        phase_outputs(measured, args.phase_dir)
    return 0


def register(sub: Any) -> None:
    """`demo` and `run`."""
    demo = sub.add_parser("demo", help="write, sync and fork a conversation with the engine; show the disk")
    demo.add_argument("directory", nargs="?", help="where to write (default: a temporary directory)")
    demo.add_argument("--record-trace", metavar="FILE", help="record the engine's trace events (JSON lines)")
    demo.set_defaults(func=traced(_cmd_demo, "demo"))

    run = sub.add_parser("run", help="run recipes under the heartbeat; write results, print verdicts")
    run.add_argument(
        "recipes",
        nargs="*",
        metavar="RECIPE",
        help=f"recipe name or .toml path (default, the quick set: {' '.join(DEFAULT_RUN_RECIPES)})",
    )
    run.add_argument("--all", action="store_true",
                     help="run the whole recipe catalogue in recipes/ (recipes with catalogue = false, the "
                     "peers, run only when named)")
    run.add_argument("--samples", type=int, help="samples per mode (recipe default: 6)")
    run.add_argument("--warmup", type=int, help="discarded warm-up samples per mode (recipe default: 1)")
    run.add_argument("--isolation", choices=("process", "inline"), help="fresh process per sample, or one")
    run.add_argument("--gc", choices=("collect-before", "natural"), help="GC policy before each sample")
    run.add_argument("--output-dir", default="results/local", help="where results go (default: results/local)")
    run.add_argument("--resume", metavar="FILE", help="continue an interrupted results file")
    run.add_argument("--session", metavar="PATH", help="a session directory to use as the fixture")
    run.add_argument("--work-dir", metavar="DIR", help="where private fixture copies live (default: temp dir)")
    add_condition_options(run)
    add_phase_options(run)
    run.add_argument("--record-trace", metavar="FILE",
                     help="record every sample's engine events as a what-if trace (adds a write per event)")
    run.set_defaults(func=traced(_cmd_run, "run"))
