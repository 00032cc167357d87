"""The committed README and documentation pages, for the tests that run what they say (house rule 8)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def page(name: str) -> str:
    """``docs/NAME`` (``README.md`` for the README) as committed."""
    path = ROOT / name if name == "README.md" else DOCS / name
    return path.read_text(encoding="utf-8")


def pages() -> dict[str, str]:
    """The README and every page under ``docs/``, by path relative to the repository."""
    found = {"README.md": page("README.md")}
    for path in sorted(DOCS.rglob("*.md")):
        found[path.relative_to(ROOT).as_posix()] = path.read_text(encoding="utf-8")
    return found


def python_blocks() -> list[str]:
    """Every ```python block of the README and the docs, each text once (the README repeats one)."""
    blocks: list[str] = []
    for text in pages().values():
        for block in re.findall(r"```python\n(.*?)```", text, re.S):
            if block not in blocks:
                blocks.append(block)
    return blocks
