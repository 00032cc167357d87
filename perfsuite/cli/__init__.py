"""The one ``perfsuite`` command. Argument parsing and printing live here, never in the library.

One module per command group (``_run``, ``_fixtures``, ``_crash``, ``_report``, ``_ab``, ``_bisect``,
``_init``, ``_store``, ``_whatif``, ``_profile``, ``_session``, ``_watch``),
each with ``_cmd_<name>(args, services) -> int`` functions and a ``register(sub)`` that adds its parsers;
``services`` (:class:`CliServices`: the fixture resolver, `run`'s results writer and load probe) is what
``main(argv, services=...)`` was given, so a test injects them there instead of patching a module.
Building the parser imports no room (every start-up, ``--help`` and argument error builds it): the choices
and defaults it shows come from :mod:`perfsuite.cli._names`, and each handler imports its room when it runs.
Library code raises :class:`~perfsuite.errors.PerfsuiteError` for bad input; :func:`main` turns it into
one line on stderr and exit status 2 (house rule 4). So does any ``OSError`` (a read-only output, a
regular file where a directory is expected, ENOSPC: ``PATH: strerror``), a bad option (argparse errors
are one line too, see :class:`~perfsuite.cli._common.OneLineParser`) and, as a last resort, any other
exception (``PERFSUITE_DEBUG=1`` shows its traceback). SIGTERM is handled like SIGINT: status 143
(SIGINT: 130); ``run`` keeps what it measured and prints the ``--resume`` hint for both.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from perfsuite._text import terminal_text
from perfsuite.cli._common import CliServices, Command, OneLineParser, describe_error
from perfsuite.cli._console import configure
from perfsuite.errors import PerfsuiteError, Terminated
from perfsuite.workloads.plan import DEFAULT_RUN_RECIPES

if TYPE_CHECKING:
    from types import FrameType

__all__ = ["DEFAULT_RUN_RECIPES", "CliServices", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    from perfsuite.cli import (
        _ab,
        _bisect,
        _cache,
        _crash,
        _fixtures,
        _init,
        _profile,
        _report,
        _run,
        _session,
        _store,
        _sweep,
        _watch,
        _whatif,
    )

    parser = OneLineParser(
        prog="perfsuite",
        description="A durable session store for agent conversations, and the benchmark suite that "
        "measures it under heartbeat-gap recipes.",
    )
    parser.add_argument("--version", action=_Version)
    add_verbosity(parser, 0)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    _run.register(sub)
    _sweep.register(sub)
    _fixtures.register(sub)
    _crash.register(sub)
    _report.register(sub)
    _ab.register(sub)
    _bisect.register(sub)
    _init.register(sub)
    _cache.register(sub)
    _store.register(sub)
    _whatif.register(sub)
    _profile.register(sub)
    _session.register(sub)
    _watch.register(sub)
    for command in sub.choices.values():  # -q / -v also after the command name
        add_verbosity(command, argparse.SUPPRESS)
    return parser


class _Version(argparse.Action):
    """``--version``, as argparse's own version action prints it, but the version is looked up only when asked:
    reading it (:mod:`importlib.metadata`) is about a third of what a ``perfsuite`` start-up costs."""

    def __init__(self, option_strings: Sequence[str], dest: str) -> None:
        super().__init__(option_strings=option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0,
                         help="show program's version number and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        import perfsuite

        print(f"perfsuite {perfsuite.__version__}")
        parser.exit()


def add_verbosity(parser: argparse.ArgumentParser, default: object) -> None:
    """Global ``-q`` (verdicts and errors only) and ``-v`` (more detail): one console for every command."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-q", "--quiet", dest="verbosity", action="store_const", const=-1, default=default,
                       help="print verdicts and errors only")
    group.add_argument("-v", "--verbose", dest="verbosity", action="store_const", const=1, default=default,
                       help="print more detail (e.g. every export path)")


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated(f"signal {signum}")


@contextlib.contextmanager
def _sigterm_as_exception() -> Iterator[None]:
    """While a command runs, SIGTERM raises :class:`Terminated` in the main thread (like SIGINT)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _error(text: str) -> None:
    try:  # a message may quote a document's names: their control characters shown, never sent
        print(f"perfsuite: error: {terminal_text(text, newlines=False)}", file=sys.stderr)
    except OSError:  # stderr itself is gone: nothing more to say
        pass


def main(argv: Sequence[str] | None = None, *, services: CliServices | None = None) -> int:
    """Run one ``perfsuite`` command line and return its exit status; ``services`` replaces what the commands
    call out to (:class:`CliServices`; default: the real fixture resolver, writer and load probe)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a one-line argument error (exit 2)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    configure(getattr(args, "verbosity", 0) or 0)
    func: Command | None = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 0
    with _sigterm_as_exception():
        try:
            return func(args, services or CliServices())
        except PerfsuiteError as exc:
            _error(describe_error(exc))
            return exc.exit_status
        except Terminated:
            print("perfsuite: terminated", file=sys.stderr)
            return Terminated.exit_status
        except KeyboardInterrupt:
            print("perfsuite: interrupted", file=sys.stderr)
            return 130
        except BrokenPipeError:  # `perfsuite ... | head`: the reader left; say nothing more
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 141
        except OSError as exc:  # a read-only output, a file for a directory, ENOSPC
            _error(describe_error(exc))
            return 2
        except Exception as exc:  # house rule 4, last resort: one line, never a traceback
            if os.environ.get("PERFSUITE_DEBUG"):
                raise
            _error(f"unexpected {describe_error(exc)} (PERFSUITE_DEBUG=1 shows the traceback)")
            return 2


if __name__ == "__main__":
    raise SystemExit(main())
