"""`perfsuite run`'s loop in the library (the CLI only parses and prints): the outcome decides, the CLI only prints it.

The results writer, the load probe and the fixture resolver are injected as parameters (ENOSPC, a loaded
machine, a fixture), never patched; a signal is raised from the progress callback, never sent for real.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from perfsuite.errors import PerfsuiteError, Terminated
from perfsuite.harness import SampleEvent, machine_load, write_json_atomic
from perfsuite.workloads.plan import RunOptions
from perfsuite.workloads.runs import RunStarted, prepare_runs, run_plans

TINY = ('samples = 3\nwarmup = 0\nisolation = "inline"\ncontrol_windows = 1\nsettle_ms = 0\n'
        '[modes.a]\noperation = "perfsuite.workloads.basic:idle"\nwindow_ms = 1\n')


def _recipe(tmp_path: Path, text: str = TINY) -> str:
    (tmp_path / "tiny.toml").write_text(text)
    return str(tmp_path / "tiny.toml")


def _full_after(writes: int) -> Any:
    """A results writer whose disk is full from write number ``writes + 1`` on (ENOSPC, never for real)."""
    done: list[int] = []

    def write(path: Path, document: Any) -> None:
        if len(done) >= writes:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        done.append(1)
        write_json_atomic(path, document)

    return write


def test_a_run_reports_its_start_and_samples_and_returns_its_documents(tmp_path: Path) -> None:
    calls: list[tuple[str | None, str | None]] = []

    def resolve(name: str | None, session: str | None) -> tuple[Path | None, Mapping[str, Any]]:
        calls.append((name, session))
        return None, {}

    batch = prepare_runs([_recipe(tmp_path)], RunOptions(samples=2), output_dir=tmp_path / "out",
                         commit="abcd1234", resolve_fixture=resolve)
    assert calls == [(None, None)]  # every recipe asks the resolver, with a fixture or without
    assert [run.recipe.name for run in batch.runs] == ["tiny"] and not batch.baseline and not batch.resuming
    started: list[RunStarted] = []
    samples: list[SampleEvent] = []
    outcome = run_plans(batch, run_id="r1", on_start=started.append, on_sample=samples.append)
    assert outcome.status == 0 and outcome.stopped is None and not outcome.interrupted
    (doc,) = outcome.documents
    assert doc.path.parent == tmp_path / "out" and doc.document["run_id"] == "r1"
    assert doc.document["environment"]["measured"]["commit"] == "abcd1234"
    assert [(s.recipe, s.path, s.done, s.total) for s in started] == [("tiny", doc.path, 0, 3)]  # 2 samples, 1 control
    assert [s.done for s in samples] == [1, 2, 3] and len(outcome.loads) == 1


def test_a_failure_that_kept_entries_is_status_1_and_resumes_where_it_stopped(tmp_path: Path) -> None:
    batch = prepare_runs([_recipe(tmp_path)], output_dir=tmp_path / "out")
    outcome = run_plans(batch, writer=_full_after(3))  # the document, then two entries; the third finds ENOSPC
    stopped = outcome.stopped
    assert stopped is not None and stopped.reason == "failed" and isinstance(stopped.error, OSError)
    assert stopped.kept == (2, 4) and stopped.resumable and outcome.status == 1 and outcome.documents == ()
    resumed = prepare_runs([], resume=stopped.path)
    assert resumed.resuming and resumed.measured is None and resumed.output_dir == stopped.path.parent
    started: list[RunStarted] = []
    again = run_plans(resumed, on_start=started.append)
    assert again.status == 0 and [d.path for d in again.documents] == [stopped.path]
    assert [(s.done, s.total) for s in started] == [(2, 4)]  # the bar starts where the document stopped


def test_a_failure_that_kept_nothing_carries_its_error(tmp_path: Path) -> None:
    outcome = run_plans(prepare_runs([_recipe(tmp_path)], output_dir=tmp_path / "out"), writer=_full_after(0))
    stopped = outcome.stopped
    assert stopped is not None and stopped.kept is None and not stopped.resumable
    assert isinstance(stopped.error, OSError) and stopped.error.errno == errno.ENOSPC and outcome.status == 2


@pytest.mark.parametrize(("signal", "reason", "status"), [(KeyboardInterrupt, "interrupted", 130),
                                                          (Terminated, "terminated", 143)])
def test_a_signal_stops_the_loop_and_keeps_the_document(tmp_path: Path, signal: type[BaseException], reason: str,
                                                        status: int) -> None:
    def on_sample(event: SampleEvent) -> None:
        if event.done == 2:
            raise signal()

    outcome = run_plans(prepare_runs([_recipe(tmp_path)], output_dir=tmp_path / "out"), on_sample=on_sample)
    stopped = outcome.stopped
    assert stopped is not None and stopped.reason == reason and outcome.interrupted and outcome.status == status
    assert stopped.kept is not None and stopped.kept[0] == 2 and stopped.resumable


def _loaded_windows(gap_ms: float) -> Any:
    """A results writer that sets every idle-control window's max gap (the seam fault injection uses)."""

    def write(path: Path, document: Any) -> None:
        for sample in document["control"]["samples"]:
            sample["max_gap_ms"] = gap_ms
        write_json_atomic(path, document)

    return write


def test_a_baseline_on_a_loaded_machine_is_refused_before_anything_is_planned(tmp_path: Path) -> None:
    loaded = machine_load([{"max_gap_ms": 8.9}] * 3, 5.0)
    with pytest.raises(PerfsuiteError, match="is a baseline directory and this machine is loaded now"):
        prepare_runs(["no-such-recipe"], output_dir=tmp_path / "baseline", load_probe=lambda: loaded)
    assert not (tmp_path / "baseline").exists()
    probed: list[int] = []
    prepare_runs([_recipe(tmp_path)], output_dir=tmp_path / "baseline", allow_loaded=True,
                 load_probe=lambda: probed.append(1) or loaded)
    assert probed == []  # --allow-loaded: no probe


def test_a_baseline_measured_loaded_is_kept_and_status_1(tmp_path: Path) -> None:
    quiet = machine_load([{"max_gap_ms": 5.3}] * 3, 5.0)
    batch = prepare_runs([_recipe(tmp_path)], output_dir=tmp_path / "baseline", load_probe=lambda: quiet)
    assert batch.baseline
    outcome = run_plans(batch, writer=_loaded_windows(8.9))
    assert outcome.status == 1 and outcome.loaded == outcome.documents and outcome.loads[0].loaded
    local = run_plans(prepare_runs([_recipe(tmp_path)], output_dir=tmp_path / "local"), writer=_loaded_windows(8.9))
    assert local.status == 0 and local.loaded == local.documents  # marked, but only a baseline exits 1
