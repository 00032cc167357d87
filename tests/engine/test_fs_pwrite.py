"""E1 (format 2's primitives): the in-place write and data-sync primitives every layer implements: ``pwrite`` at an
offset and ``fdatasync``, a durability point like fsync. Observed through the recording, fault-injecting,
in-memory and latency layers; no timing."""

from __future__ import annotations

import errno
import os

import pytest

from perfsuite.engine import FileSystem, FsyncFailed, OsFileSystem
from perfsuite.engine._fs import O_TRUNC_CREATE
from perfsuite.engine.testing import (
    DelayModel,
    Fault,
    FaultyFileSystem,
    FixedDelay,
    LatencyFileSystem,
    MemoryFileSystem,
    RecordingFileSystem,
    SimulatedCrash,
)


def _preallocated(fs: FileSystem, path: str, size: int) -> int:
    fd = fs.open(path, O_TRUNC_CREATE)
    fs.write_all(fd, b"\0" * size)
    return fd


@pytest.mark.parametrize("layer", ["os", "memory"])
def test_pwrite_overwrites_in_place_and_leaves_the_size_and_position(tmp_path, layer):
    fs: FileSystem = OsFileSystem() if layer == "os" else MemoryFileSystem()
    path = str(tmp_path / "log") if layer == "os" else "/log"
    fd = _preallocated(fs, path, 64)
    fs.pwrite_all(fd, b"abc", 10)
    fs.pwrite_all(fd, b"Z", 0)
    fs.write(fd, b"!")  # the descriptor's position is after the preallocation: pwrite did not move it
    fs.fdatasync_file(fd, path)
    fs.close(fd)
    data = fs.read(path)
    assert len(data) == 65 and data[0:1] == b"Z" and data[10:13] == b"abc" and data[64:] == b"!"
    assert data[1:10] == b"\0" * 9 and data[13:64] == b"\0" * 51


def test_a_pwrite_past_the_end_of_a_memory_file_leaves_zeros():
    fs = MemoryFileSystem()
    fd = fs.open("/f", O_TRUNC_CREATE)
    fs.pwrite_all(fd, b"xy", 5)
    fs.close(fd)
    assert fs.read("/f") == b"\0" * 5 + b"xy"


class _Short(OsFileSystem):
    """A layer whose pwrite writes at most two bytes per call (a short write, as POSIX allows)."""

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        return super().pwrite(fd, data[:2], offset)


def test_pwrite_all_loops_over_short_writes_at_advancing_offsets(tmp_path):
    fs = _Short()
    fd = _preallocated(fs, str(tmp_path / "f"), 16)
    fs.pwrite_all(fd, b"hello", 3)
    fs.close(fd)
    assert (tmp_path / "f").read_bytes() == b"\0\0\0hello" + b"\0" * 8


def test_the_recording_layer_logs_pwrite_with_its_offset_and_fdatasync_as_a_point(tmp_path):
    fs = RecordingFileSystem(OsFileSystem())
    fd = _preallocated(fs, str(tmp_path / "log"), 32)
    mark = fs.mark()
    fs.pwrite_all(fd, b"record", 8)
    fs.fdatasync_file(fd)
    fs.close(fd)
    pwrite, sync, close = fs.since(mark)
    assert (pwrite.kind, pwrite.offset, pwrite.data, pwrite.length, pwrite.nbytes) == ("pwrite", 8, b"record", 6, 6)
    assert (sync.kind, sync.path, close.kind) == ("fdatasync", str(tmp_path / "log"), "close")
    assert fs.bytes_written == 32 + 6
    assert fs.ops[0].offset == -1  # every other kind has no offset


def test_an_eio_on_fdatasync_is_fsync_failed_and_names_the_file(tmp_path):
    fs = FaultyFileSystem(OsFileSystem(), [Fault("fdatasync", path="*.log", error=errno.EIO)])
    fd = _preallocated(fs, str(tmp_path / "s.log"), 8)
    with pytest.raises(FsyncFailed) as failed:
        fs.fdatasync_file(fd, str(tmp_path / "s.log"))
    assert failed.value.errno == errno.EIO and "fdatasync failed" in str(failed.value)
    fs.fsync_file(fd)  # only the declared kind fails: an fsync of the same file is another operation
    fs.close(fd)


def test_enospc_mid_pwrite_leaves_a_prefix_at_the_offset(tmp_path):
    fs = FaultyFileSystem(OsFileSystem(), [Fault("pwrite", partial=3, error=errno.ENOSPC)])
    fd = _preallocated(fs, str(tmp_path / "f"), 16)
    with pytest.raises(OSError) as full:
        fs.pwrite_all(fd, b"abcdef", 4)
    fs.close(fd)
    assert full.value.errno == errno.ENOSPC
    assert (tmp_path / "f").read_bytes() == b"\0" * 4 + b"abc" + b"\0" * 9


@pytest.mark.parametrize("when, expected", [("before", b"\0" * 4), ("after", b"data")])
def test_a_crash_before_or_after_a_pwrite(tmp_path, when, expected):
    fs = FaultyFileSystem(OsFileSystem(), [Fault("pwrite", crash=when)])
    fd = _preallocated(fs, str(tmp_path / "f"), 4)
    with pytest.raises(SimulatedCrash):
        fs.pwrite_all(fd, b"data", 0)
    fs.close(fd)
    assert (tmp_path / "f").read_bytes() == expected


def test_a_crash_after_fdatasync_is_after_the_durability_point(tmp_path):
    fs = FaultyFileSystem(OsFileSystem(), [Fault("fdatasync", crash="after")])
    fd = _preallocated(fs, str(tmp_path / "f"), 4)
    with pytest.raises(SimulatedCrash):
        fs.fdatasync_file(fd)
    assert fs.log.fired == [(0, "fdatasync", str(tmp_path / "f"))]
    fs.close(fd)


def test_fdatasync_draws_the_fsync_distribution_and_pwrite_passes_through(tmp_path):
    pauses: list[float] = []
    model = DelayModel({"fsync": FixedDelay(5.0), "fsync_dir": FixedDelay(7.0)}, sleep=pauses.append,
                       clock=lambda: 0.0)
    fs = LatencyFileSystem(OsFileSystem(), model)
    fd = _preallocated(fs, str(tmp_path / "f"), 8)
    fs.pwrite_all(fd, b"x", 0)
    assert pauses == []
    fs.fdatasync_file(fd)
    fs.close(fd)
    assert pauses == [0.005] and model.stats().calls["fsync"] == 1


def test_every_wrapper_forwards_the_new_primitives(tmp_path):
    layered = RecordingFileSystem(FaultyFileSystem(LatencyFileSystem(OsFileSystem(), DelayModel({}))))
    fd = _preallocated(layered, str(tmp_path / "f"), 4)
    layered.pwrite_all(fd, b"ok", 1)
    layered.fdatasync_file(fd)
    layered.close(fd)
    assert (tmp_path / "f").read_bytes() == b"\0ok\0"
    assert [op.kind for op in layered.ops][-3:] == ["pwrite", "fdatasync", "close"]
    assert os.path.getsize(tmp_path / "f") == 4
