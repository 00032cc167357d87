"""Untrusted text on a terminal: control characters shown, never sent (the floor, beside ``_limits``).

A results document, a session or an error message about one can carry names with escape sequences in them
(``\x1b[2J`` clears the screen, ``\x1b]0;...\x07`` retitles the window, a lone ``\x9b`` is a CSI on some
terminals). Every line the console prints and every name the report puts in a table goes through
:func:`terminal_text`, which shows each C0 control but tab and newline, DEL and each C1 control as ``\\xNN``.
"""

from __future__ import annotations

import re

__all__ = ["terminal_text"]

#: C0 controls but tab and newline, DEL, and the C1 controls
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_text(text: str, *, newlines: bool = True) -> str:
    """``text`` with its control characters shown as ``\\xNN`` (``newlines=False``: a newline too)."""
    shown = _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))
    return shown if newlines else shown.replace("\n", "\\x0a")
