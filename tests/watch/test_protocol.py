"""M11: a raw window from the agent becomes the results document's sample in the parent (no clock involved)."""

from __future__ import annotations

import os
import time

from perfsuite.harness import validate_results
from perfsuite.watch._protocol import window_record

MS = 1_000_000


def _raw(**overrides: object) -> dict[str, object]:
    raw = {
        "index": 7, "start_ns": 100 * MS, "end_ns": 200 * MS, "whole": True, "started_at": 1_795_000_000.0,
        "thread": "MainThread", "instrument_ns": 250_000,
        # ticks every 5 ms, one 25 ms gap from 150 to 175 ms; the last tick is past the window's end
        "ticks": [t * MS for t in [*range(95, 151, 5), *range(175, 206, 5)]],
        "callbacks": 40, "busy_ns": 30 * MS,
        "top": [["__main__.collect_now", 150 * MS, 24 * MS], ["Task.__wakeup of __main__.main", 120 * MS, 2 * MS]],
        "gc": [[2, 152 * MS, 20 * MS, 10, 0]],  # a full collection inside the longest callback
    }
    raw.update(overrides)
    return raw


def test_a_raw_window_becomes_a_sample_with_its_gap_callbacks_and_collection() -> None:
    sample = window_record(_raw(), "live", 5.0)
    assert sample["index"] == 7 and sample["kind"] == "sample" and sample["window_ms"] == 100.0
    assert sample["submission_ms"] is None and sample["ack_ms"] is None
    assert sample["max_gap_ms"] == 25.0 and sample["max_gap_at_ms"] == 50.0
    assert sample["lag_us"]["max"] >= 19_900  # 25 ms gap - 5 ms period, corrected histogram (3 figures)
    assert sample["stalls"]["longest_ms"] == 24.0 and sample["stalls"]["busy_ms"] == 30.0
    top = sample["stalls"]["top"]
    assert top[0] == {"name": "__main__.collect_now", "ms": 24.0, "at_ms": 50.0, "gc_ms": 20.0}
    assert "gc_ms" not in top[1]  # no collection overlapped it
    assert sample["gc"]["collections"] == 1 and sample["gc"]["in_max_gap"] is True
    assert sample["gc"]["by_generation"]["2"] == 1 and sample["gc"]["gc_ms"] == 20.0
    assert sample["metrics"] == {"instrument_ms": 0.25}
    assert sample["labels"] == {"thread": "MainThread", "window": "whole"}


def test_a_partial_window_closed_by_the_query_time_and_no_callbacks() -> None:
    sample = window_record(_raw(whole=False, ticks=[100 * MS, 105 * MS, 130 * MS], end_ns=130 * MS, top=[],
                                callbacks=0, busy_ns=0, gc=[]), "live@worker", 5.0)
    assert sample["labels"]["window"] == "partial" and sample["max_gap_ms"] == 25.0
    assert sample["stalls"] == {"longest_ms": 0.0, "busy_ms": 0.0, "callbacks": 0, "top": []}
    assert sample["gc"]["collections"] == 0


def test_samples_validate_in_a_document(tmp_path: object) -> None:
    from pathlib import Path

    from perfsuite.watch import parse_command
    from perfsuite.watch._document import LiveDocument

    prog = Path(str(tmp_path)) / "app.py"
    prog.write_text("pass\n")
    live = LiveDocument(name="watch-app", command=parse_command(["--", str(prog)], check_python=False),
                        window_s=0.1, delay_s=0.0, period_ms=5.0, target_ms=20.0, duration_s=None, control=True,
                        alloc_every=0, cwd=Path(str(tmp_path)))
    live.program({"type": "loop", "mode": "live", "thread": "MainThread", "main_thread": True, "loop": 1})
    assert live.program({"type": "window", "mode": "live", "index": 7, "traced": False, "raw": _raw()})
    assert live.control({"type": "window", "mode": "live", "index": 7, "raw": _raw(top=[], gc=[])})
    assert not live.program({"type": "window", "mode": "live", "index": 8, "traced": True, "raw": _raw(index=8)})
    live.finish("complete", "duration")
    validate_results(live.doc)
    assert live.doc["modes"]["live"]["verdict"]["met"] is False  # a 25 ms gap against 20 ms
    assert live.doc["control"]["samples"][0]["kind"] == "control"
    assert live.doc["live"]["traced_windows"] == 1
    assert [e["kind"] for e in live.doc["order"]] == ["sample", "control"]


def test_the_window_clock_and_the_modes_by_thread() -> None:
    """Windows of every loop and of the control are aligned to one origin; loops are named by their thread."""
    import threading

    from perfsuite.watch._agent import Agent, Channel
    from perfsuite.watch._loop import mode_for_thread

    agent = Agent({"origin_ns": 1_000 * MS, "window_s": 0.5}, Channel(None))
    assert agent.boundary(0) == 1_000 * MS and agent.boundary(3) == 2_500 * MS
    assert agent.index_at(1_000 * MS) == 0 and agent.index_at(1_000 * MS + 1) == 1 and agent.index_at(0) == 0
    assert agent.index_at(2_499 * MS) == 3 and agent.index_at(2_500 * MS) == 3
    assert agent.tick_capacity * agent.period_ms * MS >= 4 * agent.window_ns
    assert mode_for_thread(threading.main_thread()) == "live"
    assert mode_for_thread(threading.Thread(name="Thread-3 (serve)")) == "live@Thread-3-serve"
    assert agent.stop_ns() is None and not agent.stopped_before(10**18)


def test_a_sigint_while_the_agent_sends_its_last_message_cuts_nothing_short() -> None:
    """The at-exit hook of the watched program's agent: a SIGINT that lands while it sends the last message
    (the watcher's repeated SIGINT, a second Ctrl-C) neither interrupts it nor prints a traceback; the
    previous SIGINT handler is back afterwards."""
    import signal

    from perfsuite.watch._agent import _finish_at_exit, _Outcome

    class Agent:
        finished: tuple[str, int] | None = None

        def finish(self, outcome: str, status: int) -> None:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the signal is handled here, between bytecodes
            self.finished = (outcome, status)

    agent, result = Agent(), _Outcome()
    result.outcome, result.status = "interrupted", 130
    before = signal.getsignal(signal.SIGINT)
    _finish_at_exit(agent, result)
    assert agent.finished == ("interrupted", 130)
    assert signal.getsignal(signal.SIGINT) is before
