"""The one ``perfsuite`` command. Argument parsing and printing live here, never in the library.

One module per command group (``_run``, ``_fixtures``, ``_crash``, ``_report``, ``_ab``, ``_whatif``, ``_profile``),
each with ``_cmd_<name>(args) -> int`` functions and a ``register(sub)`` that adds its parsers.
Library code raises :class:`~perfsuite.errors.PerfsuiteError` for bad input; :func:`main` turns it into
one line on stderr and exit status 2 (house rule 5).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from perfsuite import __version__
from perfsuite.cli._common import Command, FixtureResolver, default_resolve_fixture
from perfsuite.cli._run import DEFAULT_RUN_RECIPES
from perfsuite.errors import PerfsuiteError

__all__ = ["DEFAULT_RUN_RECIPES", "build_parser", "main", "resolve_fixture_hook"]

#: injectable hook for `run` and `profile` (tests and the fixture builders replace it)
resolve_fixture_hook: FixtureResolver = default_resolve_fixture


def build_parser() -> argparse.ArgumentParser:
    from perfsuite.cli import _ab, _crash, _fixtures, _profile, _report, _run, _whatif

    parser = argparse.ArgumentParser(
        prog="perfsuite",
        description="A durable session store for agent conversations, and the benchmark suite that "
        "measures it under heartbeat-gap recipes.",
    )
    parser.add_argument("--version", action="version", version=f"perfsuite {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    _run.register(sub)
    _fixtures.register(sub)
    _crash.register(sub)
    _report.register(sub)
    _ab.register(sub)
    _whatif.register(sub)
    _profile.register(sub)
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
