"""E7: at-least-once mail, deduplication by receipt, and the committed-removal rule."""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

from perfsuite.engine import FileSession, Message, OsFileSystem, Session, SessionSettings

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from perfsuite.engine import Session
    session = Session.open(sys.argv[1])
    delivered = session.deliver_mail("root")
    print("DELIVERED", ",".join(m.id for m in delivered), flush=True)
    if sys.argv[2] == "commit":
        session.checkpoint("root")
        print("COMMITTED", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def _session_with_mail(tmp_path) -> tuple[str, str]:
    session = Session.open(tmp_path / "s", create=True)
    session.add_message("root", Message("user", "hello", 1.0))
    session.checkpoint()
    record = session.append_mail("root", "background result", sender="job-1")
    session.close()
    return str(tmp_path / "s"), record.id


def _child(path: str, mode: str) -> str:
    proc = subprocess.run([sys.executable, "-c", CHILD, path, mode], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    return proc.stdout


def test_mail_is_delivered_again_after_a_crash_before_commit(tmp_path):
    path, mail_id = _session_with_mail(tmp_path)
    assert f"DELIVERED {mail_id}" in _child(path, "no-commit")
    # The delivering process died before its transcript committed: the record is still there.
    assert f"DELIVERED {mail_id}" in _child(path, "no-commit")
    session = Session.open(path)
    assert [m.id for m in session.deliver_mail("root")] == [mail_id]


def test_mail_is_delivered_once_when_the_receiving_transcript_committed(tmp_path):
    path, mail_id = _session_with_mail(tmp_path)
    out = _child(path, "commit")
    assert f"DELIVERED {mail_id}" in out and "COMMITTED" in out
    session = Session.open(path)
    assert session.deliver_mail("root") == []
    receipts = [m for m in session.buffers["root"].messages() if (m.meta or {}).get("receipt") == mail_id]
    assert len(receipts) == 1


def test_repeated_delivery_is_deduplicated_by_receipt(tmp_path):
    session = Session.open(tmp_path / "s", create=True)
    record = session.append_mail("root", "once only")
    assert session.deliver_mail("root") == [record]
    # Simulate a sidecar that still lists the record (e.g. recovered from an older generation).
    session.sidecar.add_mail(record, None)
    assert session.deliver_mail("root") == []
    assert sum((m.meta or {}).get("receipt") == record.id for m in session.buffers["root"].messages()) == 1
    assert session.mailbox("root") == []


def test_consumed_mail_is_merged_back_until_the_receiving_transcript_commits(tmp_path):
    session = Session.open(tmp_path / "s", create=True)
    session.spawn_agent("a1")
    record = session.append_mail("a1", "for the agent")
    session.deliver_mail("a1")
    session.save_registry()  # an ordinary sidecar write: the consumed record is merged back
    assert record.id in _committed_mail(session)["a1"]
    session.checkpoint("root")  # a root checkpoint cannot retire an agent's consumption
    assert record.id in _committed_mail(session)["a1"]
    session.checkpoint("a1")
    assert record.id not in _committed_mail(session).get("a1", [])


def _committed_mail(session: Session) -> dict[str, list[str]]:
    sidecar = session.committed_sidecar()  # format 2: the committed document
    return {conv: [r["id"] for r in box] for conv, box in sidecar["mailboxes"].items()}


def test_committed_removal_never_outruns_its_transcript_text(tmp_path):
    """Randomised operation sequences; every adopted generation is checked: a mail id that was ever
    committed to a mailbox and is absent from this generation's sidecar has its receipt in this
    generation's receiving transcript. (Format 2: every generation is replayed from the session log.)"""
    rng = random.Random(7)
    session = Session.open(tmp_path / "s", create=True, fs=OsFileSystem(),
                           settings=SessionSettings(chunk_size=512, keep_generations=1000))
    session.spawn_agent("a1")
    session.spawn_agent("a2")
    conversations = ["root", "a1", "a2"]
    for step in range(250):
        action = rng.choice(["mail", "mail", "deliver", "checkpoint", "registry", "message"])
        conv = rng.choice(conversations)
        if action == "mail":
            session.append_mail(conv, f"mail {step}")
        elif action == "deliver":
            session.deliver_mail(conv)
        elif action == "checkpoint":
            session.checkpoint(conv)
        elif action == "registry":
            session.save_registry()
        else:
            session.add_message(conv, Message("user", f"message {step}", float(step)))
    ever: dict[str, str] = {}
    checked = 0
    for generation in range(1, session.head.seq + 1):  # format 2: every generation replayed from the log
        state = session.store.state_at(generation)
        contents, sidecar, name = session.store.verify(state), state.sidecar, f"generation {generation}"
        present = {r["id"] for box in sidecar["mailboxes"].values() for r in box}
        for conv, box in sidecar["mailboxes"].items():
            for r in box:
                ever[r["id"]] = conv
        for mail_id, conv in ever.items():
            if mail_id in present:
                continue
            transcript = contents.get(f"conversations/{conv}.jsonl", b"")
            receipts = {json.loads(line).get("meta", {}).get("receipt") for line in transcript.splitlines()}
            assert mail_id in receipts, f"{name}: removal of {mail_id} committed before its transcript text"
            checked += 1
    assert checked > 50


# -- E7 at-least-once: delivered mail is never dropped from a later sidecar ----------------------------------
def _between(session: Session, kind: str) -> None:
    """One publication of ``kind`` that does not commit the receiving (root) transcript."""
    if kind == "mail":
        session.append_mail("a1", "mail to another conversation")
    elif kind == "registry":
        session.set_activity("a1", "running")
        session.save_registry()
    elif kind == "control":
        session.set_control("goal", {"text": "a goal"})
    elif kind == "agent-checkpoint":
        session.add_message("a1", Message("assistant", "the agent works", 2.0))
        session.checkpoint("a1")
    elif kind == "background":
        session.deliver_background("a1", "a background completion", sender="job-2")
    else:  # a second agent: spawn publishes its registration
        session.spawn_agent("a2", prompt="more work")


@pytest.mark.parametrize("profile", [Session, FileSession], ids=["portable", "file"])
@pytest.mark.parametrize("kind", ["mail", "registry", "control", "agent-checkpoint", "background", "spawn"])
def test_delivered_mail_survives_a_crash_after_a_later_publication_of_another_kind(tmp_path, profile, kind):
    """At-least-once (E7): mail delivered into root is consumed in memory only; a publication that does not
    commit root's transcript must carry the consumed record in its sidecar (the ledger). A crash then (the
    disk as it is, nothing flushed) leaves the mail in root's mailbox, deliverable again: never lost."""
    path = tmp_path / "s"
    session = profile.open(path, create=True)
    session.spawn_agent("a1", prompt="work")
    session.add_message("root", Message("user", "hello", 1.0))
    session.checkpoint("root")
    record = session.append_mail("root", "the result", sender="a1")
    assert [m.id for m in session.deliver_mail("root")] == [record.id]  # consumed, root not yet saved
    _between(session, kind)
    crashed = tmp_path / "crashed"
    shutil.copytree(path, crashed)  # the crash: what is on disk now, owner gone
    reopened = profile.open(crashed, owner_alive=lambda _pid: False)
    in_box = [m.id for m in reopened.mailbox("root")]
    in_text = [m.meta.get("receipt") for m in reopened.buffers["root"].messages() if m.meta]
    assert record.id in in_box + in_text, f"delivered mail {record.id} lost after a {kind} publication"
    assert [m.id for m in reopened.deliver_mail("root")] == [record.id]  # delivered again, exactly once
    reopened.checkpoint("root")
    reopened.close()
    session.close()
