"""Committed offsets: OffsetCommit and OffsetFetch for one group, on their own connection.

Why not on the member's coordinator connection: a JoinGroup parks there for a whole join
phase, and Kafka brokers answer one request per connection at a time, so a commit queued
behind it would wait for the rebalance to end. A cooperative consumer keeps consuming (and
committing) the partitions it keeps while the group rebalances, and the coordinator accepts
those commits (the generation is still current while the group is PreparingRebalance). So
offsets travel on a second coordinator connection (`CoordinatorLink`, rediscovered when the
coordinator moves).

What each OffsetCommit error means here:

- NONE: committed.
- NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, REQUEST_TIMED_OUT,
  UNKNOWN_TOPIC_OR_PARTITION, a lost connection: retried (coordinator rediscovered where that
  helps) with backoff until the commit's deadline, then `BrokerUnavailableError`.
- REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
  STALE_MEMBER_EPOCH: the commit came from a generation the group has left (or is leaving):
  `CommitFailedError`, as Kafka's consumer raises; the partitions may already be someone
  else's. A consumer-group member (KIP-848) passes `renew`: on STALE_MEMBER_EPOCH or
  UNKNOWN_MEMBER_ID it waits for the member's next epoch and retries with it while the
  member is still in the group (Kafka's client does the same), else CommitFailedError.
- anything else (OFFSET_METADATA_TOO_LARGE, GROUP_AUTHORIZATION_FAILED, ...): `BrokerError`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.client.cluster import Cluster
from coterie.client.coordinator_link import CoordinatorLink
from coterie.client.errors import (
    BrokerConnectionError,
    BrokerError,
    BrokerUnavailableError,
    CommitFailedError,
)
from coterie.client.subscription import TopicPartition
from coterie.client.versions import ApiKey

log = logging.getLogger("coterie.client.consumer")

E = ErrorCode
RETRIABLE = frozenset({E.not_coordinator, E.coordinator_not_available,
                       E.coordinator_load_in_progress, E.request_timed_out,
                       E.unknown_topic_or_partition, E.unstable_offset_commit})
REDISCOVER = frozenset({E.not_coordinator, E.coordinator_not_available})
GENERATION_GONE = frozenset({E.rebalance_in_progress, E.illegal_generation,
                             E.unknown_member_id, E.fenced_instance_id, E.stale_member_epoch})
EPOCH_STALE = frozenset({E.stale_member_epoch, E.unknown_member_id})

#: (stale epoch, deadline on the loop clock) -> the member's (new epoch, member id), or None
#: once it is no longer in the group.
Renew = Callable[[int, float], Awaitable[tuple[int, str] | None]]


def _by_topic(tps: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(tps):
        out.setdefault(topic, []).append(partition)
    return out


class OffsetClient:
    """OffsetCommit / OffsetFetch for `group_id` over a dedicated coordinator connection."""

    def __init__(self, cluster: Cluster, group_id: str, *,
                 unavailable_timeout_ms: float | None = None,
                 request_timeout_ms: float = 30_000) -> None:
        self.group_id = group_id
        self.request_timeout_ms = request_timeout_ms
        self._link = CoordinatorLink(cluster, group_id, unavailable_timeout_ms)

    async def _call(self, api_key: int, fields: Mapping[str, Any], deadline: float) -> Any:
        """One request, retried on connection loss until `deadline` (loop clock)."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    return await self._link.call(api_key, fields,
                                                 timeout_ms=self.request_timeout_ms)
            except TimeoutError:
                raise BrokerUnavailableError(
                    f"group {self.group_id!r}: {ApiKey(api_key).name} got no answer in "
                    "time") from None
            except BrokerConnectionError as e:
                if loop.time() >= deadline:
                    raise BrokerUnavailableError(
                        f"group {self.group_id!r}: {ApiKey(api_key).name} failed: {e}") from e
                await self._pause(deadline)

    async def _pause(self, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, min(self._link.retry_delay_s(), deadline - loop.time())))

    def _retry_or_raise(self, code: ErrorCode, api: str, deadline: float, detail: str) -> None:
        if code in REDISCOVER:
            self._link.drop(reason=f"coordinator moved ({code.name})")
        if asyncio.get_running_loop().time() >= deadline:
            raise BrokerUnavailableError(f"group {self.group_id!r}: {api} kept failing with "
                                         f"{code.name.upper()} ({detail})")

    async def commit(self, offsets: Mapping[TopicPartition, int], *, generation_id: int,
                     member_id: str, group_instance_id: str | None,
                     timeout_ms: float | None = None, renew: Renew | None = None) -> None:
        """Commit `offsets` (the next offset to read, per partition) as this member of
        `generation_id` (a consumer group: member epoch). Raises CommitFailedError if the
        generation is gone (see the module docstring for `renew`)."""
        if not offsets:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (timeout_ms or self.request_timeout_ms) / 1000
        pending = dict(offsets)
        while pending:
            response = await self._call(ApiKey.OFFSET_COMMIT, {
                "group_id": self.group_id, "generation_id_or_member_epoch": generation_id,
                "member_id": member_id, "group_instance_id": group_instance_id,
                "retention_time": -1,
                "topics": [{"name": topic, "partitions": [
                    {"partition_index": p, "committed_offset": pending[TopicPartition(topic, p)],
                     "committed_leader_epoch": -1, "committed_metadata": ""}
                    for p in partitions]} for topic, partitions in _by_topic(pending).items()],
            }, deadline)
            self._link.succeeded()
            retry: ErrorCode | None = None
            stale = False
            for topic in response.topics:
                for p in topic.partitions:
                    tp = TopicPartition(topic.name, int(p.partition_index))
                    code = p.error_code
                    if code == E.none:
                        pending.pop(tp, None)
                    elif code in EPOCH_STALE and renew is not None:
                        stale = True
                    elif code in GENERATION_GONE:
                        raise CommitFailedError(code, "OffsetCommit", (
                            f"group {self.group_id!r}: generation {generation_id} of member "
                            f"{member_id} can no longer commit (the group rebalanced)"))
                    elif code in RETRIABLE:
                        retry = code
                    else:
                        raise BrokerError(code, "OffsetCommit", f"{tp.topic}-{tp.partition}")
            if pending and stale and renew is not None:
                renewed = await renew(generation_id, deadline)
                if renewed is None:
                    raise CommitFailedError(E.stale_member_epoch, "OffsetCommit", (
                        f"group {self.group_id!r}: member {member_id} (epoch "
                        f"{generation_id}) is no longer in the group"))
                log.info("group %s: OffsetCommit with stale epoch %d; retrying with epoch %d",
                         self.group_id, generation_id, renewed[0])
                generation_id, member_id = renewed
                continue
            if pending:
                code = retry or E.unknown_server_error
                self._retry_or_raise(code, "OffsetCommit", deadline, f"{len(pending)} left")
                await self._pause(deadline)

    async def fetch(self, tps: Iterable[tuple[str, int]], *,
                    timeout_ms: float | None = None) -> dict[TopicPartition, int | None]:
        """The committed offset of each partition (None where nothing is committed)."""
        wanted = {TopicPartition(*tp) for tp in tps}
        if not wanted:
            return {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (timeout_ms or self.request_timeout_ms) / 1000
        while True:
            response = await self._call(ApiKey.OFFSET_FETCH, {
                "group_id": self.group_id, "require_stable": False,
                "topics": [{"name": t, "partition_indexes": ps}
                           for t, ps in _by_topic(wanted).items()],
            }, deadline)
            top = getattr(response, "error_code", E.none)
            retry: ErrorCode | None = top if top in RETRIABLE else None
            if top != E.none and retry is None:
                raise BrokerError(top, "OffsetFetch", f"group {self.group_id!r}")
            out: dict[TopicPartition, int | None] = {}
            for topic in response.topics if retry is None else ():
                for p in topic.partitions:
                    tp = TopicPartition(topic.name, int(p.partition_index))
                    if p.error_code == E.none:
                        offset = int(p.committed_offset)
                        out[tp] = offset if offset >= 0 else None
                    elif p.error_code in RETRIABLE:
                        retry = p.error_code
                    else:
                        raise BrokerError(p.error_code, "OffsetFetch",
                                          f"{tp.topic}-{tp.partition}")
            if retry is None:
                self._link.succeeded()
                return {tp: out.get(tp) for tp in wanted}
            self._retry_or_raise(retry, "OffsetFetch", deadline, "")
            await self._pause(deadline)

    async def close(self) -> None:
        await self._link.close()
