"""`perfsuite run` (SPEC M4, M7, M8) and `perfsuite demo`: parsing and printing only."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfsuite._extras import require
from perfsuite.cli._common import (
    CliServices,
    Subparsers,
    add_phase_options,
    add_recipes_option,
    bounded_int,
    commit_id,
    describe_error,
    non_empty,
    output_dir,
    output_file,
    phase_outputs,
    traced,
    verdict_lines,
)
from perfsuite.cli._console import console
from perfsuite.errors import PerfsuiteError
from perfsuite.workloads.plan import DEFAULT_RUN_RECIPES

if TYPE_CHECKING:
    from rich.progress import TaskID
    from rich.table import Table

    from perfsuite.harness import RunResult
    from perfsuite.report import Floor, Result
    from perfsuite.workloads.runs import RunOutcome


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


def _cmd_demo(args: argparse.Namespace, services: CliServices) -> int:
    from perfsuite.engine import SaveFailed, SessionError, TranscriptError, demo

    try:
        demo.main(args.directory)
    except (SessionError, TranscriptError, SaveFailed) as exc:  # the directory cannot hold a session: one line
        raise PerfsuiteError(str(exc)) from None
    return 0


# -- perfsuite run (SPEC M4, M7, M8) ----------------------------------------------------------------

def _run_table(doc: Mapping[str, Any], floor: Floor | None = None) -> Table:
    """The summary table (:func:`perfsuite.report.summary_table`); ``floor`` adds the ack/floor column."""
    from perfsuite.report import summary_table

    return summary_table(doc, floor)


def _print_measured(documents: Sequence[RunResult]) -> list[Result]:
    """The summary table of every finished document (``-q``: its verdict lines), then one plain ``results:``
    line per document (scripts read them; ``-v`` adds every export path)."""
    from perfsuite.report import Result, find_floor

    measured = [Result(doc.path, doc.document) for doc in documents]
    out = console()  # the table `report` prints, at the same width
    for result in measured:
        floor = find_floor(result, measured, same_run=True)
        out.table(_run_table(result.data, floor))
        if out.quiet:
            for line in verdict_lines(result, floor):
                out.verdict(line)
    for doc in documents:
        out.line(f"results: {doc.path}")  # exactly this: scripts read it (its exports: -v)
        for extra in doc.exports:
            out.detail(f"  {extra}")
    return measured


def _cmd_run(args: argparse.Namespace, services: CliServices) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from perfsuite.cli._root import project_recipes
    from perfsuite.harness import SampleEvent
    from perfsuite.workloads.plan import RunOptions
    from perfsuite.workloads.runs import RunStarted, prepare_runs, run_plans

    if args.phase:
        require("report", "matplotlib")  # the phase plot: say so before measuring, not after
    if os.getcwd() not in sys.path:  # operations import like `python -m` would (workers get the same)
        sys.path.insert(0, os.getcwd())
    recipes_dir = project_recipes(Path.cwd(), args.recipes_dir, os.environ.get("PERFSUITE_RECIPES"))
    if recipes_dir is not None and args.recipes_dir is None:  # from a subdirectory: the project root's recipes,
        root = str(Path(recipes_dir).parent)  # whose operations import from that root
        if root not in sys.path:
            sys.path.insert(1, root)
    options = RunOptions(samples=args.samples, warmup=args.warmup, worker_warmup=args.worker_warmup,
                         isolation=args.isolation, gc=args.gc,
                         order=args.order, seed=args.seed, storage=args.storage, storage_file=args.storage_file,
                         heap=args.heap, gc_freeze=args.gc_freeze or None,
                         instructions=True if args.instructions else None)
    batch = prepare_runs(args.recipes, options, output_dir=args.output_dir, resume=args.resume, all_recipes=args.all,
                         recipes_dir=recipes_dir, session=args.session, commit=args.commit, branch=args.branch,
                         allow_loaded=args.allow_loaded, work_root=args.work_dir, valgrind=args.valgrind,
                         resolve_fixture=services.resolve_fixture, load_probe=services.load_probe)
    if batch.measured is None and not batch.resuming:  # said first (stdout: stderr is the one-line error's)
        console().verdict("commit unknown (not a git repository): the results name no commit; run from a "
                          "checkout, or give --commit or $PERFSUITE_COMMIT")
    if batch.instructions_missing:  # one line, once: the pass records "not measured"
        print(f"perfsuite: instructions not measured: {batch.instructions_missing}", file=sys.stderr)
    out = console()
    err = out.rich(stderr=True)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[gap]}"),
    )
    # the bar is for a terminal; in a pipe or a log it would only add lines to stderr (one-line errors)
    with Progress(*columns, console=err, disable=out.quiet or not err.is_terminal) as progress:
        tasks: list[TaskID] = []

        def on_start(event: RunStarted) -> None:
            tasks.append(progress.add_task(event.recipe, total=event.total, completed=event.done, gap=""))

        def on_sample(event: SampleEvent) -> None:
            what = event.kind if event.mode is None else f"{event.mode} {event.kind} {event.index}"
            gap = f"max gap {event.max_gap_ms:.2f} ms" if event.max_gap_ms is not None else ""
            progress.update(
                tasks[-1], completed=event.done, total=event.total, description=f"{event.recipe}: {what}", gap=gap
            )

        outcome = run_plans(batch, writer=services.writer, on_start=on_start, on_sample=on_sample)
    results = _print_measured(outcome.documents)
    stopped = outcome.stopped
    if stopped is not None and stopped.error is not None:  # a failed sample, ENOSPC, a read-only output...
        if not stopped.resumable:
            raise stopped.error  # nothing measured to keep: main() prints the one line, exit 2
        done, total = stopped.kept or (0, 0)
        print(f"perfsuite: error: {describe_error(stopped.error)}; {done} of {total} entries kept in {stopped.path}; "
              f"continue with: perfsuite run --resume {stopped.path}", file=sys.stderr)
        return outcome.status
    if stopped is not None:  # SIGINT, or SIGTERM: kept, with the hint
        if stopped.kept is None:
            print(f"perfsuite: {stopped.reason}", file=sys.stderr)
        else:
            print(f"perfsuite: {stopped.reason}; measured samples kept in {stopped.path}; "
                  f"continue with: perfsuite run --resume {stopped.path}", file=sys.stderr)
        return outcome.status
    for skipped in outcome.skipped:  # one line per recipe that could not run here, with the reason
        out.verdict(f"skipped: {skipped.recipe}: {skipped.reason}")
    if getattr(args, "phase", False):
        phase_outputs(results, args.phase_dir)
    _say_load(results, outcome)
    return outcome.status


def _say_load(measured: list[Result], outcome: RunOutcome) -> None:
    """How loaded the machine was (its idle control), one line; a baseline measured loaded is exit 1."""
    from perfsuite.harness import LOADED_EXCESS_MS

    out = console()
    loads = list(zip(measured, outcome.loads))
    loaded = [(r, load) for r, load in loads if load.loaded]
    medians = [load.median_gap_ms for _, load in loads if load.median_gap_ms is not None]
    if not loaded and medians:  # -q: the verdict lines say LOADED themselves (verdict_lines)
        periods = sorted({f"{load.period_ms:g}" for _, load in loads})
        out.line(f"machine: quiet (idle control medians {min(medians):.2f}-{max(medians):.2f} ms against the "
                 f"{'/'.join(periods)} ms period; loaded above period + {LOADED_EXCESS_MS:g} ms)")
    for result, load in loaded:
        out.line(f"machine: {result.name}: {load.describe()}: its timings read high (compare them only "
                 "interleaved: perfsuite ab)")
    if loaded and outcome.baseline:
        print(f"perfsuite: error: {len(loaded)} document(s) in the baseline directory {outcome.output_dir} were "
              "measured on a loaded machine (marked so in their load section); re-measure on a quiet machine, or "
              "pass --allow-loaded", file=sys.stderr)


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
    run.add_argument("--worker-warmup", type=bounded_int("worker_warmup"), metavar="N",
                     help="discarded samples each sample's worker measures before it (process isolation; "
                          "recipe default: 0)")
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
