"""Crash-state enumeration: passes, deduplication, the cap, exhaustive subsets and seeded sampling."""

from __future__ import annotations

import os

from perfsuite.crash import Enumeration, build_timeline, enumerate_states
from perfsuite.crash.model._states import describe_spec, tear_points
from perfsuite.engine import FsOp

ROOT = "/crash-root"


def independent_files(n: int) -> list[FsOp]:
    """n files created, their names synced, then each written: n independent pending writes."""
    ops: list[FsOp] = []
    for i in range(n):
        ops.append(FsOp(len(ops), "open", f"{ROOT}/f{i}", flags=os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    ops.append(FsOp(len(ops), "fsync_dir", ROOT))
    for i in range(n):
        ops.append(FsOp(len(ops), "write", f"{ROOT}/f{i}", data=b"x\n", length=2))
    return ops


def test_every_subset_of_at_most_ten_pending_operations_is_explored():
    tl = build_timeline(independent_files(6), ROOT, "atomic-rename")
    final = len(tl.ops)
    assert len(tl.pending(final)) == 6
    whole = {s.digest for s in enumerate_states(tl, Enumeration(max_states=100_000))
             if len(s.state.files) == 6 and all(data in (b"", b"x\n") for _, data in s.state.files)}
    assert len(whole) == 2**6  # each write independently lost or persisted (torn variants aside)
    states = list(enumerate_states(tl, Enumeration(max_states=100_000)))
    assert len({s.digest for s in states}) == len(states)  # deduplicated by content digest


def test_beyond_the_subset_limit_subsets_are_sampled_with_a_seed():
    tl = build_timeline(independent_files(12), ROOT, "atomic-rename")

    def sampled(seed: int) -> set[str]:
        return {s.digest for s in enumerate_states(tl, Enumeration(max_states=100_000, seed=seed, passes=(5,)))}

    assert sampled(1) == sampled(1)
    assert sampled(1) != sampled(2)
    assert len(tl.pending(len(tl.ops))) == 12


def test_the_cap_keeps_persistence_points_first():
    tl = build_timeline(independent_files(4), ROOT, "atomic-rename")
    states = list(enumerate_states(tl, Enumeration(max_states=3)))
    assert len(states) == 3
    assert states[0].spec.kind == "synced-only" and states[0].spec.at == 5  # right after the directory fsync


def test_tear_points_cover_blocks_and_sub_block_cuts():
    assert tear_points(10, 0) == [("prefix", 5), ("prefix", 9), ("zeros", 0)]
    cuts = [cut for mode, cut in tear_points(10_000, 100) if mode == "prefix"]
    assert 3996 in cuts and 8092 in cuts and 5000 in cuts


def test_describe_names_dropped_and_torn_operations():
    tl = build_timeline(independent_files(2), ROOT, "atomic-rename")
    torn = next(s for s in enumerate_states(tl, Enumeration(max_states=1000)) if s.spec.kind == "torn")
    point, dropped, tears = describe_spec(tl, torn.spec)
    assert point.startswith("crash after op #") and "torn" in point
    assert tears and "write f" in tears[0]
    assert all(d.startswith("#") for d in dropped)
