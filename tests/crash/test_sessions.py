"""Session crash workloads (SPEC section 7): the oracle they record, recovery of a pending publication, the
session invariants on hand-made trees and views, and a reduced campaign of every standard session
workload under both models (the CI-sized version of ``perfsuite crashcheck``)."""

from __future__ import annotations

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
from perfsuite.crash.invariants._sessions import head_problems, mail_problems, removal_problems
from perfsuite.crash.model._trace import Ack, Note
from perfsuite.crash.workloads._registry import standard_workloads
from perfsuite.crash.workloads._sessions import recover_portable
from perfsuite.engine import OsFileSystem

# The blind classes' workloads (``workloads._bug_classes``): run in CI with a smaller budget of their own
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
            "session-fault", "session-file-fault", "session-async", "session-group", "session-create",
            *ISSUE_27} <= set(standard_workloads())


def test_the_session_oracle_records_what_each_acknowledgement_covers(session_trace):
    acks = session_trace.oracle.acks
    kinds = {a.kind for a in acks}
    assert {"transcript", "mail", "value"} <= kinds
    labels = {a.label for a in acks}
    assert {"mail to a1", "background completion 1", "r0 a1 checkpoint (job)", "settle a1", "goal"} <= labels
    for ack in acks:
        assert ack.scope == "sess" and ack.detail["seq"] >= 2  # generation 1 is the setup's
        # format 2 (the session log): HEAD and the logs holding the committed state's bytes
        assert ack.detail["depends"][0] == "sess/HEAD" and ack.detail["depends"][1].startswith("sess/log/")
    # A callback acknowledgement is noted where the callback ran: right after its commit point (the log's
    # fdatasync, or a roll-over's HEAD directory fsync), before the call returned (sync) or the job finished.
    ops = session_trace.ops
    for ack in (a for a in acks if a.kind == "mail"):
        at = ack.at - 1
        while ops[at].kind in ("close", "open"):  # a roll-over closes the old log after HEAD's directory fsync
            at -= 1
        last = ops[at]
        head_replaced = any(o.kind == "replace" and o.dst.endswith("/HEAD") for o in ops[at - 2 : at])
        assert (last.kind == "fdatasync" and "/log/" in last.path) or (last.kind == "fsync_dir" and head_replaced), (
            ack.label, last)
    notes = {n.kind for n in session_trace.oracle.notes}
    assert {"value", "delivered", "discard"} <= notes
    assert session_trace.initial is not None and session_trace.initial.get("sess/HEAD") is not None


def test_a_crash_between_a_records_pwrite_and_its_fdatasync_loses_nothing_acknowledged(session_trace, tmp_path):
    """Format 2 (the session log): the record of an unacknowledged publication may be on disk whole, absent, or
    torn; recovery adopts it, ignores it, or drops the torn tail (re-zeroed, reported), never refusing."""
    tl = build_timeline(session_trace.ops, session_trace.root, "atomic-rename", initial=session_trace.initial)
    ops = session_trace.ops
    k = next(i for i, op in enumerate(ops) if op.kind == "fdatasync" and i > 20 and ops[i - 1].kind == "pwrite"
             and ops[i - 1].length > 200)
    (write,) = [m for m in tl.pending(k) if tl.micro[m].kind == "write" and tl.micro[m].op == k - 1]
    cut = tl.micro[write].length // 2
    outcomes = []
    for name, state in (("kept", tl.state(k, tl.pending(k))), ("dropped", tl.state(k)),
                        ("torn", tl.state(k, set(tl.pending(k)) - {write}, ((write, "prefix", cut),)))):
        root = tmp_path / name
        materialize(state, str(root))
        view = recover_portable(str(root), OsFileSystem())
        assert list(head_problems(snapshot(str(root)), 0, view["final"]["head"])) == []  # re-zeroed, verifies
        again = recover_portable(str(root), OsFileSystem())
        assert again["final"] == view["final"]  # idempotent
        outcomes.append(view["final"]["head"][0])
    kept, dropped, torn = outcomes
    assert kept == dropped + 1 and torn == dropped  # the torn record is never half-adopted


def _tree(tmp_path, session_trace) -> FsState:
    materialize(session_trace.initial, str(tmp_path))
    return snapshot(str(tmp_path))


def test_head_problems_reads_head_and_the_log_off_the_tree(session_trace, tmp_path):
    """Invariant 3 in format 2, with the checker's own reader of the log (``invariants._logcheck``)."""
    state = _tree(tmp_path, session_trace)
    assert list(head_problems(state, 1)) == []
    files = state.as_dict()
    head = json.loads(files["sess/HEAD"])
    log = f"sess/{head['log']}"

    def changed(**edits: bytes | None) -> FsState:
        new = dict(files)
        for path, data in edits.items():
            if data is None:
                new.pop(path.replace("__", "/"), None)
            else:
                new[path.replace("__", "/")] = data
        return FsState(tuple(sorted(new.items(), key=lambda item: item[0])))

    key = log.replace("/", "__")
    assert any("does not exist" in m for m in head_problems(changed(**{key: None}), 1))
    data = bytearray(files[log])
    header_flipped = bytearray(data)
    header_flipped[20] ^= 0xFF
    assert any("header does not verify" in m for m in head_problems(changed(**{key: bytes(header_flipped)}), 1))
    end = len(bytes(data).rstrip(b"\0"))
    data[end - 30] ^= 0xFF  # the last record: the chain now ends one record earlier, junk after it
    problems = list(head_problems(changed(**{key: bytes(data)}), 1))
    assert any("not zeros" in m for m in problems)
    assert any("older than the acknowledged generation 2" in m for m in head_problems(state, 2))
    no_head = changed(sess__HEAD=None)
    assert any("HEAD is missing although" in m for m in head_problems(no_head, 1))
    assert any("the engine loaded generation" in m for m in head_problems(no_head, 0, [1, head["log"]]))
    tampered = changed(sess__HEAD=json.dumps({**head, "salt": "0" * 32}).encode())
    assert any("checksum does not match" in m for m in head_problems(tampered, 1))
    truncated = changed(**{key: files[log][: len(files[log]) // 2]})
    assert any("capacity" in m for m in head_problems(truncated, 1))


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
        # format 2's steady path is two operations per publication: fewer, smaller crash states than format 1
        assert result.states >= 30 and result.recovery_states > result.states and result.acks >= 4


@pytest.mark.parametrize("model", MODELS)
def test_the_issue_27_workloads_have_no_violation_on_the_real_engine(pool, model, tmp_path):
    """A second writer, EINVAL on directory fsync, a lost PID lock, HEAD lost on top of a crash, recovery
    files, and the paths of the three engine defects the blind classes found: the real engine passes every invariant
    (their seeded bugs, tests/crash/test_campaign.py, show that each one can fail)."""
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
