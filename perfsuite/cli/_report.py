"""`perfsuite report | evidence | compare | history | bars | dashboard` (SPEC section 5)."""

from __future__ import annotations

import argparse
from typing import Any

from perfsuite.cli._common import add_phase_options, phase_outputs, thresholds, wide_console
from perfsuite.errors import PerfsuiteError


def _cmd_report(args: argparse.Namespace) -> int:
    from perfsuite.report import find_floor, read_results, summary_table
    from perfsuite.report._history import order_results
    from perfsuite.report._load import read_siblings

    results = [r for path in args.results for r in read_results(path)]
    pool = {str(r.path): r for r in results}
    for r in results:  # the run's fsync floor may sit beside a file given alone
        if r.path is not None:
            pool.update({str(s.path): s for s in read_siblings(r.path) if str(s.path) not in pool})
    out = wide_console()
    for r in order_results(results):
        out.print(summary_table(r, find_floor(r, pool.values())))
        if r.data.get("status") != "complete":
            progress = r.data["progress"]
            print(f"  ({r.name}: {r.data.get('status')}, {progress['done']} of {progress['total']} entries measured)")
    from perfsuite.report import read_sweeps, sweep_table

    for sweep in read_sweeps(results):  # documents of a `perfsuite sweep`: the crossover table too
        out.print(sweep_table(sweep))
    if getattr(args, "phase", False):
        phase_outputs(order_results(results), args.phase_dir)
    return 0


def _cmd_evidence(args: argparse.Namespace) -> int:
    from pathlib import Path

    from perfsuite.report import evidence_for, read_results, read_sweeps, sweep_evidence

    if Path(args.result).is_dir():  # a sweep's directory: the crossover paragraph (M10)
        if args.baseline:
            raise PerfsuiteError("--baseline compares two results files, not sweeps")
        sweeps = read_sweeps(read_results(args.result))
        if not sweeps:
            raise PerfsuiteError(f"{args.result}: is a directory without sweep documents; give a results file")
        for sweep in sweeps:
            print(sweep_evidence(sweep), end="")
        return 0
    text = evidence_for(args.result, args.baseline, **thresholds(args)).markdown
    print(text, end="")
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from perfsuite.report import compare, compare_markdown, compare_table

    comparison = compare(args.base, args.new, **thresholds(args))
    if args.markdown:
        print(compare_markdown(comparison, everything=args.all), end="")
    else:
        wide_console().print(compare_table(comparison, everything=args.all))
    return comparison.exit_status


def _cmd_history(args: argparse.Namespace) -> int:
    from rich import box
    from rich.table import Table

    from perfsuite.report import history
    from perfsuite.report._format import fmt_level, short_commit

    options = {"penalty_per_log_n": args.penalty, "min_change": args.min_change}
    hist = history(args.directory, metrics=args.metric, **{k: v for k, v in options.items() if v is not None})
    table = Table(
        title=f"perfsuite history: {len(hist.steps)} step(s) over {hist.runs} run(s)",
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    for column in ("recipe", "mode", "metric", "step at", "previous", "date", "before", "after", "change", "kind"):
        table.add_column(column, justify="right" if column in ("before", "after", "change") else "left")
    for st in hist.steps:
        table.add_row(
            st.recipe,
            st.mode,
            st.metric,
            short_commit(st.commit),
            short_commit(st.previous_commit),
            st.date[:10],
            fmt_level(st.before),
            fmt_level(st.after),
            f"{st.ratio:.2f}x",
            st.kind,
        )
    wide_console().print(table)
    print(
        f"{len(hist.series)} series; ruptures PELT (l2) on noise-standardised medians, penalty "
        f"{hist.penalty_per_log_n:g} ln(n), steps of at least {hist.min_change:.0%}"
    )
    return 0


def _cmd_bars(args: argparse.Namespace) -> int:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from perfsuite.report import bars, read_results

    results = [r for path in args.results for r in read_results(path)]
    table = Table(title="SPEC section 8 bars (newest result of each recipe)", box=box.SIMPLE_HEAD,
                  title_justify="left")
    for column in ("bar", "recipe", "measured", "target", "verdict"):
        table.add_column(column)
    judged = bars(results)
    for bar in judged:
        verdict = "[dim]not measured[/]" if bar.met is None else "[green]met[/]" if bar.met else "[red]not met[/]"
        table.add_row(bar.bar, bar.recipe, bar.measured, bar.target, verdict)
    Console().print(table)
    return 1 if args.strict and any(b.met is False for b in judged) else 0


def _cmd_dashboard(args: argparse.Namespace) -> int:
    from perfsuite.report import dashboard

    site = dashboard(args.directory, args.output)
    print(f"dashboard: {site.index} ({len(site.pages)} recipe page(s), {len(site.images)} figures)")
    return 0


def register(sub: Any) -> None:
    """Register report, evidence, compare, history and dashboard (exit 2 on unusable input)."""
    report = sub.add_parser("report", help="the summary table of results files (as `run` prints it)")
    report.add_argument("results", nargs="+", metavar="RESULT", help="a results file or a directory of them")
    add_phase_options(report)
    report.set_defaults(func=_cmd_report)

    def thresholds(p: argparse.ArgumentParser) -> None:
        p.add_argument("--alpha", type=float, help="Mann-Whitney U significance level (default: 0.05)")
        p.add_argument("--factor", type=float, help="median ratio that counts as a change, either way (default: 1.1)")

    evidence = sub.add_parser("evidence", help="the ADR evidence paragraph (Markdown) of a results file or sweep")
    evidence.add_argument("result", metavar="RESULT",
                          help="a results file, or the directory of a `perfsuite sweep` (the crossover paragraph)")
    evidence.add_argument("--baseline", metavar="RESULT", help="a results file of the same recipe to compare with")
    thresholds(evidence)
    evidence.set_defaults(func=_cmd_evidence)

    compare = sub.add_parser(
        "compare",
        help="compare two runs; exit 1 on a significant regression (the CI gate)",
        description="Per recipe, mode and metric: ratio of medians and Mann-Whitney U; a change needs both. "
        "Exit status: 0 no significant regression, 1 significant regression, 2 unusable input.",
    )
    compare.add_argument("base", metavar="BASE", help="baseline results file or directory (matched by recipe)")
    compare.add_argument("new", metavar="NEW", help="new results file or directory")
    compare.add_argument("--markdown", action="store_true", help="Markdown for a PR comment or job summary")
    compare.add_argument("--all", action="store_true", help="every metric, not only headline and changed ones")
    thresholds(compare)
    compare.set_defaults(func=_cmd_compare)

    hist = sub.add_parser("history", help="change points (steps) over a directory of runs, with their commits")
    hist.add_argument("directory", metavar="DIR", help="a directory of results files (searched recursively)")
    hist.add_argument("--metric", action="append", help="a metric to follow, repeatable (default: headline ones)")
    hist.add_argument("--penalty", type=float, help="PELT penalty per ln(runs) (default: 5)")
    hist.add_argument("--min-change", type=float, help="smallest relative step (default: 0.10)")
    hist.set_defaults(func=_cmd_history)

    bars = sub.add_parser("bars", help="the bars of SPEC section 8 as verdicts, from results files",
                          description="Each bar is judged from the newest result of its recipe; bars whose "
                          "recipe is absent are reported as not measured.")
    bars.add_argument("results", nargs="+", metavar="RESULT", help="results files or directories")
    bars.add_argument("--strict", action="store_true", help="exit 1 when a measured bar is not met")
    bars.set_defaults(func=_cmd_bars)

    dash = sub.add_parser("dashboard", help="a static HTML dashboard (index + one page per recipe)")
    dash.add_argument("directory", metavar="DIR", help="a directory of results files (searched recursively)")
    dash.add_argument("-o", "--output", required=True, metavar="OUT", help="where to write the site")
    dash.set_defaults(func=_cmd_dashboard)

