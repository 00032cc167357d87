"""``python -m perfsuite.watch [options] PROGRAM ARGS``: ``perfsuite watch`` (a front door to the CLI, M11)."""

import sys

from perfsuite.cli import main

raise SystemExit(main(["watch", *sys.argv[1:]]))
