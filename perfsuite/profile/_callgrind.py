"""``perfsuite profile RECIPE --profiler callgrind``: where a mode's instructions go, by Python function.

Each mode runs once exactly as the instruction pass does (fresh worker under callgrind, the window
from submission to acknowledgement, hash seed and paths pinned; :func:`perfsuite.harness.measure_instructions`)
with two additions: the trampolines of :mod:`perfsuite.profile._trampolines` are installed just before
the window, and callgrind skips every C function and keeps Python call stacks as contexts
(``--separate-callers``). Why this attribution: it is callgrind's own count (deterministic, so two
revisions' profiles can be subtracted function by function), charged to the innermost *Python* function
with the C it called (a planted loop, a slower ``json.dumps`` call, an extra hash all land in the
function that does them), with whole Python stacks for the flame graph. A sampling profiler under
valgrind would only add noise to a count; C-level ``callgrind_annotate`` names ``_PyEval_EvalFrameDefault``
for every Python function; a cProfile under valgrind counts calls, not instructions, and its own
hooks would dominate the count.

Artifacts per mode (``<recipe>-<stamp>.<mode>.callgrind...``): ``.txt`` (top functions by self
instructions, per thread), ``.folded`` (folded stacks, thread at the root), ``.svg`` (flame graph) and
``.out-NN`` (callgrind's files, one per thread, with Python names, for ``callgrind_annotate`` or
KCachegrind); plus ``<recipe>-<stamp>.callgrind.profile.json``, the record ``--diff`` reads.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import perfsuite
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import Recipe, SampleSpec, find_valgrind, measure_instructions
from perfsuite.profile._flame import folded_lines, write_flame_graph
from perfsuite.profile._process import artifact_prefix
from perfsuite.profile._trampolines import OTHER, PREFIX, skip_options, trampoline_library

__all__ = [
    "LOOP_THREAD",
    "OUTSIDE",
    "SEPARATE_CALLERS",
    "TOP",
    "FunctionCost",
    "ThreadCounts",
    "callgrind_summary",
    "function_table",
    "parse_callgrind",
    "profile_callgrind",
]

#: valgrind's id of the worker's main thread, the event loop's
LOOP_THREAD = 1
#: Python stack depth kept per context (deeper stacks lose their outermost frames)
SEPARATE_CALLERS = 60
#: functions listed in the text summary
TOP = 25

_NAME = re.compile(r"^\((\d+)\)(?: (.*))?$")


@dataclass(frozen=True, slots=True)
class ThreadCounts:
    """One thread's window: its total and the self cost of each context (a call stack, root first)."""

    thread: int
    total: int
    stacks: Mapping[tuple[str, ...], int]
    calls: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class FunctionCost:
    """A Python function's instructions in the window: self (its code and the C it called) and inclusive,
    per thread id (as strings, JSON keys), and how often it was called."""

    function: str
    file: str
    line: int
    self: Mapping[str, int]
    inclusive: Mapping[str, int]
    calls: int

    @property
    def self_total(self) -> int:
        """Self instructions over all threads."""
        return sum(self.self.values())

    @property
    def inclusive_total(self) -> int:
        """Inclusive instructions over all threads."""
        return sum(self.inclusive.values())

    def to_dict(self) -> dict[str, Any]:
        """The record's ``functions[]`` entry."""
        return {"function": self.function, "file": self.file, "line": self.line, "self": dict(self.self),
                "inclusive": dict(self.inclusive), "self_total": self.self_total,
                "inclusive_total": self.inclusive_total, "calls": self.calls}


def _elements(name: str) -> list[str]:
    """A context name ``leaf'caller'caller2`` without callgrind's recursion marks (``f'2``)."""
    return [part for part in name.split("'") if part and not part.isdigit()]


#: where the cost of code in frames entered before the window goes (the loop and the measuring coroutine)
OUTSIDE = "[frames entered before the window]"


def _stack(name: str) -> tuple[str, ...]:
    """Root-first Python stack of a context. Cost outside any Python frame entered in the window (a C
    function with no trampoline above it) goes to :data:`OUTSIDE`; C callers below the window are dropped."""
    parts = _elements(name)
    if not parts:
        return ()
    leaf, callers = parts[0], parts[1:]
    frames = [p for p in reversed(callers) if p.startswith(PREFIX)]
    frames.append(leaf if leaf.startswith(PREFIX) else OUTSIDE)
    return tuple(frames)


def parse_callgrind(path: Path) -> ThreadCounts:
    """Read one callgrind output file: thread id, ``totals``, self cost per context, calls per callee."""
    names: dict[str, str] = {}
    stacks: Counter[tuple[str, ...]] = Counter()
    calls: Counter[str] = Counter()
    thread, total = LOOP_THREAD, 0
    current: tuple[str, ...] | None = None
    callee: str | None = None
    skip_next = False

    def resolve(text: str) -> str:
        match = _NAME.match(text.strip())
        if not match:
            return text.strip()
        if match.group(2) is not None:
            names[match.group(1)] = match.group(2)
        return names.get(match.group(1), f"({match.group(1)})")

    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            head = line[:1]
            if head.isdigit() or head in "+-*":
                if skip_next:  # the inclusive cost of a call, not self cost
                    skip_next = False
                elif current is not None:
                    stacks[current] += int(line.split()[-1])
            elif line.startswith("fn="):
                current = _stack(resolve(line[3:]))
            elif line.startswith("cfn="):
                callee = _elements(resolve(line[4:]))[0] if line[4:].strip() else None
            elif line.startswith("calls="):
                skip_next = True
                if callee is not None:
                    calls[callee] += int(line[6:].split()[0])
            elif line.startswith("thread:"):
                thread = int(line.split()[1])
            elif line.startswith("totals:"):
                total = int(line.split()[1])
    return ThreadCounts(thread, total, dict(stacks), dict(calls))


def _names(code_map: Mapping[str, Any]) -> dict[str, tuple[str, str, int]]:
    """``Q_n`` -> (function key ``file:qualname``, file, first line); the key has no line number, so the
    same function matches across revisions that moved it."""
    out = {OTHER: ("(other Python functions)", "", 0)}
    for i, entry in enumerate(code_map.get("codes", [])):
        out[f"{PREFIX}{i}"] = (f"{entry['file']}:{entry['name']}", str(entry["file"]), int(entry["line"]))
    return out


def named_stacks(counts: ThreadCounts, names: Mapping[str, tuple[str, str, int]]) -> dict[tuple[str, ...], int]:
    """The thread's stacks with Python names, rooted at ``thread N`` (``thread 1 (loop)``)."""
    root = f"thread {counts.thread}" + (" (loop)" if counts.thread == LOOP_THREAD else "")
    out: dict[tuple[str, ...], int] = {}
    for stack, value in counts.stacks.items():
        key = (root, *(names.get(f, (f, "", 0))[0] for f in stack))
        out[key] = out.get(key, 0) + value
    return out


def function_table(threads: Sequence[ThreadCounts], names: Mapping[str, tuple[str, str, int]]) -> list[FunctionCost]:
    """Self and inclusive instructions per Python function (inclusive counts a recursive function once
    per stack), biggest self cost first."""
    self_cost: dict[str, Counter[str]] = {}
    inclusive: dict[str, Counter[str]] = {}
    calls: Counter[str] = Counter()
    where: dict[str, tuple[str, int]] = {}
    for counts in threads:
        tid = str(counts.thread)
        for stack, value in counts.stacks.items():
            named = [names.get(f, (f, "", 0)) for f in stack]
            for key, file, line in named:
                where.setdefault(key, (file, line))
            if named:
                self_cost.setdefault(named[-1][0], Counter())[tid] += value
            for key in {n[0] for n in named}:
                inclusive.setdefault(key, Counter())[tid] += value
        for callee, n in counts.calls.items():
            calls[names.get(callee, (callee, "", 0))[0]] += n
    table = [
        FunctionCost(key, where[key][0], where[key][1], dict(self_cost.get(key, {})), dict(inclusive[key]), calls[key])
        for key in inclusive
    ]
    return sorted(table, key=lambda f: (-f.self_total, f.function))


def callgrind_summary(title: str, threads: Sequence[ThreadCounts], table: Sequence[FunctionCost],
                      top: int = TOP) -> str:
    """The text summary: totals per thread, then the top functions by self instructions."""
    total = sum(t.total for t in threads)
    lines = [title, ""]
    for t in sorted(threads, key=lambda t: t.thread):
        role = "the event loop's" if t.thread == LOOP_THREAD else "offloaded work"
        lines.append(f"  thread {t.thread} ({role}): {t.total:,} instructions")
    lines += [f"  all threads: {total:,} instructions", "",
              f"top {min(top, len(table))} Python functions by self instructions (their own code and the C it "
              "called):",
              f"{'self':>12} {'%':>6} {'loop thread':>12} {'inclusive':>12} {'calls':>7}  function"]
    for f in table[:top]:
        share = f.self_total / total if total else 0.0
        loop = f.self.get(str(LOOP_THREAD), 0)
        lines.append(f"{f.self_total:>12,} {share:>6.1%} {loop:>12,} {f.inclusive_total:>12,} {f.calls:>7}  "
                     f"{f.function}" + (f" (line {f.line})" if f.line else ""))
    return "\n".join(lines) + "\n"


def _rewrite(source: Path, target: Path, names: Mapping[str, tuple[str, str, int]]) -> None:
    """Copy a callgrind file with trampoline names replaced by Python names (for callgrind_annotate)."""

    def rename(match: re.Match[str]) -> str:
        key, file, line = names.get(match.group(0), (match.group(0), "", 0))
        return f"{file}:{line} {key.rpartition(':')[2]}" if file else key

    pattern = re.compile(re.escape(PREFIX) + r"(?:\d+|other)")
    with open(source, encoding="utf-8", errors="replace") as src, open(target, "w", encoding="utf-8") as out:
        for line in src:
            if line.startswith(("fn=(", "cfn=(")) and PREFIX in line:
                line = pattern.sub(rename, line)
            out.write(line)


def _profile_mode(recipe: Recipe, mode: str, prefix: Path, scratch: Path, work_root: Path, fixture: Path | None,
                  valgrind: Any, library: Path) -> dict[str, Any]:
    m = recipe.mode(mode)
    spec = SampleSpec(recipe=recipe.name, mode=mode, index=0, kind="instructions", operation=m.operation,
                      params=dict(m.params), fixture=str(fixture) if fixture else None, work_root=None,
                      heartbeat_ms=recipe.heartbeat_ms, gc=recipe.gc, tail_ms=recipe.window_tail_ms,
                      ack_timeout_s=recipe.ack_timeout_s, settle_ms=recipe.settle_ms,
                      sync_after_copy=recipe.sync_after_copy)
    out = scratch / f"callgrind-{mode}"
    code_map = scratch / f"codes-{mode}.json"
    hooks = {"factory": "perfsuite.profile._trampolines:window_hooks",
             "params": {"library": str(library), "map": str(code_map)}}
    extra = [*skip_options(), f"--separate-callers={SEPARATE_CALLERS}"]
    # the instruction pass's fixed work directory (under the work root, not the scratch dir): the same
    # hashed paths in every profile, so two revisions' profiles differ only by their code
    record = measure_instructions(spec, valgrind, base_dir=work_root, out_dir=out, hooks=hooks, extra_args=extra)
    try:
        names = _names(json.loads(code_map.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        raise PerfsuiteError(f"{recipe.name}/{mode}: the profiled worker wrote no function map") from None
    parsed = [(p, parse_callgrind(p)) for p in sorted(out.iterdir()) if re.fullmatch(r"callgrind\.out(-\d+)?", p.name)]
    files = [p for p, t in parsed if t.total]  # threads that ran in the window
    threads = [t for _p, t in parsed if t.total]
    if not threads:
        raise PerfsuiteError(f"{recipe.name}/{mode}: callgrind counted no instructions in the window")
    table = function_table(threads, names)
    base = Path(f"{prefix}.{mode}.callgrind")
    artifacts: dict[str, Path] = {}
    stacks: dict[tuple[str, ...], int] = {}
    for t in threads:
        stacks.update(named_stacks(t, names))
    artifacts["folded"] = Path(f"{base}.folded")
    artifacts["folded"].write_text("\n".join(folded_lines(stacks)) + "\n", encoding="utf-8")
    total = sum(t.total for t in threads)
    title = f"callgrind profile of {recipe.name}/{mode}: instructions from submission to acknowledgement"
    artifacts["svg"] = write_flame_graph(Path(f"{base}.svg"), stacks, title=title)
    summary = callgrind_summary(title + " (Python functions named through trampolines)", threads, table)
    artifacts["summary"] = Path(f"{base}.txt")
    artifacts["summary"].write_text(summary, encoding="utf-8")
    for p in files:
        target = Path(f"{base}.{p.name.removeprefix('callgrind.')}")
        _rewrite(p, target, names)
        artifacts[target.name.rpartition(".")[2]] = target
    return {
        "mode": mode,
        "summary": summary,
        "artifacts": artifacts,
        "body": {
            "artifacts": {k: str(v) for k, v in artifacts.items()},
            "total": total,
            "threads": {str(t.thread): t.total for t in threads},
            "loop_thread": sum(t.total for t in threads if t.thread == LOOP_THREAD),
            "uninstrumented_pass": {"total": record.total, "loop_thread": record.loop_thread},
            "functions": [f.to_dict() for f in table],
        },
    }


def profile_callgrind(
    recipe: Recipe,
    *,
    modes: Sequence[str],
    output_dir: Path,
    fixture: Path | None,
    fixture_info: Mapping[str, Any] | None,
    work_root: Path | None,
    valgrind_path: str | None,
    on_event: Callable[[str], None],
) -> tuple[Path, list[dict[str, Any]]]:
    """Profile ``modes`` of ``recipe``; returns the record's path and, per mode, its summary and artifacts."""
    valgrind = find_valgrind(valgrind_path)
    library = trampoline_library()
    output_dir.mkdir(parents=True, exist_ok=True)
    prefix = artifact_prefix(output_dir, recipe.name, "callgrind")
    root = Path(work_root) if work_root is not None else Path(tempfile.gettempdir())
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="perfsuite-callgrind-", dir=root))
    try:
        results = []
        for mode in modes:
            on_event(f"{recipe.name}/{mode}: callgrind, one pass with Python trampolines")
            results.append(_profile_mode(recipe, mode, prefix, scratch, root, fixture, valgrind, library))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    record = Path(f"{prefix}.callgrind.profile.json")
    document = {
        "kind": "perfsuite-profile",
        "profile_format": 1,
        "perfsuite": perfsuite.__version__,
        "profiler": "callgrind",
        "valgrind": valgrind.version,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "recipe": recipe.to_dict(),
        "fixture": dict(fixture_info or {}),
        "note": "instructions from submission to acknowledgement under trampolines (Python calls not inlined): "
                "a little above `perfsuite run --instructions`, which is the figure",
        "modes": {r["mode"]: r["body"] for r in results},
    }
    record.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return record, results
