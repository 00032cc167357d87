"""`perfsuite bisect GOOD BAD`: parsing and printing only; see :mod:`perfsuite.ab._bisect`."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from perfsuite.cli._ab import add_measure_options, load_ab_recipes, note_printer
from perfsuite.cli._common import CliServices, Subparsers, non_empty, output_dir, thresholds
from perfsuite.cli._console import console

if TYPE_CHECKING:
    from perfsuite.ab import BisectResult, BisectStep


def _step_line(step: BisectStep, left: int) -> str:
    more = f"; at most {left} more step{'s' if left != 1 else ''}" if left else ""
    evidence = "; ".join(step.evidence) or "no tracked metric moved"
    return (f"step {step.number}: {step.commit[:12]} ({step.position}) {step.verdict} against GOOD "
            f"(ab exit {step.exit_status}, {step.seconds:.0f} s): {evidence}{more}")


def _first_line(result: BisectResult) -> str:
    tracked = ", ".join(result.metrics) or "none"
    first_bad = result.first_bad  # a found regression names its commit
    if result.status == "found" and first_bad is not None:
        step = next(s for s in result.steps if s.commit == first_bad)
        return (f"perfsuite bisect: first regressed commit {first_bad[:12]} \"{step.subject}\" "
                f"({step.position} of {len(result.commits)} after GOOD) [tracked: {tracked}]")
    if result.status == "no-regression":
        return (f"perfsuite bisect: no regression: BAD {result.bad[:12]} does not regress against GOOD "
                f"{result.good[:12]}: nothing to bisect")
    return (f"perfsuite bisect: inconclusive at step {len(result.steps)}: the first regressed commit is one of "
            f"{result.candidates} after {result.last_good[:12]} up to {result.earliest_bad[:12]} (not guessed) "
            f"[tracked: {tracked}]")


def _cmd_bisect(args: argparse.Namespace, services: CliServices) -> int:
    from rich import box
    from rich.table import Table

    from perfsuite.ab import AB_LOOKS, bisect

    recipes, skip = load_ab_recipes(args)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    output = Path(args.output_dir) if args.output_dir else Path("results/local") / f"bisect-{stamp}"
    resolver = services.resolve_fixture
    out = console()
    note = note_printer()

    def on_step(step: BisectStep, left: int) -> None:
        note(_step_line(step, left))

    result = bisect(
        args.good, args.bad, recipes, output_dir=output, metrics=args.metrics or (), on_step=on_step,
        resolve_fixture=lambda name: resolver(name, None), seed=args.seed,
        work_root=Path(args.work_dir) if args.work_dir else None, gate=args.gate, skip_machine_only=skip,
        looks=AB_LOOKS if args.looks is None else args.looks, env=args.env, installer=args.installer,
        on_note=note, strict=args.strict, **thresholds(args),
    )
    if args.format == "json":
        print(json.dumps(result.to_dict(), indent=1))
        print(f"bisect: {len(result.steps)} steps, {result.seconds:.0f} s; {output / 'bisect.json'}", file=sys.stderr)
        return result.exit_status
    out.verdict(_first_line(result))
    table = Table("step", "commit", "position", "verdict", "ab exit", "time", "evidence (tracked metrics)",
                  box=box.SIMPLE_HEAD, caption_justify="left")
    for step in result.steps:
        table.add_row(str(step.number), step.commit[:12], f"{step.position}/{len(result.commits)}", step.verdict,
                      str(step.exit_status), f"{step.seconds:.0f} s", "; ".join(step.evidence) or "-")
    table.caption = ("each step: an interleaved A/B of that commit against GOOD (perfsuite ab; its directory under "
                     f"{output}); verdict on the tracked metrics: timings by the paired test (p, Holm-adjusted) and "
                     "ratio, costs by tolerance")
    out.table(table)
    out.line(f"bisect: {len(result.steps)} step{'s' if len(result.steps) != 1 else ''} over "
             f"{len(result.commits)} commits, {result.seconds:.0f} s; {output / 'bisect.json'}")
    return result.exit_status


def register(sub: Subparsers) -> None:
    """`bisect`."""
    bisect = sub.add_parser(
        "bisect",
        help="find the first commit of GOOD..BAD whose gating metric regressed against GOOD (interleaved A/Bs)",
        description="Binary search over BAD's first-parent history back to GOOD, each step an interleaved A/B "
        "(perfsuite ab) of a commit against GOOD. The first step measures BAD: what regressed there (or --metric) "
        "is tracked. Each step states its verdict and evidence (ratio and p for timings, tolerance for costs); "
        "an inconclusive step stops the search with the range narrowed so far, never a guess. On a loaded machine "
        "(the idle control) a step's timings are reported, not gated, as in perfsuite ab: a step whose tracked "
        "timing could not gate is inconclusive (tracked counts still decide), unless --strict. "
        "Exit status: 0 found, 1 no regression between GOOD and BAD, 2 unusable input, 3 inconclusive.",
    )
    bisect.add_argument("good", metavar="GOOD", type=non_empty, help="a revision without the regression")
    bisect.add_argument("bad", metavar="BAD", type=non_empty, help="a later revision with it (e.g. HEAD)")
    bisect.add_argument("--metric", action="append", dest="metrics", metavar="METRIC", type=non_empty,
                        help="track this metric (a label 'recipe/mode metric' or a pattern on it or on the metric, "
                        "e.g. metrics.fsyncs; repeatable; default: what regressed at BAD)")
    add_measure_options(bisect)
    bisect.add_argument("--strict", action="store_true",
                        help="every step's A/B as `perfsuite ab --strict`: paired timings gate even when the idle "
                        "control says the machine was loaded, and an inconclusive A/B exits 3 (recorded in each "
                        "pairing and bisect.json); default: a loaded step whose tracked timing could not gate is "
                        "inconclusive. Either way an inconclusive step stops the search (exit 3)")
    bisect.add_argument("--output-dir", metavar="DIR", type=output_dir,
                        help="a new or empty directory for each step's A/B and bisect.json "
                        "(default: results/local/bisect-<time>)")
    bisect.add_argument("--format", choices=("text", "json"), default="text",
                        help="text (default) or json (bisect.json's document)")
    bisect.set_defaults(func=_cmd_bisect)
