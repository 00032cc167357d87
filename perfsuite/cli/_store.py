"""`perfsuite store ingest | info`: the results store (SQLite) that history, compare and dashboard read."""

from __future__ import annotations

import argparse
from typing import Any

from perfsuite.cli._common import wide_console


def _cmd_ingest(args: argparse.Namespace) -> int:
    from perfsuite.report import DEFAULT_STORE, ingest

    store = args.store or DEFAULT_STORE
    report = ingest(args.directories, store)
    print(
        f"store {store}: {report.added} added, {report.replaced} replaced, {report.unchanged} already there; "
        f"{report.runs} run(s) on {report.machines} machine(s)"
    )
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    from rich import box
    from rich.table import Table

    from perfsuite.report import DEFAULT_STORE, open_store

    store = args.store or DEFAULT_STORE
    with open_store(store) as db:
        machines = db.machines()
    table = Table(title=f"results store {store}: {len(machines)} machine(s)", box=box.SIMPLE_HEAD,
                  title_justify="left")
    for column in ("machine", "fingerprint", "runs", "recipes", "first", "last"):
        table.add_column(column, justify="right" if column == "runs" else "left")
    for m in machines:
        table.add_row(m.machine.key, m.machine.label, str(m.runs), str(len(m.recipes)), m.first[:16], m.last[:16])
    wide_console().print(table)
    return 0


def register(sub: Any) -> None:
    """Register `store` and its subcommands (exit 2 on unusable input)."""
    store = sub.add_parser(
        "store",
        help="the results store: every sample of every run, keyed by machine (SQLite, derived from results files)",
        description="The store is derived from results documents and can be rebuilt at any time; `history`, "
        "`compare --store` and `dashboard` read it. Default: results/perfsuite.sqlite3.",
    )
    actions = store.add_subparsers(dest="store_command", metavar="ACTION", required=True)

    ingest = actions.add_parser("ingest", help="add results documents (a run ingested twice is one run)")
    ingest.add_argument("directories", nargs="+", metavar="DIR", help="results files or directories (recursive)")
    ingest.add_argument("--store", metavar="PATH", help="the store file (default: results/perfsuite.sqlite3)")
    ingest.set_defaults(func=_cmd_ingest)

    info = actions.add_parser("info", help="the machines of a store, with their runs")
    info.add_argument("--store", metavar="PATH", help="the store file (default: results/perfsuite.sqlite3)")
    info.set_defaults(func=_cmd_info)
