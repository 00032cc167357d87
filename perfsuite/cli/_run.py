"""`perfsuite run` (SPEC M4, M7, M8) and `perfsuite demo`: parsing and printing only."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfsuite._extras import require
from perfsuite.cli._common import (
    Subparsers,
    add_phase_options,
    add_recipes_option,
    bounded_int,
    commit_id,
    describe_error,
    fixture_hook,
    non_empty,
    output_dir,
    output_file,
    phase_outputs,
    traced,
    verdict_lines,
)
from perfsuite.cli._console import console
from perfsuite.errors import PerfsuiteError, Terminated
from perfsuite.workloads.plan import DEFAULT_RUN_RECIPES

if TYPE_CHECKING:
    from rich.progress import TaskID
    from rich.table import Table

    from perfsuite.report import Floor, Result


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
    from perfsuite.engine import SaveFailed, SessionError, TranscriptError, demo

    try:
        demo.main(args.directory)
    except (SessionError, TranscriptError, SaveFailed) as exc:  # the directory cannot hold a session: one line
        raise PerfsuiteError(str(exc)) from None
    return 0


# -- perfsuite run (issue 5; SPEC M4, M7, M8) -------------------------------------------------------

def _run_table(doc: Mapping[str, Any], floor: Floor | None = None) -> Table:
    """The summary table (:func:`perfsuite.report.summary_table`); ``floor`` adds the ack/floor column."""
    from perfsuite.report import summary_table

    return summary_table(doc, floor)


def _kept(path: Path) -> tuple[int, int] | None:
    """(entries done, total) of the document on disk, or ``None`` when there is none to resume."""
    from perfsuite.harness import load_results

    try:
        progress = load_results(path)["progress"]
        return int(progress["done"]), int(progress["total"])
    except (PerfsuiteError, KeyError, TypeError, ValueError):
        return None


def _print_measured(documents: list[tuple[Path, Mapping[str, Any], tuple[Path, ...]]]) -> list[Result]:
    """The summary table of every finished document (``-q``: its verdict lines), then one plain ``results:``
    line per document (scripts read them; ``-v`` adds every export path)."""
    from perfsuite.report import Result, find_floor

    measured = [Result(path, document) for path, document, _ in documents]
    out = console()  # the table `report` prints, at the same width
    for result in measured:
        floor = find_floor(result, measured, same_run=True)
        out.table(_run_table(result.data, floor))
        if out.quiet:
            for line in verdict_lines(result, floor):
                out.verdict(line)
    for path, _, exports in documents:
        out.line(f"results: {path}")  # exactly this: scripts read it (its exports: -v)
        for extra in exports:
            out.detail(f"  {extra}")
    return measured


def _cmd_run(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    import perfsuite.cli
    from perfsuite.harness import (
        BASELINE_DIR_NAME,
        LOAD_RULE,
        SampleEvent,
        instructions_unavailable,
        measured_repository,
        new_results_path,
        plan_order,
        probe_load,
        resume_run,
        run_recipe,
    )
    from perfsuite.workloads.plan import RunOptions, plan_resume, plan_run

    if args.phase:
        require("report", "matplotlib")  # the phase plot: say so before measuring, not after
    if os.getcwd() not in sys.path:  # operations import like `python -m` would (workers get the same)
        sys.path.insert(0, os.getcwd())
    work_root = Path(args.work_dir) if args.work_dir else None
    if work_root is not None:  # before any fixture is built or sample measured (issue 14 case 6)
        work_root.mkdir(parents=True, exist_ok=True)
    skipped: list[str] = []
    out = console()
    err = out.rich(stderr=True)
    plans: list[tuple[Any, Path | None, Path | None, dict[str, Any]]] = []
    options = RunOptions(samples=args.samples, warmup=args.warmup, isolation=args.isolation, gc=args.gc,
                         order=args.order, seed=args.seed, storage=args.storage, storage_file=args.storage_file,
                         heap=args.heap, gc_freeze=args.gc_freeze or None,
                         instructions=True if args.instructions else None)
    if args.resume and (args.commit or args.branch):
        raise PerfsuiteError("--resume continues the recorded document, whose measured commit is recorded: "
                             "give no --commit or --branch")
    # issue 28: the code measured is the working directory's repository (or --commit, or the CI's), found once
    measured = None if args.resume else measured_repository(commit=args.commit, branch=args.branch)
    output = Path(args.resume).parent if args.resume else Path(args.output_dir)
    baseline = output.name == BASELINE_DIR_NAME and not args.allow_loaded
    if baseline:  # issue 28: a baseline is measured on a quiet machine; look before measuring anything
        load = (perfsuite.cli.load_probe_hook or probe_load)()
        if load.loaded:
            raise PerfsuiteError(f"{output} is a baseline directory and this machine is loaded now ({load.describe()}; "
                                 f"{LOAD_RULE}): nothing measured; measure it on a quiet machine, or pass "
                                 "--allow-loaded to keep a run marked loaded")
    if args.resume:
        recipe = plan_resume(args.resume, args.recipes, options)
        plans.append((recipe, Path(args.resume), *fixture_hook()(recipe.fixture, args.session or recipe.session)))
    else:
        plan = plan_run(args.recipes, options, all_recipes=args.all, recipes_dir=args.recipes_dir)
        skipped = [f"skipped: {s.recipe}: {s.reason}" for s in plan.skipped]
        if plan.recipes:  # every recipe checked: nothing measured, nothing written until here
            Path(args.output_dir).mkdir(parents=True, exist_ok=True)  # unusable: fail before building fixtures
        for recipe in plan.recipes:
            plans.append((recipe, None, *fixture_hook()(recipe.fixture, args.session or recipe.session)))
    if any(plan[0].instructions for plan in plans):  # one line, once: the pass records "not measured"
        why = instructions_unavailable(args.valgrind)
        if why:
            print(f"perfsuite: instructions not measured: {why}", file=sys.stderr)
    writer = perfsuite.cli.results_writer_hook
    finished: list[tuple[Path, Mapping[str, Any], tuple[Path, ...]]] = []
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[gap]}"),
    )
    run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"  # one invocation, many documents
    # the bar is for a terminal; in a pipe or a log it would only add lines to stderr (one-line errors)
    with Progress(*columns, console=err, disable=out.quiet or not err.is_terminal) as progress:
        for recipe, reserved, fixture, info in plans:
            # a name nobody else can take, reserved when its run starts (issue 14 case 7)
            path = reserved or new_results_path(args.output_dir, recipe.name)
            done = (_kept(path) or (0, 0))[0] if args.resume else 0
            task = progress.add_task(recipe.name, total=len(plan_order(recipe)), completed=done, gap="")

            def on_sample(event: SampleEvent, task: TaskID = task) -> None:
                what = event.kind if event.mode is None else f"{event.mode} {event.kind} {event.index}"
                gap = f"max gap {event.max_gap_ms:.2f} ms" if event.max_gap_ms is not None else ""
                progress.update(
                    task, completed=event.done, total=event.total, description=f"{event.recipe}: {what}", gap=gap
                )

            try:
                if args.resume:
                    result = resume_run(path, fixture=fixture, fixture_info=info, work_root=work_root,
                                        on_sample=on_sample, writer=writer, valgrind=args.valgrind)
                else:
                    result = run_recipe(recipe, output=path, fixture=fixture, fixture_info=info, work_root=work_root,
                                        on_sample=on_sample, run_id=run_id, writer=writer, valgrind=args.valgrind,
                                        measured=measured)
            except KeyboardInterrupt as exc:  # SIGINT, or SIGTERM (Terminated): keep, hint, 130 / 143
                progress.stop()
                _print_measured(finished)
                word, status = ("terminated", 143) if isinstance(exc, Terminated) else ("interrupted", 130)
                if _kept(path) is None:
                    print(f"perfsuite: {word}", file=sys.stderr)
                else:
                    print(f"perfsuite: {word}; measured samples kept in {path}; "
                          f"continue with: perfsuite run --resume {path}", file=sys.stderr)
                return status
            except Exception as exc:  # a failed sample, ENOSPC, a read-only output...: one line
                progress.stop()
                _print_measured(finished)
                kept = _kept(path)
                if kept is None or kept[0] == 0:
                    raise  # nothing measured to keep: main() prints the one line, exit 2
                print(f"perfsuite: error: {describe_error(exc)}; {kept[0]} of {kept[1]} entries kept in {path}; "
                      f"continue with: perfsuite run --resume {path}", file=sys.stderr)
                return 1
            finished.append((result.path, result.document, tuple(result.exports)))
    results = _print_measured(finished)
    for line in skipped:  # one line per recipe that could not run here, with the reason
        out.verdict(line)
    if getattr(args, "phase", False):
        phase_outputs(results, args.phase_dir)
    return _say_load(results, baseline, output)


def _say_load(measured: list[Result], baseline: bool, output: Path) -> int:
    """Issue 28: how loaded the machine was (its idle control), one line; a baseline measured loaded is exit 1."""
    from perfsuite.harness import LOADED_EXCESS_MS

    out = console()
    loads = [(r, r.load) for r in measured]
    loaded = [(r, load) for r, load in loads if load.loaded]
    medians = [load.median_gap_ms for _, load in loads if load.median_gap_ms is not None]
    if not loaded and medians:  # -q: the verdict lines say LOADED themselves (verdict_lines)
        periods = sorted({f"{load.period_ms:g}" for _, load in loads})
        out.line(f"machine: quiet (idle control medians {min(medians):.2f}-{max(medians):.2f} ms against the "
                 f"{'/'.join(periods)} ms period; loaded above period + {LOADED_EXCESS_MS:g} ms)")
    for result, load in loaded:
        out.line(f"machine: {result.name}: {load.describe()}: its timings read high (compare them only "
                 "interleaved: perfsuite ab)")
    if loaded and baseline:
        print(f"perfsuite: error: {len(loaded)} document(s) in the baseline directory {output} were measured on a "
              "loaded machine (marked so in their load section); re-measure on a quiet machine, or pass "
              "--allow-loaded", file=sys.stderr)
        return 1
    return 0


def register(sub: Subparsers) -> None:
    """`demo` and `run`."""
    demo = sub.add_parser("demo", help="write, sync and fork a conversation with the engine; show the disk")
    demo.add_argument("directory", nargs="?", type=output_dir, help="where to write (default: a temporary directory)")
    demo.add_argument("--record-trace", metavar="FILE", type=output_file,
                      help="record the engine's trace events (JSON lines)")
    demo.set_defaults(func=traced(_cmd_demo, "demo"))

    run = sub.add_parser("run", help="run recipes under the heartbeat; write results, print verdicts")
    run.add_argument(
        "recipes",
        nargs="*",
        metavar="RECIPE",
        type=non_empty,
        help=f"recipe name or .toml path (default, the quick set: {' '.join(DEFAULT_RUN_RECIPES)})",
    )
    run.add_argument("--all", action="store_true",
                     help="run the whole recipe catalogue: the built-in recipes and your own (recipes with "
                     "catalogue = false, the peers, run only when named)")
    add_recipes_option(run)
    run.add_argument("--samples", type=bounded_int("samples"),
                     help="samples per mode (recipe default: 6)")
    run.add_argument("--warmup", type=bounded_int("warmup"),
                     help="discarded warm-up samples per mode (recipe default: 1)")
    run.add_argument("--isolation", choices=("process", "inline"), help="fresh process per sample, or one")
    run.add_argument("--gc", choices=("collect-before", "natural"), help="GC policy before each sample")
    run.add_argument("--order", choices=("random", "fixed"),
                     help="modes within each round: a seeded random order (recipe default: random; the seed and "
                     "the plan are recorded) or the recipe's fixed order")
    run.add_argument("--seed", type=bounded_int("seed"),
                     help="seed of the random order (default: drawn at start, recorded)")
    run.add_argument("--instructions", action="store_true",
                     help="after the latency samples, count instructions per operation under valgrind (callgrind), "
                     "per mode, total and loop thread (recipe setting: instructions = true)")
    run.add_argument("--valgrind", metavar="PATH", type=non_empty,
                     help="the valgrind executable for --instructions (default: $PERFSUITE_VALGRIND, else PATH)")
    run.add_argument("--output-dir", default="results/local", type=output_dir,
                     help="where results go (default: results/local)")
    run.add_argument("--resume", metavar="FILE", type=non_empty, help="continue an interrupted results file")
    run.add_argument("--commit", type=commit_id,
                     help="the commit measured (default: the git repository of the working directory, else the "
                     "CI's variable, e.g. GITHUB_SHA; $PERFSUITE_COMMIT also sets it)")
    run.add_argument("--branch", type=non_empty,
                     help="the branch measured (default: the checkout's, else the CI's; $PERFSUITE_BRANCH)")
    run.add_argument("--session", metavar="PATH", type=non_empty, help="a session directory to use as the fixture")
    run.add_argument("--allow-loaded", action="store_true",
                     help="into a baseline directory (--output-dir .../baseline): measure even when the machine is "
                     "loaded (by default a short idle-control probe refuses to start, and a run measured loaded "
                     "exits 1); the documents say they were loaded either way")
    run.add_argument("--work-dir", metavar="DIR", type=output_dir,
                     help="where private fixture copies live (default: temp dir)")
    add_condition_options(run)
    add_phase_options(run)
    run.add_argument("--record-trace", metavar="FILE", type=output_file,
                     help="record every sample's engine events as a what-if trace (adds a write per event)")
    run.set_defaults(func=traced(_cmd_run, "run"))
