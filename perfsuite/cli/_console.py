"""The one console of every command: width, colour, verbosity and tables that fit.

* **Width**: ``$COLUMNS`` when set, else the terminal's width, else :data:`DEFAULT_WIDTH` (100) when
  stdout is not a terminal (CI logs, pipes).
* **Colour**: only on a terminal, never with ``$NO_COLOR`` set (rich's rule, https://no-color.org).
* **Tables never wrap a cell and never cut a number.** Every column is ``no_wrap``. When a table is wider
  than the console, its columns are first set two spaces apart instead of three; then name columns
  (``mode``, ``recipe``, ``metric``, ``bar``, ...) are shortened, the widest first and all the same way:
  the start and the end of the name around ``~`` (``mailbox-delivery`` in 12 columns is ``mailbox-~ery``),
  never into two equal names, and a legend after the table gives each shortened name in full. If the
  table is still too wide, it is printed wider than the console rather than cut.
* **No trailing padding**: every printed line is stripped on the right.
* **Verbosity**: ``-q`` prints verdicts and errors only; ``-v`` adds detail (e.g. every export path).

Commands get the console with :func:`console` (configured by :func:`configure` from the global options).
"""

from __future__ import annotations

import io
import os
import re
import shutil
import sys
import textwrap
from typing import IO, TYPE_CHECKING, TypeGuard

from perfsuite._text import terminal_text

if TYPE_CHECKING:
    from rich.console import Console as RichConsole
    from rich.console import RenderableType
    from rich.table import Table

__all__ = ["DEFAULT_WIDTH", "NAME_COLUMNS", "Console", "abbreviate", "configure", "console", "console_width"]

#: the width when stdout is not a terminal and ``$COLUMNS`` is not set
DEFAULT_WIDTH = 100
#: columns whose cells are names, shortened (never wrapped) when a table does not fit
NAME_COLUMNS = frozenset({"mode", "recipe", "metric", "bar", "name", "fixture", "workload", "setting"})
#: the mark of a shortened name (ASCII: CI logs and Markdown stay plain)
MARK = "~"

_TRAILING = re.compile(r"[ \t]+((?:\x1b\[[0-9;]*m)*)$")


def console_width(stream: IO[str] | None = None) -> int:
    """``$COLUMNS``, else the terminal's width, else :data:`DEFAULT_WIDTH` when ``stream`` is not a terminal."""
    value = os.environ.get("COLUMNS", "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    stream = stream or sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty:
        return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    return DEFAULT_WIDTH


def abbreviate(name: str, width: int) -> str:
    """``name`` in at most ``width`` characters: its start and end around :data:`MARK` (unchanged if it fits)."""
    if len(name) <= width:
        return name
    if width < 3:
        return name[:width]
    tail = (width - 1) // 3
    head = width - 1 - tail
    return f"{name[:head]}{MARK}{name[len(name) - tail:]}" if tail else f"{name[:head]}{MARK}"


def _strip(text: str) -> str:
    return "\n".join(_TRAILING.sub(r"\1", line) for line in text.split("\n"))


class Console:
    """Prints for one command invocation; see the module docstring."""

    def __init__(self, verbosity: int = 0, file: IO[str] | None = None, width: int | None = None) -> None:
        self.verbosity = verbosity
        self.file = file
        self.width = width or console_width(file)

    @property
    def quiet(self) -> bool:
        """``-q``: verdicts and errors only."""
        return self.verbosity < 0

    @property
    def verbose(self) -> bool:
        """``-v``: more detail."""
        return self.verbosity > 0

    def _out(self) -> IO[str]:
        return self.file or sys.stdout

    def _rich(self, width: int, file: IO[str]) -> RichConsole:
        from rich.console import Console as RichConsole

        target = self._out()
        try:
            color = target.isatty()
        except (AttributeError, ValueError):
            color = False
        return RichConsole(file=file, width=width, highlight=False, soft_wrap=False,
                           force_terminal=color or None, no_color=not color or None, emoji=False)

    def line(self, text: str = "") -> None:
        """An ordinary line (hidden by ``-q``); its control characters shown, never sent (``_text``)."""
        if not self.quiet:
            self._write(terminal_text(text))

    def verdict(self, text: str) -> None:
        """A verdict line: printed even with ``-q``."""
        self._write(terminal_text(text))

    def detail(self, text: str) -> None:
        """A detail line: printed only with ``-v``."""
        if self.verbose:
            self._write(terminal_text(text))

    def _write(self, text: str) -> None:
        out = self._out()
        out.write(_strip(text) + "\n")
        out.flush()

    def table(self, table: Table, *, quiet_ok: bool = False) -> None:
        """Print a rich ``Table`` fitted to the width (see the module docstring); hidden by ``-q`` unless
        ``quiet_ok`` (a table that is itself the verdict)."""
        if self.quiet and not quiet_ok:
            return
        _shown_controls(table)  # names from documents: an escape sequence is shown, never sent
        title, caption = table.title, table.caption  # plain lines: never wrapped at the table's width
        table.title = table.caption = None
        wide = self._rich(10_000, io.StringIO())  # measures the natural width (a narrower console clamps it)
        legend = fit(table, self.width, wide)
        natural = _measure(table, wide)
        buffer = io.StringIO()
        if title:  # plain text, as the caption: a title's markup would come from a document's names
            self._rich(10_000, buffer).print(title if not isinstance(title, str) else _plain_text(title))
        self._rich(max(self.width, natural), buffer).print(table)
        if caption:  # each line folded at the console's width, never cut
            caption = caption.plain if hasattr(caption, "plain") else str(caption)
            buffer.write("\n".join(textwrap.fill(line, width=self.width, subsequent_indent="  ",
                                                  break_on_hyphens=False, break_long_words=False)
                                    for line in caption.splitlines()) + "\n")
        table.title, table.caption = title, caption
        self._write(buffer.getvalue().rstrip("\n"))
        if legend:
            text = "shortened: " + "; ".join(f"{short} = {full}" for short, full in legend)
            self._write(textwrap.fill(text, width=self.width, subsequent_indent="  ", break_on_hyphens=False))
        self._write("")  # a blank line between one table and what follows

    def render(self, renderable: RenderableType) -> None:
        """Print any rich renderable at the console's width, without trailing padding (hidden by ``-q``)."""
        if self.quiet:
            return
        buffer = io.StringIO()
        self._rich(self.width, buffer).print(renderable)
        self._write(buffer.getvalue().rstrip("\n"))

    def print(self, renderable: RenderableType = "", *, markup: bool = True, verdict: bool = False,
              **_: object) -> None:
        """rich's ``Console.print`` for command modules written against it: a table is fitted, text is a
        plain line (its markup rendered away unless ``markup=False``); ``verdict=True`` survives ``-q``."""
        if isinstance(renderable, str):
            if markup:
                from rich.text import Text

                renderable = Text.from_markup(renderable).plain
            (self.verdict if verdict else self.line)(renderable)
        elif _is_table(renderable):
            self.table(renderable, quiet_ok=verdict)
        else:
            self.render(renderable)

    def rich(self, stderr: bool = False) -> RichConsole:
        """A rich console for live displays (progress bars): on stderr by default, as wide as this one."""
        return self._rich(self.width, sys.stderr if stderr else self._out())


def _plain_text(text: str) -> RenderableType:
    from rich.text import Text

    return Text(text)


def _shown_controls(table: Table) -> None:
    """Every string of ``table`` (title, caption, headers, cells) with its control characters shown."""
    if isinstance(table.title, str):
        table.title = terminal_text(table.title)
    if isinstance(table.caption, str):
        table.caption = terminal_text(table.caption)
    for column in table.columns:
        if isinstance(column.header, str):
            column.header = terminal_text(column.header)
        column._cells[:] = [terminal_text(c) if isinstance(c, str) else c for c in column._cells]


def _is_table(renderable: RenderableType) -> TypeGuard[Table]:
    from rich.table import Table

    return isinstance(renderable, Table)


def _measure(table: Table, rich: RichConsole) -> int:
    from rich.measure import Measurement

    return Measurement.get(rich, rich.options, table).maximum


def _plain(cell: RenderableType) -> str | None:
    if isinstance(cell, str):
        from rich.text import Text

        return Text.from_markup(cell).plain
    return getattr(cell, "plain", None)


def fit(table: Table, width: int, rich: RichConsole) -> list[tuple[str, str]]:
    """Make ``table`` fit ``width`` without wrapping: every column ``no_wrap``, name columns shortened with
    :func:`abbreviate` as far as needed, the widest first, one character at a time (never below 8
    characters or the header), and never into two equal names. ``rich`` is a console wide enough to
    measure the table's natural width. Returns the legend: (shortened, full), sorted."""
    from rich.text import Text

    table.show_edge = False  # no blank edge column: two more columns for the data
    table.pad_edge = False
    for column in table.columns:
        column.no_wrap = True
    excess = _measure(table, rich) - width
    if excess > 0:  # first, two spaces between columns instead of three
        table.collapse_padding = True
        excess = _measure(table, rich) - width
    names = [c for c in table.columns if str(c.header).strip().lower() in NAME_COLUMNS]
    if excess <= 0 or not names:
        return []
    plains = {id(c): [_plain(x) for x in c._cells] for c in names}  # rich keeps a column's cells in _cells
    natural = {id(c): max((len(p or "") for p in plains[id(c)]), default=0) for c in names}
    floor = {id(c): max(8, len(str(c.header))) for c in names}
    target = dict(natural)
    distinct = {id(c): {p for p in plains[id(c)] if p is not None} for c in names}
    while excess > 0:
        shrinkable = [c for c in names if target[id(c)] > floor[id(c)]]
        if not shrinkable:
            break
        widest = max(shrinkable, key=lambda c: target[id(c)])
        key = id(widest)
        if len({abbreviate(v, target[key] - 1) for v in distinct[key]}) < len(distinct[key]):
            floor[key] = target[key]  # one character less and two names would read the same
            continue
        target[key] -= 1
        excess -= 1
    legend: dict[str, str] = {}
    for column in names:
        key = id(column)
        if target[key] >= natural[key]:
            continue
        cells = []
        for cell, plain in zip(column._cells, plains[key]):
            if plain is None or len(plain) <= target[key]:
                cells.append(cell)
                continue
            short = abbreviate(plain, target[key])
            legend[short] = plain
            text = Text.from_markup(cell) if isinstance(cell, str) else cell if isinstance(cell, Text) else Text(plain)
            style = text.spans[0].style if text.spans else text.style
            cells.append(Text(short, style=style or ""))
        column._cells[:] = cells
    return sorted(legend.items())


_current: Console | None = None


def configure(verbosity: int = 0) -> Console:
    """Set the console of this invocation (``perfsuite.cli.main`` calls it with ``-q``/``-v``)."""
    global _current
    _current = Console(verbosity)
    return _current


def console() -> Console:
    """The console of this invocation (a default one when :func:`configure` was not called)."""
    return _current or Console()

