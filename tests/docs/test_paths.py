"""Every ``scripts/...``, ``perfsuite/...`` and ``tests/...`` path the README and docs/ name exists, so a file
moved or renamed (scripts sorted into folders, a module renamed) breaks this test, not a reader (issue 30)."""

from __future__ import annotations

import re

from tests.docs.pages import ROOT, pages

PATH = re.compile(r"(?<![\w./-])((?:scripts|perfsuite|tests)/[\w.*/-]*[\w*/])")
#: files the docs name in a *user's* repository (what `perfsuite init` writes), not in this one
USER_FILES = {"tests/test_perfsuite_example.py"}


def named_paths(text: str) -> set[str]:
    return {m.group(1) for m in PATH.finditer(text)} - USER_FILES


def test_every_named_path_exists() -> None:
    missing = {}
    for name, text in pages().items():
        for path in named_paths(text):
            found = list(ROOT.glob(path)) if "*" in path else [ROOT / path] if (ROOT / path).exists() else []
            if not found:
                missing.setdefault(path, name)
    assert missing == {}, f"named in the docs but not in the repository: {missing}"


def test_the_scan_finds_paths_in_prose_and_code() -> None:
    text = "`scripts/crossover.sh`, (perfsuite/harness/_heap.py), tests/ab/ and perfsuite/x/*.toml; myscripts/no"
    assert named_paths(text) == {"scripts/crossover.sh", "perfsuite/harness/_heap.py", "tests/ab/",
                                 "perfsuite/x/*.toml"}
    assert len(set().union(*(named_paths(t) for t in pages().values()))) > 40
