"""The records of `__transaction_state`, in Kafka's own layout.

Key (TransactionLogKey): int16 version 0, then the transactional id as an int16-length
string. Value (TransactionLogValue): int16 version, then for version 0

    ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs int32,
    TransactionStatus int8, TransactionPartitions (nullable int32-count array of
    {Topic int16-length string, PartitionIds int32-count array of int32}),
    TransactionLastUpdateTimestampMs int64, TransactionStartTimestampMs int64

Version 1 is the flexible form of the same fields plus tagged ones: PreviousProducerId
(tag 0, int64), NextProducerId (tag 1, int64), ClientTransactionVersion (tag 2, int16) and
NextProducerEpoch (tag 3, int16). coterie writes version 0 for transactions version 1, which
it carries entirely, and version 1 once a transaction uses version 2 or an id carries a
previous or next producer id; it reads both. A tombstone (value None) removes a
transactional id that expired.
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
    if (meta.client_version < 2 and meta.previous_producer_id == -1
            and meta.next_producer_id == -1):
        value = (_I16.pack(0)
                 + _FIXED.pack(meta.producer_id, meta.producer_epoch, meta.timeout_ms,
                               meta.state)
                 + parts + _TIMES.pack(meta.last_update_ms, meta.txn_start_ms))
        return key, value
    flexible_parts = _uvarint(len(by_topic) + 1) + b"".join(
        _compact(topic) + _uvarint(len(ids) + 1) + b"".join(_I32.pack(i) for i in ids)
        + b"\x00" for topic, ids in by_topic.items())
    tags = [(0, _I64.pack(meta.previous_producer_id)), (1, _I64.pack(meta.next_producer_id)),
            (2, _I16.pack(meta.client_version))]
    if meta.next_producer_id != -1:
        tags.append((3, _I16.pack(0)))
    tagged = _uvarint(len(tags)) + b"".join(
        _uvarint(tag) + _uvarint(len(data)) + data for tag, data in tags)
    value = (_I16.pack(1)
             + _FIXED.pack(meta.producer_id, meta.producer_epoch, meta.timeout_ms, meta.state)
             + flexible_parts + _TIMES.pack(meta.last_update_ms, meta.txn_start_ms) + tagged)
    return key, value


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _compact(value: str) -> bytes:
    data = value.encode()
    return _uvarint(len(data) + 1) + data


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
        self.tags()

    def tags(self) -> dict[int, bytes]:
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            size = self.uvarint()
            if self.pos + size > len(self.data):
                raise TxnRecordError("transaction-log record cut short")
            out[tag] = self.data[self.pos : self.pos + size]
            self.pos += size
        return out


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
    tags = r.tags() if flexible else {}
    try:
        state = TxnState(status)
    except ValueError:
        raise TxnRecordError(f"unknown transaction status {status}") from None
    try:
        previous = _I64.unpack(tags[0])[0] if 0 in tags else -1
        following = _I64.unpack(tags[1])[0] if 1 in tags else -1
        client_version = _I16.unpack(tags[2])[0] if 2 in tags else 0
    except struct.error:
        raise TxnRecordError("bad tagged field in a transaction-log record") from None
    return tid, TxnMetadata(tid, pid, epoch, timeout, state, frozenset(partitions), start,
                            last_update, client_version, previous, following)
