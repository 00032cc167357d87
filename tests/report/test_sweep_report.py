"""Reports of M10 conditions: the table and the first evidence sentence say "simulated storage latency:
PROFILE (source)"; a sweep's paragraph names the first setting where each mode misses the target and
whether GC was in those samples, with every figure taken from the documents."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from perfsuite import cli
from perfsuite.harness import verdict
from perfsuite.report import Result, read_results, read_sweeps, summary_table, sweep_evidence, write_sweep_plot
from perfsuite.report._conditions import conditions_of, stall_ms
from perfsuite.report._evidence import evidence
from perfsuite.workloads.storage import load_profile

NUMBER = re.compile(r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
CODE = re.compile(r"`[^`]*`")


def unsourced(markdown: str, docs: list[dict[str, Any]]) -> list[str]:
    """Figures outside code spans that are no value (or rounding of one) of ``docs`` (as in test_evidence)."""
    values: list[float] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key != "hdr":
                    walk(value)
        elif isinstance(node, list):
            values.append(float(len(node)))
            for value in node:
                walk(value)
        elif isinstance(node, bool):
            return
        elif isinstance(node, int | float):
            values.append(float(node))
        elif isinstance(node, str):
            values.extend(float(t.replace(",", "")) for t in NUMBER.findall(node))

    for doc in docs:
        walk(doc)
    missing = []
    for token in NUMBER.findall(CODE.sub(" ", markdown)):
        text = token.replace(",", "")
        if "." in text:
            ok = any(f"{v:.{len(text.split('.')[1])}f}" == text for v in values)
        else:
            ok = float(text) in {v for v in values if v.is_integer()}
        if not ok:
            missing.append(token)
    return missing


def sweep_doc(docs: Any, index: int, storage: str, heap: int, freeze: bool, gaps: dict[str, list[float]],
              *, of: int, gc_in: dict[str, list[int]] | None = None, probe: float | None = None) -> dict[str, Any]:
    """A synthetic document of setting ``index``, with the given max gaps per mode and sample."""
    doc = docs.make(n=len(next(iter(gaps.values()))), seed=100 + index, gc="natural")
    for mode, values in gaps.items():
        samples = doc["modes"][mode]["samples"]
        for i, (sample, gap) in enumerate(zip(samples, values)):
            sample["max_gap_ms"] = gap
            hit = i in (gc_in or {}).get(mode, [])
            sample["gc"].update({"collections": 1 if hit else 0, "in_max_gap": hit,
                                 "gc_ms": 3.25 if hit else 0.0})
            if probe is not None:
                sample["heap"] = {"objects": heap, "full_gc_ms": probe + i}
        doc["modes"][mode]["verdict"] = verdict(samples, 20.0)
    doc["recipe"]["storage"] = load_profile(storage).to_dict()
    doc["recipe"]["heap"] = heap
    for body in doc["recipe"]["modes"].values():
        body["freeze_loaded"] = freeze
    doc["sweep"] = {"id": "sweep-x", "recipe": doc["recipe"]["name"],
                    "setting": {"index": index, "storage": storage, "heap": heap, "freeze": freeze}, "of": of}
    return doc


@pytest.fixture
def sweep_dir(tmp_path: Path, docs: Any) -> Path:
    below, above = [6.1, 7.2, 8.3], [24.5, 19.5, 31.25]
    settings = [
        ("nvme", 0, False, {"sync": below, "async": below}, None, None),
        ("nvme", 100000, False, {"sync": below, "async": below}, None, 41.5),
        ("sata-ssd", 0, False, {"sync": above, "async": below}, {"sync": [0, 2]}, None),
        ("hdd", 0, False, {"sync": above, "async": [9.5, 10.5, 11.75]}, None, None),
        ("hdd", 100000, True, {"sync": above, "async": below}, None, 0.25),
    ]
    for i, (storage, heap, freeze, gaps, gc_in, probe) in enumerate(settings):
        docs.write(tmp_path / "sweep" / f"mailbox-delivery-{i:02d}.json",
                   sweep_doc(docs, i, storage, heap, freeze, gaps, of=len(settings), gc_in=gc_in, probe=probe))
    return tmp_path / "sweep"


def test_the_paragraph_names_the_first_miss_per_mode_and_gc(sweep_dir: Path) -> None:
    (sweep,) = read_sweeps(read_results(sweep_dir))
    text = sweep_evidence(sweep)
    assert text.startswith("- **") and "Simulated storage latency: `nvme`" in text
    assert "`sync` first missed it at setting `2` (`sata-ssd`, heap `0`, freeze off): 2 of 3 samples over it" in text
    assert "2 of them with a collection in the window (2 inside the largest gap)" in text
    assert "`async` met it at every setting (worst maximum gap 11.750 ms, at setting `3`" in text
    assert "loop stalls (M9) were not measured" in text
    assert ("Along storage alone (heap `0`, freeze off; profiles in the order `nvme`, `sata-ssd`, `hdd`), "
            "`sync` first missed at `sata-ssd`; `async` missed at none.") in text
    assert "41.500-43.500 ms with heap `100000` and freeze off" in text
    assert "0.250-2.250 ms with heap `100000` and freeze on" in text
    sources = [json.loads(p.read_text()) for p in sorted(sweep_dir.glob("*.json"))]
    assert unsourced(text, sources) == []
    assert unsourced(text.replace("took", "took 987.654 ms or", 1), sources) == ["987.654"]


def test_a_miss_without_gc_says_so(tmp_path: Path, docs: Any) -> None:
    docs.write(tmp_path / "s" / "a.json", sweep_doc(docs, 0, "hdd", 0, False,
                                                    {"sync": [30.5, 31.5], "async": [5.5, 6.5]}, of=1))
    (sweep,) = read_sweeps(read_results(tmp_path / "s"))
    text = sweep_evidence(sweep)
    assert "`sync` first missed it at setting `0` (`hdd`, heap `0`, freeze off): 2 of 2 samples over it, " \
           "worst 31.500 ms, none of them with a collection in the window" in text


def test_the_loop_stall_is_read_where_present_and_not_measured_otherwise() -> None:
    assert stall_ms({"max_gap_ms": 5.0}) is None
    assert stall_ms({"loop_stall_ms": 3.25}) == 3.25
    assert stall_ms({"loop": {"longest_callback_ms": 4.5}}) == 4.5
    assert stall_ms({"metrics": {"loop_stall_ms": 0.0}}) == 0.0


def test_the_sweep_plot_is_written(sweep_dir: Path, tmp_path: Path) -> None:
    (sweep,) = read_sweeps(read_results(sweep_dir))
    path = write_sweep_plot(sweep, tmp_path / "plots" / "sweep.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_single_document_says_simulated_storage_first(sweep_dir: Path) -> None:
    result = Result(None, json.loads((sweep_dir / "mailbox-delivery-04.json").read_text()))
    source = load_profile("hdd").source
    assert conditions_of(result).storage_text == f"simulated storage latency: hdd ({source})"
    paragraph = evidence(result).markdown
    body = paragraph.split("): ", 1)[1]
    assert body.startswith(f"Simulated storage latency: `hdd` (`{source}`)")
    assert "held `100000` live objects" in body and "`gc.freeze()` after open" in body
    assert "storage latency was simulated from a published profile" in paragraph
    from rich.console import Console

    console = Console(width=300, record=True)
    console.print(summary_table(result))
    table = " ".join(console.export_text().split())
    assert f"simulated storage latency: hdd ({source}); not a device measurement" in table
    assert "live heap: 100000 objects" in table and "gc.freeze() after each session opened" in table


def test_evidence_and_report_on_a_sweep_directory(sweep_dir: Path, capsys: Any) -> None:
    assert cli.main(["evidence", str(sweep_dir)]) == 0
    out = capsys.readouterr().out
    assert "`sync` first missed it at setting `2`" in out
    assert cli.main(["report", str(sweep_dir)]) == 0
    assert "sweep sweep-x: mailbox-delivery against the 20 ms target" in capsys.readouterr().out
    assert cli.main(["sweep", "--report", str(sweep_dir), "--plot", str(sweep_dir.parent / "p.png")]) == 0
    assert (sweep_dir.parent / "p.png").is_file()


def test_evidence_on_a_directory_without_a_sweep_is_one_line(tmp_path: Path, docs: Any, capsys: Any) -> None:
    docs.write(tmp_path / "d" / "x.json", docs.make())
    assert cli.main(["evidence", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert "without sweep documents" in err and len(err.strip().splitlines()) == 1


def test_compare_leaves_the_storage_counters_out_and_notes_other_conditions(sweep_dir: Path) -> None:
    from perfsuite.report import compare_results

    base = Result(None, json.loads((sweep_dir / "mailbox-delivery-00.json").read_text()))
    new_doc = json.loads((sweep_dir / "mailbox-delivery-03.json").read_text())
    for mode in ("sync", "async"):
        for i, sample in enumerate(new_doc["modes"][mode]["samples"]):
            sample["metrics"]["storage.injected_ms"] = 40.0 + i
    for mode in ("sync", "async"):
        for sample in base.data["modes"][mode]["samples"]:
            sample["metrics"]["storage.injected_ms"] = 1.0
    comparison = compare_results([base], [Result(None, new_doc)])
    assert not any(c.metric.startswith("metrics.storage.") for c in comparison.changes)
    assert any("measured under different conditions (simulated storage latency: nvme" in n and
               "simulated storage latency: hdd" in n for n in comparison.notes)


def test_a_reference_mode_gets_no_verdict_in_the_sweep(tmp_path: Path, docs: Any) -> None:
    doc = sweep_doc(docs, 0, "nvme", 0, False, {"sync": [30.5, 31.5], "async": [5.5, 6.5]}, of=1)
    doc["modes"]["sync"]["verdict"] = verdict(doc["modes"]["sync"]["samples"], 20.0, reference="raw os calls")
    docs.write(tmp_path / "r" / "a.json", doc)
    (sweep,) = read_sweeps(read_results(tmp_path / "r"))
    text = sweep_evidence(sweep)
    assert "`sync` is a by-design reference (no verdict)" in text and "`sync` first missed" not in text
    from rich.console import Console

    console = Console(width=300, record=True)
    from perfsuite.report import sweep_table

    console.print(sweep_table(sweep))
    assert "reference" in console.export_text()


def test_a_sweep_measured_on_two_machines_says_which_setting_ran_where(tmp_path: Path, docs: Any) -> None:
    """Sweeps on a cluster: each setting's samples come from one machine; the table names it per row, the
    paragraph says so, and a range of heap probes never spans two machines."""
    for i, host in enumerate(("node-a", "node-b", "node-a")):
        doc = sweep_doc(docs, i, "nvme", 100000, i == 2, {"sync": [5.5, 6.5]}, of=3, probe=10.0 * (i + 1))
        doc["environment"]["hostname"] = host
        doc["placement"] = {"host": host, "backend": "dask"}
        docs.write(tmp_path / "s" / f"r-{i:02d}.json", doc)
    (sweep,) = read_sweeps(read_results(tmp_path / "s"))
    assert [r.machine.split(":")[0] for r in sweep.rows] == ["node-a", "node-b", "node-a"]
    assert len(sweep.machines) == 2
    from rich.console import Console

    from perfsuite.report import sweep_table

    console = Console(width=200, record=True)
    console.print(sweep_table(sweep))
    text = console.export_text()
    assert "measured on 2 machines (column m)" in text and "m2: node-b:" in text
    rows = [line.split() for line in text.splitlines() if line.strip()[:1].isdigit()]
    assert [row[4] for row in rows] == ["m1", "m2", "m1"]
    paragraph = sweep_evidence(sweep)
    assert "measured on 2 machines of a cluster" in paragraph and "one machine per setting" in paragraph
    assert "10.000-11.000 ms with heap `100000` and freeze off on `node-a:" in paragraph
    assert "20.000-21.000 ms with heap `100000` and freeze off on `node-b:" in paragraph
