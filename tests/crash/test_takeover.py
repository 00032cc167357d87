"""Takeovers inside a publication (E3 fencing): ``session-lease-fence`` takes the session over at every point
of an owner's commit path and ``session-noflock-takeover`` runs every owner without ``flock``; both find
nothing on the real engine, and the campaign catches their seeded bugs (``lease-checked-after-head``: a
roll-over's lease re-check after HEAD's replace; ``takeover-in-place``: a takeover without flock that
neither reads the log again nor starts its own). The engine defects the workloads found stay fixed: a
roll-over re-checks the lease before its new log's rename and before HEAD's replace; an open that broke
the lease without the flock reads the log from the disk again and copies its bytes into its BASE."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from concurrent.futures import Executor
from pathlib import Path

import pytest

from perfsuite.crash import SEEDED_BUGS, WORKLOADS, CrashConfig, NoFlock, make_executor, record_workload, run_campaign
from perfsuite.crash.workloads._takeover import BIG, FENCE_POINTS, Takeover
from perfsuite.engine import FileSystem, Message, OsFileSystem, SaveFailed, Session, SessionSettings
from perfsuite.engine.testing import VirtualClock

SMALL = SessionSettings(chunk_size=512, offload="inline", log_capacity=4096)


@pytest.fixture(scope="module")
def pool() -> Iterator[Executor]:
    executor = make_executor(2)
    yield executor
    executor.shutdown()


def _open(root: str, fs: FileSystem) -> Session:
    return Session.open(root, create=True, fs=fs, clock=VirtualClock(), settings=SMALL, owner_alive=lambda _pid: False)


def _turn(session: Session, text: str) -> None:
    session.add_message("root", Message("user", text, 1.0))
    session.checkpoint("root")


def _taken_over_at(tmp_path: Path, point: tuple[str, str, str], text: str) -> list[str]:
    """O0 publishes ``text``; at the armed point O1 (no flock) takes over and publishes; O0 must be refused.
    Returns what a later open loads of the root conversation."""
    root = str(tmp_path / "sess")
    layer = Takeover(OsFileSystem())
    old = _open(root, layer)
    _turn(old, "O0 asks")
    taken: list[Session] = []

    def take() -> None:
        new = _open(root, NoFlock(OsFileSystem()))
        _turn(new, "O1 took over")
        taken.append(new)

    layer.arm(*point, take)
    with pytest.raises(SaveFailed):
        _turn(old, text)
    assert layer.fired and taken
    taken[0].close()
    with Session.open(root, settings=SMALL, clock=VirtualClock()) as again:
        return [m.content for m in again.buffers["root"].messages()]


@pytest.mark.parametrize("point", [p for p in FENCE_POINTS if "roll-over" in p[0] and "HEAD replaced" not in p[0]],
                         ids=lambda p: p[0])
def test_an_owner_taken_over_mid_roll_over_never_names_its_log_nor_replaces_head(
        tmp_path: Path, point: tuple[str, str, str, str]) -> None:
    messages = _taken_over_at(tmp_path, point[1:], "x" * BIG)  # a roll-over: it does not fit
    assert messages == ["O0 asks", "O1 took over"]


def test_a_takeover_without_flock_reads_what_the_old_owner_acknowledged_meanwhile(tmp_path: Path) -> None:
    root = str(tmp_path / "sess")
    old = _open(root, NoFlock(OsFileSystem()))
    _turn(old, "O0 asks")
    layer = Takeover(NoFlock(OsFileSystem()))
    layer.arm("replace", "before", "*/.LEASE.stale-*", lambda: _turn(old, "O0 acknowledged while O1 opens"))
    new = _open(root, layer)
    assert layer.fired
    assert [m.content for m in new.buffers["root"].messages()] == ["O0 asks", "O0 acknowledged while O1 opens"]
    new.close()


def test_the_fence_workload_interrupts_every_point_and_refuses_the_old_owner(tmp_path: Path) -> None:
    trace = record_workload(WORKLOADS["session-lease-fence"], str(tmp_path))
    notes = trace.oracle.notes
    assert [n.label for n in notes if n.kind == "unexpected"] == []
    assert len([n for n in notes if n.kind == "fenced"]) == len(FENCE_POINTS)
    refused = [n.label for n in notes if n.kind == "refused"]
    assert len(refused) == 2 * len(FENCE_POINTS)  # the interrupted publication and a later one, each owner
    fenced = {n.detail["writer"] for n in notes if n.kind == "fenced"}
    assert not [a.label for a in trace.oracle.acks if a.detail["writer"] in fenced and "interrupted" in a.label]


def test_the_noflock_workload_runs_both_takeovers(tmp_path: Path) -> None:
    trace = record_workload(WORKLOADS["session-noflock-takeover"], str(tmp_path))
    assert [n.label for n in trace.oracle.notes if n.kind == "unexpected"] == []
    labels = [a.label for a in trace.oracle.acks]
    assert "O0 turn while O1 opens" in labels and "O2 turn after the takeover" in labels


@pytest.mark.parametrize(("name", "bug"), [("session-lease-fence", "lease-checked-after-head"),
                                           ("session-noflock-takeover", "takeover-in-place")])
def test_the_campaign_catches_the_seeded_bug_and_passes_the_real_engine(pool: Executor, tmp_path: Path, name: str,
                                                                         bug: str) -> None:
    assert SEEDED_BUGS[bug].shows_in == (name,)
    config = CrashConfig(workloads=(name,), models=("atomic-rename",), max_states=150, recovery_states=8,
                         keep_dir=str(tmp_path / "bug"))
    report = run_campaign(dataclasses.replace(config, seeded_bug=bug), executor=pool)
    assert report.caught
    assert any(v.invariant in ("0", "1") for v in report.violations)  # an acknowledged turn lost or unopenable
    clean = run_campaign(dataclasses.replace(config, keep_dir=str(tmp_path / "clean")), executor=pool)
    assert clean.violations == (), "\n".join(f"[{v.invariant}] {v.message} ({v.crash})" for v in clean.violations[:5])
    assert clean.results[0].states > 80
