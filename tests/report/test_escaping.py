"""Names in a results document are untrusted text: ``report`` shows a mode name's escape sequences as
``\\x1b`` (never sends them to the terminal) and its rich markup as written (never renders it), and
``compare --markdown`` keeps backticks, ``|`` and other Markdown syntax in names from becoming code spans,
table cells, emphasis or links."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from perfsuite import cli

from .conftest import PHASES, SYNC_ASYNC

#: a mode name that clears the screen, retitles the window and asks rich for bold red
HOSTILE = "\x1b[2J\x1b]0;pwned\x07[bold red]evil[/] \x9b31m"
#: a recipe name with markup, an escape sequence and a C1 control
RECIPE = "rec[blink]ipe\x1b[5m\x85"
#: a mode name that would close a code span and split a Markdown table cell
TICKS = "a|b`c`*x*_y_[l](javascript:alert(1))"


def _hostile_doc(docs: Any) -> dict[str, Any]:
    modes = {HOSTILE: {**SYNC_ASYNC["async"], "phases": PHASES, "operation": "m:f"},
             TICKS: {**SYNC_ASYNC["sync"], "phases": PHASES, "operation": "m:f"}}
    return docs.make(RECIPE, modes)


def _controls(text: str) -> list[str]:
    return [ch for ch in text if (ord(ch) < 32 and ch not in "\n\t") or 0x7F <= ord(ch) <= 0x9F]


@pytest.mark.parametrize("flags", [[], ["-q"], ["-v"]])
def test_report_shows_control_characters_and_markup_of_names_never_sends_them(
        tmp_path: Path, docs: Any, capsys: pytest.CaptureFixture[str], flags: list[str]) -> None:
    path = docs.write(tmp_path / "doc.json", _hostile_doc(docs))
    assert cli.main([*flags, "report", str(path)]) == 0
    out = capsys.readouterr().out
    assert _controls(out) == []
    assert "\\x1b[2J\\x1b]0;pwned\\x07" in out and "\\x9b31m" in out
    assert "rec[blink]ipe\\x1b[5m\\x85" in out  # the title's markup as written, not rendered away


def test_report_markdown_escapes_names(tmp_path: Path, docs: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = docs.write(tmp_path / "doc.json", _hostile_doc(docs))
    assert cli.main(["report", str(path), "--markdown"]) == 0
    out = capsys.readouterr().out
    assert _controls(out) == []
    assert "| a\\|b\\`c\\`\\*x\\*\\_y\\_[l\\](javascript:alert(1)) |" in out
    assert "**rec[blink\\]ipe\\\\x1b[5m\\\\x85: " in out


def test_compare_markdown_keeps_names_inside_their_code_spans(
        tmp_path: Path, docs: Any, capsys: pytest.CaptureFixture[str]) -> None:
    base = docs.write(tmp_path / "base" / "doc.json", _hostile_doc(docs))
    new = docs.write(tmp_path / "new" / "doc.json", _hostile_doc(docs))
    assert cli.main(["compare", str(base), str(new), "--markdown", "--all"]) == 0
    out = capsys.readouterr().out
    assert _controls(out) == []
    rows = [line for line in out.splitlines() if line.startswith("| ") and "max_gap_ms" in line]
    assert len(rows) == 3  # both modes and the idle control
    for row in rows:  # nine cells each: no name splits a cell
        assert len(row.replace("\\|", "").strip("|").split("|")) == 9, row
    assert "| ``a\\|b`c`*x*_y_[l](javascript:alert(1))`` |" in out


def test_compare_text_escapes_markup_in_names(tmp_path: Path, docs: Any, capsys: pytest.CaptureFixture[str]) -> None:
    base = docs.write(tmp_path / "base" / "doc.json", _hostile_doc(docs))
    new = docs.write(tmp_path / "new" / "doc.json", _hostile_doc(docs))
    assert cli.main(["compare", str(base), str(new), "--all"]) == 0
    out = capsys.readouterr().out
    assert _controls(out) == [] and "[bold red]evil[/]" in out


def test_the_markdown_escapes() -> None:
    from perfsuite.report._format import md_code, md_text

    assert md_code("a`b``c") == "```a`b``c```"
    assert md_code("`x") == "`` `x ``"
    assert md_code("a|b", table=True) == "`a\\|b`"
    assert md_text("ack_ms _x_ *y* [l](u) <b> p < 0.05 1 -> 2") == (
        "ack_ms \\_x\\_ \\*y\\* [l\\](u) \\<b> p < 0.05 1 -> 2")
    assert md_text("line\nbreak\x1b") == "line\\\\x0abreak\\\\x1b"
