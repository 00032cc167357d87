"""Shared fixtures of the workload tests: a tiny real session (portable, 200 turns, two agents, a diagnostic log),
the acceptance scripts (``scripts/acceptance/NAME.py``) loaded as modules, so a test calls their ``main``, and
one fixture cache for the whole run (every pytest-xdist worker: a 27 MB session is built once, not per worker)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from perfsuite.engine import DiagnosticLog, Message, Session, SessionSettings


@pytest.fixture(scope="session")
def run_fixture_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fixture cache shared by every worker of this run: the run's temporary root when pytest-xdist splits the
    run (each worker's base dir is a child of it), else this session's. :func:`build_fixture` builds an entry
    under a lock and renames it into place, so a worker asking for an entry another one is building waits for
    it; tests read entries through the harness's private copy of each sample, never in place."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    cache = root / "shared-fixture-cache"
    cache.mkdir(exist_ok=True)
    return cache


@pytest.fixture
def small_session(tmp_path: Path) -> Path:
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


@pytest.fixture
def acceptance_script() -> Callable[[str], ModuleType]:
    """``acceptance_script("ack_overhead")``: that script of scripts/acceptance/, imported from its file."""

    def load(name: str) -> ModuleType:
        path = Path(__file__).resolve().parents[2] / "scripts" / "acceptance" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load
