"""Every requirement id the repository cites (E1..E8, M1..M12, U, SPEC sections and section 7's invariants)
has its line on docs/requirements.md, so a citation resolves inside the repository."""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs.pages import ROOT, page

#: where ids are cited: the code, the tests, the scripts, the documentation, recipes and results notes
SCANNED = ("perfsuite", "tests", "scripts", "docs", "recipes", "fixtures", "results", "notebooks")
SUFFIXES = {".py", ".md", ".toml", ".sh", ".yml", ".ipynb", ".txt"}
IDS = re.compile(r"\b([EM]\d{1,2})\b")  # E3, M10: the requirement ids' own spelling
SECTIONS = re.compile(r"\bSPEC\s+(?:section\s+)?(\d+)(?:\.(\d+))?\b")  # SPEC section 7, SPEC 8, SPEC 7.6
SPEC_IDS = re.compile(r"\bSPEC\s+([EMU]\d*)\b")  # SPEC M6, SPEC E4


def _files() -> list[Path]:
    files = [ROOT / "README.md"]
    for top in SCANNED:
        files += [p for p in sorted((ROOT / top).rglob("*")) if p.suffix in SUFFIXES and p.is_file()
                  and ".pytest_cache" not in p.parts and "__pycache__" not in p.parts]
    return files


def cited(text: str) -> set[str]:
    """The anchors of docs/requirements.md that ``text``'s citations name."""
    anchors = {m.lower() for m in IDS.findall(text)}
    anchors |= {m.lower() for m in SPEC_IDS.findall(text)}
    for section, item in SECTIONS.findall(text):
        anchors.add(f"section-{section}-{item}" if item else f"section-{section}")
    return anchors


def anchors_of_the_page() -> set[str]:
    text = page("requirements.md")
    return set(re.findall(r'<a id="([\w-]+)"></a>', text)) | set(re.findall(r"\{ #([\w-]+) \}", text))


def test_the_page_has_a_line_for_every_id_of_the_specification() -> None:
    expected = {f"e{n}" for n in range(1, 9)} | {f"m{n}" for n in range(1, 13)} | {"u"}
    expected |= {f"section-{n}" for n in range(1, 9)} | {f"section-7-{n}" for n in range(1, 8)}
    assert expected <= anchors_of_the_page()


def test_every_cited_id_resolves_on_the_page() -> None:
    anchors = anchors_of_the_page()
    missing = {}
    for path in _files():
        for anchor in cited(path.read_text(encoding="utf-8", errors="replace")) - anchors:
            missing.setdefault(anchor, str(path.relative_to(ROOT)))
    assert missing == {}, f"cited but not on docs/requirements.md: {missing}"


def test_the_scan_sees_each_citation_style() -> None:
    """A scan that finds nothing cannot fail: each spelling the code uses is recognised, and a new id is not."""
    unknown = "E" + "9"  # spelled apart, so this file cites no unknown id itself
    text = f"E4 and M10; (SPEC M6); SPEC section 7; SPEC 7.6; bars of SPEC 8; SPEC U; {unknown}"
    assert cited(text) == {"e4", "m10", "m6", "section-7", "section-7-6", "section-8", "u", "e9"}
    assert "e9" not in anchors_of_the_page()
    assert len(_files()) > 100 and any("E1" in p.read_text(errors="replace") for p in _files()[:200])
