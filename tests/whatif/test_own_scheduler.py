"""U, what-if through the team's scheduler: a team's own debouncer (not the engine's), in its own package in a scratch
directory outside perfsuite, tuned by `perfsuite whatif --target` over a debounce grid from a trace, and `--validate`
agreeing with a real-time replay of the same code (a few hundred milliseconds of real time)."""

from __future__ import annotations

import ast
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

DEBOUNCE = '''\
"""myruntime's registry debouncer: saves once edits stop for delay_s (plain asyncio, no perfsuite)."""
import asyncio


class Debouncer:
    def __init__(self, delay_s, save):
        self.delay_s = delay_s
        self.save = save
        self._handle = None

    def changed(self):
        if self._handle is not None:
            self._handle.cancel()
        self._handle = asyncio.get_running_loop().call_later(self.delay_s, self._fire)

    def _fire(self):
        self._handle = None
        self.save()

    @property
    def pending(self):
        return self._handle is not None
'''

TARGET = '''\
"""The replay target: trace events into myruntime's debouncer, its saves out to perfsuite."""
import asyncio

from myruntime.debounce import Debouncer


class Target:
    def __init__(self, ctx):
        self.ctx = ctx
        self.saving = set()
        self.debouncer = Debouncer(ctx.setting.debounce_s, self.save)

    def save(self):  # the real save: a file written in a thread, as myruntime does it
        publication = self.ctx.begin("registry-save")
        path = self.ctx.workdir / "registry.json"
        job = asyncio.get_running_loop().run_in_executor(None, path.write_text, "{}")
        self.saving.add(job)

        def finished(future):
            self.saving.discard(future)
            publication.done(bytes_written=2) if future.exception() is None else publication.failed()

        job.add_done_callback(finished)

    def on_event(self, event):
        if event.kind == "x-edit":
            self.debouncer.changed()

    def idle(self):
        return not self.debouncer.pending and not self.saving
'''

#: a mistake the validation must catch: a throttle timed by time.monotonic(), which the virtual loop does not move
THROTTLE = '''\
import time


class Target:
    def __init__(self, ctx):
        self.ctx = ctx
        self.last = None

    def on_event(self, event):
        now = time.monotonic()
        if self.last is None or now - self.last >= self.ctx.setting.debounce_s:
            self.last = now
            self.ctx.publish("save")
'''


def _trace(path: Path, bursts: list[float], edits: int = 5, spacing: float = 0.05, duration: float = 6.0) -> Path:
    lines = [json.dumps({"format": "perfsuite-trace", "version": 1, "duration_s": duration, "meta": {}})]
    for start in bursts:
        for i in range(edits):
            lines.append(json.dumps({"time": round(start + i * spacing, 6), "session": "main",
                                     "conversation": "root", "kind": "x-edit", "size": 40}))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def team(tmp_path: Path) -> Path:
    """The team's checkout: its own package, nothing of perfsuite's (perfsuite is 'installed': PYTHONPATH)."""
    repo = tmp_path / "team"
    package = repo / "myruntime"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "debounce.py").write_text(DEBOUNCE)
    (package / "whatif_target.py").write_text(TARGET)
    (package / "throttle.py").write_text(THROTTLE)
    assert not repo.resolve().is_relative_to(ROOT)
    return repo


def _perfsuite(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "perfsuite", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def test_the_teams_debouncer_is_tuned_over_a_grid_and_validated_against_a_real_replay(team: Path) -> None:
    _trace(team / "edits.jsonl", bursts=[0.0, 1.0, 2.5, 5.0])  # 4 bursts of 5 edits, 50 ms apart
    grid = "0.02,0.1,0.5,1,2,3"
    proc = _perfsuite(team, "whatif", "--trace", "edits.jsonl", "--target", "myruntime.whatif_target:Target",
                      "--debounce", grid, "--json", "sweep.json", "--csv", "sweep.csv", "--plot", "tradeoff.png")
    assert proc.returncode == 0, proc.stderr
    assert "through myruntime.whatif_target:Target" in proc.stdout and "registry-save" in proc.stdout
    rows = json.loads((team / "sweep.json").read_text())["results"]
    # shorter than the 50 ms spacing: every edit saves; longer than a gap between bursts: the bursts merge
    assert [r["publications"] for r in rows] == [20, 4, 4, 3, 2, 1]
    assert [r["per_minute_mean"] for r in rows] == [200.0, 40.0, 40.0, 30.0, 20.0, 10.0]
    # the longest wait: a burst's first edit to its save (0.2 s of burst + the debounce), merged bursts longer
    assert [r["loss_window_s"] for r in rows] == pytest.approx([0.02, 0.3, 0.7, 2.2, 4.7, 8.2])
    assert [r["pareto"] for r in rows] == [True, True, False, True, True, True]  # 0.5 s: 0.1 s's saves, later
    assert [r["bytes_written"] for r in rows] == [40, 8, 8, 6, 4, 2]  # what the target's code reported
    assert [r["publications_registry-save"] for r in csv.DictReader((team / "sweep.csv").open())] == \
        ["20", "4", "4", "3", "2", "1"]
    assert (team / "tradeoff.png").stat().st_size > 10_000

    # the chosen setting against the same code on a real event loop: the first 2 s at speed 4 (0.5 s real)
    proc = _perfsuite(team, "whatif", "--trace", "edits.jsonl", "--target", "myruntime.whatif_target:Target",
                      "--debounce", "0.5", "--validate", "--validate-seconds", "2", "--speed", "4",
                      "--json", "validation.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "validate: PASS" in proc.stdout
    check = json.loads((team / "validation.json").read_text())
    assert check["target"] == "myruntime.whatif_target:Target"
    assert check["simulated_publications"] == check["real_publications"] == 2
    assert check["simulated_loss_s"] == pytest.approx(0.7)
    assert check["wall_s"] < 5.0  # keep the real-time part short (a bound, not a measurement)


def test_validation_catches_code_the_virtual_clock_cannot_drive(team: Path) -> None:
    """A throttle timed by time.monotonic(): in virtual time it saves once, in real time once per burst."""
    _trace(team / "bursts.jsonl", bursts=[0.3 * k for k in range(8)], edits=3, spacing=0.01, duration=2.4)
    proc = _perfsuite(team, "whatif", "--trace", "bursts.jsonl", "--target", "myruntime.throttle:Target",
                      "--debounce", "0.2", "--validate", "--validate-seconds", "all", "--speed", "4")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "validate: FAIL: publications: simulated 1, real" in proc.stdout


@pytest.mark.parametrize("where", [("--jobs", "2"), ("--cluster", "local", "--jobs", "1")],
                         ids=["pool", "local-cluster"])
def test_the_teams_grid_runs_on_a_pool_and_a_cluster_with_the_same_table(team: Path, where: tuple[str, ...]) -> None:
    """Each setting of the target's grid is one task there (the target imported by its name on the worker,
    from the team's directory); the replay is in virtual time, so the table is the one replayed in-process."""
    if "--cluster" in where:
        pytest.importorskip("distributed")
    _trace(team / "edits.jsonl", bursts=[0.0, 1.0, 2.5, 5.0])
    grid = ["whatif", "--trace", "edits.jsonl", "--target", "myruntime.whatif_target:Target", "--debounce",
            "0.02,0.5,2"]
    alone = _perfsuite(team, *grid, "--json", "alone.json")
    there = _perfsuite(team, *grid, *where, "--json", "there.json")
    for proc in (alone, there):
        assert proc.returncode == 0, proc.stderr
    docs = [json.loads((team / name).read_text()) for name in ("alone.json", "there.json")]
    for doc in docs:
        doc.pop("simulate_s")
    assert docs[0] == docs[1] and [r["publications"] for r in docs[0]["results"]] == [20, 4, 2]
    assert "replaying 3 settings on" in there.stdout


@pytest.mark.parametrize(("args", "message"), [
    (("--target", "myruntime.nothere:Target"), "replay target myruntime.nothere:Target: no module named"),
    (("--target", "myruntime.debounce"), 'replay target: expected "module:Class"'),
    (("--target", "myruntime.debounce:Debouncer"), "making it for session 'main' failed: TypeError"),
    (("--target", "myruntime.whatif_target:Target", "--remeasure"), "--remeasure measures the engine's"),
    (("--target", "myruntime.whatif_target:Target", "--costs", "missing.json"), "missing.json: no such costs file"),
])
def test_bad_target_input_is_one_line_and_exit_2(team: Path, args: tuple[str, ...], message: str) -> None:
    _trace(team / "edits.jsonl", bursts=[0.0])
    proc = _perfsuite(team, "whatif", "--trace", "edits.jsonl", "--debounce", "1", *args)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert message in lines[0]


def test_the_teams_modules_import_nothing_of_perfsuites() -> None:
    """What 'unchanged' means here: the debouncer and even its adapter are plain asyncio."""
    for source in (DEBOUNCE, TARGET, THROTTLE):
        imported = {alias.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {node.module or "" for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom)}
        assert imported and not any(name.startswith("perfsuite") for name in imported)
