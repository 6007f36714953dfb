"""The consumer's per-partition state: position, pending reset, fetched-but-undelivered
records, and whether the partition is being revoked.

Theory of operation. Every partition the consumer owns has one `PartitionState`, created
when the partition is assigned and thrown away when it is revoked (a partition assigned
again later starts afresh, from its committed offset). Three parties touch it, all on one
event loop:

- the fetcher reads `needs_position` / `fetchable` partitions, resolves positions (committed
  offset, else the reset policy) and hands fetched records to `deliver`, which keeps them
  only if the partition is still the same state object, not revoking, and still at the
  offset the fetch was sent for (a seek in between makes the fetch stale);
- `take` hands buffered records to the user and advances positions: the position is the
  offset of the next record the user will see, which is what commits store;
- the rebalance logic calls `start_revoking` *before* anything that awaits (commits,
  listener callbacks): from then on the partition is neither fetched nor delivered and its
  buffer is gone, so no record of a partition reaches the user after its revocation began.

Pure: no I/O, no clock (a caller that wants to back off passes its own clock values).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from coterie.client.records import ConsumerRecord, Decoded
from coterie.client.subscription import TopicPartition

EARLIEST = "earliest"
LATEST = "latest"
RESET_POLICIES = (EARLIEST, LATEST, "none")


@dataclass(slots=True)
class Fetched:
    """Records of one fetch of one partition not yet handed to the user."""

    records: list[ConsumerRecord]
    next_offset: int
    index: int = 0

    @property
    def remaining(self) -> int:
        return len(self.records) - self.index


@dataclass(slots=True, eq=False)
class PartitionState:
    tp: TopicPartition
    position: int | None = None
    reset: str | None = None  # a reset to EARLIEST / LATEST waits for ListOffsets
    committed_checked: bool = False  # OffsetFetch answered (or the position was set)
    paused: bool = False
    revoking: bool = False
    error: BaseException | None = None  # stops fetching until the next seek
    buffer: Fetched | None = None
    retry_at: float = 0.0  # caller's clock: no fetch before this (after an error)
    committed: int | None = None  # the last offset this consumer committed for it

    @property
    def needs_position(self) -> bool:
        return self.position is None and not self.revoking and self.error is None

    def fetchable(self, now: float) -> bool:
        return (self.position is not None and not self.paused and not self.revoking
                and self.buffer is None and self.error is None and now >= self.retry_at)

    def seek(self, offset: int) -> None:
        self.position = offset
        self.reset = None
        self.committed_checked = True
        self.buffer = None
        self.error = None
        self.retry_at = 0.0


@dataclass
class Assignment:
    """The partitions a consumer owns, each with its `PartitionState`."""

    parts: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    _rotation: int = 0

    def owned(self) -> frozenset[TopicPartition]:
        """Partitions owned and not being revoked."""
        return frozenset(tp for tp, ps in self.parts.items() if not ps.revoking)

    def get(self, tp: tuple[str, int]) -> PartitionState | None:
        ps = self.parts.get(TopicPartition(*tp))
        return ps if ps is not None and not ps.revoking else None

    def add(self, tps: Iterable[tuple[str, int]]) -> list[PartitionState]:
        added = []
        for raw in tps:
            tp = TopicPartition(*raw)
            if tp not in self.parts:
                self.parts[tp] = PartitionState(tp)
                added.append(self.parts[tp])
        return added

    def start_revoking(self, tps: Iterable[tuple[str, int]]) -> list[PartitionState]:
        """Stop fetching and delivering `tps` now; their buffered records are dropped."""
        out = []
        for raw in tps:
            ps = self.parts.get(TopicPartition(*raw))
            if ps is not None:
                ps.revoking = True
                ps.buffer = None
                out.append(ps)
        return out

    def remove(self, tps: Iterable[tuple[str, int]]) -> None:
        for raw in tps:
            self.parts.pop(TopicPartition(*raw), None)

    def clear(self) -> None:
        self.parts.clear()

    # -- the fetcher's side -------------------------------------------------------------------
    def needing_position(self) -> list[PartitionState]:
        return [ps for ps in self.parts.values() if ps.needs_position]

    def fetchable(self, now: float) -> list[PartitionState]:
        return [ps for ps in self.parts.values() if ps.fetchable(now)]

    def is_current(self, ps: PartitionState) -> bool:
        """Is `ps` still the live state of its partition (not revoked, not replaced)?"""
        return self.parts.get(ps.tp) is ps and not ps.revoking

    def deliver(self, ps: PartitionState, fetch_offset: int, decoded: Decoded) -> bool:
        """Keep a fetch's records if they are still wanted; True if anything changed."""
        if not self.is_current(ps) or ps.position != fetch_offset or ps.buffer is not None:
            return False
        if decoded.records:
            ps.buffer = Fetched(decoded.records, decoded.next_offset)
            return True
        if decoded.next_offset > fetch_offset:  # only control batches or a compacted gap
            ps.position = decoded.next_offset
            return True
        return False

    # -- the user's side ----------------------------------------------------------------------
    def take(self, max_records: int) -> tuple[list[ConsumerRecord], bool]:
        """Up to `max_records` buffered records, partitions served in turn. Returns the
        records and whether some buffer was emptied (so the fetcher has work again)."""
        ready = [ps for ps in self.parts.values()
                 if ps.buffer is not None and not ps.paused and not ps.revoking]
        out: list[ConsumerRecord] = []
        drained = False
        if not ready:
            return out, drained
        start = self._rotation % len(ready)
        self._rotation += 1
        for ps in ready[start:] + ready[:start]:
            if len(out) >= max_records:
                break
            buf = ps.buffer
            assert buf is not None
            n = min(max_records - len(out), buf.remaining)
            chunk = buf.records[buf.index:buf.index + n]
            buf.index += n
            out.extend(chunk)
            if chunk:
                ps.position = chunk[-1].offset + 1
            if buf.remaining == 0:
                ps.position = max(ps.position or 0, buf.next_offset)
                ps.buffer = None
                drained = True
        return out, drained

    def has_records(self) -> bool:
        return any(ps.buffer is not None and not ps.paused and not ps.revoking
                   for ps in self.parts.values())

    def positions(self, tps: Iterable[tuple[str, int]] | None = None) -> dict[TopicPartition,
                                                                              int]:
        """Current positions of `tps` (default: every owned partition) that have one."""
        states = (self.parts.values() if tps is None
                  else [self.parts[TopicPartition(*t)] for t in tps
                        if TopicPartition(*t) in self.parts])
        return {ps.tp: ps.position for ps in states if ps.position is not None}
