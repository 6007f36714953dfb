"""The records of `__transaction_state`, in Kafka's own layout.

Key (TransactionLogKey): int16 version 0, then the transactional id as an int16-length
string. Value (TransactionLogValue): int16 version, then for version 0

    ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs int32,
    TransactionStatus int8, TransactionPartitions (nullable int32-count array of
    {Topic int16-length string, PartitionIds int32-count array of int32}),
    TransactionLastUpdateTimestampMs int64, TransactionStartTimestampMs int64

Version 1 is the flexible form of the same fields plus tagged ones (previous and next
producer id, client transaction version). coterie writes version 0, which carries everything
it keeps, and reads both (a version-1 value's tagged fields are skipped). A tombstone (value
None) removes a transactional id that expired.
"""

from __future__ import annotations

import struct

from coterie.txn.metadata import TxnMetadata, TxnState

__all__ = ["TxnRecordError", "decode", "encode"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_FIXED = struct.Struct(">qhib")
_TIMES = struct.Struct(">qq")


class TxnRecordError(ValueError):
    """Bytes that are not a transaction-log record this version can read."""


def _string(value: str) -> bytes:
    data = value.encode()
    return _I16.pack(len(data)) + data


def encode(meta: TxnMetadata | None,
           transactional_id: str | None = None) -> tuple[bytes, bytes | None]:
    """(key, value) bytes; `meta` None is the tombstone of `transactional_id`."""
    tid = meta.transactional_id if meta is not None else transactional_id
    if tid is None:
        raise ValueError("a tombstone needs its transactional id")
    key = _I16.pack(0) + _string(tid)
    if meta is None:
        return key, None
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(partition)
    parts = _I32.pack(len(by_topic)) + b"".join(
        _string(topic) + _I32.pack(len(ids)) + b"".join(_I32.pack(i) for i in ids)
        for topic, ids in by_topic.items())
    value = (_I16.pack(0)
             + _FIXED.pack(meta.producer_id, meta.producer_epoch, meta.timeout_ms, meta.state)
             + parts + _TIMES.pack(meta.last_update_ms, meta.txn_start_ms))
    return key, value


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, s: struct.Struct) -> tuple:
        if self.pos + s.size > len(self.data):
            raise TxnRecordError("transaction-log record cut short")
        out = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return out

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            if self.pos >= len(self.data):
                raise TxnRecordError("transaction-log record cut short")
            byte = self.data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7

    def string(self, flexible: bool) -> str:
        size = self.uvarint() - 1 if flexible else self.take(_I16)[0]
        if size < 0 or self.pos + size > len(self.data):
            raise TxnRecordError("bad string in a transaction-log record")
        out = self.data[self.pos : self.pos + size].decode()
        self.pos += size
        return out

    def count(self, flexible: bool) -> int:
        return self.uvarint() - 1 if flexible else self.take(_I32)[0]

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()


def decode(key: bytes, value: bytes | None) -> tuple[str, TxnMetadata | None]:
    """(transactional id, metadata or None for a tombstone). Raises TxnRecordError."""
    r = _Reader(key)
    (version,) = r.take(_I16)
    if version != 0:
        raise TxnRecordError(f"transaction-log key version {version} is not known")
    tid = r.string(False)
    if value is None:
        return tid, None
    r = _Reader(value)
    (version,) = r.take(_I16)
    if version not in (0, 1):
        raise TxnRecordError(f"transaction-log value version {version} is not known")
    flexible = version == 1
    pid, epoch, timeout, status = r.take(_FIXED)
    n = r.count(flexible)
    partitions: set[tuple[str, int]] = set()
    for _ in range(max(n, 0)):
        topic = r.string(flexible)
        for _ in range(r.count(flexible)):
            partitions.add((topic, r.take(_I32)[0]))
        if flexible:
            r.skip_tags()
    last_update, start = r.take(_TIMES)
    if flexible:
        r.skip_tags()
    try:
        state = TxnState(status)
    except ValueError:
        raise TxnRecordError(f"unknown transaction status {status}") from None
    return tid, TxnMetadata(tid, pid, epoch, timeout, state, frozenset(partitions), start,
                            last_update)
