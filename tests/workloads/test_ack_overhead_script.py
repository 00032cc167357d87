"""scripts/acceptance/ack_overhead.py (format 2: where an acknowledgement's time goes beyond the floor) runs
its four kinds of child process on copies of synthetic-6000 and prints one row per kind (the engine's with
its own fdatasync and the rest); bad input is one line and exit 2."""

from __future__ import annotations

import os
import re

import pytest


@pytest.mark.parametrize("what", ["mail", "checkpoint"])
def test_one_round_prints_every_kind_against_the_floor(acceptance_script, what, capsys):
    assert acceptance_script("ack_overhead").main([what, "-n", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == f"{what}: 1 rounds, medians (ms); x: against the floor's ack"
    rows = {re.split(r"\s+ack\s+", line.strip())[0]: line for line in lines[1:]}
    assert set(rows) == {"sync", "sync (second)", "async", "async (second)", "floor", "floor-thread"}
    assert re.search(r"floor\s+ack\s+\d+\.\d{3}\s+1\.00x$", rows["floor"].strip())
    legs = re.compile(r"hand-off there\s+\d+\.\d{3}\s+and back\s+\d+\.\d{3}$")
    assert legs.search(rows["floor-thread"]), rows["floor-thread"]
    own = re.compile(r"its fdatasync\s+\d+\.\d{3}\s+ack minus its fdatasync\s+-?\d+\.\d{3}$")
    for engine in ("sync", "sync (second)", "async", "async (second)"):
        assert own.search(rows[engine]), rows[engine]


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux's")
def test_pinned_rounds_say_so(acceptance_script, capsys):
    cpu = min(os.sched_getaffinity(0))
    assert acceptance_script("ack_overhead").main(["mail", "-n", "1", "--pin-cpu", str(cpu)]) == 0
    assert capsys.readouterr().out.startswith(f"mail: 1 rounds, every child on CPU {cpu}, medians")


@pytest.mark.parametrize("argv", [["mail", "-n", "0"], ["mail", "--pin-cpu", "100000"]])
def test_bad_input_is_one_line(acceptance_script, argv, capsys):
    assert acceptance_script("ack_overhead").main(argv) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
