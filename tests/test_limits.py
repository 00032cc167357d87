"""Bad input is one line: every count, size and duration perfsuite takes is bounded by one table (perfsuite/_limits.py),
and the "Bad input and limits" table of docs/conventions.md says exactly what that table holds."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from perfsuite._limits import LIMITS, Limit, check_limit, describe_limit, show_number

README = Path(__file__).resolve().parents[1] / "docs" / "conventions.md"


def _readme_rows() -> dict[str, tuple[str, str]]:
    text = README.read_text(encoding="utf-8")
    body = text.split("<!-- limits: tests/test_limits.py reads this table -->", 1)[1].split("<!-- /limits -->", 1)[0]
    rows = {}
    for line in body.splitlines():
        match = re.fullmatch(r"\| `(\w+)` \| (\S+)\.\.(\S+?)(?: (\S+))? \| .+ \|", line.strip())
        if match:
            rows[match.group(1)] = (f"{match.group(2)}..{match.group(3)}", match.group(4) or "")
    return rows


def test_the_readme_table_is_the_limits_table() -> None:
    rows = _readme_rows()
    assert set(rows) == set(LIMITS)
    for name, limit in LIMITS.items():
        assert rows[name] == (f"{show_number(limit.low)}..{show_number(limit.high)}", limit.unit), name


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), True, "3", None, 2.5])
def test_a_count_refuses_what_is_not_an_integer_in_range(value: object) -> None:
    assert check_limit("samples", value) is not None


def test_a_limit_names_the_value_and_the_range() -> None:
    assert check_limit("samples", 10**12) == "expected an integer from 1 to 10000, got 1000000000000 (at most 10000)"
    assert check_limit("samples", 0) == "expected an integer from 1 to 10000, got 0 (at least 1)"
    assert check_limit("heartbeat_ms", math.inf) == "expected a finite number from 0.1 to 1000 (ms), got inf"
    assert check_limit("samples", 10**400) is not None  # exact for any integer (no float conversion)
    assert check_limit("samples", 6) is None and check_limit("heartbeat_ms", 5) is None
    assert describe_limit(Limit(0, 1, integer=False, unit="s")) == "a finite number from 0 to 1 (s)"
