"""M11/M12: a watch run and a typing run go in the committed baseline. Every command that reads the
baseline directory must keep working with them there: report, bars, compare, history, the dashboard, and the
results README's list of reference modes (the typing recipes' idle editor and planted step are references)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from perfsuite.harness import ModeSpec, Recipe, run_recipe
from tests.watch.conftest import PROGRAMS, ROOT, perfsuite


def test_the_baseline_reads_with_a_watch_and_a_typing_result_in_it(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline"
    shutil.copytree(ROOT / "results" / "baseline", baseline)
    # the program stops itself after 1.5 s of loop time: a watch --duration, from launch, could stop it still importing
    proc = perfsuite("watch", "--window", "0.3", "--output-dir", str(baseline), "--",
                     sys.executable, str(PROGRAMS / "plant.py"), "--block-ms", "2", "--duration", "1.5")
    assert proc.returncode == 0, proc.stderr
    typing = Recipe(name="typing-floor", modes=(
        ModeSpec("idle", "perfsuite.workloads.typing:typing", {"publish": "none", "keys": 3, "key_interval_ms": 30},
                 reference="the idle editor: the floor of key latency"),), samples=1, warmup=0, isolation="inline",
        gc="natural", control_windows=1, settle_ms=0.0)
    run_recipe(typing, output_dir=baseline, work_root=tmp_path / "w")
    for args in (["report", str(baseline)], ["bars", str(baseline)], ["compare", str(baseline), str(baseline)],
                 ["history", str(baseline)], ["dashboard", str(baseline), "-o", str(tmp_path / "site")],
                 ["typing", str(baseline)]):
        proc = perfsuite(*args, timeout=300)
        assert proc.returncode == 0, (args, proc.stdout[-2000:], proc.stderr)
        assert "Traceback" not in proc.stderr
    pages = "".join(p.read_text() for p in (tmp_path / "site").rglob("*.html"))
    assert "watch-plant" in pages and "typing-floor" in pages  # a recipe page each, timelines included
    readme = tmp_path / "README.md"
    shutil.copy(ROOT / "results" / "README.md", readme)
    script = ROOT / "scripts" / "dev" / "results_readme.py"
    proc = subprocess.run([sys.executable, str(script), str(baseline), str(readme)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "- `typing-floor` `idle`: the idle editor: the floor of key latency" in readme.read_text()
