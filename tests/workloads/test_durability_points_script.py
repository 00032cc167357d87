"""scripts/acceptance/durability_points.py (format 2's measurements) runs and says what format 2 promises: one
durability point per publication on the steady path, at most 1.01 amortized over a stream with
consolidation, and k publications pending during one sync sharing the next (the recording layer counts)."""

from __future__ import annotations

import json


def test_the_script_counts_one_point_per_publication_and_a_shared_sync(acceptance_script, capsys):
    script = acceptance_script("durability_points")
    assert script.main(["--sizes", "1", "--checkpoints", "2", "--stream", "120", "--retire-every", "40",
                        "--groups", "3", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for row in doc["operations"]:
        assert (row["points"], row["order"]) == (1, ["fdatasync:log"]), row
        assert (row["fsyncs"], row["dir_fsyncs"], row["renames"]) == (0, 0, 0)
    stream = doc["stream"]
    assert stream["publications"] == 120 and 1.0 <= stream["amortized"] <= 1.01
    [group] = doc["group_commit"]
    assert (group["publications"], group["fdatasyncs"]) == (4, 2) and group["groups"][1:] == [3, 3, 3]
    [scale] = doc["scale"]
    assert scale["points"] == 1 and scale["bytes_per_checkpoint"] < 4096 and scale["logs"] == 1
    assert scale["allocated"] >= scale["used"] >= scale["live"] > 10**6


def test_bad_sizes_are_one_line(acceptance_script, capsys):
    assert acceptance_script("durability_points").main(["--sizes", "x"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
