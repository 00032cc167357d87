"""Where campaigns, sweeps and what-if run, on a LocalCluster of 2 workers: what-if grids give the same table as
in-process; a sweep runs each setting whole on one worker, one setting per host at a time, and records where; the
crossover script runs through the cluster path (a one-setting smoke configuration); a missing extra is one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from perfsuite import whatif
from perfsuite.cluster import PoolRunner

pytest.importorskip("distributed")
from perfsuite.cluster import DaskRunner

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dask() -> Iterator[DaskRunner]:
    runner = DaskRunner.local(2)
    yield runner
    runner.close()


def _table(report: whatif.WhatIf) -> dict[str, Any]:
    data = report.to_json()
    data.pop("simulate_s")  # (how long it took: the only figure that depends on where it ran)
    return data


def test_a_whatif_grid_gives_the_same_results_on_a_cluster_a_pool_and_in_process(dask) -> None:
    trace = whatif.permission_storm(whatif.StormSpec(seed=3))
    grid = whatif.make_grid((0.5, 2.0, 5.0), (15.0, 30.0))
    alone = _table(whatif.sweep(trace, grid))
    assert _table(whatif.sweep(trace, grid, runner=dask)) == alone
    with PoolRunner(2) as pool:
        assert _table(whatif.sweep(trace, grid, runner=pool)) == alone
    assert len(alone["results"]) == 6


@pytest.fixture
def floor_recipe(tmp_path: Path) -> Path:
    path = tmp_path / "floor.toml"
    path.write_text(textwrap.dedent("""
        name = "floor"
        samples = 2
        warmup = 0
        isolation = "inline"
        control_windows = 1
        [modes.raw]
        operation = "perfsuite.workloads.basic:fsync_floor"
    """))
    return path


def test_a_sweep_runs_each_setting_whole_on_one_worker_one_per_host(dask, floor_recipe, tmp_path) -> None:
    from perfsuite.harness import load_recipe, validate_results
    from perfsuite.workloads.conditions import plan_sweep, run_sweep_on

    plan = plan_sweep(load_recipe(str(floor_recipe)), storages=("nvme", None), heaps=(0,), freeze="off")
    events: list[tuple[str, int]] = []
    results = run_sweep_on(dask, plan, output_dir=tmp_path / "out",
                           on_start=lambda s, host: events.append(("start", s.index)),
                           on_done=lambda s, r: events.append(("done", s.index)))
    # one host (this machine): the second setting starts only after the first is measured, although the
    # cluster has two workers: two measurements never share a machine
    assert events == [("start", 0), ("done", 0), ("start", 1), ("done", 1)]
    assert [r.document["sweep"]["setting"]["index"] for r in results] == [0, 1]
    for result in results:
        doc = json.loads(result.path.read_text())
        validate_results(doc)
        assert doc["status"] == "complete" and doc["placement"] == {"host": "127.0.0.1", "backend": "dask-local"}
        assert len(doc["modes"]["raw"]["samples"]) == 2 and all(p.is_file() for p in result.exports)
        assert result.path.parent == tmp_path / "out" / plan.id


def test_the_crossover_script_runs_through_the_cluster_path(tmp_path: Path) -> None:
    """The smoke configuration the script's header gives: one recipe, one setting, one sample."""
    env = dict(os.environ, PYTHON=sys.executable, PYTHONPATH=str(ROOT), OUT=str(tmp_path / "xo"), COLUMNS="200",
               CLUSTER="--cluster local", RECIPES="mailbox-delivery", STORAGE="nvme", HEAP="0", FREEZE="off",
               SAMPLES="1", WARMUP="0")
    script = ROOT / "scripts" / "acceptance" / "crossover.sh"
    proc = subprocess.run(["sh", str(script)], cwd=tmp_path, env=env, text=True,
                          capture_output=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "on LocalCluster of 1 worker" in proc.stderr and "sweep `mailbox-delivery`" in proc.stdout
    (doc_path,) = (tmp_path / "xo").glob("*/mailbox-delivery-00.json")
    assert json.loads(doc_path.read_text())["placement"]["backend"] == "dask-local"


def test_a_cluster_option_without_the_extra_is_one_line(tmp_path: Path) -> None:
    site = tmp_path / "blocker"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent('''
        import sys
        class _Blocker:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("dask", "distributed"):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        sys.meta_path.insert(0, _Blocker())
    '''))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))
    for args in (["crashcheck", "--cluster", "local", "--max-states", "1"],
                 ["whatif", "--storm", "--no-costs", "--scheduler", "tcp://127.0.0.1:8786"]):
        proc = subprocess.run([sys.executable, "-m", "perfsuite", *args], env=env, text=True, capture_output=True,
                              timeout=120, check=False)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "perfsuite's cluster extra" in proc.stderr and "[cluster]" in proc.stderr


def test_whatif_jobs_on_the_command_line_writes_the_same_json(tmp_path: Path, capsys: Any) -> None:
    from perfsuite import cli

    grid = ["whatif", "--storm", "--no-costs", "--debounce", "0.5,2", "--checkpoint-interval", "15,30"]
    assert cli.main([*grid, "--json", str(tmp_path / "alone.json")]) == 0
    assert cli.main([*grid, "--jobs", "2", "--json", str(tmp_path / "pool.json")]) == 0
    docs = [json.loads((tmp_path / n).read_text()) for n in ("alone.json", "pool.json")]
    for doc in docs:
        doc.pop("simulate_s")
    assert docs[0] == docs[1] and len(docs[0]["results"]) == 4
