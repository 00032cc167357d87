"""Keys over the target, counted from a typing sample's histogram (M12): read off the counts array, it must
say what hdrh's recorded iterator says (kept here as the specification), for any recorded values and any
target, including values exactly at the target and in the histogram's coarse upper buckets."""

from __future__ import annotations

from hdrh.histogram import HdrHistogram
from hypothesis import example, given, settings
from hypothesis import strategies as st

from perfsuite.watch._keys import _over


def reference_over(blobs: list[str], target_ms: float) -> int:
    """The count as first written: every recorded bucket, walked with the recorded iterator."""
    count = 0
    for blob in blobs:
        hist = HdrHistogram.decode(blob)
        for item in hist.get_recorded_iterator():
            if hist.get_lowest_equivalent_value(item.value_iterated_to) / 1e3 > target_ms:
                count += item.count_added_in_this_iter_step
    return count


def _blob(values: list[tuple[int, int]]) -> str:
    hist = HdrHistogram(1, 60_000_000, 3)  # the typing workload's histogram: microseconds, 3 figures
    for value, times in values:
        hist.record_value(value, times)
    return hist.encode().decode("ascii")


recorded = st.lists(st.tuples(st.one_of(st.integers(1, 60_000_000), st.integers(19_900, 20_100)),
                               st.integers(1, 5)), max_size=40)


@settings(max_examples=60, deadline=None)  # the reference walks every sub-bucket: slow
@given(st.lists(recorded, min_size=1, max_size=3), st.one_of(st.sampled_from([20.0, 19.99, 20.01, 0.0]),
                                                             st.floats(0, 70_000, allow_nan=False)))
@example([[(20_000, 1), (20_001, 2), (20_010, 3), (20_020, 4), (19_999, 5)]], 20.0)
def test_the_count_is_the_recorded_iterators(samples: list[list[tuple[int, int]]], target_ms: float) -> None:
    blobs = [_blob(values) for values in samples]
    assert _over([{"labels": {"key_hdr": b}} for b in blobs], target_ms) == reference_over(blobs, target_ms)


def test_keys_well_over_the_target_are_counted() -> None:
    blob = _blob([(5_000, 10), (25_000, 3), (2_000_000, 1)])
    assert _over([{"labels": {"key_hdr": blob}}], 20.0) == 4
