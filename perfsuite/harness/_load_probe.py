"""M1: how loaded the machine is *now*, measured by a short idle-control run before a baseline is measured.

It runs a recipe, so it sits above the runner; the load rule and its value type
(:mod:`perfsuite.harness._machine_load`) sit below it, which the runner reads each run's load with. The
arrows point one way: probe -> runner -> machine load.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from perfsuite.harness._machine_load import MachineLoad, machine_load
from perfsuite.harness._operation import CONTROL_OPERATION
from perfsuite.harness._recipe import ModeSpec, Recipe
from perfsuite.harness._runner import run_recipe

__all__ = ["probe_load"]


def probe_load(windows: int = 6, window_ms: float = 100.0, heartbeat_ms: float = 5.0) -> MachineLoad:
    """A short idle-control run (``windows`` windows of the harness's own idle operation and as many control
    windows, inline, about ``2 * windows * window_ms`` plus a settle each): the machine's load *now*, before
    a baseline is measured on it. Nothing is kept."""
    recipe = Recipe(name="load-probe", modes=(ModeSpec("idle", CONTROL_OPERATION, {"window_ms": window_ms}),),
                    samples=windows, warmup=1, isolation="inline", control_windows=windows, settle_ms=10.0,
                    heartbeat_ms=heartbeat_ms, sync_after_copy=False)
    directory = Path(tempfile.mkdtemp(prefix="perfsuite-load-probe-"))
    try:
        document = run_recipe(recipe, output=directory / "probe.json", measured=None).document
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    samples = [*document["modes"]["idle"]["samples"], *document["control"]["samples"]]
    return machine_load(samples, heartbeat_ms)
