"""Every ``scripts/...``, ``perfsuite/...`` and ``tests/...`` path the README and docs/ name exists, so a file
moved or renamed (scripts sorted into folders, a module renamed) breaks this test, not a reader."""

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
    text = ("`scripts/acceptance/crossover.sh`, (perfsuite/harness/_heap.py), tests/ab/ and perfsuite/x/*.toml; "
            "myscripts/no")
    assert named_paths(text) == {"scripts/acceptance/crossover.sh", "perfsuite/harness/_heap.py", "tests/ab/",
                                 "perfsuite/x/*.toml"}
    assert len(set().union(*(named_paths(t) for t in pages().values()))) > 40


#: scripts no page names yet (docs/scripts.md names each one, so none)
NOT_YET_NAMED: set[str] = set()


def test_every_script_is_named_in_the_docs() -> None:
    named = set().union(*(named_paths(text) for text in pages().values()))
    scripts = {p.relative_to(ROOT).as_posix() for p in (ROOT / "scripts").rglob("*")
               if p.is_file() and p.suffix in {".py", ".sh"} and "__pycache__" not in p.parts}

    def is_named(script: str) -> bool:  # by its path, or by a folder named with it (scripts/acceptance/watch_programs/)
        folders = [n.rstrip("/") + "/" for n in named if n.endswith("/") or (ROOT / n).is_dir()]
        return script in named or any(script.startswith(folder) for folder in folders)

    unnamed = {s for s in scripts if not is_named(s)}
    assert unnamed - NOT_YET_NAMED == set(), "a script no page names: say what it is for (docs/scripts.md)"
    assert NOT_YET_NAMED - unnamed == set(), "named (or gone) now: remove it from NOT_YET_NAMED"
