"""Format 2: the session log's framing and the torn-tail-versus-damage table (design 6.4), row by
row on hand-made logs, then as properties (hypothesis): a crash's tear of the last write is always a
clean or torn tail and never loses a complete record; a single flipped byte anywhere is always damage."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfsuite.engine._logformat import (
    BASE,
    CLEAN,
    DAMAGED,
    GEN,
    HEADER_SIZE,
    LOG_HEADER_SIZE,
    TORN,
    TRAILER_SIZE,
    LogDamage,
    LogHeader,
    classify,
    encode_record,
    read_record,
    record_size,
    scan,
)

SALT = 0x1234ABCD
CAPACITY = 16 * 1024
HEADER = LogHeader("perfsuite-session/2", 3, "1234abcd" * 4, "session-a", 2, CAPACITY, None)


def record(seq: int, payload: bytes = b"", *, kind: int = GEN, salt: int = SALT, meta: dict | None = None) -> bytes:
    return encode_record(kind, seq, 1, salt, meta or {"seq": seq}, payload)[0]


def log(*records: bytes, capacity: int = CAPACITY) -> bytearray:
    """A preallocated log: header, the records from byte 512, zeros to the capacity."""
    data = bytearray(capacity)
    data[:LOG_HEADER_SIZE] = HEADER.encode()
    offset = LOG_HEADER_SIZE
    for r in records:
        data[offset : offset + len(r)] = r
        offset += len(r)
    return data


def line(i: int, size: int = 90) -> bytes:
    return (f'{{"role":"user","content":"message {i} ' + "x" * size + '"}\n').encode()


def tail_of(data: bytes | bytearray):
    return scan(bytes(data), SALT)


# -- framing ---------------------------------------------------------------------------------------------------
def test_a_record_round_trips_with_its_meta_payload_and_digest():
    data, digest, payload_at = encode_record(GEN, 7, 3, SALT, {"parent": "p", "n": [1, 2]}, b"payload bytes")
    assert len(data) % 8 == 0 and len(data) == record_size(4 + len(b'{"n":[1,2],"parent":"p"}') + 13)
    found = read_record(data, 0, SALT)
    assert found is not None
    assert (found.kind, found.seq, found.epoch, found.offset, found.size) == (GEN, 7, 3, 0, len(data))
    assert dict(found.meta) == {"parent": "p", "n": [1, 2]} and found.digest == digest
    assert data[found.payload_start : found.payload_start + found.payload_length] == b"payload bytes"
    assert found.payload_start == payload_at


def test_a_payload_with_a_zero_sector_of_its_own_is_flagged():
    assert read_record(record(1, b"\0" * 600), 0, SALT).flags == 1
    assert read_record(record(1, b"a" * 600), 0, SALT).flags == 0


def test_the_log_header_round_trips_and_any_flipped_byte_is_damage():
    encoded = HEADER.encode()
    assert len(encoded) == LOG_HEADER_SIZE and LogHeader.decode(encoded) == HEADER
    for i in range(LOG_HEADER_SIZE):
        flipped = bytearray(encoded)
        flipped[i] ^= 0xFF
        with pytest.raises(LogDamage):
            LogHeader.decode(bytes(flipped))
    with pytest.raises(LogDamage, match="shorter"):
        LogHeader.decode(encoded[:100])


def test_records_chain_one_after_the_other_and_the_scan_stops_at_zeros():
    records = [record(i, line(i)) for i in range(5)]
    found = tail_of(log(*records))
    assert [r.seq for r in found.records] == list(range(5))
    assert found.tail.kind == CLEAN and found.tail.offset == LOG_HEADER_SIZE + sum(map(len, records))


# -- the table of design 6.4, one row each --------------------------------------------------------------------
def test_row_zeros_at_the_next_record_offset_is_a_clean_end():
    assert tail_of(log(record(1))).tail.kind == CLEAN
    assert tail_of(log()).tail == tail_of(log()).tail and tail_of(log()).tail.kind == CLEAN


@pytest.mark.parametrize("cut", [1, 20, HEADER_SIZE - 1, HEADER_SIZE, 100, -TRAILER_SIZE, -8, -1])
def test_row_a_record_cut_short_with_only_zeros_after_it_is_torn(cut):
    good, last = record(1, line(1)), record(2, line(2, 500))
    keep = cut if cut > 0 else len(last) + cut
    found = tail_of(log(good, last[:keep]))
    assert [r.seq for r in found.records] == [1]
    assert found.tail.kind == TORN and found.tail.offset == LOG_HEADER_SIZE + len(good)
    assert found.tail.end <= found.tail.offset + len(last)


def test_row_a_record_whose_sector_never_reached_the_disk_is_torn():
    """Sectors persisted out of order: one aligned sector in the middle is still zeros (etcd isTornEntry)."""
    last = bytearray(record(2, line(2, 3000)))
    data = log(record(1, b"a"), bytes(last))
    start = LOG_HEADER_SIZE + len(record(1, b"a"))
    sector = (start + 1024) // 512 * 512
    data[sector : sector + 512] = bytes(512)
    found = tail_of(data)
    assert [r.seq for r in found.records] == [1] and found.tail.kind == TORN


def test_the_sector_rule_does_not_apply_to_a_record_with_zero_sectors_of_its_own():
    last = bytearray(record(2, b"b" * 1500 + b"\0" * 1200 + b"c" * 1500))
    data = log(record(1), bytes(last))
    start = LOG_HEADER_SIZE + len(record(1))
    data[start + 200] ^= 0xFF  # damage: not a tear, although the record holds zero sectors
    assert tail_of(data).tail.kind == DAMAGED


@pytest.mark.parametrize("where", ["header", "meta", "payload", "padding", "digest", "trailer seq", "end magic"])
def test_row_a_flipped_byte_even_in_the_last_record_is_damage(where):
    size = next(n for n in range(50, 60) if (4 + len(b'{"seq":2}') + len(line(2, n))) % 8)
    last = record(2, line(2, size))  # a body length that leaves the record some padding
    body = 4 + len(b'{"seq":2}') + len(line(2, size))
    offsets = {"header": 5, "meta": HEADER_SIZE + 6, "payload": len(last) - TRAILER_SIZE - 20,
               "padding": len(last) - TRAILER_SIZE - 1, "digest": len(last) - TRAILER_SIZE + 3,
               "trailer seq": len(last) - 16, "end magic": len(last) - 1}
    data = log(record(1, line(1)), last)
    position = LOG_HEADER_SIZE + len(record(1, line(1))) + offsets[where]
    if where == "padding":
        assert body % 8 and data[position] == 0  # a padding byte, zero until flipped
    data[position] ^= 0xFF
    found = tail_of(data)
    assert [r.seq for r in found.records] == [1]
    assert found.tail.kind == DAMAGED and "\n" not in found.tail.reason


def test_row_an_invalid_record_followed_by_a_valid_one_is_mid_log_damage():
    data = log(record(1, line(1)), record(2, line(2)), record(3, line(3)))
    data[LOG_HEADER_SIZE + len(record(1, line(1))) + 60] ^= 0xFF
    found = tail_of(data)
    assert [r.seq for r in found.records] == [1]
    assert found.tail.kind == DAMAGED and "mid-log damage" in found.tail.reason and "record 3" in found.tail.reason


def test_row_a_zeroed_header_with_records_after_it_is_damage():
    first = record(1, line(1))
    data = log(first, record(2, line(2)), record(3, line(3)))
    data[LOG_HEADER_SIZE + len(first) : LOG_HEADER_SIZE + len(first) + HEADER_SIZE] = bytes(HEADER_SIZE)
    assert tail_of(data).tail.kind == DAMAGED


def test_row_junk_after_a_clean_end_is_damage():
    data = log(record(1))
    data[CAPACITY - 3] = 7
    found = tail_of(data)
    assert [r.seq for r in found.records] == [1] and found.tail.kind == DAMAGED


def test_row_a_record_of_another_log_is_damage():
    data = log(record(1), record(2, salt=0x0BADF00D))
    found = tail_of(data)
    assert [r.seq for r in found.records] == [1]
    assert found.tail.kind == DAMAGED and "another log" in found.tail.reason


def test_row_a_record_that_claims_more_than_the_log_holds_is_damage():
    big = record(2, b"z" * 3000)
    data = log(record(1), big)[: LOG_HEADER_SIZE + len(record(1)) + 1000]  # the header names bytes past the end
    found = tail_of(data)
    assert [r.seq for r in found.records] == [1] and found.tail.kind == DAMAGED


def test_row_a_zero_tear_of_a_write_leaves_a_clean_end():
    """The model's "zeros" tear: the size was there, the data never written: nothing to drop."""
    assert tail_of(log(record(1), bytes(len(record(2, line(2)))))).tail.kind == CLEAN


def test_a_torn_group_leaves_its_valid_prefix():
    group = b"".join(record(i, line(i, 700)) for i in range(2, 6))
    first_three = sum(len(record(i, line(i, 700))) for i in range(2, 5))
    found = tail_of(log(record(1), group[: first_three + 500]))
    assert [r.seq for r in found.records] == [1, 2, 3, 4] and found.tail.kind == TORN


def test_classify_in_place_of_scan_gives_the_same_answers():
    data = bytes(log(record(1), record(2, line(2))[:50]))
    assert classify(data, LOG_HEADER_SIZE + len(record(1)), SALT) == scan(data, SALT).tail


# -- properties ---------------------------------------------------------------------------------------------
text = st.binary(min_size=0, max_size=700).map(lambda b: b.replace(b"\0", b"\1"))  # like JSON lines: no zeros
binary = st.one_of(st.binary(max_size=1500), st.integers(512, 1500).map(bytes))  # zero sectors of their own
payloads = st.lists(st.one_of(text, binary), min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(payloads, st.integers(min_value=1, max_value=4), st.data())
def test_a_torn_last_write_is_never_damage_and_keeps_every_complete_record(bodies, group, data):
    """The last write (one record, or a group of them in one pwrite) cut at any byte over the old zeros:
    the scan keeps exactly the records that were complete before the cut and calls the rest torn or clean."""
    records = [record(i + 1, body, meta={"i": i}) for i, body in enumerate(bodies)]
    split = max(0, len(records) - group)
    written, last = records[:split], b"".join(records[split:])
    cut = data.draw(st.integers(min_value=0, max_value=len(last)))
    found = tail_of(log(*written, last[:cut]))
    complete, offset = split, 0
    for r in records[split:]:
        if offset + len(r) <= cut:
            complete += 1
        offset += len(r)
    assert len(found.records) == complete
    assert found.tail.kind == (CLEAN if cut in _boundaries(records[split:]) else TORN)


def _boundaries(records: list[bytes]) -> set[int]:
    out, offset = {0}, 0
    for r in records:
        offset += len(r)
        out.add(offset)
    return out


@settings(max_examples=300, deadline=None)
@given(payloads, st.data())
def test_a_single_flipped_byte_after_the_log_header_is_always_damage(bodies, data):
    records = [record(i + 1, body) for i, body in enumerate(bodies)]
    capacity = LOG_HEADER_SIZE + sum(map(len, records)) + 600
    damaged = log(*records, capacity=capacity)
    position = data.draw(st.integers(min_value=LOG_HEADER_SIZE, max_value=capacity - 1))
    damaged[position] ^= 0xFF
    found = tail_of(damaged)
    assert found.tail.kind == DAMAGED
    assert all(r.offset + r.size <= position for r in found.records)  # only records before the flip verify


def test_a_record_from_before_a_base_kind_reads_its_kind():
    assert read_record(record(1, kind=BASE), 0, SALT).name == "BASE"
