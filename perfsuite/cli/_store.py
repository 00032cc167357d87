"""`perfsuite store ingest | info | push | pull`: the results store (SQLite) and the branch it is rebuilt from."""

from __future__ import annotations

import argparse

from perfsuite.cli._common import CliServices, Subparsers, non_empty, output_dir
from perfsuite.cli._console import console


def _cmd_ingest(args: argparse.Namespace, services: CliServices) -> int:
    from perfsuite.report import DEFAULT_STORE, ingest

    store = args.store or DEFAULT_STORE
    report = ingest(args.directories, store)
    console().line(
        f"store {store}: {report.added} added, {report.replaced} replaced, {report.unchanged} already there; "
        f"{report.runs} run(s) on {report.machines} machine(s)"
    )
    return 0


def _cmd_info(args: argparse.Namespace, services: CliServices) -> int:
    from rich import box
    from rich.table import Table

    from perfsuite.report import DEFAULT_STORE, open_store

    store = args.store or DEFAULT_STORE
    with open_store(store) as db:
        machines = db.machines()
    table = Table(title=f"results store {store}: {len(machines)} machine(s)", box=box.SIMPLE_HEAD,
                  title_justify="left")
    for column in ("machine", "fingerprint", "runs", "loaded", "recipes", "first", "last"):
        table.add_column(column, justify="right" if column in ("runs", "loaded") else "left")
    for m in machines:  # loaded: runs whose idle control says the machine was loaded
        table.add_row(m.machine.key, m.machine.label, str(m.runs), str(m.loaded), str(len(m.recipes)),
                      m.first[:16], m.last[:16])
    console().table(table, quiet_ok=True)
    return 0


def _cmd_push(args: argparse.Namespace, services: CliServices) -> int:
    from perfsuite.report import push_results

    report = push_results(args.directories, branch=args.branch, remote=args.remote, repo=args.repo,
                          message=args.message)
    for line in report.skipped:
        console().line(f"skipped {line}")
    if report.commit is None:
        console().line(f"{args.remote} {args.branch}: nothing new ({report.unchanged} document(s) already there)")
    else:
        console().line(f"{args.remote} {args.branch}: {len(report.added)} document(s) added in "
                       f"{report.commit[:12]} ({report.unchanged} already there)")
    return 0


def _cmd_pull(args: argparse.Namespace, services: CliServices) -> int:
    from perfsuite.report import DEFAULT_STORE, pull_results, rebuild_store

    pulled = pull_results(args.into, branch=args.branch, remote=args.remote, repo=args.repo)
    console().line(f"{args.remote} {args.branch} at {pulled.commit[:12]}: {pulled.files} document(s) in "
                   f"{pulled.directory}")
    if not args.no_store:
        store = args.store or DEFAULT_STORE
        report = rebuild_store(pulled.directory, store)
        console().line(f"store {store} rebuilt: {report.runs} run(s) on {report.machines} machine(s)")
    return 0


def register(sub: Subparsers) -> None:
    """Register `store` and its subcommands (exit 2 on unusable input)."""
    store = sub.add_parser(
        "store",
        help="the results store: every sample of every run, keyed by machine (SQLite, derived from results files)",
        description="The store is derived from results documents and can be rebuilt at any time; `history`, "
        "`compare --store` and `dashboard` read it. Default: results/perfsuite.sqlite3.",
    )
    actions = store.add_subparsers(dest="store_command", metavar="ACTION", required=True)

    ingest = actions.add_parser("ingest", help="add results documents (a run ingested twice is one run)")
    ingest.add_argument("directories", nargs="+", metavar="DIR", type=non_empty,
                        help="results files or directories (recursive)")
    ingest.add_argument("--store", metavar="PATH", type=non_empty,
                        help="the store file (default: results/perfsuite.sqlite3)")
    ingest.set_defaults(func=_cmd_ingest)

    info = actions.add_parser("info", help="the machines of a store, with their runs")
    info.add_argument("--store", metavar="PATH", type=non_empty,
                      help="the store file (default: results/perfsuite.sqlite3)")
    info.set_defaults(func=_cmd_info)

    def branch_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--branch", default="perfsuite-results", type=non_empty,
                       help="the results branch (default: perfsuite-results)")
        p.add_argument("--remote", default="origin", type=non_empty, help="the git remote holding it (default: origin)")
        p.add_argument("--repo", default=".", metavar="PATH", type=non_empty,
                       help="the git repository to work from (default: .)")

    push = actions.add_parser(
        "push", help="append results documents to a git branch (what CI keeps; never the database)",
        description="Commits complete results documents to BRANCH on REMOTE under <machine>/<commit>/, without "
        "touching the working tree; documents already there are not committed again; synthetic documents are "
        "refused.",
    )
    push.add_argument("directories", nargs="+", metavar="DIR", type=non_empty,
                      help="results files or directories (recursive)")
    branch_options(push)
    push.add_argument("--message", type=non_empty, help="the commit message (default: which commits are measured)")
    push.set_defaults(func=_cmd_push)

    pull = actions.add_parser("pull", help="fetch the results branch into a directory and rebuild the store from it")
    branch_options(pull)
    pull.add_argument("--into", default="results/history", metavar="DIR", type=output_dir,
                      help="where the documents go (default: results/history)")
    pull.add_argument("--store", metavar="PATH", type=non_empty,
                      help="the store to rebuild (default: results/perfsuite.sqlite3)")
    pull.add_argument("--no-store", action="store_true", help="only fetch the documents")
    pull.set_defaults(func=_cmd_pull)
