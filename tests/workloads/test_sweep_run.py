"""`perfsuite sweep`'s plan and runs: grid order, conditions per setting, and documents that carry the
sweep id, the storage profile with its source, the heap and the freeze setting."""

from __future__ import annotations

import textwrap

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.harness import load_recipe, validate_results
from perfsuite.report import read_results, read_sweeps, sweep_table
from perfsuite.workloads.conditions import apply_conditions, parse_heaps, plan_sweep, run_sweep
from perfsuite.workloads.storage import load_profile

BASIC = "perfsuite.workloads.basic"


@pytest.fixture
def recipe(tmp_path):
    path = tmp_path / "floor.toml"
    path.write_text(textwrap.dedent(f"""
        name = "floor"
        samples = 1
        warmup = 0
        isolation = "inline"
        gc = "collect-before"
        allocation = true
        allocation_samples = 1
        control_windows = 1
        [modes.raw]
        operation = "{BASIC}:fsync_floor"
        [modes.idle]
        operation = "{BASIC}:idle"
        window_ms = 5
    """))
    return load_recipe(str(path))


def test_heaps_parse_like_the_command_line(tmp_path):
    assert parse_heaps("0, 1e5,1e6") == [0, 100_000, 1_000_000]
    for bad in ("-1", "1.5", "lots", "2e9"):
        with pytest.raises(PerfsuiteError):
            parse_heaps(bad)


def test_the_grid_is_storage_then_heap_then_freeze(recipe):
    plan = plan_sweep(recipe, storages=["nvme", "hdd"], heaps=[0, 1000], freeze="both", sweep_id="s1")
    assert [(s.storage, s.heap, s.freeze) for s in plan.settings] == [
        ("nvme", 0, False), ("nvme", 0, True), ("nvme", 1000, False), ("nvme", 1000, True),
        ("hdd", 0, False), ("hdd", 0, True), ("hdd", 1000, False), ("hdd", 1000, True)]
    for s in plan.settings:
        r = s.recipe
        assert r.gc == "natural" and r.allocation is False and r.heap == s.heap
        assert r.storage["name"] == s.storage and r.storage["source"] == load_profile(s.storage).source
        assert all(m.params.get("freeze_loaded", False) is s.freeze for m in r.modes)
    assert plan.annotation(plan.settings[3])["setting"] == {"index": 3, "storage": "nvme", "heap": 1000,
                                                            "freeze": True}


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"storages": ["floppy"]}, "unknown storage profile"),
    ({"storages": ["nvme", "nvme"]}, "must not repeat"),
    ({"heaps": [0, 0]}, "must not repeat"),
    ({"freeze": "maybe"}, "--freeze"),
])
def test_bad_grids_fail_before_anything_runs(recipe, kwargs, message):
    with pytest.raises(PerfsuiteError) as info:
        plan_sweep(recipe, **kwargs)
    assert message in str(info.value)


def test_apply_conditions_resolves_a_recipe_named_profile_to_its_sourced_table(recipe):
    import dataclasses

    named = dataclasses.replace(recipe, storage="sata-ssd")
    conditioned = apply_conditions(named, heap=500)
    assert conditioned.storage == load_profile("sata-ssd").to_dict()
    assert conditioned.heap == 500 and conditioned.gc == "natural"
    assert apply_conditions(recipe, heap=500, gc="collect-before").gc == "collect-before"
    assert apply_conditions(recipe).storage is None


def test_a_sweeps_documents_carry_the_profile_its_source_and_the_setting(recipe, tmp_path):
    plan = plan_sweep(recipe, storages=["nvme", "nfs"], heaps=[0, 2000], freeze="off", sweep_id="sweep-test")
    results = run_sweep(plan, output_dir=tmp_path / "out")
    assert len(results) == 4
    for setting, result in zip(plan.settings, results):
        doc = result.document
        validate_results(doc)
        assert result.path.parent == tmp_path / "out" / "sweep-test"
        assert doc["sweep"]["id"] == "sweep-test" and doc["sweep"]["setting"] == setting.to_dict()
        storage = doc["recipe"]["storage"]
        assert storage["name"] == setting.storage and storage["source"] == load_profile(setting.storage).source
        assert storage["simulated"] is True and storage["sources"][0]["url"].startswith("https://")
        assert doc["recipe"]["heap"] == setting.heap and doc["recipe"]["gc"] == "natural"
        raw = doc["modes"]["raw"]["samples"]
        assert raw[0]["labels"]["storage_profile"] == setting.storage and raw[0]["metrics"]["storage.ops"] == 4
        assert ("heap" in raw[0]) is (setting.heap > 0)
        assert doc["modes"]["raw"]["allocation"] is None
    (sweep,) = read_sweeps(read_results(tmp_path / "out"))
    assert sweep.id == "sweep-test" and sweep.complete and [r.index for r in sweep.rows] == [0, 1, 2, 3]
    from rich.console import Console

    console = Console(width=400, record=True)
    console.print(sweep_table(sweep))
    text = " ".join(console.export_text().split())
    assert f"simulated storage latency: nvme ({load_profile('nvme').source})" in text
    assert "not measured" in text  # no loop-stall metric in these documents


def test_only_runs_the_chosen_settings(recipe, tmp_path):
    plan = plan_sweep(recipe, storages=["nvme"], heaps=[0, 100], sweep_id="part")
    results = run_sweep(plan, output_dir=tmp_path, only=[1])
    assert [r.document["sweep"]["setting"]["index"] for r in results] == [1]
    (sweep,) = read_sweeps(read_results(tmp_path / "part"))
    assert not sweep.complete and sweep.planned == 2
