"""Which `__consumer_offsets` partition, and so which shard, coordinates a group; and which
partition a keyed record goes to (`default_partition`, Kafka's murmur2 partitioner, shared by
the Spark sink and the client's producer).

Kafka maps a group id to a partition by Java's `String.hashCode` modulo the partition count;
coterie does the same, so a group's records sit in the partition Kafka would put them in and
a log written by one can be read by the other.

The hash is computed without a Python-level loop per character: a byte at a time it cost
about 150 ns per character, so a transactional id of 100,000 characters (which a client may
send) took 15 ms, and a Produce naming it for every partition held the event loop for
seconds (issue 23). As a dot product of the UTF-16 code units with the powers of 31 it runs
in C, in chunks of at most `_CHUNK` units (about 60 ns a character); and the hashes of the
few latest long strings are kept, since one request names its transactional id or group once
per partition or topic. That is still 2 ms for an id of 32,767 characters, 0.9 s for a
12 MB DescribeTransactions of such ids: for a request that large the broker computes the
hashes of its long strings on a worker thread (`hashes_of`) and lends them here
(`lend`/`give_back`) while the request is handled on the event loop.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable
from functools import lru_cache
from operator import mul

from coterie.common.limits import MAX_STRING_BYTES

_MASK = 0xFFFFFFFF
_CHUNK = 4_096
# 31**i mod 2**32 for i in range(_CHUNK + 1).
_POWERS: list[int] = [1]
for _ in range(_CHUNK):
    _POWERS.append(_POWERS[-1] * 31 & _MASK)
_SWAP = sys.byteorder == "little"
# Strings longer than this have their hashes kept (`_long_hash`) or lent (`lend`).
_LONG = 256
# Hashes of long strings computed ahead for the requests being handled (`lend`).
_LENT: dict[str, int] = {}


def _units(s: str) -> array:
    """The UTF-16 code units of `s`, as Java's String holds them."""
    units = array("H", s.encode("utf-16-be", "surrogatepass"))
    if _SWAP:
        units.byteswap()
    return units


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: 31-polynomial over UTF-16 code units, as a signed int32."""
    if len(s) <= _LONG:
        return _hash(s)
    lent = _LENT.get(s)
    return _long_hash(s) if lent is None else lent


def hashes_of(strings: Iterable[str]) -> dict[str, int]:
    """The hashes of the long ones among `strings` (pure: a worker thread may compute
    them). Strings longer than any id a record can hold are left out: they are refused,
    never hashed."""
    return {s: _hash(s) for s in strings if _LONG < len(s) <= MAX_STRING_BYTES}


def lend(hashes: dict[str, int]) -> None:
    """Hashes `java_string_hash` answers from until `give_back`."""
    _LENT.update(hashes)


def give_back(hashes: dict[str, int]) -> None:
    for s in hashes:
        _LENT.pop(s, None)


@lru_cache(maxsize=16)
def _long_hash(s: str) -> int:
    return _hash(s)


def _hash(s: str) -> int:
    units = _units(s)
    h = 0
    for start in range(0, len(units), _CHUNK):
        chunk = units[start:start + _CHUNK]
        # h * 31**len + sum(unit[i] * 31**(len - 1 - i)): the last unit takes 31**0.
        h = (h * _POWERS[len(chunk)] + sum(map(mul, reversed(chunk), _POWERS))) & _MASK
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's mapping of a group to a coordinator partition (Utils.abs maps MIN_VALUE to 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(2**31) else abs(h)) % partitions


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash of a key (32-bit, as an unsigned int)."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = length % 4
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h


def default_partition(key: bytes, partitions: int) -> int:
    """Kafka's default partitioner for a keyed record (murmur2 of the key, as Java's
    producer and librdkafka's murmur2_random do: a key lands where their clients put it)."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions
