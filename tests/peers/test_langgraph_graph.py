"""The peer-langgraph-graph operation (E4, seed 002): one real graph invoke per sample on a long thread, each
saver acknowledged, the engine savers' checkpoints durable (counted fdatasyncs, read back by a new saver on
the same session), the InMemorySaver floor writing nothing, and a mode key the operation does not know
failing before anything runs."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.harness import check_parameters, load_recipe, resolve_factories, run_recipe, validate_results
from perfsuite.workloads.peers import langgraph_graph

needs_langgraph = pytest.mark.skipif(langgraph_graph.invoke.unavailable() is not None,  # type: ignore[attr-defined]
                                reason=str(langgraph_graph.invoke.unavailable()))  # type: ignore[attr-defined]

HISTORY = 40


@needs_langgraph
@pytest.mark.parametrize("saver", ["engine", "async-engine"])
def test_the_engine_modes_store_the_invoke_durably(saver: str, run_operation: Any, tmp_path: Path) -> None:
    _, metrics = run_operation(langgraph_graph.invoke, {"saver": saver, "messages": HISTORY}, scratch=tmp_path)
    assert metrics["reply_messages"] == HISTORY + 2  # the user turn and the node's reply
    assert metrics["supersteps"] >= 2  # the input's checkpoint and the node's step, at least
    assert metrics["fdatasyncs"] >= metrics["supersteps"]  # durability "sync": every put fdatasynced
    assert metrics["bytes_written"] > 0 and metrics["bytes_written_per_superstep"] > 0
    from perfsuite.integrations.langgraph import EngineSaver

    with EngineSaver(tmp_path / "session", create=False) as reopened:  # what a new process would read
        stored = reopened.get_tuple({"configurable": {"thread_id": langgraph_graph.THREAD_ID}})
    assert stored is not None
    messages = stored.checkpoint["channel_values"]["messages"]
    assert len(messages) == HISTORY + 2 and messages[-1].content.startswith(f"reply to {HISTORY + 1} messages")


@needs_langgraph
def test_the_memory_floor_writes_nothing(run_operation: Any, tmp_path: Path) -> None:
    _, metrics = run_operation(langgraph_graph.invoke, {"saver": "memory", "messages": HISTORY}, scratch=tmp_path)
    assert metrics["reply_messages"] == HISTORY + 2 and metrics["supersteps"] >= 2
    assert metrics["bytes_written"] == 0 and metrics["fdatasyncs"] == 0 and metrics["fsyncs"] == 0
    assert not list(tmp_path.iterdir())  # no file at all


@needs_langgraph
def test_every_mode_of_the_recipe_is_acknowledged(tmp_path: Path) -> None:
    recipe = load_recipe("peer-langgraph-graph")
    assert not recipe.catalogue and recipe.allocation
    assert {m.params["saver"] for m in recipe.modes} == set(langgraph_graph.SAVERS)
    assert all(m.params["messages"] == 6000 for m in recipe.modes)  # the long thread of the comparison
    real = load_recipe("peer-langgraph-graph-27mb")
    assert real.fixture == "copied-27mb" and {m.params["saver"] for m in real.modes} == set(langgraph_graph.SAVERS)
    assert all(m.params["history"] == "root" for m in real.modes)
    modes = tuple(dataclasses.replace(m, params={**m.params, "messages": HISTORY}) for m in recipe.modes)
    small = dataclasses.replace(recipe, modes=modes, samples=1, warmup=0, worker_warmup=0, control_windows=1,
                                settle_ms=0.0, allocation_samples=1, instructions=False)
    document = run_recipe(small, output_dir=tmp_path / "out").document
    validate_results(document)
    assert document["status"] == "complete"
    for mode in recipe.modes:
        (sample,) = document["modes"][mode.name]["samples"]
        metrics = sample["metrics"]
        assert sample["ack_ms"] is not None and sample["max_gap_ms"] is not None, mode.name
        assert metrics["reply_messages"] == HISTORY + 2, mode.name
        if mode.params["saver"] == "memory":
            assert metrics["bytes_written"] == 0 and metrics["fdatasyncs"] == 0
        else:
            assert metrics["bytes_written"] > 0 and metrics["bytes_written_per_superstep"] > 0, mode.name
        if mode.params["saver"] in ("engine", "async-engine"):
            assert metrics["fdatasyncs"] >= metrics["supersteps"] >= 2, mode.name
        assert document["modes"][mode.name]["allocation"], mode.name  # the allocation pass ran


@needs_langgraph
def test_a_root_history_is_the_fixture_sessions_root_transcript(run_operation: Any, tmp_path: Path) -> None:
    from perfsuite.engine import ROOT, Message, Session

    workdir = tmp_path / "fixture"
    with Session.open(workdir, create=True) as session:
        for i in range(30):
            session.add_message(ROOT, Message("user" if i % 3 == 0 else "assistant", f"text {i}", float(i)))
        session.checkpoint(ROOT)
    history = langgraph_graph.root_conversation(workdir)
    assert [m.content for m in history] == [f"text {i}" for i in range(30)]
    assert [m.type for m in history[:3]] == ["human", "ai", "ai"]
    _, metrics = run_operation(langgraph_graph.invoke, {"saver": "engine", "history": "root"},
                               scratch=tmp_path / "scratch", workdir=workdir)
    assert metrics["thread_messages"] == 30 and metrics["reply_messages"] == 32 and metrics["history"] == "root"
    with pytest.raises(PerfsuiteError, match="names no fixture"):
        run_operation(langgraph_graph.invoke, {"saver": "memory", "history": "root"}, scratch=tmp_path / "s2")
    with pytest.raises(PerfsuiteError, match="cannot read the fixture's session") as caught:
        run_operation(langgraph_graph.invoke, {"saver": "memory", "history": "root"}, scratch=tmp_path / "s3",
                      workdir=tmp_path / "s3")
    assert "\n" not in str(caught.value)


def test_a_key_the_operation_does_not_read_fails_before_anything_runs() -> None:
    recipe = load_recipe("peer-langgraph-graph")
    mode = dataclasses.replace(recipe.modes[0], params={**recipe.modes[0].params, "mesages": 10})
    bad = dataclasses.replace(recipe, modes=(mode,))
    with pytest.raises(PerfsuiteError, match="mesages"):
        check_parameters(bad, resolve_factories(bad))


def test_an_unknown_saver_is_one_line() -> None:
    recipe = load_recipe("peer-langgraph-graph")
    mode = dataclasses.replace(recipe.modes[0], params={"saver": "redis"})
    bad = dataclasses.replace(recipe, modes=(mode,))
    with pytest.raises(PerfsuiteError, match="saver") as caught:
        check_parameters(bad, resolve_factories(bad))
    assert "\n" not in str(caught.value)


def test_without_langgraph_the_recipe_is_skipped_in_one_line(tmp_path: Path) -> None:
    hide = "import sys\nfor _name in ('langgraph', 'langchain_core', 'aiosqlite'):\n    sys.modules[_name] = None\n"
    code = hide + (
        "from perfsuite.harness import load_recipe\n"
        "from perfsuite.workloads.plan import unavailable\n"
        "print(unavailable(load_recipe('peer-langgraph-graph')))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.splitlines()
    assert line.startswith("modes.engine: langgraph is not installed (optional langgraph extra): pip install")
