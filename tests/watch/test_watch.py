"""M11: `perfsuite watch` on small programs: windows of the program's own loop, named callbacks, GC attributed,
several loops by thread, SIGINT keeps what was measured, programs that cannot be watched refused in one line.

Lower bounds only: a busy-wait of B ms on the loop reads at least B ms as its callback (the stall monitor reads the
clock the block spins on) and leaves a heartbeat gap of at least B ms (no tick can run inside it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from perfsuite._paths import portable_path
from perfsuite.harness import validate_results
from perfsuite.watch import LIVE_OPERATION
from tests.watch.conftest import PROGRAMS, child_env, perfsuite, watch

PLANT = str(PROGRAMS / "plant.py")
FAST = ("--window", "0.3", "--heartbeat", "5")


def _windows(doc: dict[str, Any], mode: str = "live") -> list[dict[str, Any]]:
    return doc["modes"][mode]["samples"]


def _planted_ms(window: dict[str, Any], name: str) -> float:
    """The longest of the window's top callbacks called ``name`` (0 when none is): looked up by name, not taken
    first, since on a loaded machine a preempted callback of the agent's can read longer than the planted block."""
    return max((entry["ms"] for entry in window["stalls"]["top"] if entry["name"] == name), default=0.0)


def test_a_planted_block_reads_at_least_its_length_in_every_window_named(tmp_path: Path) -> None:
    # the program stops itself after 2 s of loop time: as many windows however long a loaded machine takes to start
    proc, doc = watch(tmp_path, [PLANT, "--block-ms", "20", "--every-ms", "100", "--duration", "2"], *FAST)
    assert proc.returncode == 0, proc.stderr
    assert doc is not None
    validate_results(doc)
    assert doc["status"] == "complete" and doc["live"]["stop"] == "exited" and doc["live"]["exit_status"] == 0
    assert doc["recipe"]["name"] == "watch-plant"  # the program's name: one series in history and the store
    windows = [w for w in _windows(doc) if w["labels"]["window"] == "whole"]
    assert len(windows) >= 3
    for w in windows:  # 0.3 s windows, a block every 100 ms: each whole window holds one whole
        assert w["submission_ms"] is None and w["ack_ms"] is None  # nothing submitted: not measured, never 0
        assert w["stalls"]["longest_ms"] >= 20.0
        assert _planted_ms(w, "Task.__wakeup of __main__.main") >= 20.0
        assert w["max_gap_ms"] >= 20.0
        assert w["lag_us"]["max"] >= 15_000  # gap minus the 5 ms period, CO-corrected histogram
    assert doc["modes"]["live"]["operation"] == LIVE_OPERATION
    assert doc["live"]["loops"][0]["thread"] == "MainThread" and doc["live"]["loops"][0]["startup"] is not None
    # the idle control ran alongside, on the same window clock: its windows cover the program's instants
    control = {w["index"] for w in doc["control"]["samples"]}
    assert control and {w["index"] for w in windows} & control
    assert all(w["stalls"]["top"][0]["name"] != "Task.__wakeup of __main__.main" for w in doc["control"]["samples"])
    assert "live windows of 0.3 s" in proc.stdout and "idle control" in proc.stdout
    exports = sorted(p.name for p in tmp_path.iterdir())
    assert "w.pyperf.json" in exports and "w.live.hlog" in exports and "w.control.hlog" in exports


def test_a_planted_collection_is_attributed(tmp_path: Path) -> None:
    program = [str(PROGRAMS / "gc_pause.py"), "--objects", "100000", "--every-ms", "150", "--duration", "2.5"]
    proc, doc = watch(tmp_path, program, "--window", "0.5")
    assert proc.returncode == 0, proc.stderr
    assert doc is not None
    planted = [(w, e) for w in _windows(doc) for e in w["stalls"]["top"] if e["name"] == "__main__.collect_now"]
    assert planted, "no window named the planted collection's callback"
    for w, entry in planted:  # a full collection every time: inside the callback that ran it, and in its window
        assert 0 < entry["gc_ms"] <= entry["ms"] + 0.001
        assert w["gc"]["collections"] >= 1 and w["gc"]["by_generation"]["2"] >= 1
    assert any(w["gc"]["in_max_gap"] for w, _ in planted)
    assert "of it GC" in proc.stdout  # the longest callback's line says how much of it was a collection


def test_each_loop_is_reported_by_its_thread(tmp_path: Path) -> None:
    program = [str(PROGRAMS / "threads.py"), "--block-ms", "20", "--every-ms", "100", "--duration", "2"]
    proc, doc = watch(tmp_path, program, *FAST, "--no-control")
    assert proc.returncode == 0, proc.stderr
    assert doc is not None
    assert set(doc["modes"]) == {"live", "live@worker"}
    assert {(loop["mode"], loop["thread"]) for loop in doc["live"]["loops"]} == {("live", "MainThread"),
                                                                               ("live@worker", "worker")}
    worker = [w for w in _windows(doc, "live@worker") if w["labels"]["window"] == "whole"]
    assert worker and all(w["stalls"]["longest_ms"] >= 20.0 for w in worker)
    assert all(_planted_ms(w, "Task.__wakeup of __main__.worker_main") >= 20.0 for w in worker)
    assert all(w["labels"]["thread"] == "worker" for w in worker)
    assert doc["control"]["samples"] == [] and doc["live"]["idle_control"] is None


def _wait_for_windows(path: Path, count: int, proc: subprocess.Popen[str], *, control: bool = False,
                      timeout: float = 300) -> int:
    """The hand-over: ``count`` program windows on disk (and, with ``control``, one of the idle control's: both
    children are past their start-up, where a SIGINT of the whole group would land in their imports). The
    deadline only bounds a failure; a loaded machine takes as long as it takes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            doc = None
        if doc and len(doc["modes"]["live"]["samples"]) >= count and (not control or doc["control"]["samples"]):
            return len(doc["modes"]["live"]["samples"])
        time.sleep(0.05)
    raise AssertionError("no windows written in time")


def test_sigint_mid_run_keeps_every_window_measured(tmp_path: Path) -> None:
    """SIGINT to `perfsuite watch` (a `kill -INT`): the program is stopped, every window already on disk is in
    the final document, marked interrupted; exit 130, no traceback."""
    out = tmp_path / "w.json"
    proc = subprocess.Popen([sys.executable, "-m", "perfsuite", "watch", "--output", str(out), *FAST, "--",
                             sys.executable, PLANT, "--block-ms", "2"], env=child_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    seen = _wait_for_windows(out, 3, proc)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    doc = json.loads(out.read_text())
    validate_results(doc)
    assert doc["status"] == "interrupted" and doc["live"]["stop"] == "interrupted"
    assert len(doc["modes"]["live"]["samples"]) >= seen
    assert "interrupted" in stdout


def test_ctrl_c_in_a_terminal_reaches_both_and_keeps_every_window(tmp_path: Path) -> None:
    """A terminal's Ctrl-C goes to the whole process group: the program stops by itself, the watch keeps its
    windows (the program is not signalled twice, and prints no KeyboardInterrupt traceback)."""
    out = tmp_path / "w.json"
    proc = subprocess.Popen([sys.executable, "-m", "perfsuite", "watch", "--output", str(out), *FAST, "--",
                             sys.executable, PLANT, "--block-ms", "2"], env=child_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    seen = _wait_for_windows(out, 2, proc, control=True)  # the group's SIGINT reaches the control too
    os.killpg(proc.pid, signal.SIGINT)
    _stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    doc = json.loads(out.read_text())
    assert doc["status"] == "interrupted" and len(doc["modes"]["live"]["samples"]) >= seen


def test_a_program_without_an_event_loop_is_refused_in_one_line(tmp_path: Path, write_program: Any) -> None:
    program = write_program("sync.py", "print('no loop here')\n")
    proc, doc = watch(tmp_path, [program], "--duration", "300")  # it exits by itself; a bound on a hang only
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert "ran no asyncio event loop perfsuite could instrument" in lines[-1] and "Traceback" not in proc.stderr
    assert "no loop here" in proc.stdout  # the program ran, unchanged, with its own output
    assert doc is not None and doc["status"] == "failed" and "no asyncio event loop" in doc["error"]


def test_a_program_that_replaces_the_policy_is_refused_naming_it(tmp_path: Path, write_program: Any) -> None:
    program = write_program("own_policy.py", """
        import asyncio

        class Mine(asyncio.DefaultEventLoopPolicy):
            pass

        asyncio.set_event_loop_policy(Mine())
        asyncio.run(asyncio.sleep(0.2))
    """)
    proc, _doc = watch(tmp_path, [program])
    assert proc.returncode == 2
    assert "replaced the event loop policy (__main__.Mine)" in proc.stderr.strip().splitlines()[-1]


def test_a_failing_program_keeps_its_windows_and_its_status(tmp_path: Path, write_program: Any) -> None:
    program = write_program("fails.py", """
        import asyncio, sys

        async def main():
            await asyncio.sleep(1.0)
            raise SystemExit(3)

        asyncio.run(main())
    """)
    proc, doc = watch(tmp_path, [program], "--window", "0.2")
    assert proc.returncode == 1, proc.stderr
    assert doc is not None and doc["status"] == "complete"
    assert doc["live"]["stop"] == "exited" and doc["live"]["exit_status"] == 3
    assert _windows(doc) and "the program exited (status 3)" in proc.stdout


def test_python_m_perfsuite_watch_is_the_same_command(tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    # the program stops itself after 1.5 s of its loop's time (a watch --duration counts from launch: on a loaded
    # machine it could stop the program while it still imports); that --duration, after the program, is its own
    proc = subprocess.run([sys.executable, "-m", "perfsuite.watch", "--window", "0.3", "--output", str(out),
                           PLANT, "--block-ms", "1", "--duration", "1.5"], capture_output=True, text=True,
                          timeout=300, env=child_env())
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["live"]["program"] == portable_path(PLANT) and _windows(doc)  # no machine's absolute path


def test_allocation_windows_are_traced_and_never_latency_samples(tmp_path: Path) -> None:
    proc, doc = watch(tmp_path, [PLANT, "--block-ms", "1"], "--duration", "4", "--window", "0.3",
                      "--allocation-every", "2", "--no-control")
    assert proc.returncode == 0, proc.stderr
    assert doc is not None
    validate_results(doc)
    assert doc["live"]["stop"] == "duration" and doc["status"] == "complete"  # perfsuite stopped it
    alloc = doc["modes"]["live"]["allocation"]
    assert alloc is not None and alloc["tracker"] == "memray" and alloc["samples"]
    assert all(s["total_bytes"] > 0 and s["allocations"] > 0 for s in alloc["samples"])
    traced = {s["index"] for s in alloc["samples"]}
    assert traced.isdisjoint({w["index"] for w in _windows(doc)})
    assert doc["live"]["traced_windows"] >= len(traced)


def test_bad_options_are_one_line() -> None:
    for args, text in [(["watch", "--window", "0"], "expected a finite number > 0"),
                       (["watch", "--duration", "5"], "give the program to run"),
                       (["watch", "--window", "0.005", "--", sys.executable, PLANT], "shorter than two heartbeat")]:
        proc = perfsuite(*args)
        assert proc.returncode == 2 and text in proc.stderr and "Traceback" not in proc.stderr, (args, proc.stderr)
