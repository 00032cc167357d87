"""The one ``perfsuite`` command. Argument parsing and printing live here, never in the library.

Each subcommand is a ``_cmd_<name>(args) -> int`` function registered in :func:`build_parser`.
Library code raises :class:`~perfsuite.errors.PerfsuiteError` for bad input; :func:`main` turns it into
one line on stderr and exit status 2 (house rule 5).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from perfsuite import __version__
from perfsuite.errors import PerfsuiteError

Command = Callable[[argparse.Namespace], int]


def _cmd_demo(args: argparse.Namespace) -> int:
    from perfsuite.engine import demo

    demo.main(args.directory)
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
