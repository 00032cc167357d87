"""Number formatting shared by tables, evidence and the dashboard.

Every printed figure is a rounding of a value in the results, never a new number: milliseconds keep
three decimals (two significant digits below 0.01 ms, so small values do not print as 0.000), counts
and bytes print exactly (bytes with thousands separators).
"""

from __future__ import annotations

__all__ = ["fmt_bytes", "fmt_level", "fmt_ms", "fmt_number", "plural", "short_commit"]


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
