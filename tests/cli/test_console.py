"""One console for every command: width, no wrapped cells, no cut numbers, no trailing
padding, NO_COLOR, -q and -v, and `run` printing one line per results document."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.table import Table

import perfsuite.cli as cli
from perfsuite.cli._console import DEFAULT_WIDTH, Console, abbreviate, console_width

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "results" / "baseline"
ANSI = re.compile(r"\x1b\[([0-9;]*)m")


def _colours(text: str) -> list[str]:
    """SGR colour parameters (30-49, 90-107) in ``text``; bold and the like are not colour (no-color.org)."""
    return [p for m in ANSI.finditer(text) for p in m.group(1).split(";")
            if p.isdigit() and (30 <= int(p) <= 49 or 90 <= int(p) <= 107)]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "perfsuite", *args], capture_output=True, text=True, env=environ,
                          cwd=cwd, timeout=300, check=False)


def _wide_table() -> Table:
    table = Table(title="a title longer than the table itself, which must not wrap at the table's width")
    for column in ("recipe", "mode", "metric", "base median", "new median", "ratio", "status"):
        table.add_column(column, justify="right" if "median" in column or column == "ratio" else "left")
    for i in range(3):
        table.add_row("mailbox-delivery", "append-barrier", f"allocation.total_bytes_{i}", "1,284,276.125",
                      "3,540,118.5", "2.76x", "regressed")
    table.add_row("transcript-barrier", "append", "allocation.peak_bytes", "288,995", "310,314", "1.07x", "unchanged")
    return table


def test_width_comes_from_columns_else_the_terminal_else_100(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    assert console_width(io.StringIO()) == DEFAULT_WIDTH == 100
    monkeypatch.setattr("shutil.get_terminal_size", lambda fallback=None: os.terminal_size((132, 40)))
    assert console_width(_Tty()) == 132
    monkeypatch.setenv("COLUMNS", "73")
    assert console_width(_Tty()) == 73 and console_width(io.StringIO()) == 73


def test_abbreviations_keep_start_and_end_and_stay_distinct() -> None:
    assert abbreviate("mailbox-delivery", 20) == "mailbox-delivery"
    assert abbreviate("mailbox-delivery", 12) == "mailbox-~ery"
    assert len(abbreviate("transcript-barrier", 9)) == 9


def test_a_wide_table_is_fitted_names_shortened_numbers_whole() -> None:
    out = io.StringIO()
    Console(file=out, width=80).table(_wide_table())
    text = out.getvalue()
    lines = text.splitlines()
    assert lines[0].startswith("a title longer than the table itself, which must not wrap")  # one line
    body = [ln for ln in lines if ln.startswith(("mail", "tran"))]
    assert len(body) == 4  # one line per row: nothing wrapped
    assert all(len(ln) <= 80 for ln in lines[1:] if not ln.startswith(("shortened", "  ")))
    for number in ("1,284,276.125", "3,540,118.5", "288,995", "310,314", "2.76x"):
        assert number in text  # never cut
    assert all(ln == ln.rstrip() for ln in lines)  # no trailing padding
    legend = " ".join(ln.strip() for ln in lines if ln.startswith(("shortened", "  ")))
    assert "= mailbox-delivery" in legend and "= allocation.total_bytes_0" in legend
    metrics = {ln.split()[2] for ln in body}
    assert len(metrics) == 4  # the shortened metric names are still distinct


def test_numbers_are_never_cut_even_when_nothing_else_can_shrink() -> None:
    table = Table()
    for i in range(12):
        table.add_column(f"v{i}", justify="right")
    table.add_row(*[f"{123456.789 + i:,.3f}" for i in range(12)])
    out = io.StringIO()
    Console(file=out, width=60).table(table)
    for i in range(12):
        assert f"{123456.789 + i:,.3f}" in out.getvalue()


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    table = Table()
    table.add_column("verdict")
    table.add_row("[red]missed[/]")
    monkeypatch.delenv("NO_COLOR", raising=False)
    tty = _Tty()
    Console(file=tty, width=100).table(table)
    assert _colours(tty.getvalue())
    pipe = io.StringIO()
    Console(file=pipe, width=100).table(table)
    assert not ANSI.search(pipe.getvalue())  # no escape at all in a pipe
    monkeypatch.setenv("NO_COLOR", "1")
    tty = _Tty()
    Console(file=tty, width=100).table(table)
    assert "missed" in tty.getvalue() and not _colours(tty.getvalue())


def _check_page(text: str, width: int = 100) -> None:
    lines = text.splitlines()
    assert lines and all(ln == ln.rstrip() for ln in lines), "trailing padding"
    assert max(len(ln) for ln in lines) <= width


def test_report_and_bars_of_the_baseline_fit_100_columns_when_piped() -> None:
    report = _cli("report", str(BASELINE))
    assert report.returncode == 0, report.stderr
    _check_page(report.stdout)
    legend = " ".join(ln.strip() for ln in report.stdout.splitlines() if ln.startswith(("shortened:", "  ")))
    pairs = [e.split(" = ") for e in re.split(r";\s*|\s*shortened:\s*", legend) if " = " in e]
    short = {full.strip(): abbrev.strip() for abbrev, full in pairs}
    for recipe in json.loads(_cli("report", str(BASELINE), "--format", "json").stdout)["results"]:
        for mode in recipe["modes"]:
            gap = mode["max_gap_ms"]
            assert f"{gap['min']:.2f}-{gap['max']:.2f}" in report.stdout  # every range whole
            names = (mode["mode"] + " ", short.get(mode["mode"], mode["mode"]) + " ")
            assert any(ln.startswith(names) for ln in report.stdout.splitlines()), mode["mode"]  # one line a row
    bars = _cli("bars", str(BASELINE))
    assert bars.returncode == 0, bars.stderr
    _check_page(bars.stdout)
    assert "mailbox-delivery" in bars.stdout and "mailbox-deli" + "..." not in bars.stdout


def test_columns_sets_the_width() -> None:
    narrow = _cli("bars", str(BASELINE), env={"COLUMNS": "70"})
    _check_page(narrow.stdout, 70)


def test_quiet_prints_verdicts_only_and_verbose_more(tmp_path: Path) -> None:
    mailbox = next(p for p in sorted(BASELINE.glob("mailbox-delivery-*.json")) if not p.name.endswith(".pyperf.json"))
    quiet = _cli("-q", "report", str(mailbox))
    doc = json.loads(mailbox.read_text(encoding="utf-8"))
    modes = list(doc["modes"])  # the committed baseline's modes, whatever its measurements
    lines = quiet.stdout.splitlines()
    assert [ln.split(":", 1)[0] for ln in lines] == [f"mailbox-delivery {m}" for m in modes]
    for mode, line in zip(modes, lines):
        met = doc["modes"][mode].get("verdict", {}).get("met")
        word = "reference: " if "reference" in doc["modes"][mode] else {True: "met <= 20 ms", False: "missed "}[met]
        assert word in line and "(max gap median " in line
    bars = _cli("bars", str(BASELINE), "-q").stdout.splitlines()
    assert bars[0].startswith("SPEC section 8 bars") and all(not ln.startswith(" ") for ln in bars)


def test_run_prints_one_line_per_results_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["run", "idle-control", "--samples", "1", "--warmup", "0", "--isolation", "inline", "--output-dir"]
    assert cli.main([*args, str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    results = [ln for ln in out.splitlines() if ln.startswith("results: ")]
    assert len(results) == 1 and results[0].endswith(".json")
    assert not [ln for ln in out.splitlines() if ln.strip().endswith(".hlog")]
    assert cli.main(["-v", *args, str(tmp_path / "b")]) == 0
    verbose = capsys.readouterr().out
    assert len([ln for ln in verbose.splitlines() if ln.strip().endswith(".hlog")]) == 4
    assert cli.main(["-q", *args, str(tmp_path / "c")]) == 0
    [line] = capsys.readouterr().out.splitlines()  # -q: the verdict, nothing else
    assert line.startswith("idle-control idle: ") and "(max gap median " in line
