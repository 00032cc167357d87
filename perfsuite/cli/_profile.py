"""`perfsuite profile` (SPEC section 5): a recipe's operation under a profiler."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

from perfsuite._extras import require
from perfsuite.cli._common import CliServices, Subparsers, add_recipes_option, bounded_int, non_empty, output_dir
from perfsuite.cli._console import console
from perfsuite.cli._names import PROFILE_REPEAT, PROFILERS
from perfsuite.errors import PerfsuiteError


def _cmd_diff(args: argparse.Namespace, services: CliServices) -> int:
    """``perfsuite profile --diff A B``: functions that gained (and lost) instructions, text and flame graphs."""
    from perfsuite.profile import diff_profiles

    if args.recipe or args.profiler or args.baseline:
        raise PerfsuiteError("--diff A B compares two callgrind profile records: give no RECIPE, --profiler or "
                             "--baseline with it")
    base, new = args.diff
    stamp = time.strftime("%Y%m%dT%H%M%S")
    prefix = Path(args.output_dir) / f"{Path(new).name.split('.')[0]}-vs-{Path(base).name.split('.')[0]}-{stamp}"
    print(diff_profiles(base, new, modes=args.mode, output_prefix=prefix).text(), end="")
    return 0


def _cmd_profile(args: argparse.Namespace, services: CliServices) -> int:
    from perfsuite.harness import check_parameters, load_recipe, recipe_dirs, resolve_factories
    from perfsuite.profile import diff_profiles, load_callgrind_profile, profile_recipe, profiler_command
    from perfsuite.report import phase_table

    if args.diff:
        return _cmd_diff(args, services)
    if not args.recipe or not args.profiler:
        raise PerfsuiteError("give RECIPE and --profiler (py-spy, scalene or callgrind), or --diff A B")
    if args.baseline and args.profiler != "callgrind":
        raise PerfsuiteError("--baseline compares callgrind profiles: use it with --profiler callgrind")
    if args.baseline:
        load_callgrind_profile(args.baseline)  # a bad baseline fails before anything is measured
    profiler_command(args.profiler, args.profiler_path)  # a missing profiler fails before any fixture is built
    if args.phase:
        require("report", "matplotlib")  # the phase plot

    if os.getcwd() not in sys.path:  # operations import like `python -m` would (the worker gets the same)
        sys.path.insert(0, os.getcwd())
    recipe = load_recipe(args.recipe, recipe_dirs(args.recipes_dir))
    chosen = dataclasses.replace(recipe, modes=tuple(m for m in recipe.modes if not args.mode or m.name in args.mode))
    check_parameters(chosen, resolve_factories(chosen))  # imports and declared parameters, before any fixture
    fixture, info = services.resolve_fixture(recipe.fixture, args.session or recipe.session)
    run = profile_recipe(
        recipe, args.profiler, modes=args.mode, output_dir=args.output_dir, repeat=args.repeat,
        native=args.native, rate=args.rate, fixture=fixture, fixture_info=info,
        work_root=Path(args.work_dir) if args.work_dir else None, profiler_path=args.profiler_path,
        phase=args.phase, on_event=lambda message: None if console().quiet else print(f"perfsuite: profiling {message}",
                                                                       file=sys.stderr),
    )
    out = console()
    for mode in run.modes:
        out.line(mode.summary)
    if run.phases_png is not None:
        out.table(phase_table(run.breakdown()))
    out.verdict(f"profile: {run.record}")  # plain lines, never wrapped: scripts read them
    for path in run.artifacts()[1:]:
        out.line(f"  {path}")
    if args.baseline:
        prefix = Path(str(run.record).removesuffix(".callgrind.profile.json") + "-vs-baseline")
        print(diff_profiles(args.baseline, run.record, modes=args.mode, output_prefix=prefix).text(), end="")
    return 0


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "profile", help="a recipe's operation under py-spy, scalene or callgrind; artifacts beside the results",
        description="Runs each mode's operation (fixture resolved and privately copied as in `run`) in a worker "
        "process under the profiler, which is on only while operations run. py-spy: flame graph SVG, speedscope "
        "JSON and a text summary per mode; scalene: its JSON and a text summary (top lines by CPU and by "
        "allocation). A profile with too few samples is repeated with more iterations. Times under a profiler "
        "are distorted: use `run` for measurements. callgrind: the instructions of one operation, submission "
        "to acknowledgement, by Python function (text summary, folded stacks, flame graph SVG, callgrind "
        "files); --diff A B (or --baseline A) shows which functions gained between two such profiles. Exit "
        "status 2 on bad input, a missing profiler, a profiler failure or a profile without samples.")
    p.add_argument("recipe", metavar="RECIPE", nargs="?", type=non_empty, help="recipe name or .toml path")
    add_recipes_option(p)
    p.add_argument("--profiler", choices=PROFILERS,
                   help="py-spy or scalene (sampling, time) or callgrind (instructions, under valgrind)")
    p.add_argument("--diff", nargs=2, metavar=("A", "B"), type=non_empty,
                   help="compare two callgrind profile records (*.callgrind.profile.json): which functions gained "
                   "instructions from A to B; writes a difference flame graph per mode into --output-dir")
    p.add_argument("--baseline", metavar="PROFILE", type=non_empty,
                   help="callgrind: after profiling, compare with this earlier profile record (as --diff)")
    p.add_argument("--mode", action="append", metavar="MODE", type=non_empty,
                   help="profile (or --diff) this mode only (repeatable; default: all)")
    p.add_argument("--repeat", type=bounded_int("repeat"), metavar="N",
                   help=f"operations per profiled batch (default: {PROFILE_REPEAT}; more when too few samples)")
    p.add_argument("--output-dir", default="results/local", type=output_dir,
                   help="where artifacts go (default: results/local)")
    p.add_argument("--native", action="store_true", help="py-spy: include native (C) frames")
    p.add_argument("--rate", type=bounded_int("rate"), metavar="HZ", help="py-spy sampling rate (default: 250)")
    p.add_argument("--profiler-path", metavar="PATH", type=non_empty,
                   help="the profiler executable (default: $PERFSUITE_PY_SPY / $PERFSUITE_SCALENE / "
                   "$PERFSUITE_VALGRIND, else py-spy on PATH or beside this Python, `python -m scalene`, valgrind "
                   "on PATH)")
    p.add_argument("--session", metavar="PATH", type=non_empty, help="a session directory to use as the fixture")
    p.add_argument("--work-dir", metavar="DIR", type=output_dir,
                   help="where private fixture copies live (default: temp dir)")
    p.add_argument("--phase", action="store_true",
                   help="also print and plot the profiled iterations' phase breakdown (main-thread time)")
    p.set_defaults(func=_cmd_profile)

