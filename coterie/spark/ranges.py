"""Offset ranges: how a micro-batch or a batch query is cut into Spark tasks, and how
`maxOffsetsPerTrigger` is shared out among partitions.

Pure: no I/O. Offsets here are resolved numbers (the next offset to read, Kafka style);
EARLIEST / LATEST placeholders are resolved against the brokers before anything in this
module sees them.

The streaming offset Spark checkpoints is the same JSON shape Spark's Kafka source writes,
`{"topic": {"0": 23, "1": 42}}`, so a checkpoint can be read by a human; `to_offset_json` and
`from_offset_json` convert it to and from `{TopicPartition: offset}`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

TP = tuple[str, int]


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Records [start, end) of one topic partition: one Spark task."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def to_offset_json(offsets: Mapping[TP, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_offset_json(data: Mapping[str, Mapping[str, int]] | None) -> dict[TP, int]:
    return {(topic, int(p)): int(o) for topic, parts in (data or {}).items()
            for p, o in parts.items()}


def split_ranges(starts: Mapping[TP, int], ends: Mapping[TP, int], *,
                 max_records: int, min_partitions: int | None = None) -> list[OffsetRange]:
    """One range per partition with records between start and end, each cut into pieces of
    at most `max_records` offsets; then, if `min_partitions` asks for more tasks than that,
    the largest ranges are halved until there are enough (or nothing is left to halve)."""
    ranges: list[OffsetRange] = []
    for tp in sorted(ends):
        start, end = starts.get(tp, ends[tp]), ends[tp]
        pos = start
        while pos < end:
            stop = min(end, pos + max_records)
            ranges.append(OffsetRange(tp[0], tp[1], pos, stop))
            pos = stop
    if min_partitions is not None:
        while len(ranges) < min_partitions:
            biggest = max(ranges, key=lambda r: r.size, default=None)
            if biggest is None or biggest.size < 2:
                break
            mid = biggest.start + biggest.size // 2
            i = ranges.index(biggest)
            ranges[i:i + 1] = [OffsetRange(biggest.topic, biggest.partition, biggest.start, mid),
                               OffsetRange(biggest.topic, biggest.partition, mid, biggest.end)]
    return ranges


def rate_limit(starts: Mapping[TP, int], latest: Mapping[TP, int], limit: int) -> dict[TP, int]:
    """End offsets that admit at most `limit` offsets in total, shared among partitions in
    proportion to their backlog (largest remainders first, ties by partition order), so a
    trigger never reads more than `limit` and every partition with a backlog moves when the
    limit allows."""
    backlog = {tp: max(0, latest[tp] - starts.get(tp, latest[tp])) for tp in sorted(latest)}
    total = sum(backlog.values())
    if total <= limit:
        return dict(latest)
    shares = {tp: limit * lag // total for tp, lag in backlog.items()}
    left = limit - sum(shares.values())
    order = sorted(backlog, key=lambda tp: (-((limit * backlog[tp]) % total), tp))
    for tp in order:
        if left <= 0:
            break
        if shares[tp] < backlog[tp]:
            shares[tp] += 1
            left -= 1
    return {tp: starts.get(tp, latest[tp]) + shares[tp] for tp in latest}
