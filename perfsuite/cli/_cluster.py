"""The options every distributable command shares (issue 32): where it runs, and a progress bar of
states (cases, kills, settings) done and violations so far, fed by the client as batches come back."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from perfsuite.cli._common import non_empty

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
                        help=f"run {what} on the running Dask cluster at ADDRESS (tcp://HOST:8786; every worker "
                        "must import the same perfsuite)")


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
