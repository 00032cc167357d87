"""The guide at the top of docs/engine.md runs as written (house rule 8: what a page says is run).

The guide is the section between ``## Guide`` and ``## Reference``. Its blocks run **in order, as one
program**: every ```python block in ONE namespace shared by the whole page (a later block uses the session
an earlier one opened), every ```sh block through ``bash -e`` at its place, all in one empty temporary
directory (the working directory, where the guide creates ``notes-session/``), with ``perfsuite`` on PATH
from this interpreter's directory. The crash is the guide's own: a child process killed with SIGKILL. The
test asserts what the guide's comments say the blocks print (what recovery keeps, the refusal that names
the repair command, the repair's report), and that the guide uses only names of ``perfsuite.engine``'s
``__all__``. A guide without blocks fails.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import perfsuite.engine
from tests.docs.pages import page

BLOCK = re.compile(r"^```(python|sh)\n(.*?)^```", re.S | re.M)


def guide() -> str:
    """The guide section of docs/engine.md (before its reference)."""
    text = page("engine.md")
    assert "\n## Guide\n" in text and "\n## Reference\n" in text, "docs/engine.md: no Guide / Reference section"
    return text.split("\n## Guide\n", 1)[1].split("\n## Reference\n", 1)[0]


def guide_blocks() -> list[tuple[str, str]]:
    """(language, code) of every python and sh block of the guide, in order."""
    return [(language, code) for language, code in BLOCK.findall(guide())]


def test_the_guide_has_python_blocks_and_uses_only_the_engines_public_names() -> None:
    found = guide_blocks()
    assert [language for language, _ in found].count("python") >= 6, found
    imported: set[str] = set()
    for _, code in found:
        for names in re.findall(r"^\s*from perfsuite\.engine import (.+)$", code, re.M):
            imported.update(name.strip() for name in names.split(","))
    assert imported and imported <= set(perfsuite.engine.__all__), imported - set(perfsuite.engine.__all__)
    assert not re.search(r"perfsuite\.engine\.(_|testing)", guide())  # no private module, no test stand-in


def test_every_block_of_the_guide_runs_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    env = {**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    namespace: dict[str, object] = {"__name__": "__guide__"}
    printed: list[str] = []
    for number, (language, code) in enumerate(guide_blocks(), 1):
        if language == "sh":
            proc = subprocess.run(["bash", "-e", "-c", code], env=env, capture_output=True, text=True, timeout=120,
                                  check=False)
            assert proc.returncode == 0 and "Traceback" not in proc.stderr, f"block {number}:\n{code}\n{proc.stderr}"
            printed.append(proc.stdout + proc.stderr)
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"docs/engine.md guide block {number}", "exec"), namespace)
        printed.append(out.getvalue())
    output = "\n".join(printed)
    # what the comments of the guide say each step prints
    assert "adopted 1\n" in output and "\nNone\n" in output  # the synchronous report; the awaited acknowledgement
    assert "[message from ci] the build is green" in output
    after_crash = "['remember the milk', 'noted', '[message from ci] the build is green', 'buy bread']"
    assert after_crash in output  # acknowledged: kept; 'never saved' was only in memory
    assert "['deploy finished']" in output  # its delivery was never saved: deliverable again (at-least-once)
    assert "broke a stale lease left by dead pid" in output
    assert "fails its checksum" in output and "run `perfsuite session repair" in output
    assert "portable session repaired" in output  # the command repaired it
    assert "False ('HEAD is intact" in output and "nothing to repair" in output  # the library call: nothing left
