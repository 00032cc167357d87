"""M4 in the worker: ``worker_warmup`` measures discarded samples in each sample's worker process first, each on
its own fresh copy, so the measured one is not the process's first; inline isolation is unaffected (its one
process already ran the warm-up samples)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.harness import ModeSpec, Recipe, load_recipe, run_recipe

OPERATION = '''
import asyncio, os
from perfsuite.harness import Operation

class _Counted(Operation):
    def submit(self, ack):
        asyncio.get_running_loop().call_soon(ack, None)

def counted(ctx):
    """Appends ``<pid> <kind> <index>`` to params["log"] each time a sample opens it (a warm-up or a sample)."""
    with open(ctx.params["log"], "a") as log:
        log.write(f"{os.getpid()} {ctx.kind} {ctx.sample}\\n")
    return _Counted()
'''


def _recipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **keys: object) -> tuple[Recipe, Path]:
    (tmp_path / "warm_ops.py").write_text(OPERATION)
    monkeypatch.syspath_prepend(str(tmp_path))  # the workers get the running sys.path
    log = tmp_path / "opened.log"
    mode = ModeSpec("counted", "warm_ops:counted", {"log": str(log)})
    return Recipe(name="warm", modes=(mode,), samples=2, warmup=0, control_windows=1, settle_ms=0.0, **keys), log


def _opened(log: Path) -> list[tuple[int, str, int]]:
    rows = [line.split() for line in log.read_text().splitlines()]
    return [(int(pid), kind, int(index)) for pid, kind, index in rows]


def test_each_sample_worker_measures_its_warm_ups_first_in_the_same_process(tmp_path, monkeypatch) -> None:
    recipe, log = _recipe(tmp_path, monkeypatch, isolation="process", worker_warmup=2)
    result = run_recipe(recipe, output_dir=tmp_path / "out", work_root=tmp_path / "work")
    opened = _opened(log)
    assert [kind for _, kind, _ in opened] == ["warmup", "warmup", "sample"] * 2
    for first in (0, 3):  # one worker per sample: its two warm-ups, then the sample, in one process
        assert len({pid for pid, _, _ in opened[first:first + 3]}) == 1 and opened[first][0] != os.getpid()
    assert opened[0][0] != opened[3][0]  # every sample still has a fresh worker (M4)
    assert len(result.document["modes"]["counted"]["samples"]) == 2  # the warm-ups are never recorded
    recorded = json.loads(result.path.read_text())["recipe"]
    assert recorded["worker_warmup"] == 2 and Recipe.from_dict(recorded).worker_warmup == 2


def test_without_the_key_a_worker_measures_only_its_sample(tmp_path, monkeypatch) -> None:
    recipe, log = _recipe(tmp_path, monkeypatch, isolation="process")
    run_recipe(recipe, output_dir=tmp_path / "out", work_root=tmp_path / "work")
    assert [kind for _, kind, _ in _opened(log)] == ["sample", "sample"]


def test_inline_isolation_ignores_it(tmp_path, monkeypatch) -> None:
    recipe, log = _recipe(tmp_path, monkeypatch, isolation="inline", worker_warmup=3)
    run_recipe(recipe, output_dir=tmp_path / "out", work_root=tmp_path / "work")
    assert [kind for _, kind, _ in _opened(log)] == ["sample", "sample"]


def test_the_recipe_key_and_the_override_are_checked_in_one_line(tmp_path) -> None:
    def recipe(extra: str) -> Recipe:
        path = tmp_path / "r.toml"
        path.write_text(f'{extra}\n[modes.a]\noperation = "perfsuite.workloads.basic:idle"\n')
        return load_recipe(str(path))

    assert recipe("worker_warmup = 1").worker_warmup == 1
    with pytest.raises(PerfsuiteError, match="worker_warmup"):
        recipe("worker_warmup = -1")
    assert recipe("").worker_warmup == 0 and recipe("").with_overrides(worker_warmup=1).worker_warmup == 1
    with pytest.raises(PerfsuiteError, match="--worker-warmup"):
        recipe("").with_overrides(worker_warmup=101)


def test_run_takes_it_on_the_command_line_and_records_it(tmp_path, capsys) -> None:
    from perfsuite import cli
    from perfsuite.workloads.plan import RunOptions, plan_run

    assert plan_run(["idle-control"], RunOptions(worker_warmup=2)).recipes[0].worker_warmup == 2
    assert cli.main(["run", "idle-control", "--worker-warmup", "-1", "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--worker-warmup" in err
