"""The one ``perfsuite`` command. Argument parsing and printing live here, never in the library.

Each subcommand is a ``_cmd_<name>(args) -> int`` function registered in :func:`build_parser`.
Library code raises :class:`~perfsuite.errors.PerfsuiteError` for bad input; :func:`main` turns it into
one line on stderr and exit status 2 (house rule 5).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from perfsuite import __version__
from perfsuite.errors import PerfsuiteError

Command = Callable[[argparse.Namespace], int]


def _cmd_demo(args: argparse.Namespace) -> int:
    from perfsuite.engine import demo

    demo.main(args.directory)
    return 0


# -- perfsuite run (issue 5; SPEC M4, M7, M8) -------------------------------------------------------

#: what `perfsuite run` measures when no RECIPE is named (later: the quick set)
DEFAULT_RUN_RECIPES: tuple[str, ...] = (
    "idle-control", "fsync-floor", "mailbox-delivery", "root-checkpoint", "diagnostic-append")

FixtureResolver = Callable[[str | None, str | None], tuple[Path | None, dict[str, Any]]]


def _default_resolve_fixture(name: str | None, session: str | None) -> tuple[Path | None, dict[str, Any]]:
    """Fixture name (or ``None``) and ``--session`` -> (directory to copy per sample, info for the results)."""
    if session is not None and not Path(session).is_dir():
        raise PerfsuiteError(f"--session: no such session directory: {session}")
    if name is None:
        return None, {}
    try:
        from perfsuite.workloads.fixtures import resolve_fixture  # type: ignore[attr-defined]
    except ImportError:
        resolve_fixture = None
    if resolve_fixture is not None:
        return resolve_fixture(name, session, progress=_fixture_notices)
    if session is not None:
        return Path(session), {"name": name, "source": "session", "session": str(Path(session).resolve())}
    raise PerfsuiteError(f"unknown fixture {name!r} (no fixture builder is available yet; try --session PATH)")


#: injectable hook for `run` (tests and the fixture builders replace it)
resolve_fixture_hook: FixtureResolver = _default_resolve_fixture


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
        if args.recipes or any(v is not None for v in (args.samples, args.warmup, args.isolation, args.gc)):
            raise PerfsuiteError(
                "--resume continues the recorded recipe: give no RECIPE, --samples, --warmup, --isolation or --gc"
            )
        path = Path(args.resume)
        doc = load_results(path)
        recipe = Recipe.from_dict(doc["recipe"], source=f"{path}: recipe")
        for mode in recipe.modes:
            resolve_operation(mode.operation)
        plans: list[tuple[Recipe, Path, Path | None, dict[str, Any], int]] = [
            (recipe, path, *resolve_fixture_hook(recipe.fixture, args.session), doc["progress"]["done"])
        ]
    else:
        plans = []
        if args.all and args.recipes:
            raise PerfsuiteError("--all runs the whole catalogue: give no RECIPE with it")
        for ref in (list_recipes(catalogue_only=True) if args.all else args.recipes or DEFAULT_RUN_RECIPES):
            recipe = load_recipe(ref).with_overrides(
                samples=args.samples, warmup=args.warmup, isolation=args.isolation, gc=args.gc
            )
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
            fixture, info = resolve_fixture_hook(recipe.fixture, args.session)
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
        _phase_outputs(measured, args.phase_dir)
    return 0


# -- perfsuite fixtures (issue 5 item 6; SPEC M6) -------------------------------------------------------
def _fixture_notices(event: Any) -> None:
    """Progress of a first-use fixture build during `run`: one line when it starts, one when it ends."""
    if event.step == "starting":
        print(f"perfsuite: building fixture {event.fixture} (first use; cached afterwards)", file=sys.stderr)
    elif event.step == "done":
        print(f"perfsuite: fixture {event.fixture} built in {event.elapsed_s:.1f} s", file=sys.stderr)


def _cmd_fixtures(args: argparse.Namespace) -> int:
    """`fixtures list | build [NAME...] [--force] | path NAME | info NAME`: generated fixtures and their cache."""
    import json

    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from perfsuite.workloads import fixtures as fx

    out = Console(highlight=False)
    if args.action == "list":
        table = Table(title="fixtures (SPEC M6)", title_justify="left")
        for column in ("fixture", "generator", "spec digest", "files", "bytes", "cached"):
            table.add_column(column, justify="right" if column in ("files", "bytes") else "left")
        for name in fx.list_fixtures():
            spec = fx.load_spec(name)
            hit = fx.cached_fixture(spec)
            files, nbytes = (str(hit.info["files"]), f"{hit.info['bytes']:,}") if hit else ("", "")
            table.add_row(name, spec.generator, spec.digest[7:19], files, nbytes, "yes" if hit else "[dim]no[/]")
        out.print(table)
        print(f"specs: {fx.fixtures_dir()}\ncache: {fx.cache_root()}")
        return 0
    if args.action in ("path", "info") and len(args.names) != 1:
        raise PerfsuiteError(f"fixtures {args.action}: expected exactly one NAME, got {len(args.names)}")
    if args.action in ("path", "info"):
        fixture = fx.build_fixture(args.names[0], force=args.force, progress=_fixture_notices)
        print(fixture.path if args.action == "path" else json.dumps(fixture.info, indent=1, sort_keys=True))
        return 0
    names = args.names or fx.list_fixtures()
    specs = [fx.load_spec(name) for name in names]  # every name checked before anything is built
    built = []
    columns = (TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True)) as progress:
        for spec in specs:
            task = progress.add_task(spec.name, total=1.0)

            def update(event: Any, task: Any = task) -> None:
                progress.update(task, completed=event.fraction, description=f"{event.fixture}: {event.step}")

            built.append(fx.build_fixture(spec, force=args.force, progress=update))
            progress.update(task, completed=1.0, description=spec.name)
    for fixture in built:  # plain lines: scripts read them
        info = fixture.info
        how = f"built in {info.get('build_s', 0):.1f} s" if fixture.built else "cached"
        print(f"{fixture.name}: {info['files']} files, {info['bytes']:,} bytes, {how}: {fixture.path}")
    return 0


# -- perfsuite crashcheck (issue 10; SPEC section 7) ---------------------------------------------------
def _cmd_crashcheck(args: argparse.Namespace) -> int:
    """Exit 0: no violation (with --seeded-bug: the bug was caught); 1: violations (bug not caught)."""
    from rich.console import Console
    from rich.table import Table

    from perfsuite.crash import MODELS, CrashConfig, RunResult, run_campaign

    console = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 160)
    if args.kill is not None:
        return _crashcheck_kill(args, console)
    config = CrashConfig(
        workloads=tuple(args.workload or ()), models=tuple(args.model or MODELS), max_states=args.max_states,
        seed=args.seed, seeded_bug=args.seeded_bug, jobs=args.jobs or os.cpu_count() or 1, keep_dir=args.keep,
    )

    def progress(result: RunResult) -> None:
        console.print(f"{result.workload} / {result.model}: {result.states} states + {result.recovery_states} "
                      f"recovery-crash states, {len(result.violations)} violations, {result.seconds:.1f} s",
                      markup=False)

    report = run_campaign(config, on_result=progress)
    table = Table(title=f"crashcheck{f' --seeded-bug {report.seeded_bug}' if report.seeded_bug else ''}")
    for column in ("workload", "model", "ops", "syncs", "acks", "states", "recovery states",
                   "bad states", "violations", "seconds"):
        table.add_column(column, justify="left" if column in ("workload", "model") else "right", no_wrap=True)
    for r in report.results:
        table.add_row(r.workload, r.model, str(r.ops), str(r.persistence_points), str(r.acks), str(r.states),
                      str(r.recovery_states), str(r.violating_states), str(len(r.violations)), f"{r.seconds:.1f}")
    console.print(table)
    shown = report.violations[: args.show]
    for v in shown:
        lines = [f"[{v.invariant}] {v.name}: {v.message}", f"  {v.workload} / {v.model}: {v.crash}",
                 f"  recovery: {v.recovery}", *(f"  dropped: {d}" for d in v.dropped),
                 *(f"  torn: {t}" for t in v.torn), *(f"  {line}" for line in v.trace)]
        if v.kept:
            lines.append(f"  kept: {v.kept}")
        console.print("\n".join(lines), markup=False)
    if len(report.violations) > len(shown):
        console.print(f"... and {len(report.violations) - len(shown)} more violations", markup=False)
    console.print(f"{report.states} states explored, {len(report.violations)} violations, {report.seconds:.1f} s",
                  markup=False)
    if report.keep_dir and report.violations:
        console.print(f"violating states kept in {report.keep_dir}", markup=False)
    if report.seeded_bug:
        console.print(f"seeded bug {report.seeded_bug}: {'caught' if report.caught else 'NOT caught'}", markup=False)
        return 0 if report.caught else 1
    return 1 if report.violations else 0


def _crashcheck_kill(args: argparse.Namespace, console: Any) -> int:
    """``crashcheck --kill N``: the SIGKILL campaign (issue 10 item 4); exit 1 on any violation."""
    from perfsuite.crash import PROFILES, KillConfig, run_kill_campaign
    from perfsuite.errors import PerfsuiteError

    if args.kill < 1:
        raise PerfsuiteError("--kill must be at least 1")
    config = KillConfig(kills=args.kill, seed=args.seed, profiles=tuple(args.profile or PROFILES),
                        directory=args.keep)

    def progress(kill: int, profile: str, acks: int, violations: int) -> None:
        if (kill + 1) % 10 == 0 or kill + 1 == args.kill:
            console.print(f"kill {kill + 1}/{args.kill} ({profile}): {acks} acknowledgements read, "
                          f"{violations} violations so far", markup=False)

    report = run_kill_campaign(config, on_kill=progress)
    for v in report.violations[: args.show]:
        console.print(f"[{v.invariant}] kill {v.kill} ({v.profile}): {v.message}"
                      + (f"\n  state before recovery kept: {v.kept}" if v.kept else ""), markup=False)
    if len(report.violations) > args.show:
        console.print(f"... and {len(report.violations) - args.show} more violations", markup=False)
    per = ", ".join(f"{n} {p}" for p, n in report.per_profile.items())
    console.print(f"{report.kills} kills ({per}), {report.acks} acknowledgements checked, "
                  f"{report.recovered_pending} recoveries retried a pending publication, "
                  f"{len(report.violations)} violations, {report.seconds:.1f} s "
                  f"(children {report.child_seconds:.1f} s, recovery and checks {report.recovery_seconds:.1f} s)",
                  markup=False)
    return 1 if report.violations else 0


# -- perfsuite report | evidence | compare | history | dashboard (issue 7; SPEC section 5) ----------------


def _wide_console() -> Any:
    """A console that does not wrap tables at 80 columns when stdout is a pipe (CI logs)."""
    from rich.console import Console

    return Console(highlight=False, width=None if sys.stdout.isatty() else 160)


def _thresholds(args: argparse.Namespace) -> dict[str, float]:
    """--alpha / --factor when given (the library's defaults otherwise)."""
    return {k: v for k, v in (("alpha", args.alpha), ("factor", args.factor)) if v is not None}


def _cmd_report(args: argparse.Namespace) -> int:
    from perfsuite.report import find_floor, read_results, summary_table
    from perfsuite.report._history import order_results
    from perfsuite.report._load import read_siblings

    results = [r for path in args.results for r in read_results(path)]
    pool = {str(r.path): r for r in results}
    for r in results:  # the run's fsync floor may sit beside a file given alone
        if r.path is not None:
            pool.update({str(s.path): s for s in read_siblings(r.path) if str(s.path) not in pool})
    out = _wide_console()
    for r in order_results(results):
        out.print(summary_table(r, find_floor(r, pool.values())))
        if r.data.get("status") != "complete":
            progress = r.data["progress"]
            print(f"  ({r.name}: {r.data.get('status')}, {progress['done']} of {progress['total']} entries measured)")
    if getattr(args, "phase", False):
        _phase_outputs(order_results(results), args.phase_dir)
    return 0


def _cmd_evidence(args: argparse.Namespace) -> int:
    from perfsuite.report import evidence_for

    text = evidence_for(args.result, args.baseline, **_thresholds(args)).markdown
    print(text, end="")
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from perfsuite.report import compare, compare_markdown, compare_table

    comparison = compare(args.base, args.new, **_thresholds(args))
    if args.markdown:
        print(compare_markdown(comparison, everything=args.all), end="")
    else:
        _wide_console().print(compare_table(comparison, everything=args.all))
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
    _wide_console().print(table)
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


def _add_report_commands(sub: Any) -> None:
    """Register report, evidence, compare, history and dashboard (exit 2 on unusable input)."""
    report = sub.add_parser("report", help="the summary table of results files (as `run` prints it)")
    report.add_argument("results", nargs="+", metavar="RESULT", help="a results file or a directory of them")
    _add_phase_options(report)
    report.set_defaults(func=_cmd_report)

    def thresholds(p: argparse.ArgumentParser) -> None:
        p.add_argument("--alpha", type=float, help="Mann-Whitney U significance level (default: 0.05)")
        p.add_argument("--factor", type=float, help="median ratio that counts as a change, either way (default: 1.1)")

    evidence = sub.add_parser("evidence", help="the ADR evidence paragraph (Markdown) of a results file")
    evidence.add_argument("result", metavar="RESULT", help="a results file")
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


# -- perfsuite whatif and --record-trace (issue 8; SPEC section 6) -------------------------------------
def _traced(command: Command, name: str) -> Command:
    """``--record-trace FILE``: run ``command`` while recording the engine's trace events into FILE."""

    def run(args: argparse.Namespace) -> int:
        path = getattr(args, "record_trace", None)
        if not path:
            return command(args)
        from perfsuite.whatif import recording

        with recording(path, meta={"command": name}) as recorder:
            status = command(args)
        trace = recorder.trace
        if trace is not None:
            print(f"trace: {path} ({len(trace.events)} events, {len(trace.sessions)} sessions, "
                  f"{trace.duration_s:.1f} s)")
        return status

    return run


def _cmd_whatif(args: argparse.Namespace) -> int:
    """Exit 0; with --validate: 0 when the simulation matches the real session, 1 when it does not."""
    from rich.console import Console

    from perfsuite import whatif

    sources = [bool(args.trace), args.storm, args.unattended]
    if sum(sources) != 1:
        raise PerfsuiteError("give exactly one of --trace FILE, --storm or --unattended")
    if args.trace:
        trace = whatif.read_trace(args.trace)
    elif args.storm:
        trace = whatif.permission_storm(whatif.StormSpec(**({"seed": args.seed} if args.seed is not None else {})))
    else:
        trace = whatif.unattended_run(whatif.UnattendedSpec(**({"seed": args.seed} if args.seed is not None else {})))
    if not trace.events:
        raise PerfsuiteError(f"{trace.source}: the trace has no events")
    if args.save_trace:
        print(f"trace: {whatif.write_trace(trace, args.save_trace)}")
    debounce = whatif.parse_intervals(args.debounce, "--debounce") if args.debounce else None
    checkpoint = (whatif.parse_intervals(args.checkpoint_interval, "--checkpoint-interval", allow_zero=False)
                  if args.checkpoint_interval else whatif.DEFAULT_CHECKPOINT_S)
    notify = (whatif.parse_intervals(args.notify_max, "--notify-max", allow_zero=False)
              if args.notify_max else whatif.DEFAULT_NOTIFY_MAX_S)
    if args.validate:
        grid = whatif.make_grid(debounce or (2.0,), checkpoint, notify)
        if len(grid) != 1:
            raise PerfsuiteError("--validate checks one setting: give one value to each grid option")
        if args.validate_seconds < 0:
            raise PerfsuiteError(f"--validate-seconds must be >= 0, got {args.validate_seconds:g}")
        seconds = args.validate_seconds if args.validate_seconds > 0 else None
        print(f"validating {grid[0].label} on the first {seconds or trace.duration_s:g} s of {trace.source} "
              f"at speed {args.speed:g} (about {(seconds or trace.duration_s) / args.speed:.0f} s)...", flush=True)
        check = whatif.validate(trace, grid[0], speed=args.speed, seconds=seconds)
        print(f"publications: simulated {check.simulated_publications} {dict(check.simulated_by_kind)}, "
              f"real {check.real_publications} {dict(check.real_by_kind)} (tolerance +-{check.publications_tolerance})")
        print(f"generations: simulated {check.simulated_generations}, real {check.real_generations}")
        print(f"crash-loss window: simulated {check.simulated_loss_s:.3f} s, real {check.real_loss_s:.3f} s "
              f"(tolerance +-{check.loss_tolerance_s:.3f} s; trace seconds)")
        durations = ", ".join(f"{k} {v:.1f} ms" for k, v in sorted(check.real_durations_ms.items()))
        print(f"real publication durations (medians, not compressed; the simulation used them): {durations}")
        if args.json:
            import json

            Path(args.json).write_text(json.dumps(check.to_json(), indent=2) + "\n", encoding="utf-8")
            print(f"json: {args.json}")
        print("validate: " + ("PASS" if check.passed else "FAIL: " + "; ".join(check.problems)))
        return 0 if check.passed else 1
    grid = whatif.make_grid(debounce or whatif.DEFAULT_DEBOUNCE_S, checkpoint, notify)
    if args.no_costs:
        costs = None
    elif args.costs:
        costs = whatif.read_costs(args.costs)
    else:
        if args.remeasure or not _whatif_cached():
            print("measuring this machine's per-publication costs (allocation pass, once; cached)...", flush=True)
        costs = whatif.load_costs(refresh=args.remeasure)
    report = whatif.sweep(trace, grid, costs)
    Console(width=max(180, Console().width)).print(whatif.build_table(report))
    for line in whatif.describe_notes(report):
        print(line)
    for option, writer in (("csv", whatif.write_csv), ("json", whatif.write_json), ("plot", whatif.write_plot)):
        target = getattr(args, option)
        if target:
            print(f"{option}: {writer(report, target)}")
    return 0


def _whatif_cached() -> bool:
    from perfsuite.whatif._costs import cache_path

    return cache_path().is_file()


def _add_whatif_command(sub: Any) -> None:
    w = sub.add_parser(
        "whatif", help="replay a trace through the real schedulers for a grid of debounce/checkpoint settings",
        description="Replays an event trace in virtual time through the engine's real Debouncer, CheckpointTimer "
        "and NotificationQueue for every setting of the grid, and reports publications per minute, bytes "
        "(this machine's measured costs), the crash-loss window and notification delay. --validate replays the "
        "trace's first --validate-seconds through a real Session in real time and compares; --speed F divides "
        "every trace time and the debounce, checkpoint and notification intervals by F (the engine's 50 ms "
        "deferral step and the publications' own durations are real and not scaled), both sides run the same "
        "compressed trace, and loss windows are reported back in trace seconds. It passes when publications "
        "match within max(1, 5%) and the crash-loss window within 30 ms + 10% (compressed time) plus the slowest "
        "real publication's excess over its median. Exit status 2 "
        "on bad input; with --validate, 1 when the simulation does not match the real session.")
    w.add_argument("--trace", metavar="FILE", help="a trace file (JSON lines: time, session, conversation, kind, size)")
    w.add_argument("--storm", action="store_true", help="the generated permission storm (SPEC M6)")
    w.add_argument("--unattended", action="store_true", help="a generated unattended agent run (checkpoints)")
    w.add_argument("--seed", type=int, help="seed of the generated trace")
    w.add_argument("--save-trace", metavar="FILE", help="also write the replayed trace to FILE")
    w.add_argument("--debounce", metavar="S,S,...", help="registry debounce intervals (default: 0.1,0.5,1,2,5,10)")
    w.add_argument("--checkpoint-interval", metavar="S,S,...", help="in-flight checkpoint intervals (default: 30)")
    w.add_argument("--notify-max", metavar="S,S,...", help="notification backoff limits (default: 0.5)")
    w.add_argument("--csv", metavar="OUT", help="write one row per setting")
    w.add_argument("--json", metavar="OUT", help="write the sweep (or the validation) as JSON")
    w.add_argument("--plot", metavar="OUT.png", help="the trade-off plot, Pareto-optimal settings marked")
    w.add_argument("--costs", metavar="FILE", help="per-publication costs to use instead of this machine's cache")
    w.add_argument("--no-costs", action="store_true", help="skip bytes (no allocation pass)")
    w.add_argument("--remeasure", action="store_true", help="measure this machine's costs again")
    w.add_argument("--validate", action="store_true",
                   help="replay the trace's start in real time through a real Session and compare")
    w.add_argument("--validate-seconds", type=float, default=120.0, metavar="S",
                   help="how much of the trace --validate replays (default: 120; 0: all)")
    w.add_argument("--speed", type=float, default=10.0, metavar="FACTOR",
                   help="--validate compresses time: trace times and scheduler intervals divided by FACTOR "
                   "(default: 10)")
    w.set_defaults(func=_cmd_whatif)


# -- perfsuite profile and --phase (issue 9; SPEC section 5) ------------------------------------------
def _add_phase_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--phase", action="store_true",
                        help="also print each mode's phase breakdown (freeze..finish, GC; main-thread time) and "
                        "write it as a stacked bar plot <results>.phases.png")
    parser.add_argument("--phase-dir", metavar="DIR", help="where --phase writes its plots (default: beside each "
                        "results file)")


def _phase_outputs(results: Sequence[Any], phase_dir: str | None) -> None:
    """--phase: per results document, the phase table and ``<stem>.phases.png`` (plain path lines)."""
    from perfsuite.report._phases import phase_breakdown, phase_table, write_phase_plot

    out = _wide_console()
    for r in results:
        breakdown = phase_breakdown(r)
        if not any(row.phases or row.gc_ms for row in breakdown.rows):
            print(f"phases: {r.name}: no per-phase times in this recipe")
            continue
        out.print(phase_table(breakdown))
        directory = Path(phase_dir) if phase_dir else (r.path.parent if r.path is not None else Path("."))
        stem = r.path.stem if r.path is not None else r.recipe
        print(f"phases: {write_phase_plot(breakdown, directory / f'{stem}.phases.png')}")


def _cmd_profile(args: argparse.Namespace) -> int:
    from perfsuite.harness import load_recipe, resolve_operation
    from perfsuite.profile import profile_recipe, profiler_command
    from perfsuite.report._phases import phase_table

    profiler_command(args.profiler, args.profiler_path)  # a missing profiler fails before any fixture is built

    if os.getcwd() not in sys.path:  # operations import like `python -m` would (the worker gets the same)
        sys.path.insert(0, os.getcwd())
    recipe = load_recipe(args.recipe)
    for mode in recipe.modes:
        if not args.mode or mode.name in args.mode:
            try:
                resolve_operation(mode.operation)
            except PerfsuiteError as exc:
                raise PerfsuiteError(f"{recipe.path or args.recipe}: modes.{mode.name}.operation: {exc}") from None
    fixture, info = resolve_fixture_hook(recipe.fixture, args.session)
    run = profile_recipe(
        recipe, args.profiler, modes=args.mode, output_dir=args.output_dir, repeat=args.repeat,
        native=args.native, rate=args.rate, fixture=fixture, fixture_info=info,
        work_root=Path(args.work_dir) if args.work_dir else None, profiler_path=args.profiler_path,
        phase=args.phase, on_event=lambda message: print(f"perfsuite: profiling {message}", file=sys.stderr),
    )
    for mode in run.modes:
        print(mode.summary)
    if run.phases_png is not None:
        _wide_console().print(phase_table(run.breakdown()))
    print(f"profile: {run.record}")  # plain lines, never wrapped: scripts read them
    for path in run.artifacts()[1:]:
        print(f"  {path}")
    return 0


def _add_profile_command(sub: Any) -> None:
    from perfsuite.profile import DEFAULT_REPEAT, PROFILERS

    p = sub.add_parser(
        "profile", help="a recipe's operation under py-spy or scalene; artifacts beside the results",
        description="Runs each mode's operation (fixture resolved and privately copied as in `run`) in a worker "
        "process under the profiler, which is on only while operations run. py-spy: flame graph SVG, speedscope "
        "JSON and a text summary per mode; scalene: its JSON and a text summary (top lines by CPU and by "
        "allocation). A profile with too few samples is repeated with more iterations. Times under a profiler "
        "are distorted: use `run` for measurements. Exit status 2 on bad input, a missing profiler, a profiler "
        "failure or a profile without samples.")
    p.add_argument("recipe", metavar="RECIPE", help="recipe name or .toml path")
    p.add_argument("--profiler", required=True, choices=PROFILERS, help="the sampling profiler")
    p.add_argument("--mode", action="append", metavar="MODE", help="profile this mode only (repeatable; default: all)")
    p.add_argument("--repeat", type=int, metavar="N",
                   help=f"operations per profiled batch (default: {DEFAULT_REPEAT}; more when too few samples)")
    p.add_argument("--output-dir", default="results/local", help="where artifacts go (default: results/local)")
    p.add_argument("--native", action="store_true", help="py-spy: include native (C) frames")
    p.add_argument("--rate", type=int, metavar="HZ", help="py-spy sampling rate (default: 250)")
    p.add_argument("--profiler-path", metavar="PATH",
                   help="the profiler executable (default: $PERFSUITE_PY_SPY / $PERFSUITE_SCALENE, else py-spy "
                   "on PATH or beside this Python, `python -m scalene`)")
    p.add_argument("--session", metavar="PATH", help="a session directory to use as the fixture")
    p.add_argument("--work-dir", metavar="DIR", help="where private fixture copies live (default: temp dir)")
    p.add_argument("--phase", action="store_true",
                   help="also print and plot the profiled iterations' phase breakdown (main-thread time)")
    p.set_defaults(func=_cmd_profile)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="perfsuite",
        description="A durable session store for agent conversations, and the benchmark suite that "
        "measures it under heartbeat-gap recipes.",
    )
    parser.add_argument("--version", action="version", version=f"perfsuite {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser("demo", help="write, sync and fork a conversation with the engine; show the disk")
    demo.add_argument("directory", nargs="?", help="where to write (default: a temporary directory)")
    demo.add_argument("--record-trace", metavar="FILE", help="record the engine's trace events (JSON lines)")
    demo.set_defaults(func=_traced(_cmd_demo, "demo"))

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
    _add_phase_options(run)
    run.add_argument("--record-trace", metavar="FILE",
                     help="record every sample's engine events as a what-if trace (adds a write per event)")
    run.set_defaults(func=_traced(_cmd_run, "run"))

    fixtures = sub.add_parser("fixtures", help="list, build and locate the generated fixtures (SPEC M6)",
                              description="Generated fixtures are cached by spec digest outside git and built "
                              "on first use; `build` with no NAME builds them all.")
    fixtures.add_argument("action", choices=("list", "build", "path", "info"), help="what to do")
    fixtures.add_argument("names", nargs="*", metavar="NAME", help="fixture name (see `perfsuite fixtures list`)")
    fixtures.add_argument("--force", action="store_true", help="rebuild even when the cache holds it")
    fixtures.set_defaults(func=_cmd_fixtures)

    from perfsuite.crash import MODELS, SEEDED_BUGS, WORKLOADS

    crash = sub.add_parser("crashcheck", help="enumerate crash states of engine workloads and check recovery",
                           description="Exit status: 0 no violation (with --seeded-bug: the bug was caught), "
                           "1 violations (with --seeded-bug: the bug was not caught), 2 bad input.")
    crash.add_argument("--workload", action="append", choices=list(WORKLOADS),
                       help="a workload to run, repeatable (default: every standard workload)")
    crash.add_argument("--model", action="append", choices=list(MODELS), help="crash model, repeatable (default: both)")
    crash.add_argument("--max-states", type=int,
                       help="unique crash states per workload and model (default: each workload's cap, 5000 "
                       "unless the workload sets a smaller one)")
    crash.add_argument("--seed", type=int, default=0, help="seed of the sampled subsets (default: 0)")
    crash.add_argument("--seeded-bug", choices=list(SEEDED_BUGS), help="run against a deliberately broken engine")
    crash.add_argument("--jobs", type=int, help="recovery worker processes (default: CPU count)")
    crash.add_argument("--keep", metavar="DIR", help="where violating states are kept (default: a temp dir)")
    crash.add_argument("--show", type=int, default=10, help="violations printed in full (default: 10)")
    crash.add_argument("--kill", type=int, metavar="N",
                       help="instead: the kill campaign, N SIGKILLs of a child running a mixed session workload "
                       "on the real file system, recovery checked after each (200 is the acceptance run); "
                       "--seed seeds the kill points, --keep keeps the sessions")
    crash.add_argument("--profile", action="append", choices=["portable", "file"],
                       help="with --kill: session profile, repeatable (default: both, alternating)")
    crash.set_defaults(func=_cmd_crashcheck)
    _add_report_commands(sub)
    _add_whatif_command(sub)
    _add_profile_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Command | None = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 0
    try:
        return func(args)
    except PerfsuiteError as exc:
        print(f"perfsuite: error: {exc}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        print("perfsuite: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `perfsuite ... | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    raise SystemExit(main())
