"""Which `__consumer_offsets` partition, and so which shard, coordinates a group.

Kafka maps a group id to a partition by Java's `String.hashCode` modulo the partition count;
coterie does the same, so a group's records sit in the partition Kafka would put them in and
a log written by one can be read by the other.
"""

from __future__ import annotations


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: 31-polynomial over UTF-16 code units, as a signed int32."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's mapping of a group to a coordinator partition (Utils.abs maps MIN_VALUE to 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(2**31) else abs(h)) % partitions
