"""`perfsuite sweep` (SPEC M10): the crossover grid, storage x heap x freeze. Parsing and printing
only: the plan and runs are :mod:`perfsuite.workloads.conditions`, the tables, plot and paragraph
:mod:`perfsuite.report`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

    from rich.progress import Progress

    from perfsuite.harness import RunResult, SampleEvent
    from perfsuite.workloads.conditions import SweepPlan, SweepSetting

from perfsuite.cli._cluster import add_cluster_options, with_cluster_security
from perfsuite.cli._common import (
    CliServices,
    Subparsers,
    bounded_int,
    non_empty,
    output_dir,
    output_file,
)
from perfsuite.cli._console import console
from perfsuite.errors import PerfsuiteError


def _storages(text: str | None) -> list[str | None]:
    if text is None:
        return [None]
    names = [part.strip() for part in text.split(",")]
    if not all(names):
        raise PerfsuiteError(f"--storage: expected profile names separated by commas, got {text!r}")
    return [None if name == "none" else name for name in names]


def _storage_files(pairs: list[str] | None) -> dict[str, str]:
    files: dict[str, str] = {}
    for pair in pairs or []:
        name, sep, path = pair.partition("=")
        if not sep or not name or not path:
            raise PerfsuiteError(f"--storage-file: expected NAME=FILE.toml, got {pair!r}")
        files[name] = path
    return files


def _print_sweeps(paths: list[Path], plot: str | None) -> int:
    from perfsuite.report import read_results, read_sweeps, sweep_table, write_sweep_plot

    results = [r for p in paths for r in read_results(p)]
    sweeps = read_sweeps(results)
    if not sweeps:
        raise PerfsuiteError("no sweep documents found (documents written by `perfsuite sweep` carry a sweep id)")
    out = console()
    for sweep in sweeps:
        out.table(sweep_table(sweep))
        target = Path(plot) if plot and len(sweeps) == 1 else (
            Path(plot).with_name(f"{Path(plot).stem}-{sweep.id}.png") if plot else
            Path(sweep.rows[0].result.path or ".").parent / f"{sweep.id}.png")
        print(f"plot: {write_sweep_plot(sweep, target)}")
        print(f"evidence: perfsuite evidence {Path(sweep.rows[0].result.path or '.').parent}")
    return 0


def _sweep_on_cluster(args: argparse.Namespace, plan: SweepPlan, fixture: Path | None, info: Mapping[str, Any],
                      progress: Progress) -> list[RunResult]:
    """Every setting is one task on one worker, at most one setting per host at a time (timing
    work never shares or mixes machines); a LocalCluster gets one worker (this machine measures one setting
    at a time, as without a cluster)."""
    from perfsuite.cluster import make_runner
    from perfsuite.workloads.conditions import run_sweep_on

    if args.work_dir:
        raise PerfsuiteError("--work-dir is this machine's: on a cluster each worker copies fixtures into its own "
                             "temp dir")
    rows: dict[int, Any] = {}

    def started(setting: SweepSetting, host: str) -> None:
        rows[setting.index] = progress.add_task(f"[{setting.index + 1}/{len(plan.settings)}] {setting.label} on {host}",
                                                total=1, gap="")

    def done(setting: SweepSetting, result: RunResult) -> None:
        progress.update(rows[setting.index], completed=1)

    with make_runner(1, cluster=args.cluster, scheduler=args.scheduler) as runner:
        print(f"sweep {plan.id}: on {runner.describe()}", file=sys.stderr)
        return run_sweep_on(runner, plan, output_dir=args.output_dir, fixture=fixture, fixture_info=info,
                            on_start=started, on_done=done)


def _cmd_sweep(args: argparse.Namespace, services: CliServices) -> int:
    if args.report:
        return _print_sweeps([Path(p) for p in args.report], args.plot)
    if not args.recipe:
        raise PerfsuiteError("give a RECIPE to sweep (or --report DIR to print an existing sweep)")
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from perfsuite.harness import load_recipe, plan_order
    from perfsuite.workloads.conditions import parse_heaps, plan_sweep, run_sweep

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    recipe = load_recipe(args.recipe).with_overrides(samples=args.samples, warmup=args.warmup, isolation=args.isolation)
    files = _storage_files(args.storage_file)
    storages = _storages(args.storage)
    storages += [name for name in files if name not in storages]
    if len(storages) > 1 and None in storages and args.storage is None:
        storages.remove(None)  # only --storage-file given: sweep those profiles
    plan = plan_sweep(recipe, storages=storages, heaps=parse_heaps(args.heap), freeze=args.freeze,
                      storage_files=files)
    fixture, info = services.resolve_fixture(recipe.fixture, args.session or recipe.session)
    err = Console(stderr=True)
    print(f"sweep {plan.id}: {plan.recipe}, {len(plan.settings)} settings "
          f"({len(plan.storages)} storage x {len(plan.heaps)} heap x {'2' if plan.freeze == 'both' else '1'} freeze)",
          file=sys.stderr)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[gap]}"))
    # the bar is for a terminal; in a pipe or a log it would only add lines to stderr
    with Progress(*columns, console=err, disable=not err.is_terminal) as progress:

        def on_setting(setting: SweepSetting, total: int) -> Callable[[SampleEvent], None]:
            label = f"[{setting.index + 1}/{total}] {setting.label}"
            task = progress.add_task(label, total=len(plan_order(setting.recipe)), gap="")

            def on_sample(event: SampleEvent) -> None:
                gap = f"max gap {event.max_gap_ms:.2f} ms" if event.max_gap_ms is not None else ""
                progress.update(task, completed=event.done, total=event.total, gap=gap)

            return on_sample

        try:
            if args.cluster or args.scheduler:
                results = _sweep_on_cluster(args, plan, fixture, info, progress)
            else:
                results = run_sweep(plan, output_dir=args.output_dir, fixture=fixture, fixture_info=info,
                                    work_root=Path(args.work_dir) if args.work_dir else None, on_setting=on_setting)
        except KeyboardInterrupt:
            progress.stop()
            print(f"perfsuite: interrupted; settings measured so far are in {Path(args.output_dir) / plan.id}",
                  file=sys.stderr)
            return 130
    directory = results[0].path.parent if results else Path(args.output_dir) / plan.id
    _print_sweeps([directory], args.plot)
    print(f"results: {directory}")
    return 0


def register(sub: Subparsers) -> None:
    """`sweep`."""
    sweep = sub.add_parser(
        "sweep", help="the crossover grid: a recipe under storage profiles x live-heap sizes x gc.freeze()",
        description="Runs RECIPE once per setting of the grid (one results document each, grouped by a sweep "
        "id), then prints and plots the sync/async max gap, loop stall and acknowledgement per setting against "
        "the target. Storage latency is simulated from sourced profiles; GC is natural at every setting.")
    sweep.add_argument("recipe", nargs="?", metavar="RECIPE", type=non_empty, help="recipe name or .toml path")
    sweep.add_argument("--storage", metavar="A,B,C",
                       help="storage profiles in grid order (built-in: nvme, sata-ssd, hdd, nfs, ebs-gp3; 'none' "
                       "for the machine as it is; default: none)")
    sweep.add_argument("--storage-file", metavar="NAME=FILE.toml", action="append",
                       help="add your own profile under NAME (repeatable; NAME may also appear in --storage)")
    sweep.add_argument("--heap", default="0", metavar="N,N",
                       help="live-heap sizes in objects, e.g. 0,1e5,1e6 (default: 0)")
    sweep.add_argument("--freeze", choices=("off", "on", "both"), default="off",
                       help="the engine's freeze_loaded setting (gc.freeze() after open): off, on, or both")
    sweep.add_argument("--samples", type=bounded_int("samples"),
                       help="samples per mode and setting (recipe default: 6)")
    sweep.add_argument("--warmup", type=bounded_int("warmup"),
                       help="warm-up samples per mode and setting (recipe default: 1)")
    sweep.add_argument("--isolation", choices=("process", "inline"), help="fresh process per sample, or one")
    sweep.add_argument("--output-dir", default="results/local", type=output_dir,
                       help="where the sweep's directory goes")
    sweep.add_argument("--session", metavar="PATH", type=non_empty, help="a session directory to use as the fixture")
    sweep.add_argument("--work-dir", metavar="DIR", type=output_dir,
                       help="where private fixture copies live (default: temp dir)")
    sweep.add_argument("--plot", metavar="OUT.png", type=output_file,
                       help="where the plot goes (default: <sweep dir>/<id>.png)")
    sweep.add_argument("--report", nargs="+", metavar="DIR", type=non_empty,
                       help="print the tables and plot of sweeps already measured (directories or files)")
    add_cluster_options(sweep, "the settings (one setting per task, all its samples on one worker, at most one "
                        "setting per host at a time)", default="one setting after another in this process",
                        jobs=False)
    sweep.set_defaults(func=with_cluster_security(_cmd_sweep))
