"""M10 run conditions in the harness: live-heap shapes, the heap held through a sample and probed after
the window, recipe keys storage/heap, and a storage condition no operation silently ignores."""

from __future__ import annotations

import gc
import textwrap

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.harness import load_recipe, run_recipe, validate_results
from perfsuite.harness._heap import build_heap
from perfsuite.harness._sample import HEAP_SEED

BASIC = "perfsuite.workloads.basic"


def test_heap_holds_the_requested_objects_in_session_state_records():
    heap = build_heap(10_000, seed=1)
    assert 10_000 <= heap.objects < 10_000 + 9
    assert heap.objects == heap.dicts + heap.lists + heap.strings + heap.numbers
    n = len(heap.records)
    calls = sum(1 for r in heap.records if r["meta"]["tool_calls"])
    # per record: message dict + meta dict (+ a tool-call dict every 4th); one list; id + content (+ arguments)
    assert heap.dicts == 2 * n + calls and heap.lists == n and heap.strings == 2 * n + calls
    assert heap.numbers == 2 * n and calls == (n + 3) // 4
    first = heap.records[0]
    assert set(first) == {"id", "role", "timestamp", "content", "meta"}
    assert set(first["meta"]) == {"model", "tokens", "tool_calls"}
    assert first["meta"]["tool_calls"][0]["name"] == "bash"
    assert all(gc.is_tracked(r) and gc.is_tracked(r["meta"]) for r in heap.records[:50])
    assert 0.40 < heap.containers / heap.objects < 0.46  # the documented 43% of tracked containers


def test_heap_is_seeded_and_places_the_collector_at_a_phase():
    a, b, c = build_heap(5000, seed=7), build_heap(5000, seed=7), build_heap(5000, seed=8)
    assert a.records == b.records and a.phase == b.phase
    assert a.phase != c.phase and 0.0 <= a.phase < 1.0
    assert a.to_dict()["objects"] == a.objects and a.to_dict()["records"] == len(a.records)


def _recipe(tmp_path, body: str):
    path = tmp_path / "r.toml"
    path.write_text(textwrap.dedent(body))
    return load_recipe(str(path))


HEAD = """
name = "cond"
samples = 2
warmup = 1
isolation = "inline"
gc = "natural"
allocation = false
control_windows = 1
"""


def test_a_heap_sample_records_its_heap_and_the_probe_and_controls_do_not(tmp_path):
    recipe = _recipe(tmp_path, HEAD + f"""
    heap = 3000
    [modes.idle]
    operation = "{BASIC}:idle"
    window_ms = 5
    """)
    doc = run_recipe(recipe, output_dir=tmp_path / "out").document
    validate_results(doc)
    assert doc["recipe"]["heap"] == 3000
    samples = doc["modes"]["idle"]["samples"]
    for s in samples:
        assert s["heap"]["objects"] >= 3000 and s["heap"]["full_gc_ms"] >= 0
        assert isinstance(s["gc"]["frozen_objects"], int)
    seeds_differ = samples[0]["heap"]["phase"] != samples[1]["heap"]["phase"]
    assert seeds_differ and HEAP_SEED > 0
    assert all("heap" not in c for c in doc["control"]["samples"])
    assert gc.get_freeze_count() == 0


def test_recipe_storage_reaches_every_mode_and_is_recorded(tmp_path):
    recipe = _recipe(tmp_path, HEAD + f"""
    storage = "nfs"
    [modes.floor]
    operation = "{BASIC}:fsync_floor"
    """)
    doc = run_recipe(recipe, output_dir=tmp_path / "out").document
    validate_results(doc)
    assert doc["recipe"]["storage"] == "nfs"
    for s in doc["modes"]["floor"]["samples"]:
        assert s["labels"]["storage_profile"] == "nfs" and s["metrics"]["storage.ops"] == 4


def test_a_storage_condition_on_an_operation_that_ignores_it_is_refused(tmp_path):
    recipe = _recipe(tmp_path, HEAD + f"""
    storage = "nvme"
    [modes.busy]
    operation = "{BASIC}:busy"
    ms = 1
    """)
    with pytest.raises(PerfsuiteError) as info:
        run_recipe(recipe, output_dir=tmp_path / "out")
    assert "modes.busy" in str(info.value) and "storage" in str(info.value)
    assert list(tmp_path.glob("out/*.json")) == []  # refused before any document was written


@pytest.mark.parametrize(("line", "message"), [
    ("heap = -1", "heap: expected an integer from 0 to 100000000, got -1"),
    ('heap = "big"', 'heap: expected an integer from 0 to 100000000, got "big"'),
    ("heap = 1000000000000", "heap: expected an integer from 0 to 100000000, got 1000000000000 (at most"),
    ('storage = ""', "storage: expected a non-empty string"),
    ("storage = 3", "storage: expected a non-empty string"),
])
def test_bad_condition_keys_are_one_line(tmp_path, line, message):
    with pytest.raises(PerfsuiteError) as info:
        _recipe(tmp_path, HEAD + line + f"""
        [modes.idle]
        operation = "{BASIC}:idle"
        """)
    assert message in str(info.value)


def test_overrides_merge_mode_params_and_conditions(tmp_path):
    recipe = _recipe(tmp_path, HEAD + f"""
    [modes.a]
    operation = "{BASIC}:idle"
    window_ms = 5
    """)
    changed = recipe.with_overrides(storage={"name": "x", "source": "s"}, heap=10, mode_params={"freeze_loaded": True})
    assert changed.storage == {"name": "x", "source": "s"} and changed.heap == 10
    assert dict(changed.mode("a").params) == {"window_ms": 5, "freeze_loaded": True}
    assert changed.to_dict()["modes"]["a"]["freeze_loaded"] is True
    with pytest.raises(PerfsuiteError):
        recipe.with_overrides(heap=-3)


class _FreezesWhenIdle:
    """An operation that freezes the heap in wait_idle, as the engine's freeze_loaded does at open."""

    def __init__(self, ctx) -> None:
        self.keep = [{"i": i} for i in range(1000)]

    async def wait_idle(self) -> None:
        gc.freeze()

    def submit(self, ack) -> None:
        ack(None)


def test_the_freeze_count_is_read_after_the_idle_wait_and_left_clean(sample):
    # the count is read after wait_idle and before the settle: gc.get_freeze_count() walks every frozen
    # object, so at the window's edge its stall would be counted in the max gap (found by M10's sweep)
    assert gc.get_freeze_count() == 0
    rec = sample(f"{BASIC}:idle", factory=_FreezesWhenIdle)
    assert rec.frozen_objects >= 1000
    assert gc.get_freeze_count() == 0  # the sample unfroze what it froze (inline isolation)
