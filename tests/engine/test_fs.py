"""E1: the durable I/O layer's policy, observed through the recording and fault-injecting layers."""

from __future__ import annotations

import errno
import os
import warnings
from pathlib import Path

import pytest

from perfsuite.engine import DirectoryFsyncUnsupported, FsyncFailed, OsFileSystem
from perfsuite.engine.testing import Fault, FaultyFileSystem, RecordingFileSystem, SimulatedCrash


def test_rejected_directory_fsync_warns_once_per_directory(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    fs = FaultyFileSystem(OsFileSystem(), [Fault("fsync_dir", error=errno.EINVAL, repeat=True)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert fs.sync_dir(str(a)) is False
        assert fs.sync_dir(str(a)) is False
        assert fs.sync_dir(str(b)) is False
    assert [str(w.message).split(" (")[0] for w in caught if w.category is DirectoryFsyncUnsupported] == [
        f"directory fsync rejected for {a}",
        f"directory fsync rejected for {b}",
    ]


@pytest.mark.parametrize("code", [errno.EIO, errno.EACCES, errno.EPERM, errno.ENOSPC])
def test_other_directory_fsync_errors_propagate(tmp_path, code):
    fs = FaultyFileSystem(OsFileSystem(), [Fault("fsync_dir", error=code)])
    with pytest.raises(FsyncFailed) as info:
        fs.sync_dir(str(tmp_path))
    assert info.value.errno == code


def test_file_fsync_error_is_fsync_failed(tmp_path):
    fs = FaultyFileSystem(OsFileSystem(), [Fault("fsync", error=errno.EIO)])
    with pytest.raises(FsyncFailed):
        fs.write_new(str(tmp_path / "f"), b"x")


def test_atomic_replace_order_is_temp_write_fsync_replace_dir_fsync(tmp_path):
    fs = RecordingFileSystem(OsFileSystem())
    target = tmp_path / "file.json"
    target.write_bytes(b"old")
    fs.atomic_replace(str(target), b"new")
    kinds = [op.kind for op in fs.ops]
    assert kinds == ["open", "write", "fsync", "close", "replace", "fsync_dir"]
    temp = fs.ops[0].path
    assert os.path.dirname(temp) == str(tmp_path) and fs.ops[0].flags & os.O_EXCL
    assert fs.ops[4].path == temp and fs.ops[4].dst == str(target)
    assert fs.ops[5].path == str(tmp_path)
    assert target.read_bytes() == b"new"


def test_atomic_replace_through_symlink_keeps_the_link(tmp_path):
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    real = real_dir / "t.jsonl"
    real.write_bytes(b"old")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    fs = RecordingFileSystem(OsFileSystem())
    fs.atomic_replace(str(link), b"new")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_bytes() == b"new"
    assert fs.ops[-1].kind == "fsync_dir" and fs.ops[-1].path == str(real_dir)


def test_crash_before_replace_leaves_old_file_and_no_temp_visible_as_target(tmp_path):
    target = tmp_path / "f"
    target.write_bytes(b"old")
    fs = FaultyFileSystem(OsFileSystem(), [Fault("replace", crash="before")])
    with pytest.raises(SimulatedCrash):
        fs.atomic_replace(str(target), b"new")
    assert target.read_bytes() == b"old"


def test_makedirs_reports_created_ancestors_outermost_first(tmp_path):
    fs = OsFileSystem()
    created = fs.makedirs(str(tmp_path / "a" / "b" / "c"))
    assert created == [str(tmp_path / "a"), str(tmp_path / "a" / "b"), str(tmp_path / "a" / "b" / "c")]
    assert fs.makedirs(str(tmp_path / "a" / "b")) == []


def test_partial_write_then_enospc(tmp_path):
    fs = FaultyFileSystem(OsFileSystem(), [Fault("write", partial=3, error=errno.ENOSPC)])
    path = str(tmp_path / "f")
    with pytest.raises(OSError) as info:
        fs.write_new(path, b"abcdef", sync=False)
    assert info.value.errno == errno.ENOSPC
    assert Path(path).read_bytes() == b"abc"


def test_recording_counts_bytes(tmp_path):
    fs = RecordingFileSystem(OsFileSystem(), keep_data=False)
    fs.write_new(str(tmp_path / "f"), b"12345")
    assert fs.bytes_written == 5 and fs.ops[1].length == 5 and fs.ops[1].data == b""
