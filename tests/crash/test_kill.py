"""The kill campaign (SPEC section 7), CI-sized: 20 SIGKILLs (10 per session profile) of a child running
the mixed session workload on the real file system; recovery after each must keep every acknowledged
mutation. The acceptance run is ``perfsuite crashcheck --kill 200``."""

from __future__ import annotations

import json

import pytest

from perfsuite.cli import main
from perfsuite.crash import SEEDED_BUGS, KillConfig, run_kill_campaign
from perfsuite.crash.kill._campaign import _Oracle, check_recovered, create_session


def test_twenty_kills_lose_no_acknowledged_mutation(tmp_path):
    seen: list[tuple[int, str, int]] = []
    report = run_kill_campaign(KillConfig(kills=20, seed=11, directory=str(tmp_path)),
                               on_kill=lambda kill, profile, acks, _: seen.append((kill, profile, acks)))
    assert report.violations == (), "\n".join(f"kill {v.kill} ({v.profile}) [{v.invariant}] {v.message}"
                                              for v in report.violations)
    assert report.per_profile == {"portable": 10, "file": 10}
    assert [profile for _, profile, _ in seen] == ["portable", "file"] * 10
    assert report.acks >= 20 and all(acks >= 1 for _, _, acks in seen)  # each child acknowledged before dying
    assert {"portable", "file"} <= {p.name for p in tmp_path.iterdir()}


def test_recovery_checks_notice_a_lost_acknowledgement(tmp_path):
    """The parent's checks are not vacuous: an acknowledgement the session does not hold is reported."""
    directory = str(tmp_path / "portable")
    create_session(directory, "portable")
    oracle = _Oracle()
    ghost = {"kind": "mail", "id": "m9-9", "to": "root", "body": "never written", "seq": 1}
    assert oracle.read("ACK " + json.dumps(ghost), kill=0)
    assert not oracle.read('ACK {"kind": "mail", "id": "m9', kill=0)  # a line torn by the kill
    found = list(check_recovered(directory, "portable", oracle))
    assert any(inv == "4" and "m9-9" in message for inv, message in found)


def test_cli_kill_campaign(tmp_path, capsys):
    assert main(["crashcheck", "--kill", "2", "--seed", "5", "--profile", "portable", "--keep", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "2 kills (2 portable;" in out and "0 violations" in out
    assert main(["crashcheck", "--kill", "0"]) == 2


@pytest.mark.parametrize("bug", sorted(name for name, bug in SEEDED_BUGS.items() if bug.kill))
def test_the_kill_campaign_catches_its_seeded_bugs(tmp_path, bug):
    """Blind classes the kill campaign catches too: delivered mail dropped from later sidecars, and a partial last line
    accepted as a message, are caught by real SIGKILLs too (the second through a torn kill: the child tears a transcript
    write, all but its newline, and dies; recovery must set the line aside, not load it)."""
    report = run_kill_campaign(KillConfig(kills=12, seed=3, directory=str(tmp_path), seeded_bug=bug))
    assert report.caught, f"{bug} not caught by 12 kills"
    assert report.torn >= 1


def test_the_kill_campaign_tears_transcript_writes_and_stays_clean(tmp_path):
    report = run_kill_campaign(KillConfig(kills=12, seed=3, profiles=("file",), directory=str(tmp_path)))
    assert report.violations == (), [f"[{v.invariant}] {v.message}" for v in report.violations]
    assert report.torn == 4


def test_cli_kill_campaign_with_a_seeded_bug(tmp_path, capsys):
    args = ["crashcheck", "--kill", "6", "--seed", "3", "--profile", "file", "--keep", str(tmp_path)]
    assert main([*args, "--seeded-bug", "partial-line-accepted"]) == 0
    assert "seeded bug partial-line-accepted: caught" in capsys.readouterr().out
