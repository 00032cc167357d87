"""What every command module of the CLI shares: thresholds, --phase, fixtures, --record-trace, the
one-line argument parser and the ``type=`` validators every option uses (bad input is one line
and exit 2, caught at parse time, before anything is built or measured).

The console (width, colour, -q/-v, tables that fit) is :mod:`perfsuite.cli._console`."""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias, TypedDict

from perfsuite.cli._console import console
from perfsuite.errors import PerfsuiteError

if TYPE_CHECKING:
    from perfsuite.harness import ResultsWriter
    from perfsuite.report import Floor, Result
    from perfsuite.workloads.fixtures import FixtureProgress
    from perfsuite.workloads.runs import LoadProbe

FixtureResolver = Callable[[str | None, str | None], tuple[Path | None, dict[str, Any]]]


# -- one-line errors (house rule 4) ----------------------------------------------------------------


#: the ``sub`` every command module's ``register`` adds its parser to (``build_parser``'s subparsers)
Subparsers: TypeAlias = "argparse._SubParsersAction[OneLineParser]"


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line on stderr and exit status 2 (no usage block).

    Subparsers inherit the class, so ``perfsuite run --samples 0`` prints
    ``perfsuite: error: run: argument --samples: expected a positive integer, got '0'``.
    """

    def error(self, message: str) -> NoReturn:
        sub = self.prog.partition(" ")[2]
        where = f"{sub}: " if sub else ""
        self.exit(2, f"perfsuite: error: {where}{one_line(message)} (see {self.prog} --help)\n")


def one_line(text: str) -> str:
    """``text`` folded onto one line (a library message must never spill a second line on stderr)."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip()) or "(no message)"


def describe_os_error(exc: OSError) -> str:
    """``PATH: strerror`` for an OSError; a ``shutil.Error`` list becomes its first entry and a count."""
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list) and exc.args[0]:
        entries = exc.args[0]
        first = entries[0]
        text = f"{first[1]}: {first[2]}" if isinstance(first, tuple) and len(first) == 3 else str(first)
        more = f" (and {len(entries) - 1} more)" if len(entries) > 1 else ""
        return one_line(f"{text}{more}")
    reason = exc.strerror or str(exc) or type(exc).__name__
    names = [str(n) for n in (exc.filename, exc.filename2) if n is not None]
    return one_line(f"{' -> '.join(names)}: {reason}" if names else reason)


def describe_error(exc: BaseException) -> str:
    """The one line :func:`perfsuite.cli.main` prints for any error (without the ``perfsuite: error:``)."""
    if isinstance(exc, OSError):
        return describe_os_error(exc)
    text = one_line(str(exc)) if str(exc).strip() else ""
    if isinstance(exc, PerfsuiteError):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# -- argparse ``type=`` validators (every option checked at parse time) -----------------------------


def _show(text: str) -> str:
    """The offending value as typed: bare, or quoted when blank or padded (so ``''`` is visible)."""
    text = str(text)
    return text if text and text.strip() == text else repr(text)


def _number(text: str, kind: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"expected {kind}, got {_show(text)}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected {kind}, got {_show(text)}")
    return value


def _integer(text: str, kind: str) -> int:
    try:
        return int(str(text).strip(), 10)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"expected {kind}, got {_show(text)}") from None


def positive_int(text: str) -> int:
    """An integer >= 1 (``--samples``, ``--jobs``, ``--repeat``...)."""
    value = _integer(text, "a positive integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {_show(text)} (must be at least 1)")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0 (``--warmup``, ``--show``, ``--seed``)."""
    value = _integer(text, "an integer >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {_show(text)}")
    return value


def bounded_int(limit: str) -> Callable[[str], int]:
    """An integer inside ``perfsuite._limits.LIMITS[limit]`` (every count a flag takes is bounded;
    the bound is the library's, the same a recipe key meets)."""
    from perfsuite._limits import LIMITS, check_limit, describe_limit

    def parse(text: str) -> int:
        value = _integer(text, describe_limit(LIMITS[limit]))
        problem = check_limit(limit, value)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value

    parse.__name__ = limit
    return parse


def bounded_float(limit: str) -> Callable[[str], float]:
    """A finite number inside ``perfsuite._limits.LIMITS[limit]``."""
    from perfsuite._limits import LIMITS, check_limit, describe_limit

    def parse(text: str) -> float:
        value = _number(text, describe_limit(LIMITS[limit]))
        problem = check_limit(limit, value)
        if problem:
            raise argparse.ArgumentTypeError(problem.replace(f"got {value:g}", f"got {_show(text)}"))
        return value

    parse.__name__ = limit
    return parse


def finite_float(text: str) -> float:
    """Any finite number (no NaN, no infinity)."""
    return _number(text, "a finite number")


def positive_float(text: str) -> float:
    """A finite number > 0 (``whatif --speed``: it divides)."""
    value = _number(text, "a finite number > 0")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {_show(text)}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0 (``history --penalty``, ``--min-change``)."""
    value = _number(text, "a finite number >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {_show(text)}")
    return value


def seconds_or_all(text: str) -> float | None:
    """``whatif --validate-seconds``: seconds > 0, or ``all`` (``None``: the whole trace). 0 is an error:
    it used to mean "all" and silently replayed a 1860 s trace."""
    if str(text).strip().lower() == "all":
        return None
    value = _number(text, "seconds > 0 or 'all'")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected seconds > 0 or 'all', got {_show(text)}")
    return value


def interval_list(*, allow_zero: bool = True) -> Callable[[str], tuple[float, ...]]:
    """``"0.1,0.5,2"`` -> (0.1, 0.5, 2.0): finite seconds >= 0 (> 0 unless ``allow_zero``); ``""`` is an
    error, not the default. Messages as :func:`perfsuite.whatif.parse_intervals`'s."""

    def parse(text: str) -> tuple[float, ...]:
        values: list[float] = []
        for part in str(text).split(","):
            item = part.strip()
            if not item:
                raise argparse.ArgumentTypeError(f"empty value in {text!r}; expected comma-separated seconds")
            try:
                value = float(item)
            except ValueError:
                raise argparse.ArgumentTypeError(f"{item!r} is not a number of seconds") from None
            if not math.isfinite(value):
                raise argparse.ArgumentTypeError(f"{item!r} is not a finite number of seconds")
            if value < 0:
                raise argparse.ArgumentTypeError(f"{item} is negative; intervals must be >= 0 s")
            if value == 0 and not allow_zero:
                raise argparse.ArgumentTypeError(f"intervals must be > 0 s, got {item}")
            values.append(value)
        return tuple(dict.fromkeys(values))

    parse.__name__ = "interval list"
    return parse


def commit_id(text: str) -> str:
    """A commit id (``--commit``): 4 to 64 hex digits, lowercased (:func:`perfsuite.harness.check_commit`)."""
    from perfsuite.harness import check_commit

    try:
        return check_commit(text, "commit")
    except PerfsuiteError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("commit: ")) from None


def non_empty(text: str) -> str:
    """A non-blank string (names, paths read later)."""
    if not str(text).strip():
        raise argparse.ArgumentTypeError("expected a non-empty value, got ''")
    return str(text)


def _check_creatable(path: Path, text: str) -> None:
    """``path`` (a directory, existing or to be created) must end up a writable directory: its nearest
    existing ancestor is a directory (not a regular file) we may write in."""
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {probe} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text}: {probe} is not writable")


def output_file(text: str) -> str:
    """A file to write: non-empty, not a directory, in a writable directory (created when missing)."""
    text = non_empty(text)
    path = Path(text).expanduser()
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a directory, expected a file to write")
    if path.exists() and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text}: not writable")
    _check_creatable(path.absolute().parent, text)
    return text


def output_dir(text: str) -> str:
    """A directory to write in: non-empty, a directory if it exists, creatable (not under a file) if not."""
    text = non_empty(text)
    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: not a directory")
    _check_creatable(path.absolute(), text)
    return text


def input_file(text: str) -> str:
    """A file to read: non-empty, exists, not a directory."""
    text = non_empty(text)
    path = Path(text).expanduser()
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such file")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a directory, expected a file")
    return text


def input_dir(text: str) -> str:
    """A directory to read: non-empty, exists, a directory."""
    text = non_empty(text)
    path = Path(text).expanduser()
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such directory")
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: not a directory")
    return text


def default_resolve_fixture(name: str | None, session: str | None) -> tuple[Path | None, dict[str, Any]]:
    """Fixture name (or ``None``) and ``--session`` -> (directory to copy per sample, info for the results).
    A session gives a recipe without a fixture its fixture too (ignoring it would measure the recipe on no
    data while the command line named some)."""
    if session is not None and not Path(session).is_dir():
        raise PerfsuiteError(f"--session: no such session directory: {session}")
    if name is None and session is None:
        return None, {}
    from perfsuite.workloads.fixtures import resolve_fixture

    return resolve_fixture(name, session, progress=fixture_notices)


def fixture_notices(event: FixtureProgress) -> None:
    """Progress of a first-use fixture build during `run`: one line when it starts, one when it ends."""
    if console().quiet:
        return
    if event.step == "starting":
        print(f"perfsuite: building fixture {event.fixture} (first use; cached afterwards)", file=sys.stderr)
    elif event.step == "done":
        print(f"perfsuite: fixture {event.fixture} built in {event.elapsed_s:.1f} s", file=sys.stderr)


@dataclass(frozen=True, slots=True)
class CliServices:
    """What the commands call out to that a test (or a program embedding the CLI) replaces, handed to every
    command by :func:`perfsuite.cli.main` (``main(argv, services=CliServices(...))``): explicit injection,
    never a module global.

    ``resolve_fixture`` gives `run`, `sweep`, `profile`, `ab` and `bisect` their fixture directories;
    ``writer`` writes `run`'s results documents, ``(path, document) -> None`` (``None``: the harness's atomic
    writer; tests inject ENOSPC); ``load_probe`` measures the machine's load before `run`
    writes into a baseline directory (``None``: :func:`perfsuite.harness.probe_load`; tests inject a loaded
    machine, never a timing)."""

    resolve_fixture: FixtureResolver = default_resolve_fixture
    writer: ResultsWriter | None = None
    load_probe: LoadProbe | None = None


#: a command: the parsed arguments and the services -> its exit status (``set_defaults(func=...)``)
Command = Callable[[argparse.Namespace, CliServices], int]


class Thresholds(TypedDict, total=False):
    """The keyword arguments --alpha and --factor give the library (absent: its defaults)."""

    alpha: float
    factor: float


def thresholds(args: argparse.Namespace) -> Thresholds:
    """--alpha / --factor when given (the library's defaults otherwise)."""
    given = Thresholds()
    if args.alpha is not None:
        given["alpha"] = float(args.alpha)
    if args.factor is not None:
        given["factor"] = float(args.factor)
    return given


def traced(command: Command, name: str) -> Command:
    """``--record-trace FILE``: run ``command`` while recording the engine's trace events into FILE."""

    def run(args: argparse.Namespace, services: CliServices) -> int:
        path = getattr(args, "record_trace", None)
        if not path:
            return command(args, services)
        from perfsuite.whatif import recording

        with recording(path, meta={"command": name}) as recorder:
            status = command(args, services)
        trace = recorder.trace
        if trace is not None and not trace.events:
            # a header-only file is one `whatif` refuses; say so in one line and keep none
            Path(path).unlink(missing_ok=True)
            print(f"perfsuite: --record-trace {path}: no events recorded, no file written (the code measured "
                  "neither used perfsuite's engine nor called perfsuite.whatif.emit(kind, ...))", file=sys.stderr)
        elif trace is not None:
            console().line(f"trace: {path} ({len(trace.events)} events, {len(trace.sessions)} sessions, "
                           f"{trace.duration_s:.1f} s)")
        return status

    return run


def add_gate_option(parser: argparse.ArgumentParser) -> None:
    """``--gate all|costs`` of `compare` and `ab`."""
    parser.add_argument("--gate", choices=("all", "costs"),
                        help="what may fail the gate: timings and costs (default), or only the deterministic costs "
                        "(timings still compared, shown as info; for noisy shared runners)")


def add_strict_options(parser: argparse.ArgumentParser) -> None:
    """``--strict`` and ``--neutral-exit`` of `compare` and `ab` (the loaded-runner policy, docs/gates.md)."""
    parser.add_argument("--strict", action="store_true",
                        help="timings gate even when the idle control says the machine was loaded (paired), and an "
                        "inconclusive timing exits 3; default: a loaded machine's timings are reported, not gated "
                        "(the counts gate), and inconclusive timings alone are neutral")
    parser.add_argument("--neutral-exit", type=_exit_code, default=0, metavar="CODE",
                        help="exit status of a neutral result (no regression in what gated, but timings not gated "
                        "on a loaded machine or inconclusive; default 0; the workflow perfsuite init writes "
                        "passes 78 and turns it into a warning)")


def _exit_code(text: str) -> int:
    """An exit status a shell keeps as it is: 0 to 125 (126 and up mean the shell's own failures)."""
    value = _integer(text, "an integer from 0 to 125")
    if not 0 <= value <= 125:
        raise argparse.ArgumentTypeError(f"must be from 0 to 125, got {value}")
    return value


def gate_exit(comparison: Any, args: argparse.Namespace) -> int:
    """The command's exit status for ``comparison``: its own, but ``--neutral-exit`` for a neutral outcome."""
    if getattr(comparison, "outcome", None) == "neutral":
        return int(getattr(args, "neutral_exit", 0) or 0)
    return int(comparison.exit_status)


def add_recipes_option(parser: argparse.ArgumentParser) -> None:
    """``--recipes DIR``: where your own recipes live (default: ``./recipes`` when it exists); built-ins follow."""
    parser.add_argument("--recipes", dest="recipes_dir", metavar="DIR",
                        help="look recipe names up in DIR first (default: ./recipes when it exists), then among "
                        "the built-in recipes")


def add_phase_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--phase", action="store_true",
                        help="also print each mode's phase breakdown (freeze..finish, GC; main-thread time) and "
                        "write it as a stacked bar plot <results>.phases.png")
    parser.add_argument("--phase-dir", metavar="DIR", type=output_dir,
                        help="where --phase writes its plots (default: beside each "
                        "results file)")


def phase_outputs(results: Sequence[Result], phase_dir: str | None) -> None:
    """--phase: per results document, the phase table and ``<stem>.phases.png`` (plain path lines)."""
    from perfsuite.report import phase_breakdown, phase_table, write_phase_plot

    out = console()
    for r in results:
        breakdown = phase_breakdown(r)
        if not any(row.phases or row.gc_ms for row in breakdown.rows):
            out.line(f"phases: {r.name}: no per-phase times in this recipe")
            continue
        out.table(phase_table(breakdown))
        directory = Path(phase_dir) if phase_dir else (r.path.parent if r.path is not None else Path("."))
        stem = r.path.stem if r.path is not None else r.recipe
        out.line(f"phases: {write_phase_plot(breakdown, directory / f'{stem}.phases.png')}")


def verdict_lines(result: Result, floor: Floor | None = None) -> list[str]:
    """``-q`` of `run` and `report`: one line per mode, ``recipe mode: verdict (max gap median X ms)``."""
    from perfsuite.report import summary_rows

    loaded = " [LOADED machine]" if getattr(result, "loaded", False) else ""  # said where shown
    return [f"{result.recipe} {row.mode}: {row.verdict} (max gap median {row.max_gap} ms){loaded}"
            for row in summary_rows(result, floor) if not row.control]


def export_summary(exports: Sequence[Path]) -> str:
    """``pyperf.json, 4 .hlog``: what `run` wrote beside a results document (``-v`` lists every path)."""
    counts: dict[str, int] = {}
    for path in exports:
        kind = "pyperf.json" if str(path).endswith(".pyperf.json") else Path(path).suffix or Path(path).name
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} {kind}" if n > 1 else kind for kind, n in counts.items())
