"""Session crash workloads (issue 10): the oracle they record, recovery of a pending publication, the
session invariants on hand-made trees and views, and a reduced campaign of every standard session
workload under both models (the CI-sized version of ``perfsuite crashcheck``)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from concurrent.futures import Executor

import pytest

from perfsuite.crash import (
    MODELS,
    WORKLOADS,
    CrashConfig,
    FsState,
    build_timeline,
    make_executor,
    materialize,
    record_workload,
    run_campaign,
    snapshot,
)
from perfsuite.crash._session_invariants import head_problems, mail_problems, removal_problems
from perfsuite.crash._sessions import recover_portable
from perfsuite.crash._trace import Ack, Note
from perfsuite.crash._workloads import standard_workloads
from perfsuite.engine import OsFileSystem

# The issue 27 workloads (``_classes``): run in CI with a smaller budget of their own
ISSUE_27 = ("session-second-owner", "session-file-second-writer", "session-file-lost-lock", "session-einval",
            "session-file-einval", "session-adopt-eio", "session-file-abandon", "session-file-damaged")
SESSION_WORKLOADS = tuple(w for w in standard_workloads() if w.startswith("session") and w not in ISSUE_27)
REDUCED = 120  # unique crash states per session workload and model in CI (persistence points first)
REDUCED_27 = 60


@pytest.fixture(scope="module")
def pool() -> Iterator[Executor]:
    executor = make_executor(2)
    yield executor
    executor.shutdown()


@pytest.fixture(scope="module")
def session_trace(tmp_path_factory):
    root = tmp_path_factory.mktemp("session")
    return record_workload(WORKLOADS["session"], str(root))


def test_the_standard_campaign_covers_transcripts_and_sessions():
    assert {"transcript", "transcript-fsync-eio", "transcript-dirfsync-eio", "session", "session-file",
            "session-fault", "session-file-fault", "session-async", "session-create", *ISSUE_27} <= set(
        standard_workloads())


def test_the_session_oracle_records_what_each_acknowledgement_covers(session_trace):
    acks = session_trace.oracle.acks
    kinds = {a.kind for a in acks}
    assert {"transcript", "mail", "value"} <= kinds
    labels = {a.label for a in acks}
    assert {"mail to a1", "background completion 1", "r0 a1 checkpoint (job)", "settle a1", "goal"} <= labels
    for ack in acks:
        assert ack.scope == "sess" and ack.detail["seq"] >= 2  # generation 1 is the setup's
        assert ack.detail["depends"][0] == "sess/HEAD" and ack.detail["depends"][1].startswith("sess/objects/manifest-")
    # A callback acknowledgement is noted where the callback ran: right after the HEAD adoption's
    # directory fsync, before the call returned (sync) or the job finished (async).
    ops = session_trace.ops
    for ack in (a for a in acks if a.kind == "mail"):
        last = ops[ack.at - 1]
        assert last.kind in ("fsync_dir", "rmdir", "remove"), (ack.label, last)
        adopted = [i for i in range(ack.at) if ops[i].kind == "replace" and ops[i].dst.endswith("/HEAD")]
        assert adopted and all(ops[j].kind != "replace" or not ops[j].dst.endswith("/HEAD")
                               for j in range(adopted[-1] + 1, ack.at))
    notes = {n.kind for n in session_trace.oracle.notes}
    assert {"value", "delivered", "discard"} <= notes
    assert session_trace.initial is not None and session_trace.initial.get("sess/HEAD") is not None


def test_recovery_retries_a_publication_that_crashed_between_commit_and_adoption(session_trace, tmp_path):
    """A crash right after a publication's manifest is durable and before HEAD moves: recovery loads the
    previous generation, finds the staged batch, and ``retry_pending`` publishes it."""
    tl = build_timeline(session_trace.ops, session_trace.root, "atomic-rename", initial=session_trace.initial)
    ops = session_trace.ops
    k = next(i + 1 for i, op in enumerate(ops) if op.kind == "fsync_dir" and op.path.endswith("/objects")
             and any("manifest-" in o.path and "checkpoint" in o.path for o in ops[max(0, i - 4): i]) and i > 200)
    state = tl.state(k, tl.pending(k))  # everything issued before the crash reached the disk
    materialize(state, str(tmp_path))
    view = recover_portable(str(tmp_path), OsFileSystem())
    opened, retried = view["open"], view["retried"]
    assert retried is not None and opened["pending"] is not None
    assert retried["head"][0] == opened["head"][0] + 1 and retried["pending"] is None
    for conversation, data in opened["pending"].items():
        assert retried["conversations"][conversation] == data
    again = recover_portable(str(tmp_path), OsFileSystem())  # idempotent: nothing left to retry
    assert again["retried"] is None and again["final"] == view["final"]
    assert not os.path.exists(tmp_path / "sess" / "LEASE")  # recovery released its lease


def _tree(tmp_path, session_trace) -> FsState:
    materialize(session_trace.initial, str(tmp_path))
    return snapshot(str(tmp_path))


def test_head_problems_reads_head_manifest_and_chunks_off_the_tree(session_trace, tmp_path):
    state = _tree(tmp_path, session_trace)
    assert list(head_problems(state, 1)) == []
    files = state.as_dict()
    head = json.loads(files["sess/HEAD"])
    manifest = json.loads(files[f"sess/{head['manifest']}"])
    digest, _ = next(iter(manifest["artifacts"].values()))["chunks"][0]

    def changed(**edits: bytes | None) -> FsState:
        new = dict(files)
        for path, data in edits.items():
            if data is None:
                new.pop(path.replace("__", "/"), None)
            else:
                new[path.replace("__", "/")] = data
        return FsState(tuple(sorted(new.items(), key=lambda item: item[0])))

    missing = changed(**{f"sess__objects__{digest}": None})
    assert any("is missing" in m for m in head_problems(missing, 1))
    corrupt = changed(**{f"sess__objects__{digest}": b"x"})
    assert any("does not match its digest" in m for m in head_problems(corrupt, 1))
    assert any("older than the acknowledged generation 2" in m for m in head_problems(state, 2))
    no_head = changed(sess__HEAD=None)
    assert any("HEAD is missing although" in m for m in head_problems(no_head, 1))
    assert any("every later adoption" in m for m in head_problems(no_head, 0, [1, head["manifest"]]))
    bad_digest = changed(sess__HEAD=json.dumps({**head, "digest": hashlib.sha256(b"").hexdigest()}).encode())
    assert any("digest does not match" in m for m in head_problems(bad_digest, 1))


def _snapshot(conversations: dict[str, bytes], mailboxes: dict[str, list] | None = None,
              marker: dict | None = None) -> dict:
    return {"head": None, "conversations": conversations, "agents": {}, "mailboxes": mailboxes or {},
            "control": {}, "root": {}, "checkpoint": marker, "pending": None}


def _mail_line(mail_id: str, body: str) -> bytes:
    return json.dumps({"role": "mail", "content": f"[message from a1] {body}", "timestamp": 0.0,
                       "meta": {"receipt": mail_id, "hidden_receipt": True}}).encode() + b"\n"


def test_mail_and_removal_invariants_on_views():
    ack = Ack(5, "mail m1", "sess", "mail", {"id": "m1", "to": "root", "body": "hello"})
    delivered = Note(7, "delivered m1", "delivered", {"id": "m1", "to": "root"})
    in_box = _snapshot({"root": b""}, {"root": [("m1", "a1", "message", "hello")]})
    in_text = _snapshot({"root": _mail_line("m1", "hello")})
    lost = _snapshot({"root": b""})
    for snap in (in_box, in_text):
        view = {"open": snap, "retried": None, "final": snap, "redelivered": {}}
        assert list(mail_problems(view, [ack], [delivered])) == []
        assert list(removal_problems(view, [delivered])) == []
    view = {"open": lost, "retried": None, "final": lost, "redelivered": {}}
    assert any("is lost" in m for m in mail_problems(view, [ack], []))
    assert any("receipt is not in the recovered transcript" in m for m in removal_problems(view, [delivered]))
    discarded = Note(6, "discard m1", "discard", {"id": "m1", "to": "root"})
    assert list(mail_problems(view, [ack], [discarded])) == []
    again = {"open": in_text, "retried": None, "final": in_text, "redelivered": {"root": ["m1"]}}
    assert any("delivered m1 again" in m for m in mail_problems(again, [], []))
    twice = _snapshot({"root": _mail_line("m1", "hello") * 2})
    assert any("more than once" in m for m in mail_problems({"open": twice, "retried": None, "final": twice,
                                                             "redelivered": {}}, [], []))
    outrun = _snapshot({"root": b""}, marker={"conversations": {"root": {"size": 10, "messages": 1}}})
    assert any("checkpoint marker claims" in m for m in removal_problems({"open": outrun, "retried": None}, []))


@pytest.mark.parametrize("model", MODELS)
def test_a_reduced_session_campaign_has_no_violation(pool, model, tmp_path):
    report = run_campaign(CrashConfig(workloads=SESSION_WORKLOADS, models=(model,), max_states=REDUCED,
                                      keep_dir=str(tmp_path)), executor=pool)
    assert [r.workload for r in report.results] == list(SESSION_WORKLOADS)
    assert report.violations == (), "\n".join(f"{v.workload}: [{v.invariant}] {v.message} ({v.crash})"
                                              for v in report.violations[:5])
    for result in report.results:
        assert result.states >= 60 and result.recovery_states > result.states and result.acks >= 4


@pytest.mark.parametrize("model", MODELS)
def test_the_issue_27_workloads_have_no_violation_on_the_real_engine(pool, model, tmp_path):
    """A second writer, EINVAL on directory fsync, a lost PID lock, HEAD lost on top of a crash, recovery
    files, and the paths of issue 27's three defects: the real engine passes every invariant (their
    seeded bugs, tests/crash/test_campaign.py, show that each one can fail)."""
    report = run_campaign(CrashConfig(workloads=ISSUE_27, models=(model,), max_states=REDUCED_27,
                                      keep_dir=str(tmp_path)), executor=pool)
    assert report.violations == (), "\n".join(f"{v.workload}: [{v.invariant}] {v.message} ({v.crash})"
                                              for v in report.violations[:5])
    for result in report.results:
        assert result.states >= 40 and result.recovery_states > result.states and result.acks >= 4


def test_issue_27_workloads_exercise_what_they_name():
    """Each scenario really happens on the recorder: the fenced writer is refused, the rejected directory
    fsyncs warn once each, the abandons are noted, the damaged transcript is recovered, and the crash
    states of the HEAD-loss workloads are also recovered with HEAD damaged."""
    import tempfile

    notes: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as work:
        for name in ISSUE_27:
            root = os.path.join(work, name)
            os.makedirs(root)
            trace = record_workload(WORKLOADS[name], root)
            notes[name] = [n.kind for n in trace.oracle.notes]
            assert "unexpected" not in notes[name], (name, [n.label for n in trace.oracle.notes
                                                            if n.kind == "unexpected"])
            if name in ("session-einval", "session-file-einval"):
                assert any(op.kind == "fsync_dir_rejected" for op in trace.ops)
    for name in ("session-second-owner", "session-file-second-writer", "session-file-lost-lock"):
        assert "fenced" in notes[name] and notes[name].count("refused") >= 2
    assert notes["session-einval"].count("dir-fsync-warning") == 1
    assert notes["session-file-einval"].count("dir-fsync-warning") >= 2
    assert notes["session-adopt-eio"].count("abandoned") == 1 and notes["session-file-abandon"].count("abandoned") == 2
    assert WORKLOADS["session-adopt-eio"].head_loss and WORKLOADS["session-fault"].head_loss
