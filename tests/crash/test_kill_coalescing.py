"""The kill campaign's acknowledgement ledger and coalescing kills: every acknowledgement a child makes is
recorded durably outside the session before anything sees it, each one is checked after every reopen, and
a checkpoint request coalesced into a running checkpoint (held at its admission, so coalescing is certain)
must be durable with the bytes it had when it was made (E7)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from perfsuite.crash import SEEDED_BUGS, KillConfig, KillReport, run_kill_campaign
from perfsuite.crash.kill._campaign import check_recovered, create_session, plan_kills, run_kill_slice
from perfsuite.crash.kill._ledger import AckLedger, ledger_lines, unrecorded
from perfsuite.crash.kill._recovery import _Oracle

BUG = "coalesced-into-running"


def _shown(report: KillReport) -> str:
    return "\n".join(f"kill {v.kill} ({v.profile}) [{v.invariant}] {v.message}" for v in report.violations)


def test_the_coalescing_kill_catches_a_request_acknowledged_with_the_running_checkpoint(tmp_path: Path) -> None:
    """One kill, a coalescing one: the requests made while the held checkpoint runs are acknowledged with
    its result, which froze before their edits, and the child dies before anything else checkpoints them:
    every such acknowledgement is lost, whatever the machine's speed."""
    assert SEEDED_BUGS[BUG].kill and SEEDED_BUGS[BUG].faults is not None
    config = KillConfig(kills=1, seed=7, profiles=("portable",), coalesce_every=1, directory=str(tmp_path),
                        seeded_bug=BUG)
    report = run_kill_campaign(config)
    assert report.coalescing == 1 and report.coalesced >= 1
    assert report.caught and report.lost >= 2, _shown(report)  # both requests made while it ran
    assert any(v.invariant == "L" and "missing after reopen" in v.message for v in report.violations)


def test_coalescing_kills_on_the_real_engine_lose_no_acknowledgement(tmp_path: Path) -> None:
    config = KillConfig(kills=3, seed=7, profiles=("portable",), coalesce_every=1, directory=str(tmp_path))
    report = run_kill_campaign(config)
    assert report.violations == (), _shown(report)
    assert report.coalescing == 3 and report.coalesced >= 3  # every coalescing step met the held checkpoint
    assert report.lost == 0 and report.acks >= 3 * 4  # three checkpoint requests and a mail each, at least
    assert report.checked >= report.acks  # each one checked after its own kill and every later one
    ledgers = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".perfsuite-kill-acks-portable-"))
    assert ledgers == [f".perfsuite-kill-acks-portable-{k}.jsonl" for k in range(3)]  # outside the session


def test_every_third_portable_kill_coalesces_and_the_other_kills_are_unchanged() -> None:
    plan = plan_kills(KillConfig(kills=20, seed=4))
    without = plan_kills(KillConfig(kills=20, seed=4, coalesce_every=0))
    assert [k.index for k in plan if k.coalesce] == [4, 10, 16]
    assert all(k.profile == "portable" and 1 <= k.coalesce <= 5 for k in plan if k.coalesce)
    assert [dataclasses.replace(k, coalesce=0, wanted=0) for k in plan] == \
        [dataclasses.replace(k, wanted=0) for k in without]


def test_the_side_file_is_fdatasynced_records_and_a_torn_last_line_is_none(tmp_path: Path) -> None:
    path = tmp_path / "acks.jsonl"
    ledger = AckLedger(str(path))
    ledger.record('ACK {"kind": "mail", "id": "m1"}')
    ledger.record('NOTE {"kind": "discard", "id": "m1"}')
    with open(path, "ab") as handle:
        handle.write(b'ACK {"kind": "mail", "id": "m2"')  # the kill tore the write
    assert ledger_lines(str(path)) == ['ACK {"kind": "mail", "id": "m1"}', 'NOTE {"kind": "discard", "id": "m1"}']
    assert ledger_lines(str(tmp_path / "none.jsonl")) == []


def test_a_printed_record_the_side_file_lacks_is_reported() -> None:
    recorded = ['ACK {"id": "a"}', 'ACK {"id": "b"}']
    assert unrecorded(['ACK {"id": "a"}\n'], recorded) == []  # recorded one more before the kill: fine
    assert unrecorded(['ACK {"id": "a"}', 'ACK {"id": "c"}'], recorded) == ['ACK {"id": "c"}']
    assert unrecorded(['ACK {"id": "b"}', 'ACK {"id": "a"}'], recorded) == ["(recorded in another order)"]


def test_each_recorded_acknowledgement_is_checked_not_only_the_newest(tmp_path: Path) -> None:
    """An acknowledged checkpoint whose bytes the reopened transcript lacks is reported and counted lost,
    as is an acknowledged mail; what the session holds is not."""
    directory = str(tmp_path / "portable")
    create_session(directory, "portable")
    oracle = _Oracle()
    for record in ({"kind": "transcript", "conversation": "root", "size": 1 << 20, "sha256": "0" * 64, "seq": 1},
                   {"kind": "transcript", "conversation": "root", "size": 0,
                    "sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "seq": 1},
                   {"kind": "mail", "id": "m9-9", "to": "root", "body": "never written", "seq": 1}):
        assert oracle.read("ACK " + json.dumps(record), kill=0)
    lost: list[int] = []
    found = list(check_recovered(directory, "portable", oracle, lost=lost))
    assert lost == [1, 3]
    assert any(inv == "L" and message.startswith("2 of 3 recorded acknowledgements") for inv, message in found)


def test_a_chain_continues_across_slices_when_the_profiles_alternate(tmp_path: Path) -> None:
    """The second slice of a chain starts at that chain's next kill (two profiles: two global kills on), and
    finds the first slice's marker naming it (it used to name the next global kill: every campaign of more
    than ``SLICE`` kills per chain stopped as a diverged chain)."""
    config = KillConfig(kills=4, seed=2, directory=str(tmp_path))
    plan = [k for k in plan_kills(config) if k.profile == "portable"]
    directory = str(tmp_path / "portable")
    oracle, first = run_kill_slice(directory, plan[:1], ([], [], 1), config, True, False)
    oracle, second = run_kill_slice(directory, plan[1:], oracle, config, False, True)
    assert [o.index for o in first + second] == [0, 2]
    assert all(o.violations == () for o in first + second)
