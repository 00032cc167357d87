"""Evidence from an `ab` output directory: `evidence head/X --baseline base/X` (and `evidence DIR`) states the
paired verdicts, the same gated metrics `ab` reported, never the separate-run reading that drops a timing `ab`
gated on; seeds and commits are labelled for what they are (no "seed `None`"; the measured repository's commit,
perfsuite's version). Synthetic documents, never timing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perfsuite import cli
from perfsuite.report import compare, evidence_for

from .conftest import SYNC_ASYNC, make_doc, write_doc
from .test_evidence import check_provenance

pytest.importorskip("scipy.stats")


def _ab(tmp_path: Path, block_ms: float = 3.0) -> Path:
    """16 paired rounds of a quiet machine, HEAD's async max gap ``block_ms`` longer every round; as `ab` writes
    them: the recipe records no seed of its own, the interleaving's seed is the variant's."""
    rng = np.random.default_rng(11)
    spell = rng.lognormal(0.0, 0.1, size=16)
    out = tmp_path / "ab"
    for side, extra, seed, commit in (("base", 0.0, 1, "a" * 40), ("head", block_ms, 2, "b" * 40)):
        doc = make_doc(modes={m: dict(SYNC_ASYNC[m]) for m in ("sync", "async")}, n=16, seed=seed,
                       control_gap_ms=5.3, mode_order="random")
        doc["recipe"]["seed"] = None
        doc["variant"] = {"name": side, "of": ["base", "head"], "seed": 4242}
        doc["environment"]["measured"] = {"commit": commit, "dirty": False, "branch": None, "source": "revision"}
        for i, sample in enumerate(doc["modes"]["async"]["samples"]):
            sample["max_gap_ms"] = 7.0 * float(spell[i]) + extra
        write_doc(out / side / "mailbox-delivery.json", doc)
    (out / "ab.json").write_text(json.dumps({
        "format": "perfsuite-ab/1", "seed": 4242, "base": {"revision": "main", "commit": "a" * 40},
        "head": {"revision": "HEAD", "commit": "b" * 40},
        "recipes": [{"recipe": "mailbox-delivery", "base": "base/mailbox-delivery.json",
                     "head": "head/mailbox-delivery.json", "seed": 4242, "rounds": 16}],
        "options": {"alpha": 0.05, "factor": 1.10, "gate": "all", "paired": True, "looks": 1, "correction": "holm"},
    }))
    return out


def _gated(comparison: Any) -> set[tuple[str, str, str]]:
    return {(c.mode, c.metric, c.status) for c in comparison.changes if c.gating and c.status != "unchanged"}


def test_evidence_of_an_ab_pair_states_the_paired_verdicts(tmp_path: Path) -> None:
    out = _ab(tmp_path)
    gate = compare(out)
    assert ("async", "max_gap_ms", "regressed") in _gated(gate)  # what `ab` reported
    ev = evidence_for(out / "head" / "mailbox-delivery.json", out / "base" / "mailbox-delivery.json")
    assert ev.comparison is not None and _gated(ev.comparison) == _gated(gate)
    assert any(c.test == "signed-rank" for c in ev.comparison.changes)
    text = ev.markdown
    assert "`max_gap_ms`" in text or "maximum gap" in text
    assert "Regressions: `async` `max_gap_ms`" in text, text
    assert "rounds paired as `perfsuite ab` ran them" in text
    assert "timings of separate runs are information" not in text
    assert check_provenance(ev) == []


def test_evidence_of_an_ab_directory_gives_each_recipe_paired(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = _ab(tmp_path)
    assert cli.main(["evidence", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Regressions: `async` `max_gap_ms`" in text and "rounds paired as `perfsuite ab` ran them" in text


def test_seeds_and_commits_are_labelled_for_what_they_are(tmp_path: Path) -> None:
    out = _ab(tmp_path)
    text = evidence_for(out / "head" / "mailbox-delivery.json").markdown
    assert "seed `None`" not in text
    assert "(seed `4242`)" in text  # the interleaving's seed, the variant's
    assert "commit `bbbbbbb` of the measured repository" in text
    assert "with perfsuite `" in text  # the instrument's version, apart from the measured commit
    doc = json.loads((out / "head" / "mailbox-delivery.json").read_text())
    del doc["variant"]
    lone = write_doc(tmp_path / "lone" / "mailbox-delivery.json", doc)
    text = evidence_for(lone).markdown
    assert "seed `None`" not in text and "no seed recorded" in text

