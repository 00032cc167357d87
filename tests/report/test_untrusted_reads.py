"""Results documents and traces are untrusted input: perfsuite reads regular files only, within
``LIMITS["document_bytes"]`` checked before a byte is read, and the documents beside one only when it needs
its run's fsync floor. A committed ``x.json -> /dev/zero`` beside a document, a FIFO named ``*.json``, a
sparse 2 GiB file: one line (or one "skipped" line for a neighbour), never a hang or a ``MemoryError``.

Each command runs as a real process under an address-space cap (``RLIMIT_AS``, :data:`CAP_MB`): before
these rules, reading ``/dev/zero`` or the sparse file met the cap ("unexpected MemoryError"). A FIFO hung
the old code forever, so those runs have a generous guard; the assertion is on what was printed, not on
how long it took.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from perfsuite.report import read_siblings

#: the address space each command may use (a report needs about 300 MiB of it: numpy, rich, jsonschema)
CAP_MB = 1024
#: a hang guard for the FIFO cases, not a measurement: the old code never returned
GUARD_S = 300

_RUN = """
import resource, sys
cap, limit = int(sys.argv[1]), int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (cap << 20, cap << 20))
if limit:
    from perfsuite._limits import LIMITS, Limit
    LIMITS["document_bytes"] = Limit(0, limit, what=LIMITS["document_bytes"].what)
from perfsuite.cli import main
sys.exit(main(sys.argv[3:]))
"""


def capped(*argv: str | Path, limit: int = 0) -> subprocess.CompletedProcess[str]:
    """``perfsuite ARGV`` in a process capped at :data:`CAP_MB` MiB (``limit``: a smaller document_bytes)."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    try:
        return subprocess.run([sys.executable, "-c", _RUN, str(CAP_MB), str(limit), *map(str, argv)], env=env,
                              capture_output=True, text=True, timeout=GUARD_S, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"perfsuite {' '.join(map(str, argv))} hung (a FIFO was opened blocking)")


def one_line(proc: subprocess.CompletedProcess[str], status: int, *needles: str) -> str:
    """The single stderr line of ``proc``, which exited ``status`` and holds every needle."""
    lines = proc.stderr.splitlines()
    assert proc.returncode == status, proc.stderr[-2000:]
    assert len(lines) == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def results(tmp_path: Path, docs: Any) -> Path:
    """A directory with one mailbox-delivery document (no floor of its own, so its neighbours are looked at)."""
    docs.write(tmp_path / "res" / "mailbox.json", docs.make())
    return tmp_path / "res"


def _with_floor_section(doc: dict[str, Any]) -> dict[str, Any]:
    floor = doc["control"]
    doc["floor"] = {"samples": floor["samples"], "summary": {"ack_ms": floor["summary"]["ack_ms"]}}
    return doc


def test_a_symlink_to_dev_zero_beside_a_document_is_skipped_not_read(results: Path) -> None:
    (results / "x.json").symlink_to("/dev/zero")
    proc = capped("report", results / "mailbox.json")
    line = one_line(proc, 0, "perfsuite: skipped", "x.json: a symbolic link, not followed")
    assert "mailbox.json" in line and "async" in proc.stdout  # the report itself is printed


@pytest.mark.parametrize("command", [["history"], ["dashboard", "-o", "@site"]])
def test_a_symlink_to_dev_zero_in_a_directory_is_one_line(results: Path, command: list[str]) -> None:
    (results / "x.json").symlink_to("/dev/zero")
    argv = [str(results.parent / "site") if a == "@site" else a for a in command]
    proc = capped(argv[0], results, *argv[1:])
    one_line(proc, 2, "x.json: a symbolic link, not followed")
    assert not (results.parent / "site").exists()


def test_a_fifo_beside_a_document_is_skipped_and_a_fifo_given_is_refused(results: Path) -> None:
    os.mkfifo(results / "pipe.json")
    one_line(capped("report", results / "mailbox.json"), 0, "perfsuite: skipped", "pipe.json: a FIFO, not a "
             "regular file")
    one_line(capped("report", results / "pipe.json"), 2, "pipe.json: a FIFO, not a regular file: expected a "
             "results file")


def test_a_fifo_given_as_a_trace_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "trace.jsonl")
    one_line(capped("whatif", "--trace", tmp_path / "trace.jsonl"), 2, "trace.jsonl: a FIFO, not a regular file: "
             "expected a trace file")


def test_a_sparse_2_gib_document_is_refused_by_its_size_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as handle:
        handle.truncate(2 << 30)  # sparse: no disk used
    one_line(capped("report", big), 2, f"big.json: {2 << 30} bytes, larger than a results file may be (at most "
             f"{256 << 20} bytes, document_bytes)")


def test_a_neighbour_is_read_only_when_the_document_needs_its_floor(results: Path, docs: Any) -> None:
    docs.write(results / "mailbox.json", _with_floor_section(docs.make()))
    (results / "x.json").symlink_to("/dev/zero")
    os.mkfifo(results / "pipe.json")
    proc = capped("report", results / "mailbox.json")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-2000:]  # neither neighbour was opened


def test_a_neighbour_over_the_size_limit_is_skipped_with_a_line(results: Path, docs: Any) -> None:
    floor = docs.floor()
    floor["recipe"]["description"] = "x" * 200_000  # a valid fsync-floor document, larger than the limit below
    docs.write(results / "floor.json", floor)
    size = (results / "floor.json").stat().st_size
    proc = capped("report", results / "mailbox.json", limit=100_000)
    one_line(proc, 0, "perfsuite: skipped", f"floor.json: {size} bytes, larger than a results document may be (at "
             "most 100000 bytes")


def test_only_floor_neighbours_are_schema_checked(results: Path, docs: Any) -> None:
    """A report needs a neighbour only when it measured the fsync floor: any other (a 277 MB document took
    258 s of schema checks) is parsed, bounded, and never validated."""
    other = docs.make("other-recipe")
    other["recipe"]["samples"] = "not a count"  # invalid: reported if it were validated
    docs.write(results / "other.json", other)
    broken_floor = docs.floor()
    broken_floor["recipe"]["samples"] = "not a count"
    docs.write(results / "floor.json", broken_floor)
    skipped: list[str] = []
    found = read_siblings(results / "mailbox.json", floors_only=True, on_skip=skipped.append)
    assert found == []
    assert len(skipped) == 1 and "floor.json" in skipped[0] and "schema" in skipped[0], skipped
    docs.write(results / "floor.json", docs.floor())
    assert [r.name for r in read_siblings(results / "mailbox.json", floors_only=True)] == ["floor.json"]


def test_a_regular_document_is_still_read_whole(results: Path) -> None:
    """The bounded reader reads what it is given: the same document as ``json.load``."""
    from perfsuite.harness import read_json

    path = results / "mailbox.json"
    assert read_json(path) == json.loads(path.read_text())
    assert read_json(path, follow=False) == json.loads(path.read_text())
