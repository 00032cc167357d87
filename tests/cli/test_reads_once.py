"""A reader reads each results document once: `report` of a directory of N documents looked for every
document's floor among its siblings by reading the whole directory again, N times, and parsed each file
twice (once to see whether it is a perfsuite document, once to load it): O(N^2) schema validations, 38 s for
the committed 17-document baseline on a slow machine (stop 36). Counted by Python's own ``open`` audit event
(``sys.addaudithook``), a published seam: nothing is patched."""

from __future__ import annotations

import json
import shutil
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import perfsuite.cli as cli

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "results" / "baseline"

_opened: list[Counter[str]] = []  # the innermost counting() block's counter; an audit hook cannot be removed


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if _opened and event == "open" and isinstance(args[0], (str, Path)):
        _opened[-1][str(args[0])] += 1


sys.addaudithook(_hook)


@contextmanager
def counting() -> Iterator[Counter[str]]:
    """Every file opened inside the block, by path, with how often."""
    opened: Counter[str] = Counter()
    _opened.append(opened)
    try:
        yield opened
    finally:
        _opened.pop()


def _documents(directory: Path) -> list[Path]:
    return [p for p in sorted(directory.glob("*.json")) if not p.name.endswith(".pyperf.json")]


@pytest.fixture
def baseline_copy(tmp_path: Path) -> Path:
    """Four of the committed baseline's documents (the real files: the run's fsync floor among them), with their
    pyperf exports beside them."""
    chosen = [p for p in _documents(BASELINE) if p.name.startswith(("mailbox-delivery-", "root-checkpoint-",
                                                                     "idle-control-", "fsync-floor-"))]
    assert len(chosen) >= 4
    for p in chosen:
        for sibling in BASELINE.glob(p.name.removesuffix(".json") + ".*"):
            shutil.copy2(sibling, tmp_path / sibling.name)
    return tmp_path


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_report_of_a_directory_opens_each_document_once(baseline_copy: Path, fmt: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    documents = _documents(baseline_copy)
    with counting() as opened:
        assert cli.main(["report", str(baseline_copy), "--format", fmt]) == 0
    assert {str(p): opened[str(p)] for p in documents} == {str(p): 1 for p in documents}
    assert capsys.readouterr().out  # it did report


def test_report_of_files_given_one_by_one_opens_each_once(baseline_copy: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Files named alone still find their floor beside them, and a sibling already read is not read again."""
    documents = _documents(baseline_copy)
    with counting() as opened:
        assert cli.main(["report", *map(str, documents)]) == 0
    assert {str(p): opened[str(p)] for p in documents} == {str(p): 1 for p in documents}
    capsys.readouterr()


def test_a_lone_file_still_reads_its_siblings_for_the_floor(baseline_copy: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The sibling reading is still there: a mailbox-delivery document given alone is reported against the
    fsync floor of its run, read from the document beside it, and each sibling is read once."""
    mailbox = next(p for p in _documents(baseline_copy) if p.name.startswith("mailbox-delivery-"))
    floor = next(p for p in _documents(baseline_copy) if p.name.startswith("fsync-floor-"))
    with counting() as opened:
        assert cli.main(["report", str(mailbox), "--format", "json"]) == 0
    others = [p for p in _documents(baseline_copy) if p != mailbox]
    assert opened[str(mailbox)] == 1
    assert all(opened[str(p)] <= 1 for p in others)
    (reported,) = json.loads(capsys.readouterr().out)["results"]
    assert reported["floor"] is not None and reported["floor"]["source"] == floor.name
