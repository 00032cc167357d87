"""The page-cache crash-state model (SPEC section 7) on hand-made operation lists."""

from __future__ import annotations

import os

import pytest

from perfsuite.crash import FsState, build_timeline
from perfsuite.crash.model._states import Enumeration, specs
from perfsuite.engine.testing import FsOp

ROOT = "/crash-root"  # the model never touches the disk: any absolute root will do
CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL
APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT


def ops(*specs: tuple) -> list[FsOp]:
    """(kind, path[, data|dst]) tuples -> FsOp list with absolute paths under ROOT."""
    out = []
    for seq, (kind, path, *rest) in enumerate(specs):
        fields: dict = {}
        if kind == "open":
            fields["flags"] = rest[0] if rest else CREATE
        elif kind == "write":
            fields["data"] = rest[0]
            fields["length"] = len(rest[0])
        elif kind == "replace":
            fields["dst"] = f"{ROOT}/{rest[0]}"
        out.append(FsOp(seq, kind, f"{ROOT}/{path}".rstrip("/"), **fields))
    return out


def all_states(trace: list[FsOp], model: str = "atomic-rename", initial: FsState | None = None,
               at: int | None = None) -> list[dict]:
    tl = build_timeline(trace, ROOT, model, initial=initial)
    at = len(trace) if at is None else at
    states = {}
    for spec in specs(tl, Enumeration(max_states=10_000)):
        if spec.at == at:
            state = tl.state(spec.at, spec.kept, spec.torn)
            states[state.digest] = state.as_dict()
    return list(states.values())


def test_an_unsynced_write_can_vanish_and_a_synced_one_cannot():
    trace = ops(("open", "f"), ("write", "f", b"hello\n"), ("fsync_dir", ""))
    tl = build_timeline(trace, ROOT, "atomic-rename")
    assert tl.state(3).as_dict() == {"f": b""}  # the name is durable, the data is not
    assert tl.state(3, tl.pending(3)).as_dict() == {"f": b"hello\n"}
    synced = ops(("open", "f"), ("write", "f", b"hello\n"), ("fsync", "f"), ("fsync_dir", ""))
    tl = build_timeline(synced, ROOT, "atomic-rename")
    assert tl.pending(4) == [] and tl.state(4).as_dict() == {"f": b"hello\n"}


def test_a_synced_file_whose_directory_was_not_synced_can_vanish_by_name():
    trace = ops(("open", "f"), ("write", "f", b"data\n"), ("fsync", "f"))
    tl = build_timeline(trace, ROOT, "atomic-rename")
    assert tl.state(3).as_dict() == {}  # fsync of the file makes its data durable, not its name
    assert {"f": b"data\n"} in all_states(trace)
    with_dir = [*trace, FsOp(3, "fsync_dir", ROOT)]
    assert all_states(with_dir) == [{"f": b"data\n"}]


def test_a_new_directory_needs_its_parent_synced():
    trace = ops(("mkdir", "d"), ("open", "d/f"), ("write", "d/f", b"x\n"), ("fsync", "d/f"), ("fsync_dir", "d"))
    states = all_states(trace)
    assert {} in states  # d's own entry is in the root, which was never synced
    assert all(s in ({}, {"d": None, "d/f": b"x\n"}) for s in states)


REPLACE = ops(("open", ".a.tmp-1"), ("write", ".a.tmp-1", b"new\n"), ("fsync", ".a.tmp-1"),
              ("close", ".a.tmp-1"), ("replace", ".a.tmp-1", "a"))
OLD = FsState((("a", b"old\n"),))


def test_rename_is_atomic_under_atomic_rename():
    states = all_states(REPLACE, "atomic-rename", OLD)
    assert {"a": b"old\n"} in states and {"a": b"new\n"} in states
    for state in states:
        assert state.get("a") in (b"old\n", b"new\n")  # never missing, never mixed
        assert not (state.get("a") == b"new\n" and ".a.tmp-1" in state)  # never both names
    synced = [*REPLACE, FsOp(len(REPLACE), "fsync_dir", ROOT)]
    assert all_states(synced, "atomic-rename", OLD) == [{"a": b"new\n"}]


def test_split_rename_can_show_both_names_or_neither_new_name():
    states = all_states(REPLACE, "split-rename", OLD)
    assert {"a": b"new\n", ".a.tmp-1": b"new\n"} in states  # link persisted, source unlink did not
    assert {"a": b"old\n"} in states  # unlink persisted without the link: the new inode is orphaned
    assert all(s.get("a") in (b"old\n", b"new\n") for s in states)  # the destination is never absent
    synced = [*REPLACE, FsOp(len(REPLACE), "fsync_dir", ROOT)]
    assert all_states(synced, "split-rename", OLD) == [{"a": b"new\n"}]


def test_a_pending_append_tears_at_prefixes_and_as_zeros():
    initial = FsState((("log", b"line one\n"),))
    trace = ops(("open", "log", APPEND), ("write", "log", b"line two\n"))
    contents = {s["log"] for s in all_states(trace, initial=initial)}
    assert b"line one\n" in contents and b"line one\nline two\n" in contents
    assert b"line one\nline" in contents  # a prefix at half the write
    assert b"line one\nline two" in contents  # all but the newline
    assert b"line one\n" + b"\0" * 9 in contents  # size extended, data never written


def test_torn_writes_split_at_block_boundaries():
    data = b"x" * 10_000
    trace = ops(("open", "f", APPEND), ("write", "f", data))
    lengths = {len(s["f"]) for s in all_states(trace, initial=FsState((("f", b""),)))}
    assert {4096, 8192} <= lengths


def test_a_dropped_append_before_a_kept_one_leaves_a_hole_of_zeros():
    trace = ops(("open", "f", APPEND), ("write", "f", b"aaa\n"), ("write", "f", b"bbb\n"))
    assert {"f": b"\0" * 4 + b"bbb\n"} in all_states(trace, initial=FsState((("f", b""),)))


def test_a_failed_fsync_poisons_pending_data_even_after_a_successful_retry():
    trace = ops(("open", "f", APPEND), ("write", "f", b"lost?\n"), ("fsync_failed", "f"), ("fsync", "f"),
                ("write", "f", b"later\n"), ("fsync", "f"))
    tl = build_timeline(trace, ROOT, "atomic-rename", initial=FsState((("f", b""),)))
    assert [tl.micro[i].describe() for i in tl.pending(len(trace))] == ["#1 write f @0 +6B"]
    assert tl.state(len(trace)).as_dict() == {"f": b"\0" * 6 + b"later\n"}


def test_live_history_records_bindings_and_versions():
    first = ops(("open", "a"), ("write", "a", b"v1\n"), ("close", "a"))
    shifted = [FsOp(op.seq + 3, op.kind, op.path, op.data, op.flags, op.dst, op.length) for op in REPLACE]
    tl = build_timeline([*first, *shifted], ROOT, "atomic-rename", capture={3, 8})
    assert tl.live[3].as_dict() == {"a": b"v1\n"}
    assert tl.live[8].as_dict() == {"a": b"new\n"}
    assert [(b.at, b.content) for b in tl.bindings["a"]] == [(0, b""), (7, b"new\n")]
    assert tl.versions[tl.bindings["a"][0].inode] == (b"v1\n",)


def test_paths_outside_the_root_are_refused():
    from perfsuite.crash import CrashCheckError

    with pytest.raises(CrashCheckError):
        build_timeline([FsOp(0, "mkdir", "/elsewhere/x")], ROOT, "atomic-rename")
    with pytest.raises(CrashCheckError):
        build_timeline([], ROOT, "no-such-model")


# -- pwrite and fdatasync (format 2's preallocated session log) ------------------------------------------------
def _pwrite(seq: int, path: str, data: bytes, offset: int) -> FsOp:
    return FsOp(seq, "pwrite", f"{ROOT}/{path}", data=data, length=len(data), offset=offset)


LOG = FsState((("log", b"\0" * 16),))  # a preallocated, zero-filled log whose name and size are durable


def test_a_pwrite_overwrites_at_its_offset_and_an_fdatasync_makes_it_durable():
    trace = [*ops(("open", "log", os.O_WRONLY)), _pwrite(1, "log", b"abcd", 4)]
    tl = build_timeline(trace, ROOT, "atomic-rename", initial=LOG)
    assert tl.state(2).as_dict() == {"log": b"\0" * 16}  # pending: the old zeros
    assert tl.state(2, tl.pending(2)).as_dict() == {"log": b"\0" * 4 + b"abcd" + b"\0" * 8}
    synced = [*trace, FsOp(2, "fdatasync", f"{ROOT}/log")]
    tl = build_timeline(synced, ROOT, "atomic-rename", initial=LOG)
    assert tl.pending(3) == [] and tl.state(3).as_dict() == {"log": b"\0" * 4 + b"abcd" + b"\0" * 8}
    assert tl.persistence_points == (2,)


def test_a_torn_pwrite_is_a_prefix_of_the_new_bytes_over_the_old_zeros():
    trace = [*ops(("open", "log", os.O_WRONLY)), _pwrite(1, "log", b"abcdefgh", 4)]
    logs = {s["log"] for s in all_states(trace, initial=LOG)}
    assert b"\0" * 4 + b"abcd" + b"\0" * 8 in logs  # half of it reached the disk, the rest is the old zeros
    assert b"\0" * 4 + b"abcdefg" + b"\0" * 5 in logs
    assert all(len(data) == 16 for data in logs)  # an overwrite never changes the size


def test_a_failed_fdatasync_poisons_the_pwrite_for_good():
    trace = [*ops(("open", "log", os.O_WRONLY)), _pwrite(1, "log", b"lost", 0),
             FsOp(2, "fdatasync_failed", f"{ROOT}/log"), FsOp(3, "fdatasync", f"{ROOT}/log")]
    tl = build_timeline(trace, ROOT, "atomic-rename", initial=LOG)
    assert [tl.micro[i].describe() for i in tl.pending(4)] == ["#1 write log @0 +4B"]
    assert 1 in {tl.micro[i].op for i in tl.poisoned}
