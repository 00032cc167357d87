"""U, ``perfsuite ab``: several versions of the code under test measured in one interleaved run (the harness's API
behind ``perfsuite ab``). Behaviour only: which code each sample imported, the plan, the shared control,
and a deterministic allocation difference between two variants; never a timing."""

from __future__ import annotations

import json
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.harness import (
    CodeVariant,
    ModeSpec,
    Recipe,
    extend_variants,
    probe_variant,
    resume_run,
    run_variants,
    validate_results,
)
from perfsuite.harness._variants import plan_variants


def _package(root: Path, value: int, extra: str = "") -> Path:
    """``codeut`` (the code under test) in ``root``: VALUE, and a submodule that says where it lives."""
    pkg = root / "codeut"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"from codeut._impl import where\nVALUE = {value}\n{extra}")
    (pkg / "_impl.py").write_text("def where():\n    return __file__\n")
    return root


OPERATIONS = textwrap.dedent('''
    """The workload: imports the code under test like perfsuite.workloads imports perfsuite.engine."""
    import codeut

    class Op:
        def __init__(self, ctx):
            self.ctx = ctx

        def submit(self, ack):
            block = bytearray(codeut.VALUE * (1 << 20))  # the planted cost: VALUE MB per operation
            del block
            ack(None)

        def metrics(self):
            return {"value": codeut.VALUE, "impl_in_variant": int("variant-" in codeut.where())}

    def op(ctx):
        return Op(ctx)
''')


@pytest.fixture
def variants(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[CodeVariant, CodeVariant]:
    monkeypatch.setenv("PERFSUITE_ALLOCATION_TRACKER", "memray")  # the planted megabyte's sum (alloc extra)
    ops = tmp_path / "ops"
    ops.mkdir()
    (ops / "abops.py").write_text(OPERATIONS)
    (ops / "abops_new.py").write_text("from codeut import NEW_NAME  # only in the newer variant\n"
                                      "from abops import op\n")
    monkeypatch.syspath_prepend(str(ops))  # workers get the parent's sys.path, as with `python -m`
    base = CodeVariant("base", _package(tmp_path / "variant-base", 1), ("codeut",), git={"commit": "b" * 40,
                                                                                            "dirty": False})
    head = CodeVariant("head", _package(tmp_path / "variant-head", 2, "NEW_NAME = 1\n"), ("codeut",),
                       git={"commit": "h" * 40, "dirty": True}, info={"revision": "working tree"})
    return base, head


def _recipe(**kw: object) -> Recipe:
    values: dict[str, object] = {
        "name": "ab-tiny", "modes": (ModeSpec("op", "abops:op"),), "samples": 2, "warmup": 1, "isolation": "process",
        "control_windows": 2, "settle_ms": 10.0, "allocation": True, "allocation_samples": 1,
    }
    values.update(kw)
    return Recipe(**values)  # type: ignore[arg-type]


def test_plan_interleaves_variants_in_a_seeded_order_per_round() -> None:
    recipe = _recipe(modes=(ModeSpec("a", "abops:op"), ModeSpec("b", "abops:op")), samples=6, control_windows=6,
                     allocation=False)
    plan = plan_variants(recipe, ["base", "head"], seed=11)
    assert plan == plan_variants(recipe, ["base", "head"], seed=11)  # recorded seed -> the same plan
    assert plan != plan_variants(recipe, ["base", "head"], seed=12)
    samples = [e for e in plan if e["kind"] == "sample"]
    for i in range(6):  # every round holds each variant/mode pair once, then one shared control window
        round_ = [(e["variant"], e["mode"]) for e in samples if e["index"] == i]
        assert sorted(round_) == [("base", "a"), ("base", "b"), ("head", "a"), ("head", "b")]
    firsts = Counter(next(e["variant"] for e in samples if e["index"] == i) for i in range(6))
    assert len(firsts) == 2  # not always the same variant first
    controls = [e for e in plan if e["kind"] == "control"]
    assert len(controls) == 6 and all(e["variant"] is None for e in controls)
    assert [e["kind"] for e in plan].count("warmup") == 4 and [e["kind"] for e in plan][-1] == "control"


def test_each_variant_imports_its_own_code_and_shares_the_control(
    tmp_path: Path, variants: tuple[CodeVariant, CodeVariant]
) -> None:
    outputs = {"base": tmp_path / "out" / "base" / "t.json", "head": tmp_path / "out" / "head" / "t.json"}
    events = []
    pair = run_variants(_recipe(), variants, outputs=outputs, seed=5, work_root=tmp_path / "work",
                        on_sample=events.append)
    docs = {name: json.loads(path.read_text()) for name, path in outputs.items()}
    for name, value in (("base", 1), ("head", 2)):
        doc = docs[name]
        validate_results(doc)
        assert doc["status"] == "complete" and doc["progress"]["done"] == doc["progress"]["total"]
        samples = doc["modes"]["op"]["samples"]
        assert [s["metrics"]["value"] for s in samples] == [value, value]
        assert all(s["metrics"]["impl_in_variant"] == 1 for s in samples)  # submodules from the variant too
        imported = doc["variant"]["code"]["imported"]["codeut"]
        assert imported.startswith(str(tmp_path / f"variant-{name}"))
        assert doc["variant"]["seed"] == 5 and doc["variant"]["of"] == ["base", "head"]
        assert doc["environment"]["git"]["commit"] == name[0] * 40
        assert [e["kind"] for e in doc["order"]].count("control") == 2
    assert docs["head"]["variant"]["revision"] == "working tree"
    assert docs["base"]["control"]["samples"] == docs["head"]["control"]["samples"]  # one idle control for both
    alloc = {n: d["modes"]["op"]["allocation"]["samples"][0]["total_bytes"] for n, d in docs.items()}
    assert alloc["head"] - alloc["base"] >= 1 << 20  # the planted megabyte, seen by memray
    assert [e.done for e in events] == list(range(1, len(pair.plan) + 1))
    assert {e.variant for e in events} == {"base", "head", None}
    assert list((tmp_path / "work").iterdir()) == []
    with pytest.raises(PerfsuiteError, match="cannot be resumed alone"):
        resume_run(outputs["base"])


def test_the_comparison_of_the_pair_names_the_planted_allocation(
    tmp_path: Path, variants: tuple[CodeVariant, CodeVariant]
) -> None:
    from perfsuite.report import compare

    outputs = {"base": tmp_path / "base" / "t.json", "head": tmp_path / "head" / "t.json"}
    run_variants(_recipe(samples=1, control_windows=1, warmup=0), variants, outputs=outputs, seed=1)
    comparison = compare(outputs["base"], outputs["head"])
    assert {c.metric for c in comparison.regressions} == {"allocation.total_bytes", "allocation.peak_bytes"}
    assert comparison.exit_status == 1


def test_probe_says_when_operations_do_not_import_against_a_variant(
    variants: tuple[CodeVariant, CodeVariant]
) -> None:
    base, head = variants
    imported = probe_variant(head, ["abops_new:op"])
    assert imported["codeut"].startswith(str(head.root))
    with pytest.raises(PerfsuiteError) as info:
        probe_variant(base, ["abops_new:op"])
    assert "NEW_NAME" in str(info.value) and "\n" not in str(info.value)
    broken = CodeVariant("broken", base.root / "nowhere", ("codeut",))
    with pytest.raises(PerfsuiteError, match="no package at"):
        probe_variant(broken, ["abops:op"])


def test_variants_need_process_isolation(tmp_path: Path, variants: tuple[CodeVariant, CodeVariant]) -> None:
    with pytest.raises(PerfsuiteError, match="process isolation"):
        run_variants(_recipe(isolation="inline"), variants, outputs={"base": tmp_path / "b", "head": tmp_path / "h"})


def test_imports_packages_tells_machine_only_operations_apart(tmp_path, monkeypatch) -> None:
    from perfsuite.harness import imports_packages

    (tmp_path / "machine_only_op.py").write_text("def op(ctx):\n    return None\n")  # imports nothing
    monkeypatch.syspath_prepend(str(tmp_path))  # the probe's worker gets this process's sys.path
    assert imports_packages("machine_only_op:op", ["perfsuite.engine"]) is False
    assert imports_packages("perfsuite.workloads.engine:mailbox_delivery", ["perfsuite.engine"]) is True
    # the idle control imports the engine's storage delay model (M10): importing alone cannot tell, hence
    # the declaration `perfsuite ab` reads (tests/ab/test_ab.py)
    assert imports_packages("perfsuite.workloads.basic:idle", ["perfsuite.engine"]) is True


def test_extending_a_pair_adds_interleaved_rounds_after_the_last_one(
    tmp_path: Path, variants: tuple[CodeVariant, CodeVariant]
) -> None:
    """A sequential A/B's next look (the CI gate's sequential test): more rounds appended to both finished documents,
    paired by index with nothing re-measured, and the comparison pairs every round."""
    from perfsuite.report import compare_results, read_result

    outputs = {"base": tmp_path / "base" / "t.json", "head": tmp_path / "head" / "t.json"}
    recipe = _recipe(warmup=0)
    run_variants(recipe, variants, outputs=outputs, seed=3)
    before = {name: json.loads(path.read_text()) for name, path in outputs.items()}
    events = []
    extend_variants(recipe, variants, outputs=outputs, rounds=3, seed=9, on_sample=events.append)
    for name, value in (("base", 1), ("head", 2)):
        doc = json.loads(outputs[name].read_text())
        validate_results(doc)
        assert doc["status"] == "complete" and doc["progress"]["done"] == doc["progress"]["total"] == len(doc["order"])
        samples = doc["modes"]["op"]["samples"]
        assert [s["index"] for s in samples] == [0, 1, 2, 3, 4]
        assert samples[:2] == before[name]["modes"]["op"]["samples"]  # nothing measured again
        assert [s["metrics"]["value"] for s in samples] == [value] * 5  # each side still imports its own code
        assert [s["index"] for s in doc["control"]["samples"]] == [0, 1, 2, 3, 4]
        assert doc["modes"]["op"]["allocation"] == before[name]["modes"]["op"]["allocation"]  # a cost: once
        assert doc["recipe"]["samples"] == 5
        assert doc["variant"]["extensions"] == [{"rounds": 3, "first_index": 2, "seed": 9}]
    docs = {name: json.loads(path.read_text()) for name, path in outputs.items()}
    assert docs["base"]["control"]["samples"] == docs["head"]["control"]["samples"]
    assert sorted((e.variant, e.index) for e in events if e.kind == "sample") == sorted(
        (v, i) for v in ("base", "head") for i in (2, 3, 4))
    comparison = compare_results([read_result(outputs["base"])], [read_result(outputs["head"])], paired=True)
    headlines = [c for c in comparison.changes if c.mode == "op" and c.metric in ("ack_ms", "max_gap_ms")]
    assert len(headlines) == 2 and {c.test for c in headlines} == {"signed-rank"}  # positive values: log ratios
    assert {c.base.n for c in comparison.changes if c.kind == "timing"} == {5}


def test_only_finished_documents_can_be_extended(tmp_path: Path, variants: tuple[CodeVariant, CodeVariant]) -> None:
    outputs = {"base": tmp_path / "base" / "t.json", "head": tmp_path / "head" / "t.json"}
    run_variants(_recipe(warmup=0), variants, outputs=outputs, seed=3)
    doc = json.loads(outputs["head"].read_text())
    doc["status"] = "interrupted"
    outputs["head"].write_text(json.dumps(doc))
    with pytest.raises(PerfsuiteError, match="only complete documents"):
        extend_variants(_recipe(warmup=0), variants, outputs=outputs, rounds=1)
    with pytest.raises(PerfsuiteError, match="must be positive"):
        extend_variants(_recipe(warmup=0), variants, outputs=outputs, rounds=0)
