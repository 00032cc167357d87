"""``--format text|json|markdown`` (SPEC section 5): JSON documents valid against the packaged schema, with
stable keys; Markdown tables; ``--markdown`` an alias; stdout holds nothing but the chosen format."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from perfsuite import cli
from perfsuite.cli._formats import output_schema
from perfsuite.report import History, LevelStep, Series
from tests.report.conftest import NEW_MODES, make_doc, write_doc
from tests.report.test_sqlite_column import _doc

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "results" / "baseline"
MAILBOX = next(p for p in sorted(BASELINE.glob("mailbox-delivery-*.json")) if not p.name.endswith(".pyperf.json"))
WHATIF = ("whatif", "--storm", "--no-costs", "--debounce", "1,2")
COMMANDS = {
    "report": ("report", str(BASELINE)),
    "compare": ("compare", str(BASELINE), str(BASELINE)),
    "history": ("history", str(BASELINE)),
    "bars": ("bars", str(BASELINE)),
    "whatif": WHATIF,
}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "perfsuite", *args], capture_output=True, text=True, timeout=300,
                          check=False)


def _validate(document: dict) -> None:
    jsonschema.Draft202012Validator(output_schema()).validate(document)


def test_the_schema_is_valid_and_ships_in_the_package() -> None:
    jsonschema.Draft202012Validator.check_schema(output_schema())
    assert (ROOT / "perfsuite" / "cli" / "output.schema.json").is_file()
    assert set(output_schema()["$defs"]) >= set(COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_json_is_valid_and_alone_on_stdout(command: str) -> None:
    proc = _cli(*COMMANDS[command], "--format", "json")
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)  # nothing else on stdout
    assert document["command"] == command and document["schema"] == 1
    _validate(document)


def test_json_keys_are_the_documented_ones() -> None:
    """additionalProperties is false in the schema: every key is documented; these are the stable ones."""
    report = json.loads(_cli("report", str(MAILBOX), "--format", "json").stdout)
    [result] = report["results"]
    assert list(result) == ["path", "recipe", "status", "created_at", "commit", "floor", "modes", "branch", "load"]
    # the load section is the document's own verdict (the committed baseline was re-measured quietly)
    assert result["load"]["loaded"] is json.loads(MAILBOX.read_text())["load"]["loaded"] is False
    sync = result["modes"][0]
    assert list(sync) == ["mode", "control", "n", "max_gap_ms", "submission_ms", "ack_ms", "ack_over_floor",
                          "ack_over_publication_floor", "ack_over_sqlite", "sqlite_reference", "gc_samples",
                          "verdict"]
    doc = json.loads(MAILBOX.read_text())
    assert sync["max_gap_ms"]["median"] == doc["modes"]["sync"]["summary"]["max_gap_ms"]["median"]  # unrounded
    assert sync["verdict"]["met"] is doc["modes"]["sync"]["verdict"]["met"]
    assert result["modes"][-1]["control"] is True and result["modes"][-1]["verdict"] is None
    compare = json.loads(_cli("compare", str(MAILBOX), str(MAILBOX), "--format", "json").stdout)
    assert compare["exit_status"] == 0 and compare["regressions"] == 0
    assert {c["status"] for c in compare["changes"]} == {"unchanged"}
    assert list(compare["changes"][0]) == ["recipe", "mode", "metric", "base", "new", "ratio", "p_value", "status",
                                           "gating", "headline", "underpowered", "kind", "detectable", "tolerance",
                                           "reference", "test", "p_adjusted", "reason"]
    # the CI gate: the verdict line, "cannot tell" counted, what was not compared and why
    assert compare["verdict"].startswith("no regression [separate runs: timings are information")
    assert compare["inconclusive"] == 0
    assert compare["only_base"] == compare["only_new"] == compare["cross_machine"] == compare["incomplete"] == []
    costs = [c for c in compare["changes"] if c["kind"] == "cost"]
    assert costs and all(c["p_value"] is None and c["tolerance"] >= 1 and (c["gating"] or c["reference"])
                         for c in costs)
    ack = next(c for c in compare["changes"] if (c["mode"], c["metric"]) == ("async", "ack_ms"))
    assert ack["kind"] == "timing" and not ack["gating"]  # U: separate runs' timings are information
    # U: why timings did not gate, and which runs were measured on a loaded machine (none: the committed
    # baseline was re-measured quietly; tests/report/test_separate_runs.py lists planted loaded runs)
    assert compare["timing_note"].startswith("separate runs: timings are information")
    assert compare["loaded"] == []


def test_history_json_with_a_step_and_a_ratio_from_zero() -> None:
    step = LevelStep("r", "m", "max_gap_ms", 3, "abc", "def", "2026-11-29", 0.0, 5.0, "lower", "vm-0123456789", "pelt")
    body = History((Series("r", "m", "max_gap_ms", (), (step,), "vm-0123456789"),), 5, 5.0, 0.1).to_json()
    document = json.loads(json.dumps({"command": "history", "schema": 1, **body}, allow_nan=True))
    assert document["steps"][0]["ratio"] == float("inf")  # emit_json turns it into null; check that next
    from perfsuite.cli._formats import _finite

    cleaned = _finite({"command": "history", "schema": 1, **body})
    assert cleaned["steps"][0]["ratio"] is None and cleaned["steps"][0]["kind"] == "regression"
    _validate(cleaned)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_markdown_is_tables(command: str) -> None:
    proc = _cli(*COMMANDS[command], "--format", "markdown")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    headers = [i for i, ln in enumerate(lines) if ln.startswith("| ") and i + 1 < len(lines)
               and lines[i + 1].startswith("|---")]
    assert headers, proc.stdout[:500]
    alias = _cli(*COMMANDS[command], "--markdown").stdout

    def stable(text: str) -> list[str]:  # whatif's title states the CPU time the simulation took
        return [ln for ln in text.splitlines() if " simulated in " not in ln]

    assert stable(proc.stdout) == stable(alias)  # the alias


def test_unknown_format_is_bad_input() -> None:
    proc = _cli("bars", str(BASELINE), "--format", "yaml")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


class _Docs:  # the report tests' document generators (their ``docs`` fixture)
    make = staticmethod(make_doc)
    write = staticmethod(write_doc)
    new_modes = NEW_MODES


def test_report_json_carries_both_ratios_unrounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``report --format json`` gives the table's ``ack/pub floor`` and ``ack/sqlite`` as numbers (a dashboard
    or a gate reads them without parsing "2.0x"), each naming the reference mode it was read against."""
    docs = _Docs
    docs.write(tmp_path / "mailbox-delivery-1.json", _doc(docs, sync_ack=2.4, async_ack=13.5))
    assert cli.main(["report", str(tmp_path / "mailbox-delivery-1.json"), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator(output_schema()).validate(document)
    modes = {m["mode"]: m for m in document["results"][0]["modes"]}
    assert modes["sync"]["ack_over_sqlite"] == pytest.approx(0.8)  # 2.4 / 3.0, unrounded
    assert modes["sync"]["sqlite_reference"] == "sqlite"
    assert modes["async"]["ack_over_sqlite"] == pytest.approx(3.0)  # 13.5 / 4.5
    assert modes["async"]["sqlite_reference"] == "sqlite-threaded"
    floor_ack = modes["publication-floor"]["ack_ms"]["median"]
    assert modes["sync"]["ack_over_publication_floor"] == pytest.approx(2.4 / floor_ack)
    assert modes["sqlite"]["ack_over_publication_floor"] == pytest.approx(3.0 / floor_ack)
    assert modes["publication-floor"]["ack_over_publication_floor"] is None  # the floor itself
    for anchor in ("sqlite", "sqlite-threaded", "idle control"):  # anchors and the control get none
        assert modes[anchor]["ack_over_sqlite"] is None and modes[anchor]["sqlite_reference"] is None
