"""The producing half shared by coterie's Python producer and the Spark sink
(coterie.wire.batch_builder): Kafka's default partitioner, sticky partitions for records
without a key, full batches, and batches whose bytes decode back to the records."""

from __future__ import annotations

import datetime
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.static.primitive import TZAwareMicros

from coterie.common.partitioning import default_partition
from coterie.wire.batch_builder import BatchBuilder
from coterie.wire.record_batch import HEADER_SIZE, batch_headers
from coterie.wire.records import iter_records

NOW = TZAwareMicros.parse(datetime.datetime(2026, 11, 28, tzinfo=datetime.UTC))


def test_keys_go_where_kafka_puts_them_and_keyless_records_stick_until_taken():
    b = BatchBuilder(1 << 20, random.Random(7))
    assert b.partition_for("t", b"k1", 6) == default_partition(b"k1", 6)
    first = b.partition_for("t", None, 6)
    assert {b.partition_for("t", None, 6) for _ in range(20)} == {first}
    b.add(("t", first), None, b"v", (), NOW)
    assert b.take(("t", first)) is not None
    # The batch went: the next keyless record starts the next partition's batch.
    assert b.partition_for("t", None, 6) == (first + 1) % 6


def test_a_batch_is_full_at_batch_bytes_and_nothing_waits_after_take():
    b = BatchBuilder(100)
    assert not b.add(("t", 0), None, b"x" * 10, (), NOW)
    assert b.add(("t", 0), None, b"x" * 80, (), NOW)
    assert b.waiting() == [("t", 0)] and b.buffered == 2
    assert b.take(("t", 0)) is not None
    assert b.take(("t", 0)) is None and b.waiting() == [] and b.buffered == 0
    with pytest.raises(ValueError):
        BatchBuilder(0)


@given(st.lists(st.tuples(st.none() | st.binary(max_size=20), st.none() | st.binary(max_size=50),
                          st.lists(st.tuples(st.text(max_size=5),
                                             st.none() | st.binary(max_size=5)), max_size=3)),
                min_size=1, max_size=20))
def test_a_taken_batch_decodes_to_its_records(records):
    b = BatchBuilder(1 << 30)
    for key, value, headers in records:
        b.add(("t", 0), key, value, headers, NOW)
    data, count = b.take(("t", 0))
    [h] = batch_headers(data, strict=True)
    assert count == h.records_count == len(records)
    assert h.producer_id == -1 and h.last_offset_delta == len(records) - 1
    got = list(iter_records(bytes(data[HEADER_SIZE:h.end]), h.records_count))
    assert [(r[2], r[3], tuple((k, v) for k, v in r[4])) for r in got] == [
        (k, v, tuple((hk.encode(), hv) for hk, hv in hs)) for k, v, hs in records]
