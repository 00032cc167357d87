"""The example of docs/langgraph.md runs as written: a real StateGraph on EngineSaver, turn by turn,
interrupted and resumed, its state and history read back through a second saver on the same directory."""

from __future__ import annotations

import asyncio
import runpy
from pathlib import Path

import pytest

from tests.docs.pages import python_blocks

pytest.importorskip("langgraph.graph")

from perfsuite.integrations.langgraph import AsyncEngineSaver, EngineSaver


def test_the_langgraph_page_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    [block] = [b for b in python_blocks() if "builder.compile(checkpointer=saver)" in b]
    script = tmp_path / "langgraph_example.py"
    script.write_text(block, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(script), run_name="langgraph_example")  # its own asserts check what it reads back
    assert (tmp_path / "chat-session" / "HEAD").is_file()


def test_the_example_graph_runs_on_the_async_saver_and_reads_back_on_the_sync_one(tmp_path: Path) -> None:
    """The same graph through ``ainvoke`` on AsyncEngineSaver, in each of LangGraph's durability modes; what
    it stored is what EngineSaver reads back after it closed."""
    [block] = [b for b in python_blocks() if "builder.compile(checkpointer=saver)" in b]
    namespace = runpy.run_path(_definitions(tmp_path, block), run_name="langgraph_example_defs")
    builder, command, human = namespace["builder"], namespace["Command"], namespace["HumanMessage"]

    async def run() -> None:
        async with await AsyncEngineSaver.open(tmp_path / "s") as saver:
            graph = builder.compile(checkpointer=saver)
            for durability in ("sync", "async", "exit"):
                config = {"configurable": {"thread_id": f"t-{durability}"}}
                paused = await graph.ainvoke({"messages": [human("hi")]}, config, durability=durability)
                assert "__interrupt__" in paused
                await graph.ainvoke(command(resume="ok"), config, durability=durability)

    asyncio.run(run())
    with EngineSaver(tmp_path / "s", create=False) as saver:
        graph = builder.compile(checkpointer=saver)
        for durability in ("sync", "async", "exit"):
            state = graph.get_state({"configurable": {"thread_id": f"t-{durability}"}})
            assert [m.content for m in state.values["messages"]] == ["hi", "you said: hi", "reviewed: ok"]


def _definitions(tmp_path: Path, block: str) -> str:
    """The example's definitions (everything before its first ``with``), as a script."""
    script = tmp_path / "langgraph_example_defs.py"
    script.write_text(block.split("\nwith ", 1)[0], encoding="utf-8")
    return str(script)
