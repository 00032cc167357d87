"""``perfsuite bisect GOOD BAD``: the first commit of a range whose gating metric regressed against GOOD
(``asv find``, and ``git bisect run`` for performance).

Every step is one interleaved A/B (:func:`perfsuite.ab.run_ab`: paired rounds, sequential looks, Holm, an
environment per revision when dependencies differ) of a commit against **GOOD**, never against its
neighbour, so every verdict is about the same question. The first step measures BAD itself: it must regress,
and what regressed there (or ``--metric``) are the **tracked metrics** (a BAD that is only inconclusive stops
the search there); a midpoint is *regressed* when a tracked metric regressed (significant timing, cost beyond
tolerance), *unchanged* when none regressed nor was inconclusive, and *inconclusive* otherwise. An
inconclusive step stops the search: the range narrowed so far is stated, nothing is guessed.

**The loaded-runner policy** (docs/gates.md, "Exit status and loaded runners") applies to every step's A/B
as to ``perfsuite ab``: when the idle control says the machine was loaded, timings are reported, not gated.
A step whose tracked timing could not gate so is *inconclusive* (the A/B's own outcome is neutral, exit 0,
but the search cannot tell regressed from unchanged there, and a guess would send it the wrong way); a BAD
that regressed in no count while its timings could not gate is inconclusive too, never "no regression".
Tracked counts (I/O, allocations, instructions) gate whatever the load, so such a search goes on. A search is
not a gate: an inconclusive step stops it (exit 3) with or without ``strict``. ``strict`` gives every step's
A/B ``perfsuite ab --strict``'s rule (recorded in its pairing and in ``bisect.json``): paired timings gate
whatever the load, so a loaded step is regressed or unchanged by its paired test, and an inconclusive A/B
exits 3. The range is
BAD's first-parent history back to GOOD (``git rev-list --first-parent --ancestry-path GOOD..BAD``); GOOD
must be an ancestor of BAD.

Each step's A/B is kept under ``DIR/step-<n>-<commit>/`` (the documents and pairing of ``perfsuite ab``),
and ``DIR/bisect.json`` records the steps as they are taken (atomically, after each step).
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.ab._git import git, repo_root, resolve_revision
from perfsuite.ab._run import AbResult, run_ab
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import Recipe, write_json_atomic
from perfsuite.report import TIMING_HEADLINES, Comparison, MetricChange

__all__ = ["BISECT_FILE", "BISECT_FORMAT", "BisectResult", "BisectStep", "bisect"]

BISECT_FILE = "bisect.json"
BISECT_FORMAT = "perfsuite-bisect/1"
#: exit status per outcome (docs/gates.md, "perfsuite bisect")
EXIT = {"found": 0, "no-regression": 1, "inconclusive": 3}


@dataclass(frozen=True, slots=True)
class BisectStep:
    """One A/B of a commit against GOOD: its verdict on the tracked metrics and what supports it."""

    number: int
    commit: str
    subject: str
    position: int  # 1-based among the range's commits (GOOD excluded, BAD the last)
    verdict: str  # "regressed", "unchanged" or "inconclusive"
    exit_status: int  # the A/B's own (0, 1, 3)
    evidence: tuple[str, ...]  # per tracked metric: the ratio and p (timings) or tolerance (costs)
    seconds: float
    directory: Path

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.number, "commit": self.commit, "subject": self.subject, "position": self.position,
                "verdict": self.verdict, "ab_exit_status": self.exit_status, "evidence": list(self.evidence),
                "seconds": round(self.seconds, 3), "directory": str(self.directory)}


@dataclass(frozen=True, slots=True)
class BisectResult:
    """The search: the range, the steps taken, and the outcome (``found``, ``no-regression``,
    ``inconclusive``) with the first regressed commit when found and the last known unchanged one."""

    good: str
    bad: str
    commits: tuple[str, ...]
    steps: tuple[BisectStep, ...]
    status: str  # "searching" only in bisect.json while the search goes on
    metrics: tuple[str, ...]
    first_bad: str | None
    last_good: str  # the last commit known unchanged (GOOD itself at first)
    earliest_bad: str  # the first commit known regressed (BAD at first)
    seconds: float
    directory: Path
    strict: bool = False  # every step's A/B as `perfsuite ab --strict` (the loaded-runner policy off)

    @property
    def candidates(self) -> int:
        """How many commits may still be the first regressed one (1 when found)."""
        lo = self.commits.index(self.last_good) if self.last_good in self.commits else -1
        return self.commits.index(self.earliest_bad) - lo

    @property
    def exit_status(self) -> int:
        """0 found, 1 no regression between GOOD and BAD, 3 inconclusive (2: a PerfsuiteError)."""
        return EXIT[self.status]

    def to_dict(self) -> dict[str, Any]:
        return {"format": BISECT_FORMAT, "good": self.good, "bad": self.bad, "commits": list(self.commits),
                "status": self.status, "exit_status": EXIT.get(self.status), "metrics": list(self.metrics),
                "first_bad": self.first_bad, "last_good": self.last_good, "earliest_bad": self.earliest_bad,
                "candidates": self.candidates, "seconds": round(self.seconds, 3), "strict": self.strict,
                "steps": [s.to_dict() for s in self.steps]}


def _evidence(change: MetricChange) -> str:
    """``commit/commit metrics.fsyncs 1 -> 2 (2.00x, tolerance 1)`` or ``... max_gap_ms 1.31x, p 0.002``."""
    if change.kind == "cost":
        tol = f", tolerance {change.tolerance:g}" if change.tolerance is not None else ""
        return (f"{change.label} {change.base.median:g} -> {change.new.median:g} ({change.ratio:.2f}x{tol}): "
                f"{change.status}")
    p = change.p_adjusted if change.p_adjusted is not None else change.p_value
    p_text = f", p {p:.2g}" if p is not None else ""
    return f"{change.label} {change.ratio:.2f}x{p_text}: {change.status}"


def _tracked(changes: Sequence[MetricChange], metrics: Sequence[str]) -> list[MetricChange]:
    """The changes of the tracked metrics (labels ``recipe/mode metric``, or patterns on them or the metric)."""
    return [c for c in changes if any(fnmatch.fnmatchcase(c.label, m) or fnmatch.fnmatchcase(c.metric, m)
                                      for m in metrics)]


def _held_by_load(comparison: Comparison) -> list[MetricChange]:
    """The timing headlines a loaded machine kept from gating (the loaded-runner policy; none with ``strict``,
    none on a quiet machine): on a quiet one they would have gated."""
    if comparison.load_policy is None:
        return []
    return [c for c in comparison.changes if c.kind == "timing" and not c.gating and c.metric in TIMING_HEADLINES
            and c.mode != "control" and c.reference is None]


def _not_gated(change: MetricChange) -> str:
    return f"{change.label} {change.ratio:.2f}x: not gated (machine loaded; --strict gates it)"


def _classify(ab: AbResult, metrics: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    comparison = ab.comparison
    tracked = _tracked(comparison.changes, metrics)
    held = [c for c in _held_by_load(comparison) if c in tracked]
    if any(c in comparison.regressions for c in tracked):
        verdict = "regressed"
    elif held or any(c in comparison.inconclusive for c in tracked):  # the search cannot tell: no guess
        verdict = "inconclusive"
    else:
        verdict = "unchanged"
    others = [c for c in comparison.regressions if c not in tracked]
    evidence = [_evidence(c) for c in tracked if c.gating] + [_not_gated(c) for c in held]
    evidence += [f"also regressed (not tracked): {_evidence(c)}" for c in others]
    return verdict, tuple(evidence)


def _range(root: Path, good: str, bad: str) -> list[str]:
    try:
        git(["merge-base", "--is-ancestor", good, bad], root, what="merge-base")
    except PerfsuiteError:
        raise PerfsuiteError(f"GOOD {good[:12]} is not an ancestor of BAD {bad[:12]}: bisect needs GOOD in BAD's "
                             "history") from None
    listed = git(["rev-list", "--reverse", "--first-parent", "--ancestry-path", f"{good}..{bad}"], root,
                 what="git rev-list")
    commits = [c for c in listed.splitlines() if c.strip()]
    if not commits or commits[-1] != bad:
        raise PerfsuiteError(f"no commits between GOOD {good[:12]} and BAD {bad[:12]} on BAD's first-parent history")
    return commits


def bisect(
    good: str,
    bad: str,
    recipes: Sequence[Recipe],
    *,
    output_dir: Path,
    cwd: Path | None = None,
    metrics: Sequence[str] = (),
    on_step: Callable[[BisectStep, int], None] | None = None,
    measure: Callable[..., AbResult] = run_ab,
    strict: bool = False,
    **ab_options: Any,
) -> BisectResult:
    """Find the first commit of ``GOOD..BAD`` whose tracked metrics regressed against GOOD (see the module
    docstring). ``metrics``: labels or ``fnmatch`` patterns to track (default: what regressed at BAD);
    ``on_step`` hears each step and the most steps still to go; ``ab_options`` go to every
    :func:`~perfsuite.ab.run_ab` (``resolve_fixture``, ``seed``, ``gate``, ``looks``, ``env``...);
    ``measure`` replaces it (tests of the search itself); ``strict``: every step's A/B as ``perfsuite ab
    --strict`` (see the module docstring)."""
    started = time.monotonic()
    here = Path(cwd or Path.cwd())
    root = repo_root(here)
    good_commit, bad_commit = resolve_revision(root, good), resolve_revision(root, bad)
    if good_commit == bad_commit:
        raise PerfsuiteError(f"GOOD and BAD are the same commit ({good_commit[:12]}): nothing to bisect")
    commits = _range(root, good_commit, bad_commit)
    output_dir = Path(output_dir)
    if output_dir.exists() and (not output_dir.is_dir() or any(output_dir.iterdir())):
        raise PerfsuiteError(f"{output_dir}: not an empty directory; bisect needs a fresh --output-dir")
    output_dir.mkdir(parents=True, exist_ok=True)
    steps: list[BisectStep] = []
    tracked: list[str] = list(metrics)
    lo, hi = -1, len(commits) - 1  # commits[lo] unchanged (-1: GOOD), commits[hi] regressed (BAD at first)

    def result(status: str) -> BisectResult:
        found = BisectResult(good_commit, bad_commit, tuple(commits), tuple(steps), status, tuple(tracked),
                             commits[hi] if status == "found" else None, commits[lo] if lo >= 0 else good_commit,
                             commits[hi], time.monotonic() - started, output_dir, strict)
        write_json_atomic(output_dir / BISECT_FILE, found.to_dict())  # after every step: a killed search says
        return found  # how far it got

    def step(index: int) -> BisectStep:
        commit = commits[index]
        directory = output_dir / f"step-{len(steps) + 1}-{commit[:12]}"
        t0 = time.monotonic()
        ab = measure(good_commit, commit, recipes, output_dir=directory, cwd=here, strict=strict, **ab_options)
        if not tracked:  # the first step, at BAD: what regressed there is what the search follows
            tracked.extend(c.label for c in ab.comparison.regressions)
        if tracked:
            verdict, evidence = _classify(ab, tracked)
        else:  # BAD regressed in nothing: inconclusive when a headline could not tell or a loaded machine kept
            held = _held_by_load(ab.comparison)  # the timings from gating, else nothing to find
            verdict = "inconclusive" if ab.comparison.inconclusive or held else "unchanged"
            evidence = (*(_evidence(c) for c in ab.comparison.inconclusive), *(_not_gated(c) for c in held))
        subject = git(["log", "-1", "--format=%s", commit], root, what="git log")
        taken = BisectStep(len(steps) + 1, commit, subject, index + 1, verdict, ab.comparison.exit_status,
                           evidence, time.monotonic() - t0, directory)
        steps.append(taken)
        return taken

    taken = step(hi)
    if on_step is not None:
        on_step(taken, (hi - lo - 1).bit_length() if taken.verdict == "regressed" else 0)
    if taken.verdict != "regressed":
        return result("no-regression" if taken.verdict == "unchanged" else "inconclusive")
    result("searching")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        taken = step(mid)
        if taken.verdict == "regressed":
            hi = mid
        elif taken.verdict == "unchanged":
            lo = mid
        if on_step is not None:
            on_step(taken, (hi - lo - 1).bit_length() if taken.verdict != "inconclusive" else 0)
        if taken.verdict == "inconclusive":
            return result("inconclusive")
        result("searching")
    return result("found")
