"""docs/watch.md's `perfsuite watch` / `perfsuite typing` block runs as written (house rule 8), line by line in `sh`, as
a user outside this repository would: a scratch directory holding only the committed
`scripts/acceptance/watch_programs/`,
`perfsuite` and `python` on PATH (thin shims to this interpreter), results in its own `results/local/`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.docs.pages import page
from tests.watch.conftest import ROOT, child_env

MARKER = "<!-- run by tests/watch/test_readme.py"


def _block() -> list[str]:
    text = page("watch.md")
    after = text.split(MARKER, 1)[1]
    block = re.search(r"```sh\n(.*?)```", after, re.S)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


def test_the_readme_watch_and_typing_commands_run_as_written(tmp_path: Path) -> None:
    lines = _block()
    assert any(line.startswith("perfsuite watch ") for line in lines)
    assert any(line.startswith("python -m perfsuite.watch ") for line in lines)
    assert any(line.startswith("perfsuite typing ") for line in lines)
    programs = Path("scripts", "acceptance", "watch_programs")
    shutil.copytree(ROOT / programs, tmp_path / programs)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, target in (("perfsuite", f'"{sys.executable}" -m perfsuite'), ("python", f'"{sys.executable}"')):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec {target} "$@"\n')
        shim.chmod(0o755)
    env = child_env()
    env["PATH"] = os.pathsep.join([str(bin_dir), env["PATH"]])
    outputs = {}
    for line in lines:
        proc = subprocess.run(["sh", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"{line}\n{proc.stdout}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr, line
        outputs[line] = proc.stdout
    text = "\n".join(outputs.values())
    assert "watch-plant: live windows of 1 s" in text and "watch-gc_pause" in text
    assert "Watched `" in text  # the evidence paragraph of a live run
    assert "typing latency: key due -> frame written" in text and "floor: typing-floor idle" in text
    results = sorted(p.name for p in (tmp_path / "results" / "local").glob("*.json") if ".pyperf." not in p.name)
    assert [n.split("-2")[0] for n in results] == ["plant.json", "typing-floor", "watch-gc_pause"]
