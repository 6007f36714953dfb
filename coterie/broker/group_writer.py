"""Writing a shard's results: append the records, then answer, then arm the timers.

A shard returns a `Result` whose state change it has applied already. `ResultWriter.run`
appends the result's records to the shard's `__consumer_offsets` partition as one batch (a
transactional batch of its producer, for TxnOffsetCommit) *before* any answer of the call is
sent; the shard is then told they are durable (`GroupShard.committed`). If the append fails,
every answer of the call carries COORDINATOR_NOT_AVAILABLE and the shard undoes the result
(`GroupShard.revert`, the one undo): a rebuilt group loses every armed timer before the ones
the undo re-derives are armed. Then the timers go to the timer seam, the parked requests the
call completes are answered, and the group events observer looks at the group.

Transaction markers of `__consumer_offsets` are written here too (`end_transaction`): the
marker first, then the shard replays it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from coterie.broker.group_timers import Timers
from coterie.broker.offsets_topic import OffsetsLog
from coterie.broker.parked import ParkedRequests
from coterie.broker.shard_router import ShardRouter
from coterie.group import Record, Result, TimerKind

log = logging.getLogger("coterie.groups")
# Parked answers waiting for a cluster's database (kept referenced until they are sent).
_LATER: set[asyncio.Task] = set()


def with_error(response: Any, error: ErrorCode) -> Any:
    """The same answer, carrying `error` instead (for records that could not be persisted).
    An answer with a `with_error` method says itself what changes (per-partition codes)."""
    if isinstance(response, ErrorCode):
        return error
    if hasattr(response, "with_error"):
        return response.with_error(error)
    if dataclasses.is_dataclass(response) and hasattr(response, "error"):
        return dataclasses.replace(response, error=error)
    return response


class GroupObserver(Protocol):
    """Who watches groups change (`coterie.broker.group_events` publishes them)."""

    cause: TimerKind | None

    def observe(self, group_id: str, wrote_records: bool = True) -> None: ...

    def prime(self) -> None: ...


class Unobserved:
    cause: TimerKind | None = None

    def observe(self, group_id: str, wrote_records: bool = True) -> None:
        pass

    def prime(self) -> None:
        pass


class ResultWriter:
    """Appends, answers and schedules the results of the shards (module docstring)."""

    def __init__(self, offsets_log: OffsetsLog, router: ShardRouter, timers: Timers,
                 parked: ParkedRequests, clock: Callable[[], int]) -> None:
        self.log = offsets_log
        self.router = router
        self.timers = timers
        self.parked = parked
        self.now_ms = clock
        self.events: GroupObserver = Unobserved()
        # A cluster broker's wait for its records to reach the database
        # (coterie.broker.cluster.ClusterNode.coordinator_barrier); None on a single broker.
        self.barrier: Callable[[], Any] | None = None

    def run(self, group_id: str, result: Result) -> Any:
        """Append the records, then answer, then arm timers. Returns the immediate answer.
        The shard has applied the result already; if the append fails, it reverts."""
        response = result.response
        completed = result.completed
        revert = None
        if result.records:
            shard = self.router.shard_for(group_id)
            try:
                self.log.append(shard.partition, result.records, self.now_ms(),
                                result.producer)
            except Exception:
                log.exception("could not persist %d records of group %s",
                              len(result.records), group_id)
                error = ErrorCode.coordinator_not_available
                response = with_error(response, error)
                completed = [(t, with_error(r, error)) for t, r in completed]
                revert = shard.revert(group_id, result.records, self.now_ms(),
                                      result.producer)
            else:
                shard.committed(result.records, result.producer)
        self.timers.apply(result.timers)
        if revert is not None:
            if revert.rebuilt:
                self.timers.cancel_group(group_id)
            self.timers.apply(revert.result.timers)
            completed = [*completed, *revert.result.completed]
        if completed:
            self._answer_parked(completed)
        self.events.observe(group_id, wrote_records=bool(result.records))
        return response

    def _answer_parked(self, completed: list[tuple[Any, Any]]) -> None:
        """Answer parked requests: at once, or on a cluster broker once the records before
        the answers are in the database (NOT_COORDINATOR if they did not get there)."""
        wait = self.barrier() if self.barrier is not None else None
        if wait is None:
            for token, answer in completed:
                self.parked.resolve(token, answer)
            return

        async def later() -> None:
            stored = await wait
            for token, answer in completed:
                self.parked.resolve(
                    token, answer if stored else with_error(answer, ErrorCode.not_coordinator))

        task = asyncio.ensure_future(later())
        _LATER.add(task)
        task.add_done_callback(_LATER.discard)

    def run_settled(self, group_id: str, result: Result) -> Any:
        """`run` for a settled member's heartbeat, which writes and completes nothing and
        only moves the member's session timer: the same outcome without the steps that
        would find nothing to do (no append, no revert, and a group unchanged by records
        publishes no event)."""
        if result.records or result.completed:
            return self.run(group_id, result)
        self.timers.apply(result.timers)
        return result.response

    def run_many(self, result: Result) -> None:
        """Persist a result whose records span many groups (one batch per group, in order),
        then arm its timers."""
        by_group: dict[str, list[Record]] = {}
        for record in result.records:
            by_group.setdefault(record.key.group_id, []).append(record)
        for group_id, records in by_group.items():
            self.run(group_id, Result(records=records))
        self.timers.apply(result.timers)

    def end_transaction(self, partition: int, producer: tuple[int, int], commit: bool,
                        coordinator_epoch: int) -> None:
        """Write the marker of `producer`'s transaction to a __consumer_offsets partition,
        then let its shard commit or drop the transaction's pending offsets. Raises if the
        marker could not be written (the transaction coordinator retries)."""
        self.log.append_marker(partition, producer, commit, coordinator_epoch, self.now_ms())
        self.router.shards[partition].replay_marker(producer[0], commit)
