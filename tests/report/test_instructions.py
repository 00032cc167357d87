"""Instructions in the reports: instruction counts in `report`, `compare` (a cost with a 1% tolerance, not a
p-value), `evidence` (every number from the file) and the dashboard; "not measured" stays null, never 0."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from perfsuite.harness import instructions_section, validate_results
from perfsuite.report import Result, compare_markdown, compare_results, summary_rows, summary_table
from perfsuite.report._dashboard import build_dashboard
from perfsuite.report._evidence import evidence
from perfsuite.report._metrics import COST_METRICS

from .test_evidence import unsourced

NOT_FOUND = "valgrind not found on PATH (install valgrind, or set $PERFSUITE_VALGRIND)"


def with_instructions(doc: dict[str, Any], counts: Mapping[str, Sequence[tuple[int, int]]] | str) -> dict[str, Any]:
    """``doc`` with an instruction pass per mode: ``{mode: [(total, loop_thread), ...]}``, or a reason string
    for "not measured". Sections are built by the harness's own :func:`instructions_section`."""
    doc["recipe"]["instructions"] = True
    for mode, body in doc["modes"].items():
        section = None
        if isinstance(counts, str):
            section = instructions_section(None, {"not_measured": counts})
        else:
            for i, (total, loop) in enumerate(counts[mode]):
                threads = {"1": loop, **({"3": total - loop} if total > loop else {})}
                record = {"index": i, "total": total, "loop_thread": loop, "threads": threads,
                          "ack_ms_valgrind": 900.0, "mechanism": "client requests", "tool": "callgrind",
                          "metrics": {"publications": 1}, "valgrind": "valgrind-3.19.0"}
                section = instructions_section(section, record)
        body["instructions"] = section
        doc["order"] += [{"kind": "instructions", "mode": mode, "index": i} for i in range(3)]
    validate_results(doc)
    return doc


BASE = {"sync": [(7_386_516, 7_386_516), (7_386_077, 7_386_077), (7_386_477, 7_386_477)],
        "async": [(8_654_339, 1_758_724), (8_650_544, 1_769_803), (8_645_427, 1_767_482)]}


def scaled(factor: float, mode: str = "sync") -> dict[str, list[tuple[int, int]]]:
    out = {m: list(v) for m, v in BASE.items()}
    out[mode] = [(round(t * factor), round(loop * factor)) for t, loop in out[mode]]
    return out


def test_values_and_table_show_instructions(docs: Any) -> None:
    result = Result(None, with_instructions(docs.make(), BASE))
    values = result.values("async")
    assert values["instructions.total"] == [8_654_339, 8_650_544, 8_645_427]
    assert values["instructions.loop_thread"] == [1_758_724, 1_769_803, 1_767_482]
    console = Console(width=200, record=True)
    console.print(summary_table(result))
    text = console.export_text()
    assert "instructions" in text and "loop instr" in text
    assert "8,650,544" in text and "1,767,482" in text  # medians, exact


def test_not_measured_is_null_never_zero(docs: Any) -> None:
    doc = with_instructions(docs.make(), NOT_FOUND)
    section = doc["modes"]["sync"]["instructions"]
    assert section["total"] is None and section["loop_thread"] is None and section["samples"] == []
    result = Result(None, doc)
    assert "instructions.total" not in result.values("sync")  # absent, not 0
    console = Console(width=200, record=True)
    console.print(summary_table(result))
    assert "loop instr" in console.export_text()
    sync = next(r for r in summary_rows(result) if r.mode == "sync")
    assert (sync.instructions, sync.loop_instructions) == ("n/m", "n/m")  # the table's "not measured"
    assert f"Instructions were not measured (`{NOT_FOUND}`)." in evidence(result).markdown


def test_instructions_are_registered_gate_costs() -> None:
    """Instructions join the CI gate's cost registry: 1% of the base and at least one instruction, lower is better."""
    for name in ("instructions.total", "instructions.loop_thread"):
        cost = COST_METRICS[name]
        assert (cost.relative, cost.floor, cost.direction) == (0.01, 1.0, "lower")
        assert cost.describe() == "1% and at least 1 instruction"


def test_a_planted_two_percent_instruction_increase_fails_the_gate(docs: Any) -> None:
    # one pass per side: Mann-Whitney U could never reach p < 0.05, the cost rule does not need it
    one = {m: v[:1] for m, v in BASE.items()}
    worse = {m: v[:1] for m, v in scaled(1.02).items()}
    comparison = compare_results([Result(None, with_instructions(docs.make(seed=1), one))],
                                 [Result(None, with_instructions(docs.make(seed=1), worse))])
    assert comparison.exit_status == 1
    assert {c.label for c in comparison.regressions} == {"mailbox-delivery/sync instructions.total",
                                                         "mailbox-delivery/sync instructions.loop_thread"}
    (total,) = [c for c in comparison.changes if (c.mode, c.metric) == ("sync", "instructions.total")]
    assert total.kind == "cost" and total.p_value is None and not total.underpowered
    assert total.tolerance == 0.01 * 7_386_516
    md = compare_markdown(comparison)
    assert "instructions.total" in md.splitlines()[0]  # the verdict line names the metric
    assert "+147,730 (1.02x)" in md


def test_an_unchanged_revision_passes_the_gate(docs: Any) -> None:
    comparison = compare_results([Result(None, with_instructions(docs.make(seed=1), BASE))],
                                 [Result(None, with_instructions(docs.make(seed=1), BASE))])
    assert comparison.exit_status == 0
    instructions = [c for c in comparison.changes if c.metric.startswith("instructions.")]
    assert len(instructions) == 4 and {c.status for c in instructions} == {"unchanged"}
    assert all(c.gating and c.kind == "cost" and c.headline for c in instructions)  # shown even when unchanged


def test_changes_within_the_tolerance_pass(docs: Any) -> None:
    comparison = compare_results([Result(None, with_instructions(docs.make(seed=1), BASE))],
                                 [Result(None, with_instructions(docs.make(seed=1), scaled(1.008)))])
    assert comparison.exit_status == 0
    statuses = {c.metric: c.status for c in comparison.changes if c.mode == "sync"}
    assert statuses["instructions.total"] == "unchanged"
    improved = compare_results([Result(None, with_instructions(docs.make(seed=1), BASE))],
                               [Result(None, with_instructions(docs.make(seed=1), scaled(0.95, "async")))])
    assert improved.exit_status == 0
    assert {c.label for c in improved.improvements} >= {"mailbox-delivery/async instructions.loop_thread"}


def test_evidence_numbers_come_from_the_file(docs: Any) -> None:
    doc = with_instructions(docs.make(), BASE)
    text = evidence(Result(None, doc)).markdown
    assert ("counted the instructions from submission to acknowledgement: 7,386,077-7,386,516 per publication "
            "for `sync` (all on the loop thread) and 8,645,427-8,654,339 per publication for `async` "
            "(1,758,724-1,769,803 on the loop thread)") in text
    assert "3 passes per mode" in text
    assert unsourced(text, [doc]) == []


def test_dashboard_shows_the_columns_and_the_history(tmp_path: Path, docs: Any) -> None:
    runs = []
    for i, factor in enumerate((1.0, 1.0, 1.02)):  # three runs: enough for history charts
        doc = docs.make(seed=i, date=f"2026-11-2{i}T10:00:00+00:00", epoch=1_795_000_000.0 + i * 86400,
                        commit=f"{i}" * 40)
        runs.append(Result(tmp_path / f"m{i}.json", with_instructions(doc, scaled(factor))))
    site = build_dashboard(runs, tmp_path / "site")
    (page,) = [p.read_text(encoding="utf-8") for p in site.pages if "mailbox-delivery" in p.name]
    assert ">instructions</th>" in page and ">loop instr</th>" in page and "7,534,207" in page
    assert "instructions.total" in page and "instructions.loop_thread" in page  # their history charts
