"""The corruption campaign (SPEC section 7): a budget of it runs clean on the correct engine, each seeded bug of
the open path is caught, the damage kinds do what they say, the crash checker judges ownership with the
engine's real check, and ``perfsuite session repair`` repairs what open refuses."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from concurrent.futures import Executor

import pytest

from perfsuite.cli import main
from perfsuite.crash import (
    DAMAGE_KINDS,
    SEEDED_BUGS,
    CorruptConfig,
    make_executor,
    run_corrupt_campaign,
    session_workloads,
)
from perfsuite.crash.bugs._open_path import LEASE_PID_ZERO
from perfsuite.crash.corrupt._damage import LOG_KINDS, applicable, apply, damaged_range
from perfsuite.crash.workloads._sessions import recover_portable, setup_portable
from perfsuite.engine import Message, OsFileSystem, OwnerConflict, Session, SessionError, SessionSettings
from perfsuite.engine.testing import with_fault_hooks

BUDGET = 30  # cases per workload in the clean run (every case: `perfsuite crashcheck --corrupt`)


@pytest.fixture(scope="module")
def pool() -> Iterator[Executor]:
    executor = make_executor(2)
    yield executor
    executor.shutdown()


def test_a_budget_of_the_corruption_campaign_is_clean(pool, tmp_path):
    workloads = ("session", "session-file")
    report = run_corrupt_campaign(CorruptConfig(workloads=workloads, max_cases=BUDGET, keep_dir=str(tmp_path)),
                                  executor=pool)
    assert [(r.workload, r.profile) for r in report.results] == [("session", "portable"), ("session-file", "file")]
    assert report.violations == (), "\n".join(f"{v.workload} {v.base} {v.kind} {v.target}: [{v.invariant}] "
                                              f"{v.message}" for v in report.violations[:5])
    for result in report.results:
        assert result.cases == BUDGET and result.opened + result.refused + result.undetectable == BUDGET
        assert result.opened and result.refused  # it both recovers and refuses, never silently loses
    assert os.listdir(tmp_path) == []


CAUGHT_BY = {  # (workload, damaged path, the invariant that catches the old code)
    "lease-pid-zero": ("session", "sess/LEASE", "O"),
    "head-lost-fallback": ("session", "sess/HEAD", "G"),
    "mid-transcript-cut": ("session-file", "sess/conversations/root/conversation.jsonl", "A"),
    # format 2's session log (its damage kinds: a flipped last record, mid-log damage, a foreign log)
    "mid-log-damage-as-torn": ("session", "sess/log/*.log", "A"),
    "stale-salt-log-accepted": ("session", "sess/log/*.log", "A"),
}


def test_every_open_path_seeded_bug_is_listed():
    assert sorted(CAUGHT_BY) == sorted(name for name, bug in SEEDED_BUGS.items() if bug.corrupt)


@pytest.mark.parametrize("bug", sorted(CAUGHT_BY))
def test_each_open_path_seeded_bug_is_caught(pool, bug, tmp_path):
    workload, target, invariant = CAUGHT_BY[bug]
    config = CorruptConfig(workloads=(workload,), seeded_bug=bug, targets=(target,), keep_dir=str(tmp_path))
    report = run_corrupt_campaign(config, executor=pool)
    assert report.caught
    assert invariant in {v.invariant for v in report.violations}
    kept = report.violations[0].kept
    assert kept and os.path.isfile(os.path.join(kept, "violation.txt")) and os.path.isdir(os.path.join(kept, "damaged"))
    clean = run_corrupt_campaign(CorruptConfig(workloads=(workload,), targets=(target,)), executor=pool)
    assert clean.cases == report.cases and clean.violations == ()  # the same cases, the fixed engine


def test_the_session_workloads_are_the_standard_session_ones():
    assert set(session_workloads()) == {"session", "session-file", "session-fault", "session-file-fault",
                                        "session-async", "session-group", "session-create", "session-second-owner",
                                        "session-file-second-writer", "session-file-lost-lock", "session-einval",
                                        "session-file-einval", "session-adopt-eio", "session-file-abandon",
                                        "session-file-damaged", "session-retention", "session-group-fault",
                                        "session-torn-tail", "session-sidecar-rounds", "session-ledger-retire",
                                        "session-lease-fence", "session-noflock-takeover", "session-migrate"}


def test_damaged_quarantine_files_never_block_open(pool, tmp_path):
    """E2, what recovery sets aside: a session whose open quarantined a damaged line keeps it under recovery/; damage to
    that file (a dangling link, say) costs nothing committed and must not make open refuse (invariant O)."""
    report = run_corrupt_campaign(CorruptConfig(workloads=("session-file-damaged",),
                                                targets=("sess/conversations/root/recovery/*",),
                                                keep_dir=str(tmp_path)), executor=pool)
    assert report.cases >= 10
    assert report.violations == (), [f"{v.kind} {v.target}: [{v.invariant}] {v.message}" for v in report.violations]


@pytest.mark.parametrize("kind", [k for k in DAMAGE_KINDS if k not in LOG_KINDS])
def test_each_damage_kind_does_what_it_says(tmp_path, kind):
    (tmp_path / "d").mkdir()
    data = b"0123456789abcdef"
    (tmp_path / "d" / "f").write_bytes(data)
    apply(str(tmp_path), "d/f", kind, seed=3)
    path = tmp_path / "d" / "f"
    if kind == "delete":
        assert not os.path.lexists(path)
    elif kind == "truncate-0":
        assert path.read_bytes() == b""
    elif kind == "truncate-half":
        assert path.read_bytes() == data[:8]
    elif kind == "garbage":
        assert path.read_bytes() != data and len(path.read_bytes()) == 16
    elif kind == "flip":
        start, end = damaged_range("flip", 3, "d/f", len(data))
        got = path.read_bytes()
        assert [i for i in range(16) if got[i] != data[i]] == [start] and got[start] == data[start] ^ 0xFF
        assert end == start + 1
    elif kind == "directory":
        assert path.is_dir() and not path.is_symlink()
    else:
        assert path.is_symlink() and not path.exists()
    if kind in ("delete", "garbage", "symlink"):  # the kinds a directory gets too
        apply(str(tmp_path), "d", kind, seed=3)
        assert not (tmp_path / "d").is_dir() or (tmp_path / "d").is_symlink()


@pytest.mark.parametrize("kind", LOG_KINDS)
def test_each_session_log_damage_kind_does_what_it_says(tmp_path, kind):
    """Format 2's session log: a flipped byte inside the last record, a flipped byte inside an earlier record (valid
    records after it), another session's log: each is refused by open (never taken for a torn tail)."""
    from perfsuite.crash.invariants._logcheck import log_header, records

    path = tmp_path / "s"
    with Session.open(path, create=True, settings=SessionSettings(asynchronous=False)) as session:
        for i in range(4):
            session.add_message("root", Message("user", f"turn {i}", float(i)))
            session.checkpoint()
        (log,) = [p for p in session.durable_files() if "/log/" in p]
    with open(log, "rb") as handle:
        before = handle.read()
    target = os.path.relpath(log, tmp_path)
    assert applicable(kind, False, len(before), target) and not applicable(kind, False, len(before), "s/HEAD")
    apply(str(tmp_path), target, kind, seed=3)
    with open(log, "rb") as handle:
        after = handle.read()
    salt = int(log_header(before)["salt"][:8], 16)
    valid, _end = records(before, salt)
    if kind == "foreign-log":
        assert log_header(after)["session"] != log_header(before)["session"]
    else:
        changed = [i for i in range(len(before)) if before[i] != after[i]]
        assert len(changed) == 1
        inside = [r for r in valid if r.offset <= changed[0] < r.end]
        assert inside and (inside[0] is valid[-1]) == (kind in ("flip-last-record", "retype-last-record"))
    with pytest.raises(SessionError) as refused:
        Session.open(path)
    assert "\n" not in str(refused.value) and "repair" in str(refused.value)


def test_the_crash_checker_judges_a_torn_lease_with_the_real_ownership_check(tmp_path):
    """A torn lock names no owner: the checker used to stub the liveness probe to "dead", which hid a torn LEASE
    read as pid 0 (alive for os.kill). Its recovery now runs the engine's real check."""
    setup_portable(str(tmp_path))
    (tmp_path / "sess" / "LEASE").write_bytes(b"")  # what a crash between create and write leaves
    view = recover_portable(str(tmp_path), OsFileSystem())
    assert view["open"]["conversations"]["root"]
    (tmp_path / "sess" / "LEASE").write_bytes(b"")
    with pytest.raises(OwnerConflict, match="pid 0"):  # the seeded bug, through the I/O layer's fault hooks
        recover_portable(str(tmp_path), with_fault_hooks(OsFileSystem(), LEASE_PID_ZERO))


def test_cli_crashcheck_corrupt_exit_status(tmp_path, capsys):
    args = ["crashcheck", "--corrupt", "--workload", "session-file", "--max-cases", "12", "--jobs", "1",
            "--keep", str(tmp_path)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "session-file" in out and "12 cases, 0 violations" in out and "undetectable" in out
    target = "sess/conversations/root/conversation.jsonl"
    assert main([*args[:-4], "--target", target, "--seeded-bug", "mid-transcript-cut", "--jobs", "1"]) == 0
    assert "seeded bug mid-transcript-cut: caught" in capsys.readouterr().out
    assert main(["crashcheck", "--corrupt", "--kill", "3"]) == 2
    assert "choose one" in capsys.readouterr().err
    assert main(["crashcheck", "--corrupt", "--workload", "transcript"]) == 2
    assert "not a session workload" in capsys.readouterr().err


def test_cli_session_repair_adopts_the_newest_intact_generation(tmp_path, capsys):
    path = tmp_path / "s"
    session = Session.open(path, create=True)
    for i in range(2):
        session.add_message("root", Message("user", f"t{i}", 0.0))
        session.checkpoint()
    session.close()
    head = json.loads((path / "HEAD").read_bytes())
    data = bytearray((path / head["log"]).read_bytes())
    data[len(bytes(data).rstrip(b"\0")) - 30] ^= 0xFF  # format 2: a flipped byte in the last record
    (path / head["log"]).write_bytes(bytes(data))
    with pytest.raises(SessionError, match="perfsuite session repair"):
        Session.open(path)
    assert main(["session", "repair", str(path)]) == 0
    out = capsys.readouterr().out
    assert "holding generation 1" in out and "repaired" in out and "lost" in out
    repaired = Session.open(path)
    assert [m.content for m in repaired.buffers["root"].messages()] == ["t0"]
    repaired.close()
    assert main(["session", "repair", str(tmp_path / "nothing-here")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no portable or file-backed session" in err
