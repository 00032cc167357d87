"""The format-1 migration under crash states (E3): the ``session-migrate`` workload migrates a format-1 session
on the real engine and finds nothing there; the seeded bug ``format1-aside-first`` (the format-1 manifests
set aside before HEAD format 2 is durable) leaves crash states in neither format, which invariant M and
recovery report. Two engine defects the workload found stay fixed: the migration's ``log/`` directory is
durable before HEAD names a log in it, and a migration after a crashed one removes what that one left in
``log/`` (so recovery is idempotent)."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from concurrent.futures import Executor
from pathlib import Path

import pytest

from perfsuite.crash import SEEDED_BUGS, WORKLOADS, CrashConfig, make_executor, record_workload, run_campaign
from perfsuite.crash.invariants._migration import format_problems
from perfsuite.crash.workloads._migration import format1_contents, setup_format1
from perfsuite.engine import OsFileSystem, Session
from perfsuite.engine.testing import Fault, FaultyFileSystem, RecordingFileSystem, SimulatedCrash, VirtualClock

NAME, BUG = "session-migrate", "format1-aside-first"


@pytest.fixture(scope="module")
def pool() -> Iterator[Executor]:
    executor = make_executor(2)
    yield executor
    executor.shutdown()


def _files(root: str) -> dict[str, bytes | None]:
    found: dict[str, bytes | None] = {}
    for directory, dirs, names in os.walk(root):
        for name in dirs:
            found[os.path.relpath(os.path.join(directory, name), root)] = None
        for name in names:
            with open(os.path.join(directory, name), "rb") as handle:
                found[os.path.relpath(os.path.join(directory, name), root)] = handle.read()
    return found


def test_the_workload_migrates_publishes_and_retires_the_leftovers(tmp_path: Path) -> None:
    trace = record_workload(WORKLOADS[NAME], str(tmp_path))
    assert [n.label for n in trace.oracle.notes if n.kind == "unexpected"] == []
    kinds = [(op.kind, trace.rel(op.dst or op.path)) for op in trace.ops]
    head = kinds.index(("replace", "sess/HEAD"))
    aside = [i for i, (kind, path) in enumerate(kinds) if kind == "replace" and "/format1-manifest-" in path]
    assert len(aside) == 2 and min(aside) > kinds.index(("fsync_dir", "sess"), head)  # after HEAD v2 is durable
    assert ("rmdir", "sess/objects") in kinds and len(trace.oracle.acks) >= 8


def test_the_seeded_bug_sets_the_manifests_aside_before_head(tmp_path: Path) -> None:
    trace = record_workload(WORKLOADS[NAME], str(tmp_path), BUG)
    kinds = [(op.kind, trace.rel(op.dst or op.path)) for op in trace.ops]
    aside = [i for i, (kind, path) in enumerate(kinds) if kind == "replace" and "/format1-manifest-" in path]
    assert aside and max(aside) < kinds.index(("replace", "sess/HEAD"))
    assert SEEDED_BUGS[BUG].shows_in == (NAME,)


def test_invariant_m_wants_one_whole_format(tmp_path: Path) -> None:
    setup_format1(str(tmp_path))
    files = _files(str(tmp_path))
    assert list(format_problems(files, "state")) == []  # the format-1 session, whole
    head = json.loads(files["sess/HEAD"] or b"{}")
    half = {k: v for k, v in files.items() if k != f"sess/{head['manifest']}"}
    assert any("which is gone" in p for p in format_problems(half, "state"))
    chunk = next(k for k in files if k.startswith("sess/objects/") and "manifest" not in k)
    assert any("lost 1 chunk" in p for p in format_problems({k: v for k, v in files.items() if k != chunk}, "s"))
    v2 = {**files, "sess/HEAD": json.dumps({"format": "perfsuite-session/2", "log": "log/00000001.log"}).encode()}
    assert any("does not exist" in p for p in format_problems(v2, "state"))
    assert list(format_problems({**v2, "sess/log/00000001.log": b"log"}, "state")) == []


def test_the_migration_syncs_the_log_directory_before_head_names_it(tmp_path: Path) -> None:
    setup_format1(str(tmp_path))
    fs = RecordingFileSystem(OsFileSystem())
    Session.open(str(tmp_path / "sess"), fs=fs, clock=VirtualClock()).close()
    ops = [(op.kind, os.path.relpath(op.dst or op.path, tmp_path)) for op in fs.ops]
    made = ops.index(("mkdir", "sess/log"))
    head = next(i for i, (kind, path) in enumerate(ops) if kind == "replace" and path == "sess/HEAD")
    assert ("fsync_dir", "sess") in ops[made:head]


def test_a_migration_after_a_crashed_one_leaves_nothing_of_it_behind(tmp_path: Path) -> None:
    setup_format1(str(tmp_path))
    root = str(tmp_path / "sess")
    crashing = FaultyFileSystem(OsFileSystem(), [Fault("replace", path="HEAD", crash="before")])
    with pytest.raises(SimulatedCrash):
        Session.open(root, fs=crashing, clock=VirtualClock())
    assert os.listdir(os.path.join(root, "log"))  # the crashed migration's log, never named by a HEAD
    os.remove(os.path.join(root, "LEASE"))  # its process is gone
    with Session.open(root, clock=VirtualClock()) as session:
        assert session.migrated and os.listdir(os.path.join(root, "log")) == ["00000001.log"]
        assert session.buffers["root"].data() == format1_contents()["conversations/root.jsonl"]


def test_the_campaign_catches_the_seeded_bug_and_passes_the_real_engine(pool: Executor, tmp_path: Path) -> None:
    config = CrashConfig(workloads=(NAME,), models=("atomic-rename",), max_states=150, recovery_states=8,
                         keep_dir=str(tmp_path / "bug"))
    report = run_campaign(dataclasses.replace(config, seeded_bug=BUG), executor=pool)
    assert report.caught
    assert any(v.invariant == "M" and "HEAD (format 1)" in v.message for v in report.violations)
    clean = run_campaign(dataclasses.replace(config, keep_dir=str(tmp_path / "clean")), executor=pool)
    assert clean.violations == (), "\n".join(f"[{v.invariant}] {v.message} ({v.crash})" for v in clean.violations[:5])
    assert clean.results[0].states == 150
