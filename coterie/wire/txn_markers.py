"""Transaction markers: the control batches that end a transaction in each partition.

When a transaction commits or aborts, its coordinator writes one control batch to every
partition the transaction touched (data partitions and the `__consumer_offsets` partition of
a group whose offsets it committed). The batch carries the producer's id and epoch, has the
transactional and control attribute bits set, and holds one record whose key is a
ControlRecordType (int16 version 0, int16 type: 0 ABORT, 1 COMMIT) and whose value is an
EndTxnMarker (int16 version 0, int32 coordinator epoch). Consumers never show it to
applications; a read_committed reader uses it to know where a transaction ended.

The two small schemas are kio's (ControlRecordTypeSchema, EndTxnMarker); the batch is
written by kio's record-batch writer. Three layers need this format (the log's producer
state, the group coordinator's loader, the broker writing markers), so it lives here.
"""

from __future__ import annotations

import datetime
import io
import struct

from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.schema.control_record_type_schema.v0 import ControlRecordTypeSchema
from kio.schema.end_txn_marker.v0 import EndTxnMarker
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from coterie.wire.record_batch import CONTROL_FLAG, TRANSACTIONAL_FLAG

__all__ = ["ABORT", "COMMIT", "control_batch", "marker_type"]

ABORT = 0
COMMIT = 1
_VERSION = struct.Struct(">h")
_write_type = entity_writer(ControlRecordTypeSchema)
_write_marker = entity_writer(EndTxnMarker)
_read_type = entity_reader(ControlRecordTypeSchema)


def _key(commit: bool) -> bytes:
    buf = io.BytesIO()
    buf.write(_VERSION.pack(0))
    _write_type(buf, ControlRecordTypeSchema(type_=i16(COMMIT if commit else ABORT)))
    return buf.getvalue()


def _value(coordinator_epoch: int) -> bytes:
    buf = io.BytesIO()
    buf.write(_VERSION.pack(0))
    _write_marker(buf, EndTxnMarker(coordinator_epoch=i32(coordinator_epoch)))
    return buf.getvalue()


def control_batch(producer_id: int, producer_epoch: int, commit: bool,
                  coordinator_epoch: int, now_ms: int) -> bytes:
    """One marker batch (base offset 0: the log assigns the real one)."""
    stamp = datetime.datetime.fromtimestamp(now_ms / 1000, datetime.UTC)
    record = Record(attributes=0, timestamp=stamp, offset=0, key=_key(commit),
                    value=_value(coordinator_epoch), headers=())
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1,
        records=(record,), attributes=TRANSACTIONAL_FLAG | CONTROL_FLAG))
    return buf.getvalue()


def marker_type(key: bytes | None) -> int | None:
    """ABORT or COMMIT for a control record's key; None for a key that is not a v0
    transaction marker (other control types exist: leader change, snapshot records)."""
    if key is None or len(key) < 4:
        return None
    (version,) = _VERSION.unpack_from(key, 0)
    if version != 0:
        return None
    schema, _ = _read_type(key, 2)
    return schema.type_ if schema.type_ in (ABORT, COMMIT) else None
