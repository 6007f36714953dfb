"""The Fetch handler writes its responses by hand (coterie.broker.handlers.fetch._encode); these
check that the bytes are exactly what kio writes for the same answer, in every version."""

from __future__ import annotations

import os
import tempfile
import uuid
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from coterie.broker.handlers import fetch
from coterie.wire.build import build
from coterie.wire.codec import FileRange, RawResponse, encode_response, response_schema

ERRORS = [ErrorCode.offset_out_of_range, ErrorCode.unknown_topic_id,
          ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_leader_epoch]


class _Stored:
    """Stands in for a Segment: an open file holding `data`."""

    def __init__(self, data: bytes) -> None:
        self.file = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the stand-in)
        self.file.write(data)
        self.file.flush()
        self.fd = self.file.fileno()

    def read_into(self, view: memoryview, start: int) -> None:
        assert os.preadv(self.fd, [view], start) == len(view)


def _wire(response: Any) -> bytes:
    """What the server puts on the socket for an encode_response result."""
    if type(response) is not RawResponse:
        return bytes(response)
    out = bytes(response.buffer)
    for piece in response.rest:
        if type(piece) is FileRange:
            data = os.pread(piece.fd, piece.count, piece.offset)
            assert len(data) == piece.count
            out += data
        else:
            out += bytes(piece)
    response.close()
    assert all(p.fd == -1 for p in response.rest if type(p) is FileRange)
    return out


partitions = st.tuples(
    st.integers(0, 2**31 - 1),                 # partition index
    st.sampled_from([None, *ERRORS]),          # error (None: records served)
    st.integers(-1, 2**62),                    # high watermark
    st.integers(-1, 2**62),                    # log start offset
    st.one_of(st.binary(max_size=300),         # records: read into the buffer, or
              st.integers(1, 3).map(lambda k: bytes([k]) * (70_000 * k))),  # sendfile
    st.integers(0, 5),                         # where the records start in the "segment"
    st.integers(-1, 2**62),                    # last stable offset
    st.one_of(st.none(),                       # read_committed: aborted transactions
              st.lists(st.tuples(st.integers(0, 2**62), st.integers(0, 2**62)),
                       max_size=3)),
)
# Name (or the seed of a topic id), and whether a v13+ request named it by the zero id, which
# kio reads as None and the handler echoes.
topics = st.tuples(st.text(min_size=1, max_size=140), st.lists(partitions, max_size=4),
                   st.booleans())


@settings(max_examples=300, deadline=None)
@given(version=st.integers(4, 16), answer=st.lists(topics, max_size=3))
def test_hand_written_fetch_response_matches_kio(version, answer):
    planned, plain = [], []
    for name, parts, zero_id in answer:
        if version >= 13:
            echo = None if zero_id else uuid.uuid5(uuid.NAMESPACE_DNS, name)
        else:
            echo = name
        planned_parts, plain_parts = [], []
        for index, error, hw, start_offset, records, skip, lso, aborted in parts:
            part = fetch._Part(index, error or ErrorCode.none, hw, start_offset,
                               last_stable_offset=lso, aborted=aborted)
            if error is None and records:
                part.span = (_Stored(bytes(skip) + records), skip, skip + len(records))
            planned_parts.append(part)
            plain_parts.append({
                "partition_index": index, "error_code": part.error, "high_watermark": hw,
                "last_stable_offset": lso, "log_start_offset": start_offset,
                "aborted_transactions": [{"producer_id": pid, "first_offset": first}
                                         for pid, first in aborted or ()],
                # Kafka sends empty records, never null ones, with an error (issue 10).
                "preferred_read_replica": -1, "records": b"" if error else records})
        planned.append((echo, planned_parts))
        plain.append({"topic": echo, "topic_id": echo, "partitions": plain_parts})
    raw = fetch._encode(SimpleNamespace(api_key=1, api_version=version), planned)
    entity = build(response_schema(1, version),
                   {"error_code": ErrorCode.none, "session_id": 0, "responses": plain})
    assert _wire(encode_response(42, raw, 1, version)) == encode_response(42, entity)


def test_sendfile_ranges_and_multi_byte_varint_lengths():
    records = bytes(range(256)) * 1000  # big enough to go by sendfile
    assert len(records) >= fetch.SENDFILE_MIN_BYTES
    part = fetch._Part(3, ErrorCode.none, 10, 0, (_Stored(records), 0, len(records)),
                       last_stable_offset=10)
    for version in (11, 12, 16):
        echo = uuid.UUID(int=7) if version >= 13 else "t"
        raw = fetch._encode(SimpleNamespace(api_key=1, api_version=version), [(echo, [part])])
        entity = build(response_schema(1, version), {"error_code": 0, "responses": [
            {"topic": echo, "topic_id": echo, "partitions": [
                {"partition_index": 3, "error_code": 0, "high_watermark": 10,
                 "last_stable_offset": 10, "log_start_offset": 0, "records": records}]}]})
        assert type(raw) is RawResponse and raw.rest
        assert _wire(encode_response(1, raw, 1, version)) == encode_response(1, entity)


def test_error_partitions_carry_empty_records_not_null():
    """Issue 10: librdkafka refuses a Fetch response whose records are null ("invalid
    MessageSetSize -1") and so never sees the error, e.g. OFFSET_OUT_OF_RANGE, that would make
    it reset its position. Kafka sends empty records with every partition error."""
    parts = [fetch._Part(i, error) for i, error in enumerate(ERRORS)]
    for version in range(4, 17):
        echo = None if version >= 13 else "t"  # v13+: the zero topic id, read as None
        raw = fetch._encode(SimpleNamespace(api_key=1, api_version=version), [(echo, parts)])
        frame = _wire(encode_response(7, raw, 1, version))[4:]
        schema = load_response_schema(1, version)
        header, size = entity_reader(schema.__header_schema__)(frame, 0)
        body, _ = entity_reader(schema)(frame, size)
        assert header.correlation_id == 7
        (topic,) = body.responses
        if version >= 13:
            assert topic.topic_id is None  # the zero id, echoed as sent
        assert [(p.error_code, p.records) for p in topic.partitions] == [
            (error, b"") for error in ERRORS], version
