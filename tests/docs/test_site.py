"""The reference site builds with ``mkdocs build --strict``, which ``make test`` runs, and the strict build
really fails on a broken link or anchor (the docs site builds strict)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.pages import DOCS, ROOT

pytest.importorskip("mkdocs")


def _build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=root,
                          capture_output=True, text=True, timeout=120, check=False)


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(DOCS, root / "docs")
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    return root


def test_the_committed_docs_build_strictly(tmp_path: Path) -> None:
    built = _build(ROOT, tmp_path / "site")
    assert built.returncode == 0, built.stdout + built.stderr
    assert (tmp_path / "site" / "commands" / "index.html").is_file()


@pytest.mark.parametrize("broken", ["[gone](no-such-page.md)", "[gone](run.md#no-such-anchor)"])
def test_a_broken_link_fails_the_build(tmp_path: Path, broken: str) -> None:
    root = _copy(tmp_path)
    with (root / "docs" / "index.md").open("a", encoding="utf-8") as index:
        index.write(f"\n{broken}\n")
    built = _build(root, tmp_path / "site")
    assert built.returncode != 0 and "strict mode" in built.stdout + built.stderr


def test_every_page_is_in_the_nav_and_make_test_builds_strictly() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "strict: true" in config
    assert all(f": {p.name}\n" in config for p in DOCS.glob("*.md")), "a page missing from mkdocs.yml's nav"
    target = (ROOT / "Makefile").read_text(encoding="utf-8").split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "mkdocs build --strict" in target
