"""`perfsuite init`: parsing and printing only; see :mod:`perfsuite.ab._init`."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from perfsuite.cli._common import CliServices, Subparsers, non_empty
from perfsuite.cli._console import console
from perfsuite.errors import PerfsuiteError


def _cmd_init(args: argparse.Namespace, services: CliServices) -> int:
    from perfsuite.ab import init_project

    cwd = Path(args.dir) if args.dir else Path.cwd()
    if not cwd.is_dir():
        raise PerfsuiteError(f"{cwd}: not a directory")
    result = init_project(cwd, args.package, install_from=args.install_from)
    out = console()
    out.verdict(f"perfsuite init: wrote {len(result.written)} files for {result.package} in {result.root}")
    for rel, what in result.written:
        out.line(f"  {rel}: {what}")
    done = f"ignored ({result.gitignore})" if result.gitignore else "ignored already"
    out.line(f"  .gitignore: results/local/ {done}")
    origin = "--install-from" if args.install_from is not None else "as this perfsuite was installed"
    out.line(f"the workflow installs perfsuite with: pip install {shlex.quote(result.install)} ({origin})")
    for note in result.notes:  # said even with -q: the workflow fails without it
        out.verdict(f"perfsuite init: note: {note}")
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
        "dashboard), at the top of the git repository, and adds results/local/ to its .gitignore. The workflow "
        "installs perfsuite as this one was installed: the commit of its git URL, its archive's URL, or its "
        "version from an index; an editable or local-directory install, which no CI runner can reach, is "
        "refused unless --install-from names what to install. Never overwrites a file: when one exists, or "
        "outside a git repository, nothing is written. Exit status: 0 written, 2 unusable input.",
    )
    init.add_argument("--package", type=non_empty, metavar="NAME",
                      help="the package to measure (default: the repository's one package, at its top or in src/)")
    init.add_argument("--dir", type=non_empty, metavar="DIR",
                      help="the repository (default: the one holding the working directory)")
    init.add_argument("--install-from", type=non_empty, metavar="SPEC",
                      help="what the workflow's pip installs perfsuite from: any pip requirement or URL, e.g. "
                      "'perfsuite[report] @ git+https://github.com/OWNER/perfsuite@COMMIT' (default: as this "
                      "perfsuite was installed)")
    init.set_defaults(func=_cmd_init)
