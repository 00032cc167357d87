"""The engine operations behind the recipes, run through the real harness on a tiny session."""

from __future__ import annotations

import textwrap

import pytest

from perfsuite.engine import DiagnosticLog, Message, Session, SessionSettings
from perfsuite.harness import load_recipe, run_recipe


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


def recipe(tmp_path, body: str):
    file = tmp_path / "r.toml"
    file.write_text(textwrap.dedent(body))
    return load_recipe(str(file))


def run(tmp_path, fixture, body: str) -> dict:
    result = run_recipe(recipe(tmp_path, body), output_dir=tmp_path / "out", fixture=fixture,
                        fixture_info={"name": "small"})
    return result.document


HEAD = """
name = "t"
samples = 2
warmup = 0
isolation = "inline"
gc = "collect-before"
"""


def test_mailbox_delivery_sync_and_async(tmp_path, small_session):
    doc = run(tmp_path, small_session, HEAD + """
    [modes.sync]
    operation = "perfsuite.workloads.engine:mailbox_delivery"
    path = "sync"
    [modes.async]
    operation = "perfsuite.workloads.engine:mailbox_delivery"
    path = "async"
    """)
    for mode in ("sync", "async"):
        for sample in doc["modes"][mode]["samples"]:
            assert sample["metrics"]["generations"] == 1
            assert sample["metrics"]["bytes_written"] > 4000
            assert set(sample["phases_ms"]) >= {"freeze", "stage", "hash", "select", "commit", "adopt", "finish"}
    async_sample = doc["modes"]["async"]["samples"][0]
    assert "main_thread_ms" in async_sample["metrics"] or async_sample["submission_ms"] < async_sample["ack_ms"]


def test_checkpoints_root_agent_and_chunking(tmp_path, small_session):
    doc = run(tmp_path, small_session, HEAD + """
    [modes.root-async]
    operation = "perfsuite.workloads.engine:checkpoint"
    path = "async"
    conversation = "root"
    [modes.agent-sync]
    operation = "perfsuite.workloads.engine:checkpoint"
    path = "sync"
    conversation = "agent"
    [modes.whole]
    operation = "perfsuite.workloads.engine:checkpoint"
    path = "sync"
    checkpoints = 2
    chunk_size = 0
    [modes.chunked]
    operation = "perfsuite.workloads.engine:checkpoint"
    path = "sync"
    checkpoints = 2
    chunk_size = 4096
    """)
    modes = doc["modes"]
    assert modes["agent-sync"]["samples"][0]["metrics"]["conversation_bytes"] > 400  # the larger agent, a2
    whole = modes["whole"]["samples"][0]["metrics"]["bytes_written_per_checkpoint"]
    chunked = modes["chunked"]["samples"][0]["metrics"]["bytes_written_per_checkpoint"]
    assert whole > 5 * chunked


def test_registry_save_sidecar_only_writes_less_than_full(tmp_path, small_session):
    doc = run(tmp_path, small_session, HEAD + """
    [modes.sidecar-only]
    operation = "perfsuite.workloads.engine:registry_save"
    save = "sidecar-only"
    [modes.full]
    operation = "perfsuite.workloads.engine:registry_save"
    save = "full"
    """)
    side = doc["modes"]["sidecar-only"]["samples"][0]["metrics"]
    full = doc["modes"]["full"]["samples"][0]["metrics"]
    assert side["generations"] == 1 and side["hashed_bytes"] < full["hashed_bytes"] / 10


def test_diagnostic_append_writes_the_delta_and_rewrite_writes_everything(tmp_path, small_session):
    doc = run(tmp_path, small_session, HEAD + """
    [modes.delta]
    operation = "perfsuite.workloads.engine:diagnostic_append"
    writer = "delta"
    [modes.rewrite]
    operation = "perfsuite.workloads.engine:diagnostic_append"
    writer = "rewrite"
    """)
    delta = doc["modes"]["delta"]["samples"][0]["metrics"]
    rewrite = doc["modes"]["rewrite"]["samples"][0]["metrics"]
    assert delta["bytes_written"] == delta["delta_bytes"] > 0
    assert rewrite["bytes_written"] == rewrite["log_bytes"] + rewrite["delta_bytes"]


def test_drain_and_stalled_admission(tmp_path, small_session):
    doc = run(tmp_path, small_session, HEAD + """
    [modes.drain]
    operation = "perfsuite.workloads.engine:drain_after_submit"
    [modes.stalled]
    operation = "perfsuite.workloads.engine:stalled_admission"
    drain_limit_s = 0.05
    release_after_ms = 20
    """)
    drained = doc["modes"]["drain"]["samples"][0]
    assert drained["metrics"]["generations"] == 1 and drained["ack_ms"] <= drained["submission_ms"] + 0.5
    stalled = doc["modes"]["stalled"]["samples"][0]["metrics"]
    assert stalled["signalled"] == 1 and stalled["job_retained"] == 1 and stalled["acknowledgements"] == 1
    assert stalled["time_to_signal_ms"] >= 50
