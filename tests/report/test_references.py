"""Reference modes and the sizes results/README.md quotes come from the files (every figure from a real run)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from perfsuite.report import Result, read_results, references_markdown
from perfsuite.report._references import reference_modes

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "results" / "baseline"


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("results_readme", ROOT / "scripts" / "dev" / "results_readme.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_sizes_and_reasons_come_from_the_documents(docs: Any) -> None:
    modes = {"append": {"submission_ms": 0.1, "ack_ms": 900.0, "max_gap_ms": 6.0},
             "rewrite": {"submission_ms": 0.1, "ack_ms": 950.0, "max_gap_ms": 80.0,
                         "reference": "atomic rewrites of the whole transcript",
                         "metrics": {"transcript_bytes": 15_613_002}}}
    doc = docs.make("transcript-barrier", modes, fixture={"name": None, "digest": None, "files": 0, "bytes": 0})
    (ref,) = reference_modes([Result(None, doc)])
    assert (ref.recipe, ref.mode, ref.size, ref.metric) == ("transcript-barrier", "rewrite", 15_613_002,
                                                            "metrics.transcript_bytes")
    assert references_markdown([Result(None, doc)]) == (
        "- `transcript-barrier` `rewrite`: atomic rewrites of the whole transcript "
        "(a 15,613,002-byte transcript, from `metrics.transcript_bytes`)\n")
    del modes["rewrite"]["metrics"]
    doc = docs.make("transcript-barrier", modes, fixture={"name": None, "digest": None, "files": 0, "bytes": 0})
    assert "byte" not in references_markdown([Result(None, doc)])  # not recorded: not quoted


def test_render_replaces_only_the_section() -> None:
    script = _script()
    text = f"intro\n{script.BEGIN}\nold\n{script.END}\nafter\n"
    assert script.render(text, "- new\n") == f"intro\n{script.BEGIN}\n- new\n{script.END}\nafter\n"
    with pytest.raises(ValueError, match="no <!-- references:begin -->"):
        script.render("no markers", "- x\n")


@pytest.mark.skipif(not BASELINE.is_dir(), reason="no committed baseline")
def test_results_readme_is_what_the_generator_writes_for_the_committed_baseline() -> None:
    """No hand-written size or reason can drift from the documents: the section is the generator's output."""
    script = _script()
    readme = (ROOT / "results" / "README.md").read_text(encoding="utf-8")
    assert script.render(readme, references_markdown(read_results(BASELINE))) == readme
    assert "24 MB" not in readme
