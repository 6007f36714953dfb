"""Record-level timestamp lookups (issue 10): ListOffsets by timestamp answers the first record,
in offset order, whose timestamp is >= the target, and MAX_TIMESTAMP the first record carrying
the largest timestamp, as Kafka does; not the batch's base or last offset.

Batches come from an independent writer (kafka-python's DefaultRecordBatchBuilder) in every
codec, with timestamps that are not monotonic inside a batch or across batches, and are
stored in real PartitionLogs with small segments; the answers are held against a brute-force
model over every record."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coterie.log.config import LogConfig
from coterie.log.partition import PartitionLog
from coterie.log.record_scan import (
    first_at_or_after,
    first_with_max_timestamp,
    record_times,
)
from coterie.wire.record_batch import TIMESTAMP_TYPE_FLAG
from coterie.wire.records import iter_records
from tests.unit.client.test_records import build as build_batch

NOW = 1_700_000_000_000
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def build(timestamps: list[int], *, codec: int = 0, base_offset: int = 0,
          attributes: int = 0) -> bytes:
    """One v2 batch with one record per timestamp (the client tests' batch builder)."""
    return build_batch([(ts, b"k%d" % i, b"value-%d" % i, [("h", b"x")] if i % 2 else [])
                        for i, ts in enumerate(timestamps)],
                       codec=codec, base_offset=base_offset, attributes=attributes)


def first_at_or_after_model(records: list[tuple[int, int]], target: int) -> tuple | None:
    """Kafka's rule over (offset, timestamp) pairs in offset order."""
    return next(((o, t) for o, t in records if t >= target), None)


def max_model(records: list[tuple[int, int]]) -> tuple | None:
    if not records:
        return None
    top = max(t for _, t in records)
    return next((o, t) for o, t in records if t == top)


# ------------------------------------------------------------------------ one batch


@pytest.mark.parametrize("codec", sorted(CODECS.values()))
def test_records_of_a_batch_in_every_codec(codec):
    stamps = [1000, 3000, 2000, 3000]
    batch = build(stamps, codec=codec, base_offset=40)
    assert list(record_times(batch)) == [(40, 1000), (41, 3000), (42, 2000), (43, 3000)]
    # Not the smallest timestamp >= the target: the first record that reaches it.
    assert first_at_or_after(batch, 2000) == (41, 3000)
    assert first_at_or_after(batch, 1000) == (40, 1000)
    assert first_at_or_after(batch, 1001) == (41, 3000)
    assert first_at_or_after(batch, 3001) is None
    # The first record with the batch's max timestamp, not the batch's last offset.
    assert first_with_max_timestamp(batch) == (41, 3000)


def test_record_payloads_parse():
    body = build([5, 6, 7])[61:]
    assert list(iter_records(body, 3)) == [
        (0, 0, b"k0", b"value-0", ()),
        (1, 1, b"k1", b"value-1", ((b"h", b"x"),)),
        (2, 2, b"k2", b"value-2", ()),
    ]


def test_log_append_time_batch_reads_every_record_at_the_batch_max():
    batch = bytearray(build([5, 9, 7], base_offset=10, attributes=TIMESTAMP_TYPE_FLAG))
    struct.pack_into(">q", batch, 35, NOW)  # the broker stamps maxTimestamp (and re-CRCs)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    assert list(record_times(bytes(batch))) == [(10, NOW), (11, NOW), (12, NOW)]
    assert first_at_or_after(bytes(batch), 6) == (10, NOW)
    assert first_with_max_timestamp(bytes(batch)) == (10, NOW)


def test_unreadable_payload_falls_back_to_batch_bounds():
    """The broker checks only the CRC on produce, so a batch can hold a payload that is not
    valid for its codec; a lookup must still answer, and never past a record it could not
    read."""
    batch = bytearray(build([100, 300, 200], codec=CODECS["gzip"], base_offset=7))
    batch[70:80] = b"\xff" * 10  # damage the compressed stream, keep the CRC valid
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    assert first_at_or_after(bytes(batch), 150) == (7, 300)
    assert first_at_or_after(bytes(batch), 301) is None
    assert first_with_max_timestamp(bytes(batch)) == (9, 300)


# ------------------------------------------------------------------------ partition logs


def _fill(log: PartitionLog, batches: list[tuple[list[int], int]],
          now: int = NOW) -> list[tuple[int, int]]:
    """Append each (timestamps, codec) batch; the (offset, timestamp) of every record."""
    records = []
    for stamps, codec in batches:
        info = log.append(build(stamps, codec=codec), 0, now)
        records += [(info.first_offset + i, ts) for i, ts in enumerate(stamps)]
    return records


def test_partition_lookups_across_segments_and_codecs(tmp_path: Path):
    config = LogConfig(segment_bytes=400, index_interval_bytes=90)
    log = PartitionLog.open(tmp_path / "p", config, NOW)
    codecs = sorted(CODECS.values())
    batches = [([1000 + 97 * ((7 * i + 3 * j) % 11) for j in range(1 + i % 4)], codecs[i % 5])
               for i in range(40)]
    batches[9] = ([50, 9000, 40], CODECS["lz4"])  # the largest timestamp, mid-batch
    batches[30] = ([9000, 9000], CODECS["zstd"])  # again, later: not the answer
    records = _fill(log, batches)
    assert log.segment_count > 3
    targets = [0, 50, 51, 999, 1000, 1001, 1400, 1500, 1970, 1971, 8999, 9000, 9001]
    for reopened in (False, True):
        for t in targets:
            assert log.offset_for_timestamp(t) == first_at_or_after_model(records, t), t
        assert log.max_timestamp() == max_model(records)
        # The 9000 in the middle of batch 9: neither that batch's base nor its last offset.
        assert log.max_timestamp() == (sum(len(b[0]) for b in batches[:9]) + 1, 9000)
        if not reopened:
            log.close()
            log = PartitionLog.open(tmp_path / "p", config, NOW)
    log.close()


def test_log_append_time_partition(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "p", LogConfig(message_timestamp_type="LogAppendTime"),
                            NOW)
    _fill(log, [([9, 1, 5], 0)], now=NOW)
    _fill(log, [([3, 2], CODECS["snappy"]), ([1], 0)], now=NOW + 10)
    _fill(log, [([4, 4, 4], CODECS["gzip"])], now=NOW + 5)
    # Records carry their batch's append time, whatever the producer wrote in them.
    assert log.offset_for_timestamp(0) == (0, NOW)
    assert log.offset_for_timestamp(NOW + 1) == (3, NOW + 10)
    assert log.offset_for_timestamp(NOW + 11) is None
    assert log.max_timestamp() == (3, NOW + 10)
    log.close()


batch_strategy = st.tuples(
    st.lists(st.integers(0, 60), min_size=1, max_size=6),  # timestamps (few distinct)
    st.sampled_from(sorted(CODECS.values())),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(batches=st.lists(batch_strategy, min_size=1, max_size=25))
def test_lookups_match_kafka_rule(tmp_path_factory, batches):
    directory = tmp_path_factory.mktemp("p")
    log = PartitionLog.open(directory, LogConfig(segment_bytes=500, index_interval_bytes=120),
                            NOW)
    records = _fill(log, batches)
    for t in range(-1, 63, 3):
        assert log.offset_for_timestamp(t) == first_at_or_after_model(records, t), t
    assert log.max_timestamp() == max_model(records)
    log.close()


def test_empty_log_has_no_answers(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "p", LogConfig(), NOW)
    assert log.offset_for_timestamp(0) is None
    assert log.max_timestamp() is None
    log.close()
