"""scripts/acceptance/publication_cpu.py (format 2's steady-path CPU figures) runs on a copy of synthetic-6000
and prints one line of medians per kind of publication; bad input is one line and exit 2."""

from __future__ import annotations

import re

import pytest


@pytest.mark.parametrize("what", ["mail", "checkpoint"])
def test_the_script_prints_the_medians_beside_the_raw_calls(acceptance_script, what, capsys):
    assert acceptance_script("publication_cpu").main([what, "-n", "2"]) == 0
    line = capsys.readouterr().out.strip()
    assert re.fullmatch(rf"{what}: 2 publications, medians: cpu \d+ us \(raw \d+\), wall \d+ us \(raw \d+\), "
                        r"wall ratio \d+\.\d\d", line), line


def test_a_bad_count_is_one_line(acceptance_script, capsys):
    assert acceptance_script("publication_cpu").main(["mail", "-n", "0"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
