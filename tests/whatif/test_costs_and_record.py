"""This machine's per-publication costs (M3 allocation pass, cached) and --record-trace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from perfsuite import __version__, cli
from perfsuite.engine import Message, Session
from perfsuite.errors import PerfsuiteError
from perfsuite.harness import load_recipe, run_recipe
from perfsuite.whatif import Setting, load_costs, read_costs, read_trace, recording, replay
from perfsuite.whatif._costs import cache_path


def test_costs_are_measured_once_and_cached_by_version_and_machine(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFSUITE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PERFSUITE_ALLOCATION_TRACKER", "memray")  # the alloc extra: bytes allocated, summed
    costs = load_costs()
    path = cache_path()
    assert path.is_file() and path.parent == tmp_path / "cache" / "whatif" and f"-{__version__}-" in path.name
    assert costs.source == str(path) and "this machine's measured" in costs.describe()
    for kind in ("registry", "checkpoint", "mail"):
        cost = costs.kinds[kind]
        assert cost.allocated_bytes > 0 and cost.bytes_written > 0 and cost.duration_ms > 0
    # E7/SPEC 8: the sidecar-only registry save is the cheap one
    assert costs.kinds["registry"].bytes_written < costs.kinds["checkpoint"].bytes_written
    again = load_costs()
    assert again.measured_at == costs.measured_at and again.kinds == costs.kinds


def test_costs_on_tracemalloc_say_bytes_allocated_are_not_measured_and_are_never_reused_for_memray(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The core install: the core's tracemalloc pass cannot sum allocations (None, not 0), and a cached file of one
    method is measured again for the other, so what-if never mixes them."""
    monkeypatch.setenv("PERFSUITE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PERFSUITE_ALLOCATION_TRACKER", "tracemalloc")  # the core's (memray's is the default here)
    costs = load_costs()
    assert costs.tracker == "tracemalloc" and "tracemalloc allocation pass" in costs.describe()
    assert all(c.allocated_bytes is None and c.peak_bytes > 0 for c in costs.kinds.values())
    assert read_costs(cache_path()).kinds == costs.kinds  # None survives the cache file
    monkeypatch.setenv("PERFSUITE_ALLOCATION_TRACKER", "memray")
    other = load_costs()
    assert other.tracker == "memray" and all(c.allocated_bytes for c in other.kinds.values())


def test_a_malformed_costs_file_is_a_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "c.json"
    bad.write_text(json.dumps({"schema": 1, "kinds": {"registry": {"allocated_bytes": 1}}}))
    with pytest.raises(PerfsuiteError, match=r"c.json: kinds.registry: expected allocated_bytes"):
        read_costs(bad)


def test_recording_a_session_gives_a_replayable_trace(tmp_path: Path) -> None:
    with recording(tmp_path / "t.jsonl", workers=False) as recorder:
        session = Session.open(tmp_path / "session", create=True)
        session.add_message("root", Message("user", "hello", 0.0))
        session.checkpoint()
        session.spawn_agent("agent-1")
        session.set_activity("agent-1", "permission-blocked")
        session.set_activity("agent-1", "running")
        session.append_mail("root", "done", sender="agent-1", kind="RESULT")
        session.close()
    trace = read_trace(tmp_path / "t.jsonl")
    assert recorder.trace == trace and trace.meta["generator"] == "recorded"
    kinds = [e.kind for e in trace.events if e.kind != "publication"]
    assert kinds == ["message", "save", "spawn", "activity", "activity", "mail"]  # nested calls not recorded
    assert trace.count("publication") == 3  # checkpoint, spawn, RESULT; the debounce timer was inert (no loop)
    run = replay(trace, Setting(debounce_s=2.0))
    # the RESULT's synchronous commit absorbs the pending registry save (E7), as it did in the real run
    assert [p.kind for p in run.publications] == ["checkpoint", "spawn", "message"]
    assert run.debounce_absorbed == 1 and len(run.publications) == trace.count("publication")
    assert getattr(Session.set_activity, "__wrapped__", None) is None  # uninstalled


def test_recording_reaches_processes_that_ask_the_environment(tmp_path: Path) -> None:
    """A process of the user's own opts in with ``record_from_environment`` (a published seam: no sitecustomize)."""
    child = textwrap.dedent(f"""
        from perfsuite.engine import Session
        from perfsuite.workloads.tracing import record_from_environment
        record_from_environment()
        s = Session.open({str(tmp_path / "child")!r}, create=True)
        s.spawn_agent("agent-7")
        s.set_activity("agent-7", "waiting")
        s.close()
    """)
    before = os.environ.get("PYTHONPATH")
    with recording(tmp_path / "w.jsonl"):
        assert os.environ.get("PYTHONPATH") == before  # nothing injected
        subprocess.run([sys.executable, "-c", child], check=True, env=dict(os.environ), timeout=60)
    trace = read_trace(tmp_path / "w.jsonl")
    events = [e for e in trace.events if e.kind == "activity"]
    assert len(events) == 1 and events[0].flavour == "waiting" and events[0].session.startswith("child@")
    assert "PERFSUITE_RECORD_TRACE" not in os.environ


def test_record_trace_in_process_isolation_keeps_the_users_sitecustomize(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Observed through a published seam: a process-isolated sample's session is recorded (the workload reads the
    environment), and a sitecustomize of the user's on PYTHONPATH still runs in the worker (nothing shadows it)."""
    small_session = tmp_path / "fixture"
    session = Session.open(small_session, create=True)
    session.add_message("root", Message("user", "hello", 0.0))
    session.full_save()
    session.close()
    site = tmp_path / "site"
    site.mkdir()
    marker = tmp_path / "marker"
    (site / "sitecustomize.py").write_text(
        "import os\n"
        "if os.environ.get('USER_SITE_MARKER'):\n"
        "    open(os.environ['USER_SITE_MARKER'], 'a').write(f'{os.getpid()}\\n')\n", encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p))
    monkeypatch.setenv("USER_SITE_MARKER", str(marker))
    file = tmp_path / "r.toml"
    file.write_text(textwrap.dedent("""
        name = "t"
        samples = 1
        warmup = 0
        isolation = "process"
        [modes.sync]
        operation = "perfsuite.workloads.engine:mailbox_delivery"
        path = "sync"
    """))
    with recording(tmp_path / "p.jsonl"):
        run_recipe(load_recipe(str(file)), output_dir=tmp_path / "out", fixture=small_session,
                   fixture_info={"name": "small"})
    trace = read_trace(tmp_path / "p.jsonl")
    mail = [e for e in trace.events if e.kind == "mail"]
    assert mail and all(e.session.split("@")[1].split(".")[0] != str(os.getpid()) for e in mail)  # the worker's
    assert trace.count("publication") >= 1
    pids = {line for line in marker.read_text().split() if line} if marker.exists() else set()
    assert pids and str(os.getpid()) not in pids  # the user's sitecustomize ran in the worker


def test_demo_records_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", str(tmp_path / "demo"), "--record-trace", str(tmp_path / "demo.jsonl")]) == 0
    assert "trace: " in capsys.readouterr().out
    trace = read_trace(tmp_path / "demo.jsonl")
    assert {"activity", "spawn", "save", "message", "mail", "publication"} <= {e.kind for e in trace.events}
