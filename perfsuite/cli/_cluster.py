"""The options every distributable command shares: where it runs, and a progress bar of
states (cases, kills, settings) done and violations so far, fed by the client as batches come back."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from perfsuite.cli._common import CliServices, Command, non_empty
from perfsuite.errors import PerfsuiteError

if TYPE_CHECKING:
    from perfsuite.cli._console import Console
    from perfsuite.crash import Progress as CampaignProgress


def add_cluster_options(parser: argparse.ArgumentParser, what: str, *,
                        default: str = "this machine's process pool of --jobs", jobs: bool = True) -> None:
    """``--cluster local`` and ``--scheduler ADDRESS`` (Dask; the cluster extra)."""
    size = "--jobs workers" if jobs else "one worker"
    parser.add_argument("--cluster", choices=("local",),
                        help=f"run {what} on an embedded Dask LocalCluster of {size} (needs the cluster extra; "
                        f"default: {default})")
    parser.add_argument("--scheduler", metavar="ADDRESS", type=non_empty,
                        help=f"run {what} on the running Dask cluster at ADDRESS (tls://HOST:8786 with --tls-*, or "
                        "tcp://HOST:8786, which authenticates nobody: a scheduler runs code on its workers; every "
                        "worker must import the same perfsuite)")
    for flag, what_file in (("--tls-ca", "the CA certificate the scheduler's certificate is signed by"),
                            ("--tls-cert", "this client's certificate"), ("--tls-key", "this client's private key")):
        parser.add_argument(flag, metavar="FILE", type=non_empty,
                            help=f"with --scheduler tls://...: {what_file} (PEM; default: Dask's "
                            "distributed.comm.tls configuration)")


def with_cluster_security(command: Command) -> Command:
    """``command`` with its ``--tls-ca/--tls-cert/--tls-key`` in Dask's own security settings while it runs (so
    every client it makes, in any campaign, authenticates with them); one line when they are given without a
    ``tls://`` scheduler (``--cluster local`` makes its own certificate for the run)."""

    @functools.wraps(command)
    def run(args: argparse.Namespace, services: CliServices) -> int:
        files = (args.tls_ca, args.tls_cert, args.tls_key)
        if not any(files):
            return command(args, services)
        from perfsuite.cluster import check_scheduler, tls_files

        if args.cluster:
            raise PerfsuiteError("--tls-ca, --tls-cert and --tls-key are for --scheduler tls://...: --cluster local "
                                 "makes its own certificate for the run")
        if not args.scheduler or not check_scheduler(args.scheduler).startswith("tls://"):
            raise PerfsuiteError("--tls-ca, --tls-cert and --tls-key need --scheduler tls://HOST:PORT")
        with tls_files(*files):
            return command(args, services)

    return run


@contextmanager
def progress_bar(console: Console, noun: str) -> Iterator[Callable[[CampaignProgress], None]]:
    """A rich progress bar on stderr (only on a terminal: in a pipe or a log it would only add lines), one
    row per unit; yields the ``on_progress`` callback of a campaign (:class:`perfsuite.crash.Progress`)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    err = console.rich(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn(noun),
               TimeElapsedColumn(), TextColumn("{task.fields[violations]} violations so far"))
    with Progress(*columns, console=err, disable=not err.is_terminal, transient=False) as bar:
        rows: dict[str, Any] = {}

        def update(event: CampaignProgress) -> None:
            if event.unit not in rows:
                rows[event.unit] = bar.add_task(event.unit, total=event.total, violations=0)
            bar.update(rows[event.unit], completed=event.done, total=max(event.total, event.done),
                       violations=event.violations)

        yield update
