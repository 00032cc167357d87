"""The sweep over a grid: the storm's acceptance figures, grid checks, Pareto front, cost arithmetic."""

from __future__ import annotations

import itertools

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.whatif import (
    KindCost,
    PublicationCosts,
    Setting,
    TraceEvent,
    make_grid,
    make_trace,
    pareto_front,
    parse_intervals,
    permission_storm,
    sweep,
)

COSTS = PublicationCosts({"registry": KindCost(1000, 100, 50, 20, 10.0),
                          "checkpoint": KindCost(5000, 500, 400, 300, 20.0),
                          "mail": KindCost(2000, 200, 100, 60, 5.0)}, source="test")


@pytest.fixture(scope="module")
def storm_sweep() -> object:
    return sweep(permission_storm(), make_grid(debounce=(0.0, 0.1, 0.5, 1, 2, 5, 10)), COSTS)


def test_the_default_debounce_publishes_once_per_burst_not_per_transition(storm_sweep: object) -> None:
    report = storm_sweep
    by_debounce = {r.setting.debounce_s: r for r in report.results}  # type: ignore[attr-defined]
    assert report.trace.observational == 1526  # type: ignore[attr-defined]
    # debounce 0: (almost) every transition is its own publication, ~49/min
    assert by_debounce[0.0].publications > 1500 and by_debounce[0.0].per_minute_mean > 45
    # 2 s (E7's default): exactly one registry save per burst: the profile's 434, peaking at 21 a minute
    two = by_debounce[2.0]
    assert two.publications == two.by_kind["registry"] == 434
    assert two.per_minute_peak == 21 and two.per_minute_mean == pytest.approx(14.0)
    assert 2.0 <= two.loss_window_s < 2.1


def test_publications_fall_and_the_loss_window_grows_with_the_interval(storm_sweep: object) -> None:
    results = sorted(storm_sweep.results, key=lambda r: r.setting.debounce_s)  # type: ignore[attr-defined]
    for a, b in itertools.pairwise(results):
        assert b.publications <= a.publications and b.per_minute_peak <= a.per_minute_peak
        assert b.loss_window_s > a.loss_window_s
        assert b.bytes_allocated <= a.bytes_allocated
    assert results[-1].loss_window_s == pytest.approx(10.0, abs=0.1)
    assert all(r.unpublished == 0 for r in results)


def test_bytes_come_from_the_per_publication_costs() -> None:
    trace = make_trace([TraceEvent(0.0, "s", "agent-1", "activity", 0, {"flavour": "permission-blocked"}),
                        TraceEvent(0.2, "s", "agent-1", "activity", 0, {"flavour": "idle"}),  # nets to nothing
                        TraceEvent(5.0, "s", "agent-1", "activity", 0, {"flavour": "running"})], duration_s=60)
    (result,) = sweep(trace, [Setting(debounce_s=1.0)], COSTS).results
    assert result.publications == 2 and result.generations == 1  # the first save is an empty selection
    assert result.bytes_allocated == 2 * 1000
    assert result.bytes_written == 20 + 50  # staged bytes for the no-op, the full cost for the generation
    assert result.per_minute_mean == 2.0 and result.per_minute_peak == 2


def test_parse_intervals_and_impossible_grids() -> None:
    assert parse_intervals("0.1, 0.5,2,2", "--debounce") == (0.1, 0.5, 2.0)
    for text, fragment in [("1,-2", "--debounce: -2 is negative"), ("1,,2", "--debounce: empty value"),
                           ("fast", "--debounce: 'fast' is not a number"), ("nan", "not a finite number")]:
        with pytest.raises(PerfsuiteError, match=fragment):
            parse_intervals(text, "--debounce")
    with pytest.raises(PerfsuiteError, match="--checkpoint-interval: intervals must be > 0 s"):
        parse_intervals("0", "--checkpoint-interval", allow_zero=False)
    with pytest.raises(PerfsuiteError, match="debounce interval must be >= 0"):
        Setting(debounce_s=-1)
    with pytest.raises(PerfsuiteError, match="backoff limit must be >= the first delay"):
        Setting(notify_max_s=0.01)
    assert len(make_grid((1, 2, 3), (10, 30), (0.5,))) == 6


def test_pareto_front_minimises_both() -> None:
    assert pareto_front([(10, 1), (5, 2), (6, 3), (1, 10), (1, 10)]) == [True, True, False, True, True]
