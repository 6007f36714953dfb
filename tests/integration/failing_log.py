"""A switch in front of the group runtime's `OffsetsLog`: while `full`, appends fail as on a
full disk (the runtime's log is a public seam; nothing private is patched); and `ask`, a
group request sent through the runtime's door in-process, awaiting it if it parks."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Collection, Iterator
from typing import Any

from coterie.broker.groups import GroupRuntime
from coterie.broker.offsets_topic import Logged, OffsetsLog
from coterie.group import Record


class FullDiskSwitch:
    def __init__(self, inner: OffsetsLog) -> None:
        self.inner = inner
        self.partitions = inner.partitions
        self.full = False

    def append(self, partition: int, records: list[Record], now_ms: int,
               producer: tuple[int, int] | None = None) -> None:
        if self.full:
            raise OSError(28, "No space left on device")
        self.inner.append(partition, records, now_ms, producer)

    def append_marker(self, partition: int, producer: tuple[int, int], commit: bool,
                      coordinator_epoch: int, now_ms: int) -> None:
        if self.full:
            raise OSError(28, "No space left on device")
        self.inner.append_marker(partition, producer, commit, coordinator_epoch, now_ms)

    def read(self, partition: int) -> Iterator[list[Logged]]:
        return self.inner.read(partition)

    def compact(self, partition: int, live: Collection[Record], now_ms: int,
                min_segments: int) -> bool:
        return self.inner.compact(partition, live, now_ms, min_segments)


async def ask(runtime: GroupRuntime, request: Any, timeout_s: float = 10) -> Any:
    """The answer to `request` through the runtime's door (`GroupRuntime.handle`), as a
    handler gets it: a request that may park (JoinGroup, SyncGroup) carries a token, and
    its answer comes through the token's future."""
    token, fut = runtime.park()
    answer = runtime.handle(dataclasses.replace(request, token=token))
    if answer is not None:
        runtime.forget(token)
        return answer
    return await asyncio.wait_for(fut, timeout_s)
