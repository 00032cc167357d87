"""The standard library's results-schema checker (the core install: jsonschema is the ``validate`` extra) gives
jsonschema's verdict: every committed results document matches under both, and every broken copy fails
under both, at the same place."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest

from perfsuite.harness import SCHEMA_VERSION
from perfsuite.harness._results import results_schema
from perfsuite.harness._schema import first_error

ROOT = Path(__file__).resolve().parents[2]
DOCS = [p for p in sorted((ROOT / "results" / "baseline").glob("*.json"))
        if json.loads(p.read_text(encoding="utf-8")).get("schema") == SCHEMA_VERSION]


def _reference(document: object) -> str | None:
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(results_schema()).iter_errors(document))
    return None if error is None else "/".join(str(p) for p in error.absolute_path) or "(root)"


def _breakages(doc: dict) -> list[dict]:
    """Copies of ``doc`` each broken in one way the schema forbids."""
    out = []
    for edit in (
        lambda d: d.pop("recipe"),
        lambda d: d.__setitem__("schema", "one"),
        lambda d: d["progress"].__setitem__("done", -1),
        lambda d: d["recipe"].__setitem__("heartbeat_ms", 0),
        lambda d: next(iter(d["modes"].values()))["samples"].append({"index": "x"}),
        lambda d: d.__setitem__("modes", []),
    ):
        broken = copy.deepcopy(doc)
        try:
            edit(broken)
        except (KeyError, StopIteration, AttributeError, TypeError):
            continue
        out.append(broken)
    return out


@pytest.mark.parametrize("path", DOCS[:12], ids=lambda p: p.name)
def test_committed_results_match_under_both_checkers(path: Path) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert _reference(doc) is None
    assert first_error(doc, results_schema()) is None


@pytest.mark.parametrize("path", DOCS[:4], ids=lambda p: p.name)
def test_broken_copies_fail_under_both_checkers_at_the_same_place(path: Path) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    breakages = _breakages(doc)
    assert breakages
    for broken in breakages:
        where = _reference(broken)
        found = first_error(broken, results_schema())
        assert where is not None and found is not None, broken
        assert found[0] == where or found[0].startswith(where) or where.startswith(found[0])


def test_a_tracemalloc_section_records_the_sum_as_not_measured() -> None:
    """The core install: the tracemalloc pass writes null for what it cannot measure, and the schema says so."""
    section = {"tracker": "tracemalloc", "samples": [{"index": 0, "total_bytes": None, "allocations": None,
                                                      "peak_bytes": 10}],
               "total_bytes": None, "allocations": None,
               "peak_bytes": {"n": 1, "min": 10, "median": 10, "max": 10, "ci_low": 10, "ci_high": 10}}
    schema = {"$defs": results_schema()["$defs"], **results_schema()["$defs"]["allocation"]}
    assert _reference_against(section, schema) is None
    assert first_error(section, schema) is None


def _reference_against(document: object, schema: dict) -> str | None:
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(document))
    return None if error is None else error.message


def test_checking_a_document_does_not_build_the_iri_grammar(tmp_path: Path) -> None:
    """jsonschema imports rfc3987-syntax's IRI checker when it is installed (the notebooks extra's jupyter-events
    pulls it in), and that module builds a Lark grammar at import: 3-4 s of every command that reads results on
    a slow machine. perfsuite never checks formats, so a check leaves it unimported, and a program that imports
    it afterwards still gets it."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("rfc3987_syntax") is None:
        pytest.skip("rfc3987-syntax is not installed: nothing to keep out")
    code = (
        "import json, sys\n"
        "from perfsuite.harness._results import validate_results\n"
        f"validate_results(json.loads(open({str(DOCS[0])!r}, encoding='utf-8').read()))\n"
        "assert 'jsonschema' in sys.modules, 'the check did not use jsonschema'\n"
        "print('rfc3987_syntax' in sys.modules)\n"
        "import rfc3987_syntax\n"
        "print(callable(rfc3987_syntax.is_valid_syntax))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True"]
