"""Shared fixture of the workload tests: a tiny real session (portable, 200 turns, two agents, a diagnostic log)."""

from __future__ import annotations

import pytest

from perfsuite.engine import DiagnosticLog, Message, Session, SessionSettings


@pytest.fixture
def small_session(tmp_path):
    path = tmp_path / "fixture"
    session = Session.open(path, create=True, settings=SessionSettings(chunk_size=4096))
    for i in range(200):
        session.add_message("root", Message("user" if i % 2 == 0 else "assistant", f"turn {i} " + "z" * 400, i))
    session.spawn_agent("a1", prompt="work")
    session.spawn_agent("a2", prompt="more work " * 50)
    session.attach("notes.txt", b"snapshot " * 1000)
    session.full_save()
    session.close()
    with DiagnosticLog(path / "logs") as log:
        for i in range(500):
            log.log("telemetry.jsonl", {"i": i, "payload": "p" * 100})
    return path
