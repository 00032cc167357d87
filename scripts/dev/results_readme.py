"""Regenerate the by-design reference section of ``results/README.md`` from the committed baseline.

The section between ``<!-- references:begin -->`` and ``<!-- references:end -->`` is written from the
results documents (``perfsuite.report.references_markdown``): which modes are by-design references and
why, and the size each one works on when a document records it. Run it after regenerating the baseline:

    python scripts/dev/results_readme.py [RESULTS_DIR] [README]      # default: results/baseline results/README.md

Exit status 0 when written (or already current), 2 on unusable input (one line on stderr).
"""

from __future__ import annotations

import sys
from pathlib import Path

BEGIN, END = "<!-- references:begin -->", "<!-- references:end -->"


def render(readme: str, section: str) -> str:
    """``readme`` with its reference section replaced by ``section``."""
    head, sep, rest = readme.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ValueError(f"the README has no {BEGIN} ... {END} section")
    return f"{head}{BEGIN}\n{section}{END}{tail}"


def main(argv: list[str]) -> int:
    from perfsuite.errors import PerfsuiteError
    from perfsuite.report import read_results, references_markdown

    root = Path(__file__).resolve().parents[2]
    results = Path(argv[0]) if argv else root / "results" / "baseline"
    readme = Path(argv[1]) if len(argv) > 1 else root / "results" / "README.md"
    try:
        text = render(readme.read_text(encoding="utf-8"), references_markdown(read_results(results)))
    except (PerfsuiteError, OSError, ValueError) as exc:
        print(f"results_readme: {exc}", file=sys.stderr)
        return 2
    readme.write_text(text, encoding="utf-8")
    print(f"results_readme: wrote the reference section of {readme} from {results}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
