"""``perfsuite profile --diff A B``: which Python functions gained instructions between two callgrind profiles.

Both records come from ``perfsuite profile RECIPE --profiler callgrind`` (typically the same recipe on
two revisions). Functions are matched by ``file:qualified name`` (no line number, so a function that
moved still matches); the change is in *self* instructions (the function's own code and the C it
called), so a cost planted in one function shows up on that function and not on its callers. Counts are
deterministic, so any change is a change of the code path (thread interleaving moves the event loop's
own functions by a few thousand instructions: the summary shows the totals beside the functions).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError
from perfsuite.harness import read_json
from perfsuite.profile._flame import read_folded, write_flame_graph

__all__ = ["FunctionChange", "ModeDiff", "ProfileDiff", "diff_profiles", "load_callgrind_profile"]

LOOP = "1"


@dataclass(frozen=True, slots=True)
class FunctionChange:
    """One function's self instructions in both profiles (all threads, and on the loop thread)."""

    function: str
    base: int
    new: int
    base_loop: int
    new_loop: int

    @property
    def delta(self) -> int:
        """New minus base (positive: the function gained instructions)."""
        return self.new - self.base


@dataclass(frozen=True, slots=True)
class ModeDiff:
    """One mode: totals of both profiles and every function's change, biggest gain first."""

    mode: str
    base_total: int
    new_total: int
    base_loop: int
    new_loop: int
    changes: tuple[FunctionChange, ...]

    @property
    def gained(self) -> tuple[FunctionChange, ...]:
        """Functions with more instructions, biggest gain first."""
        return tuple(c for c in self.changes if c.delta > 0)

    @property
    def lost(self) -> tuple[FunctionChange, ...]:
        """Functions with fewer instructions, biggest loss first."""
        return tuple(sorted((c for c in self.changes if c.delta < 0), key=lambda c: c.delta))


@dataclass(frozen=True, slots=True)
class ProfileDiff:
    """The comparison of two callgrind profile records."""

    base: Path
    new: Path
    recipe: str
    modes: tuple[ModeDiff, ...]
    graphs: tuple[Path, ...] = ()

    def text(self, top: int = 15) -> str:
        """Per mode: totals, then the functions that gained and lost the most self instructions."""
        lines = [f"callgrind profile diff: {self.base} -> {self.new} ({self.recipe})"]
        for m in self.modes:
            lines += ["", f"{m.mode}: {m.base_total:,} -> {m.new_total:,} instructions "
                      f"({_pct(m.base_total, m.new_total)}); loop thread {m.base_loop:,} -> {m.new_loop:,} "
                      f"({_pct(m.base_loop, m.new_loop)})"]
            for label, rows in (("gained", m.gained), ("lost", m.lost)):
                if not rows:
                    continue
                lines.append(f"  {label} (self instructions: base -> new, change, share of the base total):")
                for c in rows[:top]:
                    share = c.delta / m.base_total if m.base_total else 0.0
                    loop = f", loop thread {c.new_loop - c.base_loop:+,}" if c.new_loop != c.base_loop else ""
                    lines.append(f"  {c.delta:>+12,} {share:>+7.2%}  {c.function}  ({c.base:,} -> {c.new:,}{loop})")
        if self.graphs:
            lines += ["", *(f"flame graph: {p}" for p in self.graphs)]
        return "\n".join(lines) + "\n"


def _pct(base: int, new: int) -> str:
    return f"{(new - base) / base:+.2%}" if base else "n/a"


def load_callgrind_profile(path: Path | str) -> dict[str, Any]:
    """A ``*.callgrind.profile.json`` record; one-line :class:`PerfsuiteError` for anything else."""
    path = Path(path)
    data = read_json(path, "profile record")  # strictly: UTF-8, no NaN, no deep nesting
    if not isinstance(data, dict) or data.get("kind") != "perfsuite-profile" or data.get("profiler") != "callgrind":
        raise PerfsuiteError(f"{path}: not a callgrind profile record (perfsuite profile --profiler callgrind)")
    return data


def _self(function: Mapping[str, Any]) -> tuple[int, int]:
    return int(function.get("self_total", 0)), int((function.get("self") or {}).get(LOOP, 0))


def _mode_diff(mode: str, base: Mapping[str, Any], new: Mapping[str, Any]) -> ModeDiff:
    b = {f["function"]: _self(f) for f in base.get("functions", [])}
    n = {f["function"]: _self(f) for f in new.get("functions", [])}
    zero = (0, 0)
    changes = [FunctionChange(k, b.get(k, zero)[0], n.get(k, zero)[0], b.get(k, zero)[1], n.get(k, zero)[1])
               for k in sorted(set(b) | set(n))]
    changes.sort(key=lambda c: (-c.delta, c.function))
    return ModeDiff(mode, int(base.get("total", 0)), int(new.get("total", 0)), int(base.get("loop_thread", 0)),
                    int(new.get("loop_thread", 0)), tuple(changes))


def _folded(record: Path, body: Mapping[str, Any]) -> dict[tuple[str, ...], int] | None:
    text = (body.get("artifacts") or {}).get("folded")
    if not text:
        return None
    for candidate in (Path(text), record.parent / Path(text).name):
        if candidate.is_file():
            return read_folded(candidate)
    return None


def diff_profiles(base: Path | str, new: Path | str, *, modes: Sequence[str] | None = None,
                  output_prefix: Path | None = None) -> ProfileDiff:
    """Compare two callgrind profile records (the modes both have, or ``modes``); with ``output_prefix``,
    also write ``<prefix>.<mode>.diff.svg``: the new profile's flame graph coloured by change."""
    base, new = Path(base), Path(new)
    a, b = load_callgrind_profile(base), load_callgrind_profile(new)
    recipe_a, recipe_b = a["recipe"]["name"], b["recipe"]["name"]
    if recipe_a != recipe_b:
        raise PerfsuiteError(f"{base} profiles {recipe_a!r}, {new} profiles {recipe_b!r}: compare the same recipe")
    common = [m for m in a["modes"] if m in b["modes"]]
    chosen = list(modes) if modes else common
    for mode in chosen:
        if mode not in common:
            raise PerfsuiteError(f"mode {mode!r} is not in both profiles (common: {', '.join(common) or 'none'})")
    if not chosen:
        raise PerfsuiteError(f"{base} and {new} have no mode in common")
    diffs = tuple(_mode_diff(m, a["modes"][m], b["modes"][m]) for m in chosen)
    graphs: list[Path] = []
    if output_prefix is not None:
        Path(output_prefix).parent.mkdir(parents=True, exist_ok=True)
        for mode in chosen:
            fa, fb = _folded(base, a["modes"][mode]), _folded(new, b["modes"][mode])
            if fa is None or fb is None:
                continue
            title = f"{recipe_a}/{mode}: {new.name} against {base.name} (red: more instructions, blue: fewer)"
            graphs.append(write_flame_graph(Path(f"{output_prefix}.{mode}.diff.svg"), fb, title=title, base=fa))
    return ProfileDiff(base, new, recipe_a, diffs, tuple(graphs))
