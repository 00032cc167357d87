"""Crash-state enumeration (SPEC section 7): which durable trees a crash after trace op k may leave.

For every crash point k (a crash after the first k operations), in passes so a ``max_states`` cap keeps
the most telling states: (1) right after every persistence point and at the end, the tree with only
what was forced ("synced-only") and the one with every pending micro-op ("prefix"); (2) the same at every
other k; (3) the last operation torn, when it is a pending write; (4) each pending micro-op dropped alone
and kept alone; (5) every subset of the pending micro-ops when there are at most ``subset_limit`` of them,
otherwise ``samples`` seeded random subsets. Pass 1 is explored first, passes 2-5 interleaved (see
:func:`specs`). Identical trees are explored once (content digest).
"""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass

from perfsuite.crash.model._model import BLOCK, FsState, TearMode, Timeline

SpecKind = str  # "synced-only" | "prefix" | "torn" | "drop-one" | "keep-one" | "subset" | "sample"


@dataclass(frozen=True, slots=True)
class CrashSpec:
    """A crash after trace op ``at - 1``; ``kept`` pending micro-ops reached the disk, the others did not;
    ``torn`` micro-ops reached it partially: ``(micro-op, "prefix" | "zeros", cut)``."""

    at: int
    kind: SpecKind
    kept: frozenset[int] = frozenset()
    torn: tuple[tuple[int, TearMode, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Enumeration:
    """Enumeration limits: the cap on unique states, subset exhaustiveness, sampling and its seed."""

    max_states: int = 5000
    subset_limit: int = 10
    samples: int = 32
    seed: int = 0
    passes: tuple[int, ...] = (1, 2, 3, 4, 5)


@dataclass(frozen=True, slots=True)
class CrashState:
    """A unique durable tree, with the first spec that produced it and its content digest."""

    spec: CrashSpec
    state: FsState
    digest: str


def tear_points(length: int, offset: int) -> list[tuple[TearMode, int]]:
    """Where a pending write of ``length`` bytes at ``offset`` may tear: prefixes cut at block boundaries
    and at 1/2 and n-1 bytes (a sub-block tear), and the size extended with zeros (ALICE "zero written")."""
    cuts = {length // 2, length - 1}
    first_block = (offset // BLOCK + 1) * BLOCK
    cuts.update(b - offset for b in range(first_block, offset + length, BLOCK))
    points: list[tuple[TearMode, int]] = [("prefix", c) for c in sorted(cuts) if 0 < c < length]
    if length:
        points.append(("zeros", 0))
    return points


def specs(tl: Timeline, limits: Enumeration) -> Iterator[CrashSpec]:
    """Every crash spec of the passes in ``limits.passes`` (may repeat trees). Pass 1 comes first; the
    other passes are interleaved one spec at a time, each visiting crash points in a seeded shuffled
    order, so a ``max_states`` cap samples every pass across the whole trace instead of the first
    pass's beginning. Without a cap the set of specs is the same whatever the order."""
    if 1 in limits.passes:
        yield from _pass_specs(tl, limits, 1)
    rest = [_pass_specs(tl, limits, p) for p in limits.passes if p != 1]
    while rest:
        for generator in list(rest):
            spec = next(generator, None)
            if spec is None:
                rest.remove(generator)
            else:
                yield spec


def _points(tl: Timeline, limits: Enumeration, p: int) -> list[int]:
    order = list(range(len(tl.ops) + 1))
    random.Random(f"{limits.seed}:points:{p}").shuffle(order)
    return order


def _pass_specs(tl: Timeline, limits: Enumeration, p: int) -> Iterator[CrashSpec]:
    n = len(tl.ops)
    if p in (1, 2):
        points = sorted({q + 1 for q in tl.persistence_points} | {n})
        if p == 2:
            chosen = set(points)
            points = [k for k in _points(tl, limits, p) if k not in chosen]
        for k in points:
            pending = frozenset(tl.pending(k))
            yield CrashSpec(k, "synced-only")
            if pending:
                yield CrashSpec(k, "prefix", pending)
    elif p == 3:
        for k in _points(tl, limits, p):
            if k == 0:
                continue
            pending = frozenset(tl.pending(k))
            for index in sorted(pending):
                m = tl.micro[index]
                if m.kind != "write" or m.op != k - 1:
                    continue
                for mode, cut in tear_points(len(m.data), m.offset):
                    yield CrashSpec(k, "torn", pending - {index}, ((index, mode, cut),))
    elif p == 4:
        for k in _points(tl, limits, p):
            pending = frozenset(tl.pending(k))
            if len(pending) < 2:
                continue
            for index in sorted(pending):
                yield CrashSpec(k, "drop-one", pending - {index})
                yield CrashSpec(k, "keep-one", frozenset({index}))
    elif p == 5:
        for k in _points(tl, limits, p):
            ordered = sorted(tl.pending(k))
            if len(ordered) < 3:
                continue  # already covered by passes 1 and 4
            if len(ordered) <= limits.subset_limit:
                for size in range(2, len(ordered) - 1):
                    for combo in itertools.combinations(ordered, size):
                        yield CrashSpec(k, "subset", frozenset(combo))
            else:
                rng = random.Random(f"{limits.seed}:{k}")
                for _ in range(limits.samples):
                    yield CrashSpec(k, "sample", frozenset(i for i in ordered if rng.random() < 0.5))


def enumerate_states(tl: Timeline, limits: Enumeration) -> Iterator[CrashState]:
    """Unique crash states of ``tl`` in exploration order, at most ``limits.max_states`` of them."""
    seen: set[str] = set()
    for spec in specs(tl, limits):
        if len(seen) >= limits.max_states:
            return
        state = tl.state(spec.at, spec.kept, spec.torn)
        digest = state.digest
        if digest in seen:
            continue
        seen.add(digest)
        yield CrashState(spec, state, digest)


def describe_spec(tl: Timeline, spec: CrashSpec) -> tuple[str, list[str], list[str]]:
    """(crash point, dropped micro-ops, torn micro-ops) as human-readable text."""
    pending = tl.pending(spec.at)
    torn_ids = {index for index, _, _ in spec.torn}
    dropped = [tl.micro[i].describe() for i in pending if i not in spec.kept and i not in torn_ids]
    torn = [f"{tl.micro[i].describe()} torn: {mode} {cut}B" for i, mode, cut in spec.torn]
    last = tl.ops[spec.at - 1] if spec.at else None
    where = os.path.relpath(last.path, tl.root) if last else ""
    point = f"after op #{spec.at - 1} ({last.kind} {where})" if last else "before the first op"
    return f"crash {point}, {spec.kind}", dropped, torn
