"""SPEC section 8 bars as verdicts, judged from generated results documents (behaviour, not timing)."""

from __future__ import annotations

from perfsuite.cli import main
from perfsuite.report import Result, bars


def by_name(judged, bar: str, recipe: str):
    return next(b for b in judged if b.bar == bar and b.recipe == recipe)


def test_sync_async_bars_from_one_run(docs):
    mailbox = docs.make("mailbox-delivery", seed=3)  # sync gap ~66 ms, async ~6.9 ms, async ack ~110 ms
    floor = docs.floor(seed=4)
    judged = bars([Result(None, mailbox), Result(None, floor)])
    assert by_name(judged, "async under 20 ms", "mailbox-delivery").met is True
    assert by_name(judged, "async gap 5x smaller", "mailbox-delivery").met is True
    ack = by_name(judged, "ack within 2x fsync floor", "mailbox-delivery")
    assert ack.met is False and "(fsync floor)" in ack.measured  # 110 ms against a 1.44 ms floor
    publication = by_name(judged, "ack within 1.3x publication floor", "mailbox-delivery")
    assert publication.met is None and "not measured" in publication.measured  # an older document: no such mode


def test_publication_floor_bar_and_reference_notes(docs):
    """SPEC section 8: ack within 1.3x of the publication floor of the same document; a bar that reads a
    by-design reference mode says so."""
    shapes = {k: dict(v) for k, v in docs.new_modes.items()}
    shapes["async"]["ack_ms"] = 3.5  # against a 3.0 ms floor: 1.17x
    judged = bars([Result(None, docs.make("mailbox-delivery", shapes, seed=8))])
    bar = by_name(judged, "ack within 1.3x publication floor", "mailbox-delivery")
    assert bar.met is True and "(publication floor)" in bar.measured
    shapes["async"]["ack_ms"] = 110.0
    judged = bars([Result(None, docs.make("mailbox-delivery", shapes, seed=8))])
    assert by_name(judged, "ack within 1.3x publication floor", "mailbox-delivery").met is False
    registry = {"sidecar-only": {"submission_ms": 5.0, "ack_ms": 5.0, "max_gap_ms": 9.0, "inline": True,
                                 "alloc_bytes": 900_000},
                "full": {"submission_ms": 290.0, "ack_ms": 290.0, "max_gap_ms": 295.0, "inline": True,
                         "alloc_bytes": 37_000_000, "reference": "the rejected full save"}}
    judged = bars([Result(None, docs.make("registry-save", registry, allocation=True, seed=9))])
    tenth = by_name(judged, "registry save allocates a tenth", "registry-save")
    assert tenth.met is True and "(`full` is a reference: the rejected full save)" in tenth.measured
    assert by_name(judged, "async under 20 ms", "root-checkpoint").met is None  # absent: not measured


def test_async_gap_bar_fails_when_async_is_not_five_times_smaller(docs):
    shapes = {"sync": {"submission_ms": 9.0, "ack_ms": 9.0, "max_gap_ms": 12.0, "inline": True},
              "async": {"submission_ms": 0.3, "ack_ms": 9.0, "max_gap_ms": 6.0}}
    judged = bars([Result(None, docs.make("root-checkpoint", shapes, seed=5))])
    bar = by_name(judged, "async gap 5x smaller", "root-checkpoint")
    assert bar.met is False and "2.0" in bar.measured


def test_bars_command_strict_exit(docs, tmp_path, capsys):
    shapes = {"sync": {"submission_ms": 9.0, "ack_ms": 9.0, "max_gap_ms": 12.0, "inline": True},
              "async": {"submission_ms": 0.3, "ack_ms": 9.0, "max_gap_ms": 6.0}}
    docs.write(tmp_path / "r" / "root-checkpoint-1.json", docs.make("root-checkpoint", shapes, seed=6))
    assert main(["bars", str(tmp_path / "r")]) == 0
    assert main(["bars", str(tmp_path / "r"), "--strict"]) == 1
    assert "not met" in capsys.readouterr().out
    assert main(["bars", str(tmp_path / "missing")]) == 2
