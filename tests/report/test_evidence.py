"""`perfsuite evidence`: the ADR paragraph reads like the seed's decision history, and every number in it
comes from the files read (the result, its run's fsync floor, the baseline).

Provenance (every figure from a real run): the generator records, for every figure it prints, the document, the field,
the reduction and the format (:attr:`Evidence.figures`). :func:`check_provenance` re-reads each field with
its own small resolver (not the library's), reduces and formats it, and requires the printed figures to be
exactly the recorded ones: a figure read from the wrong field, or a number printed without a record, fails.

The every-number check is independent of the library: it extracts each figure from the Markdown (code
spans are names and settings, not figures; digits glued to a preceding letter, as in ``p99``, are
identifiers; trailing letters do not hide a figure: ``2.5x`` is one) and looks for a value in the
documents that prints as that figure at the same number of decimals. Integers must match an integer
value exactly; counts of list entries (samples) and numbers inside the documents' strings (the run
date) count as values of the file.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from perfsuite import cli
from perfsuite.report import Result, evidence_for, find_floor
from perfsuite.report._evidence import evidence

NUMBER = re.compile(r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
CODE = re.compile(r"`[^`]*`")


def figures(markdown: str) -> list[str]:
    """Every figure printed in the paragraph, code spans removed."""
    return NUMBER.findall(CODE.sub(" ", markdown))


def values_of(docs: Iterable[Mapping[str, Any]]) -> list[float]:
    """Every number of the documents: numeric leaves, list lengths, numbers inside strings (hdr blobs skipped)."""
    out: list[float] = []

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key != "hdr":
                    walk(value)
        elif isinstance(node, list):
            out.append(float(len(node)))
            for value in node:
                walk(value)
        elif isinstance(node, bool):
            return
        elif isinstance(node, int | float):
            out.append(float(node))
        elif isinstance(node, str):
            out.extend(float(t.replace(",", "")) for t in NUMBER.findall(node))

    for doc in docs:
        walk(doc)
    return out


def unsourced(markdown: str, docs: Iterable[Mapping[str, Any]]) -> list[str]:
    """Figures of ``markdown`` that are not a value (or a rounding of a value) of ``docs``."""
    values = values_of(docs)
    exact = {v for v in values if v.is_integer()}
    missing = []
    for token in figures(markdown):
        text = token.replace(",", "")
        if "." in text:
            decimals = len(text.split(".")[1])
            ok = any(f"{v:.{decimals}f}" == text for v in values)
        else:
            ok = float(text) in exact
        if not ok:
            missing.append(token)
    return missing


DATE = re.compile(r"(?<![\w.])\d{4}-\d{2}-\d{2}(?![\w])")


def tokens(markdown: str) -> list[str]:
    """The figures of the paragraph as printed (dates whole), code spans removed."""
    text = CODE.sub(" ", markdown)
    dates = DATE.findall(text)
    return dates + NUMBER.findall(DATE.sub(" ", text))


def _walk(node: Any, path: tuple[str, ...]) -> list[Any]:
    """An independent reading of a recorded field: ``[]`` every list item, ``{}`` every mapping value,
    ``[a.b>0]`` / ``[a.b]`` list items whose nested value is positive / true; nulls dropped."""
    if not path:
        return [] if node is None else [node]
    key, rest = path[0], path[1:]
    out: list[Any] = []
    if key == "{}":
        for value in node.values():
            out += _walk(value, rest)
    elif key.startswith("["):
        cond = key[1:-1]
        for item in node:
            probe = item
            for part in cond.removesuffix(">0").split("."):
                probe = probe.get(part) if cond and isinstance(probe, dict) else probe
            keep = not cond or (probe > 0 if cond.endswith(">0") else probe is True)
            if keep:
                out += _walk(item, rest)
    elif isinstance(node, dict) and key in node:
        out += _walk(node[key], rest)
    return out


def _reduce(how: str, values: list[Any]) -> Any:
    import statistics

    return {
        "value": lambda: values[0], "min": lambda: min(values), "max": lambda: max(values),
        "median": lambda: statistics.median(values), "len": lambda: len(values[0]),
        "min_len": lambda: min(len(v) for v in values), "count": lambda: len(values),
        "count_nonzero": lambda: sum(1 for v in values if v), "day": lambda: str(values[0])[:10],
    }[how]()


def _print(fmt: str, value: Any) -> str:
    from perfsuite.report._format import fmt_bytes, fmt_ms, fmt_number

    return {"ms": fmt_ms, "bytes": fmt_bytes, "number": fmt_number, "count": lambda n: str(int(n)),
            "day": str}[fmt](value)


def check_provenance(ev: Any) -> list[str]:
    """Every recorded figure re-read from its own field, and the paragraph's figures exactly the recorded
    ones (as a multiset). Returns the problems (empty when every number is accounted for)."""
    problems = []
    docs = ev.documents
    for fig in ev.figures:
        expected = _print(fig.fmt, _reduce(fig.how, _walk(docs[fig.source], fig.field)))
        if expected != fig.text:
            problems.append(f"{fig.text} printed for {fig.where}, which reads {expected}")
    description = ev.result.data["recipe"].get("description")  # the recipe's own words, quoted: not figures
    text = ev.markdown.replace(f"({description})", "", 1) if description else ev.markdown
    printed, recorded = collections.Counter(tokens(text)), collections.Counter(f.text for f in ev.figures)
    problems += [f"{t} printed without a record" for t in (printed - recorded).elements()]
    problems += [f"{t} recorded but not printed" for t in (recorded - printed).elements()]
    return problems


def _write_run(tmp_path: Path, docs: Any, **kwargs: Any) -> tuple[Path, Path]:
    """A mailbox-delivery result and the fsync floor of the same run, side by side."""
    result = docs.write(tmp_path / "mailbox-delivery-20261120T100000.json", docs.make(**kwargs))
    floor_kwargs = {k: v for k, v in kwargs.items() if k in ("commit", "date", "hostname")}
    floor = docs.write(
        tmp_path / "fsync-floor-20261120T100100.json", docs.floor(seed=77, epoch=1_795_000_060.0, **floor_kwargs)
    )
    return result, floor


SCENARIOS = {
    "collect-before, process": {},
    "natural GC, allocation, inline, noisy": {
        "gc": "natural",
        "gc_p": 0.5,
        "allocation": True,
        "isolation": "inline",
        "control_gap_ms": 14.0,
        "seed": 3,
    },
    "directory fsync rejected": {"dir_fsync": "EINVAL", "seed": 5},
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_number_comes_from_the_files(tmp_path: Path, docs: Any, scenario: str) -> None:
    result_path, floor_path = _write_run(tmp_path, docs, **SCENARIOS[scenario])
    ev = evidence_for(result_path)
    assert ev.floor is not None and ev.floor.source == floor_path.name
    sources = [json.loads(result_path.read_text()), json.loads(floor_path.read_text())]
    assert len(figures(ev.markdown)) > 40
    assert unsourced(ev.markdown, sources) == []


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_figure_comes_from_its_own_field(tmp_path: Path, docs: Any, scenario: str) -> None:
    result_path, _ = _write_run(tmp_path, docs, **SCENARIOS[scenario])
    ev = evidence_for(result_path)
    assert len(ev.figures) > 40
    assert check_provenance(ev) == []
    assert {f.source for f in ev.figures} == {"result", "floor"}


def test_provenance_catches_a_figure_from_the_wrong_field(tmp_path: Path, docs: Any) -> None:
    """The old check accepted a number found anywhere in any document; this one does not."""
    result_path, _ = _write_run(tmp_path, docs)
    ev = evidence_for(result_path)
    # the sync ack range printed under the async mode's field: both numbers exist in the file
    sync_ack = next(f for f in ev.figures if f.field[:2] == ("modes", "sync") and f.field[-1] == "ack_ms")
    wrong = dataclasses.replace(sync_ack, field=("modes", "async", *sync_ack.field[2:]))
    swapped = dataclasses.replace(ev, figures=tuple(wrong if f is sync_ack else f for f in ev.figures))
    assert any("printed for result:modes/async" in p for p in check_provenance(swapped))
    planted = dataclasses.replace(ev, markdown=ev.markdown.replace("ms.", "ms (66.3 ms).", 1))
    assert check_provenance(planted) == ["66.3 printed without a record"]


def test_the_check_catches_numbers_that_are_not_in_the_file(tmp_path: Path, docs: Any) -> None:
    result_path, floor_path = _write_run(tmp_path, docs)
    ev = evidence_for(result_path)
    sources = [json.loads(result_path.read_text()), json.loads(floor_path.read_text())]
    planted = ev.markdown.replace("ms.", "ms (about 123.457 ms, or 2.5x the floor).", 1)
    assert unsourced(planted, sources) == ["123.457", "2.5"]
    # without the floor's document, the floor's figures are unsourced too
    assert unsourced(ev.markdown, sources[:1])


def test_with_a_baseline_every_number_still_comes_from_the_files(tmp_path: Path, docs: Any) -> None:
    base = docs.write(tmp_path / "base" / "mailbox-delivery-base.json", docs.make(seed=11))
    slower = {
        "sync": {"submission_ms": 66.0, "ack_ms": 65.9, "max_gap_ms": 66.3, "inline": True, "bytes_written": 9321},
        "async": {"submission_ms": 0.31, "ack_ms": 143.0, "max_gap_ms": 6.9, "bytes_written": 9321},
    }
    result_path, floor_path = _write_run(tmp_path / "new", docs, modes=slower, seed=12)
    ev = evidence_for(result_path, base)
    text = ev.markdown
    sources = [json.loads(p.read_text()) for p in (result_path, floor_path, base)]
    assert unsourced(text, sources) == []
    assert check_provenance(ev) == [] and "baseline" in {f.source for f in ev.figures}
    assert "Against the baseline `mailbox-delivery-base.json`" in text
    assert re.search(
        r"`async` maximum heartbeat gap [\d.]+-[\d.]+ ms before and [\d.]+-[\d.]+ ms after \(unchanged\)", text
    )
    # U: two separate runs: the slower ACK is shown, as information; only costs could gate
    assert re.search(r"ACK [\d.]+-[\d.]+ ms before and [\d.]+-[\d.]+ ms after \(regressed, information\)", text)
    assert "timings of separate runs are information, not a gate" in text and "No regression." in text
    same = evidence_for(docs.write(tmp_path / "same.json", docs.make(seed=13)), base)
    assert "No regression." in same.markdown


def test_reads_like_the_decision_history(tmp_path: Path, docs: Any) -> None:
    result_path, _ = _write_run(tmp_path, docs)
    text = evidence_for(result_path).markdown
    ms_range = r"\d+\.\d{3}-\d+\.\d{3} ms"
    assert text.startswith("- **2026-11-20 `mailbox-delivery`**")
    assert text.count("\n") == 1  # one paragraph
    for phrase in (
        "fixture `synthetic-6000` (14 files, 2,345,678 bytes",
        "6 samples per mode alternated (`sync`/`async`) after 1 warm-up per mode",
        "each on a fresh private copy in its own worker process",
        "a 5 ms heartbeat from just before submission until 12 ms after acknowledgement",
        "a full garbage collection before each sample (`collect-before`)",
        "the work directory was on `ext4`, where directory fsync works",
        "The recipe collects garbage before each sample; no sample window contained a collection.",
        "`async` met it in all 6 samples",
        "`sync` missed it in 6 of 6 samples, 0 of them with GC",
        "The idle control, the same heartbeat with no workload",
        "The fsync floor of the same run (`fsync-floor-20261120T100100.json`: write, fsync, `os.replace` and "
        "directory fsync of 4,096 bytes)",
        "small samples (6 per mode) on one fixture, not graphical input latency",
        "so they do not bound GC pauses in a live session",
    ):
        assert phrase in text, phrase
    assert re.search(
        rf"The synchronous path held the loop {ms_range}, acknowledging before it returned \(heartbeat", text
    )
    assert re.search(rf"Asynchronous submission returned in {ms_range} and acknowledged after {ms_range}", text)
    assert re.search(rf"with a maximum heartbeat gap of {ms_range}\.", text)
    assert "noisy machine" not in text and "inline isolation" not in text


def test_limitations_are_chosen_from_the_data(tmp_path: Path, docs: Any) -> None:
    noisy = evidence(Result(None, docs.make(**SCENARIOS["natural GC, allocation, inline, noisy"])))
    text = noisy.markdown
    # every idle window at 14 ms: loaded (M1's idle control), said with its figures instead of "a noisy machine"
    assert re.search(r"The machine was LOADED: the median idle-control gap of 1[34]\.\d+ ms is more than", text)
    assert "noisy machine" not in text
    assert "samples that saw GC are kept" in text
    assert "inline isolation ran every sample in one process" in text
    assert "no fsync floor from the same run was found" in text
    assert re.search(r"\d of 6 `sync` samples saw a collection \([\d.-]+ ms of GC in the window", text)
    assert "A separate, untimed allocation pass (`memray`, 3 samples per mode) measured" in text
    rejected = evidence(Result(None, docs.make(dir_fsync="EINVAL"))).markdown
    assert "where directory fsync fails (`EINVAL`)" in rejected
    assert "directory fsync does not work on this filesystem" in rejected


def test_a_tracemalloc_pass_is_told_as_a_peak_with_the_sum_not_measured(docs: Any) -> None:
    """The core install: the core's tracemalloc pass records no sum; the evidence says what it did measure."""
    doc = docs.make(**SCENARIOS["natural GC, allocation, inline, noisy"])
    for body in doc["modes"].values():
        alloc = body.get("allocation")
        if alloc:
            alloc["tracker"], alloc["total_bytes"], alloc["allocations"] = "tracemalloc", None, None
            for sample in alloc["samples"]:
                sample["tracker"], sample["total_bytes"], sample["allocations"] = "tracemalloc", None, None
    text = evidence(Result(None, doc)).markdown
    assert "A separate, untimed allocation pass (`tracemalloc`, 3 samples per mode) measured a peak of " in text
    assert "bytes above the start (the sum of allocations not measured)" in text


def test_floor_of_another_run_is_not_used(tmp_path: Path, docs: Any) -> None:
    result = docs.write(tmp_path / "a.json", docs.make())
    docs.write(tmp_path / "b.json", docs.floor(commit="f" * 40))  # another commit: another run
    docs.write(tmp_path / "c.json", docs.floor(epoch=1_795_000_000.0 + 86_400))  # a day later
    assert evidence_for(result).floor is None
    doc = docs.make()
    doc["run_id"] = "run-1"
    floor = docs.floor(commit="f" * 40, epoch=1_795_000_000.0 + 86_400)
    floor["run_id"] = "run-1"  # an explicit run id wins over the heuristic
    assert find_floor(Result(None, doc), [Result(None, floor)]) is not None


def test_evidence_of_a_real_run(real_run: Path) -> None:
    paths = sorted(p for p in real_run.glob("*.json") if not p.name.endswith(".pyperf.json"))
    assert [p.name.split("-2")[0] for p in paths] == ["fsync-floor", "idle-control"]
    floor_doc = json.loads(paths[0].read_text())
    for path in paths:
        text = evidence_for(path).markdown
        assert unsourced(text, [json.loads(path.read_text()), floor_doc]) == [], path.name
        assert check_provenance(evidence_for(path)) == [], path.name
        assert "small samples (3 per mode) without a fixture" in text
    assert "This run is the fsync floor itself" in evidence_for(paths[0]).markdown
    idle = evidence_for(paths[1]).markdown
    assert "Mode `idle`: submission returned in" in idle and "fsync floor" not in idle


def test_cli_prints_the_paragraph(tmp_path: Path, docs: Any, capsys: pytest.CaptureFixture[str]) -> None:
    result_path, _ = _write_run(tmp_path, docs)
    assert cli.main(["evidence", str(result_path)]) == 0
    assert capsys.readouterr().out == evidence_for(result_path).markdown


def test_baseline_of_another_recipe_is_unusable(tmp_path: Path, docs: Any, capsys: pytest.CaptureFixture[str]) -> None:
    result_path, floor_path = _write_run(tmp_path, docs)
    assert cli.main(["evidence", str(result_path), "--baseline", str(floor_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds recipe 'fsync-floor'" in err[0]


BASELINE = Path(__file__).resolve().parents[2] / "results" / "baseline"


@pytest.mark.skipif(not BASELINE.is_dir(), reason="no committed baseline in results/baseline")
@pytest.mark.parametrize("recipe", ["mailbox-delivery", "root-checkpoint", "agent-checkpoint", "registry-save"])
def test_evidence_on_the_committed_baseline(recipe: str) -> None:
    """ADR evidence: the paragraph on the committed baseline reads like the decision history and every number in
    it comes from the baseline's own files (the recipe's document and its run's fsync floor)."""
    [path] = [p for p in BASELINE.glob(f"{recipe}-*.json") if not p.name.endswith(".pyperf.json")]
    result = evidence_for(path)
    docs = [json.loads(p.read_text()) for p in BASELINE.glob("*.json") if not p.name.endswith(".pyperf.json")]
    assert unsourced(result.markdown, docs) == []
    assert check_provenance(result) == []
    assert "6 samples per mode" in result.markdown and "against the 20 ms target" in result.markdown.replace(
        "Against", "against")


def test_new_documents_name_stalls_floors_references_and_unmeasured(tmp_path: Path, docs: Any) -> None:
    """M9 and the floors: the longest loop callback beside the max gap, the publication floor with its operation
    counts (wording from the data), a reference mode with no verdict, a null metric as "not measured", the
    recorded order, and allocation "per" what the data say; every figure from its own field."""
    doc = docs.make(modes=docs.new_modes, mode_order="random", allocation=True)
    for mode, n in (("sync", 1), ("async", 1), ("publication-floor", 1)):
        for sample in doc["modes"][mode]["allocation"]["samples"]:
            sample["metrics"] = {"publications": n}
    result_path = docs.write(tmp_path / "mailbox-delivery-20261120T100000.json", doc)
    docs.write(tmp_path / "fsync-floor-20261120T100100.json", docs.floor(seed=77, epoch=1_795_000_060.0))
    ev = evidence_for(result_path)
    text = ev.markdown
    assert check_provenance(ev) == []
    for phrase in (
        "(`sync`/`async`/`publication-floor`) in a seeded random order per round (seed `1234`)",
        "with every loop callback timed",
        "a longest loop callback of",
        "(`perfsuite.workloads.engine._MailboxDelivery.submit`)",
        "Mode `publication-floor` is a by-design reference (the publication floor: raw os calls of one generation)",
        "`publication-floor` is a reference by design and gets no verdict",
        "`offload_bytes` not measured",
        "The publication floor measured beside the modes (`publication-floor`: the engine's durable operations of "
        "one `mailbox_delivery(path=async)` generation replayed as raw os calls: 7 writes, 5 file fsyncs, "
        "3 renames, 1 directory creation, 2 directory fsyncs, 3 removals and 9,321 bytes)",
        "per publication for `sync`",
    ):
        assert phrase in text, phrase
    assert "`publication-floor` missed" not in text and "loop stalls (every loop callback timed" not in text
    assert ev.publication_floor is not None and ev.publication_floor.name == "publication floor"


def test_allocation_per_what_and_floor_wording_come_from_the_data(tmp_path: Path, docs: Any) -> None:
    doc = docs.make(allocation=True)
    for sample in doc["modes"]["sync"]["allocation"]["samples"]:
        sample["metrics"] = {"publications": 3}
    floor = docs.floor(seed=77, epoch=1_795_000_060.0)
    for sample in floor["modes"]["raw-os"]["samples"]:  # a floor that did not rename: the words follow
        sample["phases_ms"].pop("replace")
    result_path = docs.write(tmp_path / "mailbox-delivery-20261120T100000.json", doc)
    docs.write(tmp_path / "fsync-floor-20261120T100100.json", floor)
    ev = evidence_for(result_path)
    assert "per operation of 3 publications for `sync`" in ev.markdown
    assert "per operation for `async`" in ev.markdown  # no publication count recorded: no claim
    assert "(`fsync-floor-20261120T100100.json`: write, fsync and directory fsync of 4,096 bytes)" in ev.markdown
    assert check_provenance(ev) == []
