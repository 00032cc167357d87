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
    ack = by_name(judged, "ack within 2x floor", "mailbox-delivery")
    assert ack.met is False and "x" in ack.measured  # 110 ms against a 1.44 ms floor
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
