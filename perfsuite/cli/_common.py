"""What every command module of the CLI shares: consoles, thresholds, --phase, fixtures, --record-trace."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError

Command = Callable[[argparse.Namespace], int]
FixtureResolver = Callable[[str | None, str | None], tuple[Path | None, dict[str, Any]]]


def fixture_hook() -> FixtureResolver:
    """The fixture resolver in use: ``perfsuite.cli.resolve_fixture_hook`` (tests replace it there)."""
    import perfsuite.cli

    return perfsuite.cli.resolve_fixture_hook


def default_resolve_fixture(name: str | None, session: str | None) -> tuple[Path | None, dict[str, Any]]:
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
        return resolve_fixture(name, session, progress=fixture_notices)
    if session is not None:
        return Path(session), {"name": name, "source": "session", "session": str(Path(session).resolve())}
    raise PerfsuiteError(f"unknown fixture {name!r} (no fixture builder is available yet; try --session PATH)")


def fixture_notices(event: Any) -> None:
    """Progress of a first-use fixture build during `run`: one line when it starts, one when it ends."""
    if event.step == "starting":
        print(f"perfsuite: building fixture {event.fixture} (first use; cached afterwards)", file=sys.stderr)
    elif event.step == "done":
        print(f"perfsuite: fixture {event.fixture} built in {event.elapsed_s:.1f} s", file=sys.stderr)


def wide_console() -> Any:
    """A console that does not wrap tables at 80 columns when stdout is a pipe (CI logs)."""
    from rich.console import Console

    return Console(highlight=False, width=None if sys.stdout.isatty() else 160)


def thresholds(args: argparse.Namespace) -> dict[str, float]:
    """--alpha / --factor when given (the library's defaults otherwise)."""
    return {k: v for k, v in (("alpha", args.alpha), ("factor", args.factor)) if v is not None}


def traced(command: Command, name: str) -> Command:
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


def add_gate_option(parser: argparse.ArgumentParser) -> None:
    """``--gate all|costs`` of `compare` and `ab`."""
    parser.add_argument("--gate", choices=("all", "costs"),
                        help="what may fail the gate: timings and costs (default), or only the deterministic costs "
                        "(timings still compared, shown as info; for noisy shared runners)")


def add_phase_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--phase", action="store_true",
                        help="also print each mode's phase breakdown (freeze..finish, GC; main-thread time) and "
                        "write it as a stacked bar plot <results>.phases.png")
    parser.add_argument("--phase-dir", metavar="DIR", help="where --phase writes its plots (default: beside each "
                        "results file)")


def phase_outputs(results: Sequence[Any], phase_dir: str | None) -> None:
    """--phase: per results document, the phase table and ``<stem>.phases.png`` (plain path lines)."""
    from perfsuite.report._phases import phase_breakdown, phase_table, write_phase_plot

    out = wide_console()
    for r in results:
        breakdown = phase_breakdown(r)
        if not any(row.phases or row.gc_ms for row in breakdown.rows):
            print(f"phases: {r.name}: no per-phase times in this recipe")
            continue
        out.print(phase_table(breakdown))
        directory = Path(phase_dir) if phase_dir else (r.path.parent if r.path is not None else Path("."))
        stem = r.path.stem if r.path is not None else r.recipe
        print(f"phases: {write_phase_plot(breakdown, directory / f'{stem}.phases.png')}")

