"""`perfsuite report | evidence | compare | history | bars | dashboard` (SPEC section 5)."""

from __future__ import annotations

import argparse
import sys
import textwrap
from typing import TYPE_CHECKING

from perfsuite._text import terminal_text
from perfsuite.cli._common import (
    CliServices,
    Subparsers,
    add_gate_option,
    add_phase_options,
    add_strict_options,
    finite_float,
    gate_exit,
    non_empty,
    non_negative_float,
    output_dir,
    phase_outputs,
    thresholds,
    verdict_lines,
)
from perfsuite.cli._console import console
from perfsuite.cli._formats import (
    add_format_option,
    emit_json,
    markdown_table,
    report_json,
)
from perfsuite.errors import PerfsuiteError

if TYPE_CHECKING:
    from perfsuite.report import Bar, Comparison, Result


def _read(paths: list[str], skip_bad: bool) -> list[Result]:
    """Every results document under ``paths``; with ``--skip-bad``, one stderr line per document left out."""
    from perfsuite.report import scan_results

    results = []
    for path in paths:
        found, skipped = scan_results(path, skip_bad=skip_bad)
        results += found
        for line in skipped:
            print(f"perfsuite: skipped {terminal_text(line, newlines=False)}", file=sys.stderr)
    return results


def _cmd_report(args: argparse.Namespace, services: CliServices) -> int:
    from perfsuite.report import find_floor, order_results, read_siblings, summary_table

    results = _read(args.results, args.skip_bad)
    pool = {str(r.path): r for r in results}

    def skipped(line: str) -> None:
        print(f"perfsuite: skipped {terminal_text(line, newlines=False)}", file=sys.stderr)

    for r in results:  # the run's fsync floor may sit beside a file given alone: read only when it is needed
        if r.path is not None and find_floor(r, pool.values()) is None:
            pool.update({str(s.path): s for s in read_siblings(r.path, known=pool.values(), floors_only=True,
                                                                on_skip=skipped) if str(s.path) not in pool})
    ordered = order_results(results)
    floors = [find_floor(r, pool.values()) for r in ordered]
    if args.format == "json":
        emit_json("report", report_json(ordered, floors))
        return 0
    out = console()
    for r, floor in zip(ordered, floors):
        table = summary_table(r, floor)
        if args.format == "markdown":
            print(markdown_table(table))
            continue
        out.table(table)
        if out.quiet:
            for line in verdict_lines(r, floor):
                out.verdict(line)
        if r.data.get("status") != "complete":
            progress = r.data["progress"]
            why = f": {r.data['error']}" if r.data.get("error") else ""
            out.verdict(f"  ({r.name}: {r.data.get('status')}, {progress['done']} of {progress['total']} entries "
                        f"measured{why})")
    if args.format != "json":
        from perfsuite.report import read_sweeps, sweep_table

        for sweep in read_sweeps(results):  # documents of a `perfsuite sweep`: the crossover table too
            table = sweep_table(sweep)
            if args.format == "markdown":
                print(markdown_table(table))
            else:
                out.table(table)
    if getattr(args, "phase", False):
        phase_outputs(ordered, args.phase_dir)
    return 0


def _cmd_evidence(args: argparse.Namespace, services: CliServices) -> int:
    from pathlib import Path

    from perfsuite.report import evidence_for, find_pairing, read_pairing, read_results, read_sweeps, sweep_evidence

    if find_pairing(args.result) is not None:  # `perfsuite ab`'s output: each recipe's HEAD against its BASE, paired
        if args.baseline:
            raise PerfsuiteError(f"{args.result}: an A/B output directory holds its own baseline (base/): give no "
                                 "--baseline")
        for _, base, head in read_pairing(args.result).pairs:
            print(evidence_for(head, base, **thresholds(args)).markdown, end="")
        return 0
    if thresholds(args) and not args.baseline:  # they would be silently ignored
        raise PerfsuiteError("--alpha and --factor apply to a comparison: give --baseline RESULT with them")
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


def _cmd_compare(args: argparse.Namespace, services: CliServices) -> int:
    from perfsuite.report import compare

    if args.store:
        comparison = _store_comparison(args)
    else:
        comparison = compare(
            args.base, args.new, require_all=args.require_all, cross_machine=args.cross_machine,
            allow_incomplete=args.allow_incomplete, skip_bad=args.skip_bad, gate=args.gate, timings=args.timings,
            strict=True if args.strict else None, **thresholds(args),
        )
    print_comparison(comparison, "compare", fmt=args.format, everything=args.all, explain=args.explain)
    return gate_exit(comparison, args)


def print_comparison(comparison: Comparison, command: str, *, fmt: str, everything: bool,
                     explain: bool = False) -> None:
    """The verdict line first, then the table; or the Markdown, or the JSON document (which holds
    every reason anyway). ``explain``: then one line per cost and gating metric saying why it passed or gated,
    printed even with ``-q`` (asked for by name)."""
    from perfsuite.report import compare_headline, compare_markdown, compare_table

    for line in comparison.skipped:
        print(f"perfsuite: skipped {terminal_text(line, newlines=False)}", file=sys.stderr)
    if fmt == "json":
        emit_json(command, comparison.to_json())
        return
    if fmt == "markdown":
        print(compare_markdown(comparison, everything=everything, explain=explain), end="")
        return
    out = console()
    out.verdict(f"perfsuite {command}: {compare_headline(comparison)}")
    if out.quiet:  # the verdict and what made it
        for c in (*comparison.regressions, *comparison.inconclusive):
            out.verdict(f"  {c.status}: {c.label} {c.ratio:.2f}x")
    else:
        out.table(compare_table(comparison, everything=everything or out.verbose))
    if explain:
        out.verdict("why (--explain):")
        for line in comparison.explain(everything or out.verbose):
            out.verdict(f"  {line}")


def add_explain_option(parser: argparse.ArgumentParser, *, with_all: bool = False) -> None:
    """``--explain`` of `compare` (``with_all``: its ``--all`` widens it to every metric) and `ab`."""
    every = "; every metric with --all" if with_all else ""
    parser.add_argument("--explain", action="store_true",
                        help="after the verdict, one line per cost and gating metric saying why it passed or gated "
                        f"(the figures and the rule that decided{every}); the JSON holds each as the change's reason")


def _store_comparison(args: argparse.Namespace) -> Comparison:
    """``compare --store S BASE NEW``: runs of one machine chosen by commit, run id, latest or previous."""
    from perfsuite.errors import PerfsuiteError
    from perfsuite.report import compare_results, machine_of, open_store, select_runs

    if args.new is None:
        raise PerfsuiteError("compare --store needs BASE and NEW (a commit, a run id, latest or previous)")
    with open_store(args.store) as db:
        machines = db.machines()
        if args.machine:
            machine = db.machine(args.machine)
        elif len(machines) == 1:
            machine = machines[0].machine
        else:
            names = ", ".join(m.machine.key for m in machines)
            raise PerfsuiteError(f"{args.store} holds several machines; choose one with --machine ({names})")
        results = db.results(machine)
    base, new = select_runs(results, args.base), select_runs(results, args.new)
    recipes = {r.recipe for r in base} & {r.recipe for r in new}
    base, new = [r for r in base if r.recipe in recipes], [r for r in new if r.recipe in recipes]
    if not recipes:
        raise PerfsuiteError(f"{args.base} and {args.new} share no recipe on {machine.key}")
    label = machine_of(base[0]).host
    return compare_results(base, new, **thresholds(args), base_name=f"{args.base} on {label}",
                           new_name=f"{args.new} on {label}", require_all=args.require_all,
                           allow_incomplete=args.allow_incomplete, gate=args.gate or "all",
                           timings=args.timings or "info", strict=args.strict)  # two separate runs of the store


def _source(args: argparse.Namespace) -> str:
    """The results to read: SOURCE (directory, file or store), else --store, else the default store."""
    from perfsuite.errors import PerfsuiteError
    from perfsuite.report import DEFAULT_STORE

    if args.source and args.store:
        raise PerfsuiteError("give either SOURCE or --store, not both")
    if args.store:
        from perfsuite.report import open_store

        open_store(args.store).close()  # one-line errors for a missing file or one that is not a store
    source = args.source or args.store or str(DEFAULT_STORE)
    if not args.source and not args.store and not DEFAULT_STORE.exists():
        raise PerfsuiteError(f"no SOURCE given and no results store at {DEFAULT_STORE} "
                             "(give a results directory, or run `perfsuite store ingest DIR` first)")
    return str(source)


def _cmd_history(args: argparse.Namespace, services: CliServices) -> int:
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from perfsuite.report import MIN_PELT_RUNS, fmt_level, history, short_commit

    options = {"penalty_per_log_n": args.penalty, "min_change": args.min_change}
    hist = history(_source(args), metrics=args.metric, machine=args.machine,
                   **{k: v for k, v in options.items() if v is not None})
    if args.format == "json":
        emit_json("history", hist.to_json())
        return 0
    hosts = {m.key: m.host for m in hist.machines}
    table = Table(
        title=f"perfsuite history: {len(hist.steps)} step(s) over {hist.runs} run(s) on "
        f"{len(hist.machines)} machine(s)",
        caption="\n".join([*(f"machine {m.key}: {m.label}" for m in hist.machines),
                           f"{len(hist.series)} series; ruptures PELT (l2) on noise-standardised medians from "
                           f"{MIN_PELT_RUNS} runs, penalty {hist.penalty_per_log_n:g} ln(n); below that, the gate's "
                           f"test run against run; steps of at least {hist.min_change:.0%}"]),
        box=box.SIMPLE_HEAD,
        title_justify="left",
        caption_justify="left",
    )
    columns = ("machine", "recipe", "mode", "metric", "commits", "date", "before", "after", "change", "kind", "by")
    for column in columns:
        table.add_column(column, justify="right" if column in ("before", "after", "change") else "left")
    for st in hist.steps:  # names from documents: their markup escaped (a cell is rich markup)
        table.add_row(
            escape(hosts.get(st.machine, st.machine)),
            escape(st.recipe),
            escape(st.mode),
            escape(st.metric),
            f"{short_commit(st.previous_commit)}..{short_commit(st.commit)}",
            st.date[:10],
            fmt_level(st.before),
            fmt_level(st.after),
            f"{st.ratio:.2f}x",
            st.kind,
            st.method,
        )
    if args.format == "markdown":
        print(markdown_table(table), end="")
        return 0
    out = console()
    out.table(table)
    if out.quiet:  # the steps are the verdicts
        out.verdict(str(table.title))
        for st in hist.steps:
            out.verdict(f"  {st.kind}: {hosts.get(st.machine, st.machine)} {st.recipe}/{st.mode} {st.metric} "
                        f"{st.ratio:.2f}x in {short_commit(st.previous_commit)}..{short_commit(st.commit)}")
    return 0


def _bar_lines(bar: Bar, width: int) -> list[str]:
    """One bar as a block: the verdict and the bar on the first line, then what was measured and the target,
    wrapped at ``width`` under a hanging indent (a list, not a table: long sentences never wrap in a cell)."""
    verdict = "not measured" if bar.met is None else "met" if bar.met else "NOT MET"
    lines = textwrap.wrap(f"{verdict:<12}  {bar.bar} ({bar.recipe})", width=max(width, 40),
                          subsequent_indent=" " * 14, break_on_hyphens=False)
    for label, text in (("measured", bar.measured), ("target", bar.target)):
        lines += textwrap.wrap(f"{label}: {text}", width=max(width, 40), initial_indent=" " * 14,
                               subsequent_indent=" " * 24, break_on_hyphens=False)
    return lines


def _cmd_bars(args: argparse.Namespace, services: CliServices) -> int:
    from rich.markup import escape
    from rich.table import Table

    from perfsuite.report import bars

    results = _read(args.results, args.skip_bad)
    judged = bars(results)
    status = 1 if args.strict and any(b.met is False for b in judged) else 0
    if args.format == "json":
        emit_json("bars", {"bars": [bar.to_json() for bar in judged]})
        return status
    if args.format == "markdown":
        table = Table(title="SPEC section 8 bars (newest result of each recipe)")
        for column in ("bar", "recipe", "measured", "target", "verdict"):
            table.add_column(column)
        for bar in judged:
            verdict = "not measured" if bar.met is None else "met" if bar.met else "NOT MET"  # cells are text
            table.add_row(*(escape(cell) for cell in (bar.bar, bar.recipe, bar.measured, bar.target)), verdict)
        print(markdown_table(table), end="")
        return status
    out = console()
    met = sum(1 for b in judged if b.met)
    missed = sum(1 for b in judged if b.met is False)
    heading = (f"SPEC section 8 bars (newest result of each recipe): {met} met, {missed} not met, "
               f"{len(judged) - met - missed} not measured")
    for line in textwrap.wrap(heading, width=max(out.width, 40), subsequent_indent="  "):
        out.verdict(line)
    for bar in judged:
        block = _bar_lines(bar, out.width)
        if out.quiet:
            out.verdict(block[0])
        else:
            for line in block:
                out.line(line)
    return status


def _cmd_dashboard(args: argparse.Namespace, services: CliServices) -> int:
    from perfsuite.report import dashboard

    site = dashboard(_source(args), args.output, machine=args.machine, commit_url=args.commit_url)
    console().verdict(f"dashboard: {site.index} ({len(site.pages)} recipe page(s), {len(site.documents)} results "
                      "documents)")
    return 0


def source_options(p: argparse.ArgumentParser) -> None:
    """SOURCE (a directory, a results file or a results store), --store, --machine."""
    p.add_argument("source", nargs="?", metavar="SOURCE", type=non_empty, help="a directory of results files "
                   "(searched recursively), a results file, or a results store (default: results/perfsuite.sqlite3)")
    p.add_argument("--store", metavar="PATH", type=non_empty, help="read a results store (`perfsuite store ingest`)")
    p.add_argument("--machine", metavar="M", type=non_empty, help="only this machine (key, key prefix or host label)")


def _skip_bad(p: argparse.ArgumentParser) -> None:
    p.add_argument("--skip-bad", action="store_true",
                   help="leave out documents that do not load (torn, invalid), one stderr line each, instead of "
                   "stopping with exit 2")


def register(sub: Subparsers) -> None:
    """Register report, evidence, compare, history and dashboard (exit 2 on unusable input)."""
    report = sub.add_parser("report", help="the summary table of results files (as `run` prints it)")
    report.add_argument("results", nargs="+", metavar="RESULT", type=non_empty,
                        help="a results file or a directory of them")
    add_phase_options(report)
    add_format_option(report)
    _skip_bad(report)
    report.set_defaults(func=_cmd_report)

    def thresholds(p: argparse.ArgumentParser) -> None:
        p.add_argument("--alpha", type=finite_float, help="Mann-Whitney U significance level (default: 0.05)")
        p.add_argument("--factor", type=finite_float, help="ratio that counts as a change, either way (default: 1.1)")

    evidence = sub.add_parser("evidence", help="the ADR evidence paragraph (Markdown) of a results file or sweep")
    evidence.add_argument("result", metavar="RESULT", type=non_empty,
                          help="a results file, the directory of a `perfsuite sweep` (the crossover paragraph), or "
                          "an A/B output directory (`perfsuite ab`: each recipe's HEAD against its BASE, paired)")
    evidence.add_argument("--baseline", metavar="RESULT", type=non_empty,
                          help="a results file of the same recipe to compare with")
    thresholds(evidence)
    evidence.set_defaults(func=_cmd_evidence)

    compare = sub.add_parser(
        "compare",
        help="compare two runs; exit 1 on a regression, 3 when it cannot tell (the CI gate)",
        description="Per recipe, mode and metric. Timings: the Hodges-Lehmann ratio and Mann-Whitney U, a change "
        "needs both (separate runs: information unless --timings gate): slower is a regression, faster an "
        "improvement (which never fails the gate); beyond the factor the worse way but not significant is "
        "inconclusive; each headline states the smallest "
        "ratio it could detect. Costs (allocation, bytes written, fsync/rename/create counts): medians against a "
        "tolerance (1% and at least 1 KiB or 1 operation); a count whose samples vary gates on its median when a "
        "rank test on the counts confirms the shift, or beyond its range plus the tolerance. --explain says why "
        "each passed or gated. A loaded machine's timings (its idle control) are reported, not gated, unless "
        "--strict; the counts gate, and the first line says which. Exit status: 0 no regression (passed, or "
        "neutral: timings not gated or inconclusive; --neutral-exit), 1 regression, 2 unusable input, 3 "
        "inconclusive (--strict).",
    )
    compare.add_argument("base", metavar="BASE", type=non_empty, help="baseline results file or directory (matched "
                         "by recipe); alone: an A/B output directory or its ab.json (perfsuite ab); with --store: "
                         "a commit, a run id, latest or previous")
    compare.add_argument("new", metavar="NEW", type=non_empty, nargs="?",
                         help="new results file or directory; with --store, as BASE")
    compare.add_argument("--store", metavar="PATH", type=non_empty,
                         help="choose BASE and NEW among the runs of a results store")
    compare.add_argument("--machine", metavar="M", type=non_empty,
                         help="with --store: the machine (key, key prefix or host label)")
    add_format_option(compare)
    compare.add_argument("--all", action="store_true", help="every metric, not only headline and changed ones")
    add_explain_option(compare, with_all=True)
    compare.add_argument("--require-all", action="store_true",
                         help="exit 2 when the recipe sets differ (default: compare the common recipes, list the rest)")
    compare.add_argument("--cross-machine", action="store_true",
                         help="compare results of different machines (CPU model, cores, filesystem, Python) anyway; "
                         "said in the first line")
    compare.add_argument("--allow-incomplete", action="store_true",
                         help="compare running/interrupted documents under a loud 'incomplete' status (exit 3 at "
                         "best) instead of refusing them")
    _skip_bad(compare)
    add_gate_option(compare)
    add_strict_options(compare)
    compare.add_argument("--timings", choices=("info", "gate"),
                         help="what timings of two SEPARATE runs may do: information only (default: two runs cannot "
                         "tell the machine's load from a regression; costs still gate), or gate, unless either run "
                         "is loaded (its idle control; a dedicated quiet machine). An A/B pairing always gates them")
    thresholds(compare)
    compare.set_defaults(func=_cmd_compare)

    hist = sub.add_parser("history", help="change points (steps) per machine over runs, with their commit ranges")
    source_options(hist)
    hist.add_argument("--metric", action="append", type=non_empty,
                      help="a metric to follow, repeatable (default: headline ones)")
    hist.add_argument("--penalty", type=non_negative_float, help="PELT penalty per ln(runs) (default: 5)")
    hist.add_argument("--min-change", type=non_negative_float, help="smallest relative step (default: 0.10)")
    add_format_option(hist)
    hist.set_defaults(func=_cmd_history)

    bars = sub.add_parser("bars", help="the bars of SPEC section 8 as verdicts, from results files",
                          description="Each bar is judged from the newest result of its recipe; bars whose "
                          "recipe is absent are reported as not measured.")
    bars.add_argument("results", nargs="+", metavar="RESULT", type=non_empty, help="results files or directories")
    bars.add_argument("--strict", action="store_true", help="exit 1 when a measured bar is not met")
    add_format_option(bars)
    _skip_bad(bars)
    bars.set_defaults(func=_cmd_bars)

    dash = sub.add_parser("dashboard", help="a static HTML dashboard: per machine, the latest run against the "
                          "previous, verdicts and change points; one page per recipe")
    source_options(dash)
    dash.add_argument("-o", "--output", required=True, metavar="OUT", type=output_dir, help="where to write the site")
    dash.add_argument("--commit-url", metavar="TEMPLATE", type=non_empty, help="link commits: a URL with {commit}, "
                      "e.g. https://github.com/OWNER/REPO/commit/{commit}")
    dash.set_defaults(func=_cmd_dashboard)

