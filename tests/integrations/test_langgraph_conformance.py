"""LangGraph's own conformance suite (langgraph-checkpoint-conformance) on both engine checkpointers: every
base capability and the three extended ones (copy_thread, delete_for_runs, prune) pass. The report is
printed into the test output, as the suite prints it."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator
from pathlib import Path

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from perfsuite.engine import SessionSettings
from perfsuite.integrations.langgraph import AsyncEngineSaver, EngineSaver

#: small preallocated logs: a fresh session per capability suite need not write 16 MiB of zeros each
SETTINGS = SessionSettings(log_capacity=1 << 20)


def _report(tmp_path: Path, name: str, asynchronous: bool, capsys: pytest.CaptureFixture[str]) -> dict:
    counter = itertools.count()

    async def factory() -> AsyncGenerator[EngineSaver | AsyncEngineSaver, None]:
        path = tmp_path / f"session-{next(counter)}"
        if asynchronous:
            saver = await AsyncEngineSaver.open(path, settings=SETTINGS)
            yield saver
            await saver.aclose()
        else:
            sync = EngineSaver(path, settings=SETTINGS)
            yield sync
            sync.close()

    registered = checkpointer_test(name=name)(factory)
    report = asyncio.run(validate(registered))
    with capsys.disabled():
        report.print_report()
    return report.to_dict()


@pytest.mark.parametrize(("name", "asynchronous"), [("EngineSaver", False), ("AsyncEngineSaver", True)])
def test_every_capability_passes_langgraphs_conformance_suite(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             name: str, asynchronous: bool) -> None:
    document = _report(tmp_path, name, asynchronous, capsys)
    results = document["results"]
    assert set(results) == {c.value for c in ALL_CAPABILITIES}
    failing = {cap: r["failures"] for cap, r in results.items() if not (r["detected"] and r["passed"])}
    assert failing == {}
    assert document["conformance_level"] == "FULL"
    assert all(r["tests_passed"] > 0 for r in results.values())
