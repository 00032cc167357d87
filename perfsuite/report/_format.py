"""Number formatting shared by tables, evidence and the dashboard.

Every printed figure is a rounding of a value in the results, never a new number: milliseconds keep
three decimals (two significant digits below 0.01 ms, so small values do not print as 0.000), counts
and bytes print exactly (bytes with thousands separators).

Names from a results document (recipes, modes, metrics, hosts, file names) are untrusted text: on a
terminal their control characters are shown as ``\x1b`` (an escape sequence in a mode name must not
clear the screen or retitle the window), in rich markup they are escaped, and in Markdown
(:func:`md_text`, :func:`md_code`) they cannot open a code span, a link, emphasis or a table cell.
"""

from __future__ import annotations

import re

from perfsuite._text import terminal_text

__all__ = [
    "fmt_bytes",
    "fmt_level",
    "fmt_ms",
    "fmt_number",
    "md_code",
    "md_text",
    "plural",
    "rich_text",
    "short_commit",
    "terminal_text",
]

#: what Markdown may read as syntax in running text: code, emphasis, strikes, table cells, a ``]`` that could
#: close a link's text (a ``[`` alone opens nothing), a ``<`` that could open HTML or an autolink, an ``&``
#: that could be an entity, an ``_`` that could open emphasis
_MD_SPECIAL = re.compile(r"[\\`*\]|~]|<(?=[A-Za-z/!?])|&(?=#?\w+;)|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")


def rich_text(text: str) -> str:
    """Untrusted ``text`` for a rich cell or line: controls shown (:func:`terminal_text`), markup escaped."""
    from rich.markup import escape

    return escape(terminal_text(text))


def md_text(text: str) -> str:
    """Untrusted ``text`` for running Markdown: every character Markdown could read as syntax backslash-escaped
    (an underscore only where it could open emphasis: ``ack_ms`` stays as it is), on one line."""
    flat = terminal_text(text, newlines=False)
    return _MD_SPECIAL.sub(lambda m: "\\" + m.group(), flat)


def md_code(text: str, *, table: bool = False) -> str:
    """Untrusted ``text`` as one Markdown code span: fenced by one more backtick than its longest run (a
    backtick in a name cannot close the span), on one line; ``table``: ``|`` escaped for a GFM table cell."""
    flat = terminal_text(text, newlines=False)
    if table:
        flat = flat.replace("|", "\\|")
    longest = max((len(run) for run in re.findall("`+", flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat.strip() else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def fmt_ms(value: float) -> str:
    """A duration in ms: ``63.907``; ``0.0061`` below 0.01 ms; ``0`` for zero."""
    import numpy as np

    value = float(value)
    if value == 0:
        return "0"
    if abs(value) >= 0.01:
        return f"{value:.3f}"
    return np.format_float_positional(value, precision=2, fractional=False, trim="-")


def fmt_bytes(value: float) -> str:
    """A byte count, exact, with thousands separators: ``27,795,709``."""
    return f"{round(value):,}"


def fmt_number(value: float) -> str:
    """An integer exactly, otherwise like :func:`fmt_ms`."""
    value = float(value)
    if value.is_integer():
        return f"{int(value):,}" if abs(value) >= 10_000 else str(int(value))
    return fmt_ms(value)


def fmt_level(value: float) -> str:
    """A level for tables and labels (not evidence): 4 significant digits, thousands as ``62,223``."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 file``, ``2 files``."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


def short_commit(commit: str | None) -> str:
    """The first 7 characters of a commit, or ``unknown``."""
    return commit[:7] if commit else "unknown"
