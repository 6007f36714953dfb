"""Large answers without a stalled event loop.

Most answers cost microseconds, but a legal request can ask for a lot: an OffsetFetch of
250,000 partitions, a DescribeGroups of 10,000 groups, a ListGroups of every group, a
ConsumerGroupDescribe of a 10,000-member group (the web console's page of it). On the
one event loop such an answer held every other connection for seconds (healthy members'
heartbeats waited, sessions expired). Two measures bound that:

* the state is read in slices (`in_slices`), with a turn for other connections between
  slices: an answer that spans slices is not one atomic snapshot, as Kafka's answers for
  several groups are not either, but each entry is a value the state really had;
* building the kio entity and encoding it, which is two thirds of the cost and a pure
  function of plain data, runs on a worker thread (`OffLoop`). The GIL still serialises
  Python, but it is handed back to the loop thread every switch interval (5 ms), so other
  connections wait milliseconds, not seconds.

`LARGE` is the size (entries: partitions, groups, topics) from which handlers take this
path; below it the ordinary path is cheaper than a thread hop.

The same holds for a large request of any API, whatever its handler does (issue 23: a
12 MB DescribeTransactions of long transactional ids held the loop for seconds, hashing each
id to its coordinator partition). A frame of `BIG_FRAME` bytes or more is decoded on a worker
thread, where the coordinator hashes of its long strings are computed too (`decoded_big`;
lent to `coterie.common.partitioning` while its handler runs on the loop), and its answer is
encoded on a worker thread. Only the handler's own work stays on the loop, and it no longer
grows with the length of the ids.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

from coterie.common.partitioning import hashes_of
from coterie.wire.build import build
from coterie.wire.codec import decode_request_and_header, encode_response

LARGE = 2_000
# Request frames from this size are decoded, and answered, off the loop.
BIG_FRAME = 1 << 20
# Entries read per slice before other connections get a turn.
SLICE = 1_000

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class OffLoop:
    """A response to build from `data` and encode on a worker thread. `data` must hold
    only values nothing on the loop changes later (fresh lists and dicts, str, bytes,
    numbers, tuples): the loop goes on while the worker reads it."""

    schema: type
    data: dict[str, Any]

    def encode(self, correlation_id: int, api_key: int, version: int) -> Any:
        return encode_response(correlation_id, build(self.schema, self.data), api_key, version)


async def encoded_off_loop(response: OffLoop, correlation_id: int, api_key: int,
                           version: int) -> Any:
    return await asyncio.to_thread(response.encode, correlation_id, api_key, version)


async def in_slices(items: Iterable[T], make: Callable[[T], R], size: int = SLICE) -> list[R]:
    """`[make(item) for item in items]`, yielding to other connections every `size`
    items."""
    out: list[R] = []
    for i, item in enumerate(items):
        if i and i % size == 0:
            await asyncio.sleep(0)
        out.append(make(item))
    return out


def decoded_big(frame: bytes, api_key: int, version: int) -> tuple[Any, Any, dict[str, int]]:
    """A big frame's header, request and the coordinator hashes of its long strings (on a
    worker thread: all of it is pure)."""
    head, request = decode_request_and_header(frame, api_key, version)
    return head, request, hashes_of(strings_in(request))


def strings_in(value: Any) -> Iterator[str]:
    """Every string in a decoded request (kio entities, tuples of them, and values)."""
    if type(value) is str:
        yield value
    elif type(value) is tuple:
        for item in value:
            yield from strings_in(item)
    elif dataclasses.is_dataclass(value):
        for name in _field_names(type(value)):
            yield from strings_in(getattr(value, name))


@cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))
