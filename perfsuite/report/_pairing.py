"""The pairing file of an A/B run (``perfsuite ab``): which BASE document goes with which HEAD document.

``ab.json`` sits in the run's output directory beside ``base/`` and ``head/`` (one results document per
recipe each, same schema as ``perfsuite run``'s). It records the two revisions (name, commit, dirty,
which code each side imported), the seed of the interleaved order, the fixture digests, the recipes and
their document pairs (paths relative to the pairing file), and notes every reader must repeat (e.g. a
side that had to fall back to its own operations). ``perfsuite compare DIR`` and ``compare ab.json`` read
it; ``report``, ``evidence --baseline`` and the dashboard read the documents themselves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError
from perfsuite.harness import read_json

__all__ = ["PAIRING_FILE", "PAIRING_FORMAT", "Pairing", "find_pairing", "read_pairing"]

PAIRING_FILE = "ab.json"
PAIRING_FORMAT = "perfsuite-ab/1"


@dataclass(frozen=True, slots=True)
class Pairing:
    """A loaded pairing file: its path, the document pairs (absolute paths), notes and flags."""

    path: Path
    data: Mapping[str, Any]
    pairs: tuple[tuple[str, Path, Path], ...]  # (recipe, base document, head document)

    @property
    def notes(self) -> tuple[str, ...]:
        """Notes the A/B run made (fallbacks, fixture digests, which code came from where)."""
        return tuple(str(n) for n in self.data.get("notes", []))

    @property
    def flags(self) -> tuple[str, ...]:
        """Short statements that belong in the first line of any comparison of this pairing."""
        return tuple(str(f) for f in self.data.get("flags", []))

    def side(self, name: str) -> Mapping[str, Any]:
        """``base`` or ``head``: revision, commit, dirty, code."""
        return self.data.get(name) or {}


def find_pairing(path: Path | str) -> Path | None:
    """The pairing file at ``path`` (a pairing file, or a directory holding ``ab.json``), else ``None``."""
    path = Path(path)
    if path.is_dir():
        candidate = path / PAIRING_FILE
        return candidate if candidate.is_file() else None
    if path.is_file() and path.suffix == ".json":
        try:
            data = read_json(path)
        except PerfsuiteError:
            return None
        return path if isinstance(data, dict) and data.get("format") == PAIRING_FORMAT else None
    return None


def read_pairing(path: Path | str) -> Pairing:
    """Load a pairing file (or the ``ab.json`` of a directory); one-line errors for anything unusable."""
    path = Path(path)
    found = find_pairing(path)
    if found is None:
        raise PerfsuiteError(f"{path}: not an A/B pairing (expected {PAIRING_FILE} written by `perfsuite ab`)")
    data = read_json(found, "pairing file")
    recipes = data.get("recipes") if isinstance(data, dict) else None
    if not isinstance(recipes, Sequence) or not recipes:
        raise PerfsuiteError(f"{found}: the pairing lists no recipes")
    pairs = []
    for entry in recipes:
        try:
            pairs.append((str(entry["recipe"]), found.parent / entry["base"], found.parent / entry["head"]))
        except (KeyError, TypeError):
            raise PerfsuiteError(f"{found}: malformed recipe entry {entry!r}") from None
    return Pairing(found, data, tuple(pairs))
