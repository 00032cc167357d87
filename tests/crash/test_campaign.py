"""The crash campaign end to end: the correct engine survives every explored state under both models,
every seeded bug is caught, violations are described and kept, and recovery is crashed too."""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import Executor

import pytest

import perfsuite.crash
from perfsuite.cli import main
from perfsuite.crash import (
    MODELS,
    SEEDED_BUGS,
    CrashConfig,
    Enumeration,
    FsState,
    make_executor,
    run_campaign,
)
from perfsuite.crash.states._campaign import recover_batch

SMALL = 160  # unique crash states per workload and model: persistence points first (tests stay fast)


@pytest.fixture(scope="module")
def pool() -> Iterator[Executor]:
    executor = make_executor(2)
    yield executor
    executor.shutdown()


def test_facade_exports_exactly_its_public_names():
    public = {n for n in dir(perfsuite.crash) if not n.startswith("_")
              and not isinstance(getattr(perfsuite.crash, n), type(os))}
    assert set(perfsuite.crash.__all__) == public  # ruff (RUF022) keeps the list sorted


@pytest.mark.parametrize("model", MODELS)
def test_the_correct_engine_has_no_violation(pool, model, tmp_path):
    transcripts = ("transcript", "transcript-fsync-eio")
    report = run_campaign(CrashConfig(workloads=transcripts, models=(model,), max_states=SMALL,
                                      keep_dir=str(tmp_path)), executor=pool)
    assert [r.workload for r in report.results] == list(transcripts)
    assert report.violations == ()
    for result in report.results:
        assert result.states > 50 and result.recovery_states > 0 and result.acks >= 3
    assert report.keep_dir == str(tmp_path) and os.listdir(tmp_path) == []


#: the seeded bugs that only a crash of recovery itself exposes (the files recovery writes, unsynced): their hunt
#: crashes each recovery (the campaign's default nested budget); every other bug breaks an invariant in a plain
#: recovery of a crash state, so its hunt leaves recovery uncrashed (the nested states are most of a state's cost;
#: a plain recovery's outcome is the same with or without them, so a bug caught without them is caught with them)
CAUGHT_IN_RECOVERY_CRASHES = {"recovery-file-unsynced"}


@pytest.mark.parametrize("bug", sorted(name for name, bug in SEEDED_BUGS.items() if bug.shows_in))
@pytest.mark.parametrize("model", MODELS)
def test_every_seeded_bug_is_caught(pool, bug, model, tmp_path):
    """In every workload it is expected to show in, under both models (each run stops at its first
    violating state: that is what "caught" needs)."""
    workloads = SEEDED_BUGS[bug].shows_in
    nested = {} if bug in CAUGHT_IN_RECOVERY_CRASHES else {"recovery_states": 0}
    report = run_campaign(CrashConfig(workloads=workloads, models=(model,), max_states=400, seeded_bug=bug,
                                      keep_dir=str(tmp_path), stop_after=1, **nested), executor=pool)
    hint = "" if nested == {} else " (if only a crashed recovery shows it, name it in CAUGHT_IN_RECOVERY_CRASHES)"
    assert report.caught, f"{bug} not caught under {model}{hint}"
    missed = [r.workload for r in report.results if not r.violations]
    assert missed == [], f"{bug} not caught in {missed} under {model}{hint}"
    if bug in CAUGHT_IN_RECOVERY_CRASHES:
        assert any(v.recovery.startswith("recovery crash") for v in report.violations)
    violation = report.violations[0]
    assert violation.kept and os.path.isfile(os.path.join(violation.kept, "violation.txt"))


def test_a_violation_names_the_invariant_the_crash_and_the_dropped_operations(pool, tmp_path):
    report = run_campaign(CrashConfig(workloads=("transcript",), models=("atomic-rename",), max_states=SMALL,
                                      seeded_bug="no-temp-fsync", keep_dir=str(tmp_path)), executor=pool)
    lost = [v for v in report.violations if v.invariant == "1" and v.recovery == "recover"]
    assert lost
    v = lost[0]
    assert "conversation.jsonl" in v.message and "acknowledged" in v.message
    assert v.crash.startswith("crash after op #")
    assert any(".tmp-" in d and "write" in d for d in v.dropped)  # the temp file's unsynced data
    assert any(line.lstrip().startswith("#") for line in v.trace)
    kept = v.kept
    assert kept and os.path.isdir(os.path.join(kept, "before-recovery", "conv"))
    with open(os.path.join(kept, "violation.txt"), encoding="utf-8") as handle:
        assert "dropped:" in handle.read()


def test_fsync_retry_ack_breaks_invariant_7_on_the_trace_itself(pool, tmp_path):
    report = run_campaign(CrashConfig(workloads=("transcript-fsync-eio",), models=("atomic-rename",),
                                      max_states=20, seeded_bug="fsync-retry-ack", keep_dir=str(tmp_path)),
                          executor=pool)
    seven = [v for v in report.violations if v.invariant == "7"]
    assert any("retried" in v.message for v in seven)
    assert any("acknowledged" in v.message for v in seven)


def test_recovery_is_crashed_and_recovered_again():
    """A torn tail makes recovery do durable work: its own crash states are explored and recovered."""
    line = b'{"role":"user","content":"hi","timestamp":0.0}\n'
    state = FsState((("conv", None), ("conv/conversation.jsonl", line + line[:20])))
    [(state_id, outcomes)] = recover_batch("transcript", "atomic-rename", None,
                                           Enumeration(64, 0, 0, 0, passes=(1, 2)), [(7, state)])
    assert state_id == 7
    first, *crashed = outcomes
    assert first.label == "recover" and first.error is None and first.recovery_ops > 0
    assert first.post is not None and first.post.get("conv/conversation.jsonl") == line
    assert first.post.digest == first.post_again.digest
    assert len(crashed) >= 3 and all(o.label.startswith("recovery crash:") for o in crashed)
    for outcome in crashed:
        assert outcome.error is None
        assert outcome.post.get("conv/conversation.jsonl") == line  # recovering a crashed recovery converges


def test_cli_crashcheck_exit_status(tmp_path, capsys):
    args = ["crashcheck", "--workload", "transcript-fsync-eio", "--model", "atomic-rename", "--max-states", "30",
            "--jobs", "1", "--keep", str(tmp_path)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "transcript-fsync-eio" in out and "0 violations" in out
    assert main([*args, "--seeded-bug", "skip-dir-fsync"]) == 0  # exit 0: the bug was caught
    out = capsys.readouterr().out
    assert "seeded bug skip-dir-fsync: caught" in out and "[1]" in out and "kept" in out
    assert main([*args, "--max-states", "0"]) == 2
    assert "at least 1" in capsys.readouterr().err


def test_a_failed_directory_fsync_is_not_retried_and_then_acknowledged(pool, tmp_path):
    report = run_campaign(CrashConfig(workloads=("transcript-dirfsync-eio",), models=("atomic-rename",),
                                      max_states=SMALL, keep_dir=str(tmp_path)), executor=pool)
    assert report.violations == ()
