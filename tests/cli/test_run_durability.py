"""Nothing lost, the command line: nothing measured is lost, and every failure of `run` is one line.

Case 6: ENOSPC while writing results keeps the samples and prints the ``--resume`` hint (exit 1); the
disk is filled through the injected results writer (``main(argv, services=CliServices(writer=...))``), never
for real. Case 7: two runs of one recipe never share a results file, and a second ``--resume`` of a
document whose run is alive is refused. Case 9: SIGTERM is handled like SIGINT (exit 143), ``--resume``
checks the document before using it, and a failed run's document says "failed" in report and evidence.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from perfsuite import cli
from perfsuite.harness import validate_results, write_json_atomic

IDLE = 'operation = "perfsuite.workloads.basic:idle"'
TINY = (f'samples = 3\nwarmup = 0\nisolation = "inline"\ncontrol_windows = 1\nsettle_ms = 0\n'
        f'[modes.a]\n{IDLE}\nwindow_ms = 1\n')


def _perfsuite(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "perfsuite", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False)


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def _in_process(monkeypatch: pytest.MonkeyPatch, cwd: Path, *args: str,
                services: cli.CliServices | None = None) -> int:
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return cli.main(list(args), services=services)


def _wait_for(predicate: Callable[[], Any], what: str, deadline_s: float = 300.0) -> Any:
    """Poll until ``predicate()`` is truthy (a deadline against hangs, never a timing assertion)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    pytest.fail(f"timed out waiting for {what}")


# -- case 6: ENOSPC while writing results --------------------------------------------------------------


def test_enospc_while_writing_results_keeps_samples_and_prints_the_resume_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "tiny.toml").write_text(TINY)
    writes: list[int] = []

    def disk_fills_up(path: Path, document: Any) -> None:  # the 4th write finds the disk full
        if len(writes) >= 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        writes.append(document["progress"]["done"])
        write_json_atomic(path, document)

    status = _in_process(monkeypatch, tmp_path, "run", "tiny.toml", "--output-dir", "out",
                         services=cli.CliServices(writer=disk_fills_up))
    err = capsys.readouterr().err
    assert status == 1, err
    assert len(_lines(err)) == 1 and "Traceback" not in err
    (path,) = (tmp_path / "out").glob("tiny-*[0-9].json")
    line = _lines(err)[0]
    assert line.startswith("perfsuite: error: ") and os.strerror(errno.ENOSPC) in line
    assert f"continue with: perfsuite run --resume out/{path.name}" in line
    kept = json.loads(path.read_text())
    assert kept["progress"]["done"] == 2 and len(kept["modes"]["a"]["samples"]) == 1  # sample 0 + control 0

    # space again (the default writer): resume keeps and completes
    assert _in_process(monkeypatch, tmp_path, "run", "--resume", f"out/{path.name}") == 0
    final = json.loads(path.read_text())
    assert final["status"] == "complete" and len(final["modes"]["a"]["samples"]) == 3
    assert final["modes"]["a"]["samples"][0] == kept["modes"]["a"]["samples"][0]
    validate_results(final)


def test_a_failure_before_any_sample_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "boom.py").write_text("def make(ctx):\n    raise RuntimeError('boom')\n")
    (tmp_path / "boom.toml").write_text('samples = 2\nwarmup = 0\nisolation = "inline"\n[modes.a]\n'
                                        'operation = "boom:make"\n')
    proc = _perfsuite(tmp_path, "run", "boom.toml", "--output-dir", "out")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(_lines(proc.stderr)) == 1 and "RuntimeError: boom" in proc.stderr


# -- case 9: a failed run's document says so --------------------------------------------------------


def test_a_failed_runs_document_shows_as_failed_in_report_and_evidence(tmp_path: Path) -> None:
    (tmp_path / "boom.py").write_text("def make(ctx):\n    raise RuntimeError('boom')\n")
    (tmp_path / "boom.toml").write_text('samples = 2\nwarmup = 0\nisolation = "inline"\n[modes.a]\n'
                                        'operation = "boom:make"\n')
    assert _perfsuite(tmp_path, "run", "boom.toml", "--output-dir", "out").returncode == 2
    (path,) = (tmp_path / "out").glob("boom-*.json")
    doc = json.loads(path.read_text())
    assert doc["status"] == "failed" and "RuntimeError: boom" in doc["error"]
    validate_results(doc)
    report = _perfsuite(tmp_path, "report", str(path))
    assert report.returncode == 0, report.stderr
    assert "FAILED" in report.stdout and "RuntimeError: boom" in report.stdout
    evidence = _perfsuite(tmp_path, "evidence", str(path))
    assert evidence.returncode == 0, evidence.stderr
    assert "The run FAILED" in evidence.stdout and "interrupted" not in evidence.stdout


# -- case 9: SIGTERM like SIGINT; case 7: no second writer while the run is alive --------------------


def test_sigterm_keeps_samples_and_a_second_resume_is_refused_while_the_run_lives(tmp_path: Path) -> None:
    # the second mode never acknowledges (for 120 s): the run is alive, holding its document, until SIGTERM
    # (fixed order: the default random order could run the hanging mode first)
    (tmp_path / "hang.toml").write_text(
        'samples = 3\nwarmup = 0\nisolation = "inline"\ncontrol_windows = 1\nsettle_ms = 0\nack_timeout_s = 120\n'
        'order = "fixed"\n'
        f'[modes.a]\n{IDLE}\nwindow_ms = 1\n[modes.b]\noperation = "perfsuite.workloads.basic:never_ack"\n'
    )
    proc = subprocess.Popen([sys.executable, "-m", "perfsuite", "run", "hang.toml", "--output-dir", "out"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def first_sample_kept() -> Path | None:
            for path in (tmp_path / "out").glob("hang-*[0-9].json") if (tmp_path / "out").exists() else []:
                try:
                    if json.loads(path.read_text())["modes"]["a"]["samples"]:
                        return path
                except (ValueError, KeyError):
                    pass
            return None

        path = _wait_for(first_sample_kept, "the first sample")
        second = _perfsuite(tmp_path, "run", "--resume", str(path))
        assert second.returncode == 2 and len(_lines(second.stderr)) == 1, second.stderr
        assert f"being written by pid {proc.pid}" in second.stderr and "Traceback" not in second.stderr
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, stderr
    assert len(_lines(stderr)) == 1 and "Traceback" not in stderr
    assert stderr.startswith("perfsuite: terminated; measured samples kept in") and "--resume" in stderr
    doc = json.loads(path.read_text())
    assert doc["status"] == "interrupted" and len(doc["modes"]["a"]["samples"]) == 1
    validate_results(doc)
    assert not (path.parent / f".{path.name}.lock").exists()  # released when the run ended


# -- case 7: two runs of one recipe at once ---------------------------------------------------------


def test_two_concurrent_runs_of_one_recipe_keep_two_documents_each_with_its_own_exports(tmp_path: Path) -> None:
    (tmp_path / "tiny.toml").write_text(TINY)
    procs = [subprocess.Popen([sys.executable, "-m", "perfsuite", "run", "tiny.toml", "--output-dir", "out"],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    documents = sorted((tmp_path / "out").glob("tiny-*[0-9].json"))
    assert len(documents) == 2
    run_ids = set()
    for path in documents:
        doc = json.loads(path.read_text())
        assert doc["status"] == "complete"
        pyperf = json.loads(path.with_suffix("").with_suffix(".pyperf.json").read_text())
        exported = {b["metadata"].get("perfsuite_run_id") for b in pyperf["benchmarks"]}
        exported |= {r.get("metadata", {}).get("perfsuite_run_id") for b in pyperf["benchmarks"] for r in b["runs"]}
        exported |= {pyperf.get("metadata", {}).get("perfsuite_run_id")}
        assert doc["run_id"] in exported  # the export beside a document comes from that document's run
        run_ids.add(doc["run_id"])
    assert len(run_ids) == 2
    assert not list((tmp_path / "out").glob(".*.lock"))


# -- case 9: --resume checks the document first --------------------------------------------------------


def _break(doc: dict[str, Any], how: str) -> None:
    if how == "no-progress":
        del doc["progress"]
    elif how == "no-order":
        del doc["order"]
    elif how == "no-recipe-modes":
        del doc["recipe"]["modes"]
    elif how == "modes-null":
        doc["modes"] = None
    elif how == "done-negative":
        doc["progress"]["done"] = -3
    elif how == "done-past-total":
        doc["progress"]["done"] = doc["progress"]["total"] + 2
    elif how == "done-not-int":
        doc["progress"]["done"] = "2"
    elif how == "done-ahead-of-samples":
        doc["progress"]["done"] += 1
    elif how == "order-not-the-plan":
        doc["order"] = list(reversed(doc["order"]))
    elif how == "total-wrong":
        doc["progress"]["total"] += 1
    elif how == "sample-list-missing":
        del doc["modes"]["a"]["samples"]
    elif how == "status-bogus":
        doc["status"] = "paused"


@pytest.mark.parametrize("how", ["no-progress", "no-order", "no-recipe-modes", "modes-null", "done-negative",
                                 "done-past-total", "done-not-int", "done-ahead-of-samples", "order-not-the-plan",
                                 "total-wrong", "sample-list-missing", "status-bogus"])
def test_resume_refuses_a_broken_document_in_one_line_and_leaves_it_alone(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from perfsuite.harness import ModeSpec, Recipe, SampleEvent, run_recipe

    recipe = Recipe(name="r", modes=(ModeSpec("a", "perfsuite.workloads.basic:idle", {"window_ms": 1}),),
                    samples=3, warmup=0, isolation="inline", control_windows=1, settle_ms=0.0)
    path = tmp_path / "r.json"

    def stop(event: SampleEvent) -> None:
        if event.done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_recipe(recipe, output=path, work_root=tmp_path / "w", on_sample=stop)
    doc = json.loads(path.read_text())
    _break(doc, how)
    path.write_text(json.dumps(doc))
    before = path.read_bytes()
    status = _in_process(monkeypatch, tmp_path, "run", "--resume", str(path))
    err = capsys.readouterr().err
    assert status == 2 and "Traceback" not in err, err
    assert len(_lines(err)) == 1 and _lines(err)[0].startswith(f"perfsuite: error: {path}")
    assert path.read_bytes() == before  # nothing measured on a plan it cannot trust, nothing rewritten
