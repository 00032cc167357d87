"""`perfsuite session repair PATH [--generation N]`: the explicit repair open refuses to guess."""

from __future__ import annotations

import argparse

from perfsuite.cli._common import CliServices, Subparsers, non_empty
from perfsuite.cli._console import console
from perfsuite.errors import PerfsuiteError


def _cmd_session(args: argparse.Namespace, services: CliServices) -> int:
    """Repair a portable or file-backed session; print what was found and done. Exit 0 when the session
    opens afterwards (or needed nothing), 2 when it cannot be repaired (one line on stderr)."""
    from perfsuite.engine import SessionError, TranscriptError, repair_session

    try:
        report = repair_session(args.path, generation=args.generation)
    except (SessionError, TranscriptError) as exc:
        raise PerfsuiteError(str(exc)) from None
    except OSError as exc:  # the directory itself is unreadable or unwritable
        raise PerfsuiteError(f"{exc.filename or args.path}: {exc.strerror or exc}") from None
    out = console()
    for line in report.lines:
        out.line(line)
    out.verdict(f"{report.path}: {report.profile} session {'repaired' if report.changed else 'left as it was'}")
    return 0


def register(sub: Subparsers) -> None:
    session = sub.add_parser("session", help="maintain an engine session (repair what open refuses)",
                             description="Exit status: 0 repaired or nothing to repair, 2 cannot be repaired.")
    actions = session.add_subparsers(dest="action", metavar="ACTION", required=True)
    repair = actions.add_parser(
        "repair", help="repair a session that open refuses: move damaged files under recovery/, point HEAD at "
        "the newest intact generation proven adopted (portable) or rebuild the sidecar's marker (file-backed)")
    repair.add_argument("path", metavar="PATH", help="the session directory")
    repair.add_argument("--generation", metavar="N", type=non_empty,
                        help="portable: adopt this generation instead: a generation number of the session, or the "
                        "name of one of its manifests (objects/manifest-...json); anything else is refused")
    repair.set_defaults(func=_cmd_session)
