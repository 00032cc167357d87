"""`perfsuite init` (issue 28 item 7): parsing and printing only; see :mod:`perfsuite.ab._init`."""

from __future__ import annotations

import argparse
from pathlib import Path

from perfsuite.cli._common import CliServices, Subparsers, non_empty
from perfsuite.cli._console import console
from perfsuite.errors import PerfsuiteError


def _cmd_init(args: argparse.Namespace, services: CliServices) -> int:
    from perfsuite.ab import init_project, repo_root

    cwd = Path(args.dir) if args.dir else Path.cwd()
    if not cwd.is_dir():
        raise PerfsuiteError(f"{cwd}: not a directory")
    try:
        root = repo_root(cwd)
        note = None
    except PerfsuiteError:
        root = cwd
        note = f"{root} is not in a git repository: `perfsuite ab`, `bisect` and the workflow need one (git init)"
    result = init_project(root, args.package)
    out = console()
    out.verdict(f"perfsuite init: wrote {len(result.written)} files for {result.package} in {root}")
    for rel, what in result.written:
        out.line(f"  {rel}: {what}")
    if note:
        out.line(note)
    out.line("next:")
    for step in result.next_steps():
        out.line(f"  {step}")
    return 0


def register(sub: Subparsers) -> None:
    """`init`."""
    init = sub.add_parser(
        "init",
        help="write a recipe, an operation skeleton, a pytest example and the CI workflow into your repository",
        description="As `asv quickstart`: writes recipes/<package>-example.toml, perf/ops.py (an operation that "
        "imports your package: the code under test of `perfsuite ab`), tests/test_perfsuite_example.py (the "
        "perfsuite_bench fixture) and .github/workflows/perfsuite.yml (pull request: perfsuite ab against the "
        "merge base, one comment; push: the recipes run, their results appended to a results branch, a history "
        "dashboard), at the top of the git repository. Never overwrites a file: when one exists, nothing is "
        "written. Exit status: 0 written, 2 unusable input.",
    )
    init.add_argument("--package", type=non_empty, metavar="NAME",
                      help="the package to measure (default: the repository's one package, at its top or in src/)")
    init.add_argument("--dir", type=non_empty, metavar="DIR",
                      help="the repository (default: the one holding the working directory)")
    init.set_defaults(func=_cmd_init)
