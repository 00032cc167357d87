"""``--markdown`` is an alias of ``--format markdown``: given with ``--format`` as well, the two ask for two
outputs, and the command line says so in one line (exit 2) instead of printing one of them and passing."""

from __future__ import annotations

import pytest

from perfsuite import cli


@pytest.mark.parametrize("argv", [
    ["compare", "a.json", "b.json", "--markdown", "--format", "json"],
    ["compare", "a.json", "b.json", "--format", "json", "--markdown"],
    ["report", "a.json", "--format", "text", "--markdown"],
    ["history", "--markdown", "--format", "json"],
    ["bars", "a.json", "--markdown", "--format", "json"],
])
def test_conflicting_output_flags_are_a_one_line_usage_error(argv: list[str],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith(f"perfsuite: error: {argv[0]}: argument --") and "not allowed with argument --" in line


def test_either_flag_alone_still_works(capsys: pytest.CaptureFixture[str]) -> None:
    for flag in (["--markdown"], ["--format", "markdown"]):
        assert cli.main(["compare", "missing-a.json", "missing-b.json", *flag]) == 2
        assert "no such results file" in capsys.readouterr().err
