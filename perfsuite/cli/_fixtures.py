"""`perfsuite fixtures list | build | path | info` (SPEC M6)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.progress import TaskID

    from perfsuite.workloads.fixtures import FixtureProgress

from perfsuite.cli._common import CliServices, Subparsers, fixture_notices, non_empty
from perfsuite.cli._console import console
from perfsuite.errors import PerfsuiteError


def _cmd_fixtures(args: argparse.Namespace, services: CliServices) -> int:
    """`fixtures list | build [NAME...] [--force] | path NAME | info NAME`: generated fixtures and their cache."""
    import json

    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from perfsuite.workloads import fixtures as fx

    out = console()
    if args.action == "list":
        table = Table(title="fixtures (SPEC M6)", title_justify="left")
        for column in ("fixture", "generator", "spec digest", "files", "bytes", "cached"):
            table.add_column(column, justify="right" if column in ("files", "bytes") else "left")
        for name in fx.list_fixtures():
            spec = fx.load_spec(name)
            hit = fx.cached_fixture(spec)
            files, nbytes = (str(hit.info["files"]), f"{hit.info['bytes']:,}") if hit else ("", "")
            table.add_row(name, spec.generator, spec.digest[7:19], files, nbytes, "yes" if hit else "[dim]no[/]")
        out.table(table, quiet_ok=True)
        out.line(f"specs: {fx.fixtures_dir()}")
        out.line(f"cache: {fx.cache_root()}")
        return 0
    if args.action in ("path", "info") and len(args.names) != 1:
        raise PerfsuiteError(f"fixtures {args.action}: expected exactly one NAME, got {len(args.names)}")
    if args.action in ("path", "info"):
        fixture = fx.build_fixture(args.names[0], force=args.force, progress=fixture_notices)
        print(fixture.path if args.action == "path" else json.dumps(fixture.info, indent=1, sort_keys=True))
        return 0
    names = args.names or fx.list_fixtures()
    specs = [fx.load_spec(name) for name in names]  # every name checked before anything is built
    built = []
    columns = (TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    err = out.rich(stderr=True)
    with Progress(*columns, console=err, disable=out.quiet or not err.is_terminal) as progress:  # for a terminal
        for spec in specs:
            task = progress.add_task(spec.name, total=1.0)

            def update(event: FixtureProgress, task: TaskID = task) -> None:
                progress.update(task, completed=event.fraction, description=f"{event.fixture}: {event.step}")

            built.append(fx.build_fixture(spec, force=args.force, progress=update))
            progress.update(task, completed=1.0, description=spec.name)
    for fixture in built:  # plain lines: scripts read them
        info = fixture.info
        how = f"built in {info.get('build_s', 0):.1f} s" if fixture.built else "cached"
        out.verdict(f"{fixture.name}: {info['files']} files, {info['bytes']:,} bytes, {how}: {fixture.path}")
    return 0


def register(sub: Subparsers) -> None:
    fixtures = sub.add_parser("fixtures", help="list, build and locate the generated fixtures (SPEC M6)",
                              description="Generated fixtures are cached by spec digest outside git and built "
                              "on first use; `build` with no NAME builds them all.")
    fixtures.add_argument("action", choices=("list", "build", "path", "info"), help="what to do")
    fixtures.add_argument("names", nargs="*", metavar="NAME", type=non_empty,
                          help="fixture name (see `perfsuite fixtures list`)")
    fixtures.add_argument("--force", action="store_true", help="rebuild even when the cache holds it")
    fixtures.set_defaults(func=_cmd_fixtures)
