"""The one ``perfsuite`` command. Argument parsing and printing live here, never in the library.

Each subcommand is a ``_cmd_<name>(args) -> int`` function registered in :func:`build_parser`.
Library code raises :class:`~perfsuite.errors.PerfsuiteError` for bad input; :func:`main` turns it into
one line on stderr and exit status 2 (house rule 5).
"""

from __future__ import annotations

import argparse
import os
import sys
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
DEFAULT_RUN_RECIPES: tuple[str, ...] = ("idle-control", "fsync-floor")

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
        return resolve_fixture(name, session)
    if session is not None:
        return Path(session), {"name": name, "source": "session", "session": str(Path(session).resolve())}
    raise PerfsuiteError(f"unknown fixture {name!r} (no fixture builder is available yet; try --session PATH)")


#: injectable hook for `run` (tests and the fixture builders replace it)
resolve_fixture_hook: FixtureResolver = _default_resolve_fixture


def _run_stat(summary: Mapping[str, Any], key: str, part: str = "median") -> str:
    stat = summary.get(key)
    if not stat:
        return ""
    if part == "range":
        return f"{stat['min']:.2f}-{stat['max']:.2f}"
    return f"{stat[part]:.2f}"


def _run_verdict(v: Mapping[str, Any]) -> str:
    if v.get("met") is None:
        return ""
    if v["met"]:
        return f"[green]met[/] <= {v['target_ms']:g} ms"
    return f"[red]missed[/] {v['missed']}/{v['samples']}, {v['missed_with_gc']} GC"


def _run_table(doc: Mapping[str, Any]) -> Any:
    """One rich table per results document: medians, max-gap range, GC samples, M7 verdict per mode."""
    from rich import box
    from rich.table import Table

    r = doc["recipe"]
    title = f"{r['name']}: {r['isolation']}, gc {r['gc']}, heartbeat {r['heartbeat_ms']:g} ms (medians; times in ms)"
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    for column in ("mode", "n", "max gap", "gap range", "submit", "ack", "GC", "verdict"):
        table.add_column(column, justify="left" if column in ("mode", "verdict") else "right")
    rows = [
        (mode, body["samples"], body["summary"], _run_verdict(body["verdict"]), True)
        for mode, body in doc["modes"].items()
    ]
    rows.append(
        ("[dim]idle control[/]", doc["control"]["samples"], doc["control"]["summary"], "[dim]noise floor[/]", False)
    )
    for mode, samples, summary, verdict_text, timed in rows:
        gc_seen = sum(1 for s in samples if s["gc"]["collections"])
        table.add_row(
            mode,
            str(len(samples)),
            _run_stat(summary, "max_gap_ms"),
            _run_stat(summary, "max_gap_ms", "range"),
            _run_stat(summary, "submission_ms") if timed else "",
            _run_stat(summary, "ack_ms") if timed else "",
            str(gc_seen),
            verdict_text,
        )
    return table


def _cmd_run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from perfsuite.harness import (
        SampleEvent,
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
        for ref in args.recipes or DEFAULT_RUN_RECIPES:
            recipe = load_recipe(ref).with_overrides(
                samples=args.samples, warmup=args.warmup, isolation=args.isolation, gc=args.gc
            )
            for mode in recipe.modes:  # fail before measuring anything
                try:
                    resolve_operation(mode.operation)
                except PerfsuiteError as exc:
                    raise PerfsuiteError(f"{recipe.path or ref}: modes.{mode.name}.operation: {exc}") from None
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
    for document in documents:
        out.print(_run_table(document))
    for path, exports in paths:  # plain lines, never wrapped: scripts read them
        print(f"results: {path}")
        for extra in exports:
            print(f"  {extra}")
    return 0


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
    demo.set_defaults(func=_cmd_demo)

    run = sub.add_parser("run", help="run recipes under the heartbeat; write results, print verdicts")
    run.add_argument(
        "recipes",
        nargs="*",
        metavar="RECIPE",
        help=f"recipe name or .toml path (default: {' '.join(DEFAULT_RUN_RECIPES)})",
    )
    run.add_argument("--samples", type=int, help="samples per mode (recipe default: 6)")
    run.add_argument("--warmup", type=int, help="discarded warm-up samples per mode (recipe default: 1)")
    run.add_argument("--isolation", choices=("process", "inline"), help="fresh process per sample, or one")
    run.add_argument("--gc", choices=("collect-before", "natural"), help="GC policy before each sample")
    run.add_argument("--output-dir", default="results/local", help="where results go (default: results/local)")
    run.add_argument("--resume", metavar="FILE", help="continue an interrupted results file")
    run.add_argument("--session", metavar="PATH", help="a session directory to use as the fixture")
    run.add_argument("--work-dir", metavar="DIR", help="where private fixture copies live (default: temp dir)")
    run.set_defaults(func=_cmd_run)
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


if __name__ == "__main__":
    raise SystemExit(main())
