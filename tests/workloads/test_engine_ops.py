"""The engine operations behind the recipes, run through the real harness on a tiny session."""

from __future__ import annotations

import textwrap

from perfsuite.harness import load_recipe, run_recipe


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
    # the job's loop-thread time per phase, flattened (M5); acknowledged in a later loop turn than submission
    assert {"main_thread_ms.stage", "main_thread_ms.freeze"} <= set(async_sample["metrics"])
    assert async_sample["submission_ms"] < async_sample["ack_ms"]
    sync_sample = doc["modes"]["sync"]["samples"][0]
    assert not any(k.startswith("main_thread_ms.") for k in sync_sample["metrics"])  # no job: all inline
    for mode in ("sync", "async"):  # the recording layer's counts: the same durable operations either way
        metrics = doc["modes"][mode]["samples"][0]["metrics"]
        # format 2 (the session log): one fdatasync of the log, no fsync, rename or directory fsync
        assert (metrics["fdatasyncs"], metrics["fsyncs"], metrics["dir_fsyncs"], metrics["renames"]) == (1, 0, 0, 0)
        assert metrics["durability_points"] == 1


def test_process_offload_measures_the_workers_writes(tmp_path, small_session):
    """M4 isolation: with a worker process the publication's writes and syncs are measured as with a thread
    (format 2: the worker stages and hashes, the log's pwrite and fdatasync run in this process); never a
    0 that means 'unseen'."""
    doc = run(tmp_path, small_session, HEAD + """
    [modes.thread]
    operation = "perfsuite.workloads.engine:checkpoint"
    offload = "thread"

    [modes.process]
    operation = "perfsuite.workloads.engine:checkpoint"
    offload = "process"
    """)
    for index in range(2):
        thread = doc["modes"]["thread"]["samples"][index]["metrics"]
        process = doc["modes"]["process"]["samples"][index]["metrics"]
        # the same publication but for the digits of its timestamps (a float's repr varies in length)
        assert thread["bytes_written"] > 0 and abs(process["bytes_written"] - thread["bytes_written"]) <= 32
        assert process["fdatasyncs"] == thread["fdatasyncs"] == 1 and process["dir_fsyncs"] == thread["dir_fsyncs"]


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


def test_engine_operations_measure_without_listening_to_the_engine(tmp_path, small_session):
    """The operations read loop-thread times from the publication reports: no listener, so no event is
    built inside the measured window (engine events: a listener costs allocations there)."""
    import shutil

    from perfsuite.harness import OperationContext
    from perfsuite.workloads.engine import checkpoint, mailbox_delivery

    for i, (factory, params) in enumerate([(mailbox_delivery, {"path": "sync"}), (mailbox_delivery, {"path": "async"}),
                                           (checkpoint, {"path": "async", "conversation": "root"})]):
        workdir = tmp_path / f"w{i}"
        shutil.copytree(small_session, workdir)
        op = factory(OperationContext(workdir=workdir, params=params, mode="m", sample=0, scratch=tmp_path))
        try:
            assert not op.session.observers
        finally:
            op.close()


def test_asynchronous_checkpoints_back_to_back_acknowledge_the_sample(tmp_path, small_session):
    """Several asynchronous checkpoints in one sample (the -x8 modes): each publication's callback is the
    sample's own, and the sample is acknowledged once, after the last one is durable (a per-checkpoint
    callback that shadowed the operation's ``ack`` left the harness waiting until its deadline)."""
    doc = run(tmp_path, small_session, HEAD + """
    [modes.async-x3]
    operation = "perfsuite.workloads.engine:checkpoint"
    path = "async"
    conversation = "root"
    checkpoints = 3
    """)
    samples = doc["modes"]["async-x3"]["samples"]
    assert len(samples) == 2 and all(s["metrics"]["generations"] == 3 for s in samples)
    assert all(s["ack_ms"] >= s["submission_ms"] for s in samples)
