"""What a handler knows about the request it is answering."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.large import OffLoop
from coterie.broker.services import Services
from coterie.common.shared_table import SharedTable, shared_str
from coterie.wire.build import build
from coterie.wire.codec import response_schema

# Every partition's leader epoch: one broker, never re-elected.
LEADER_EPOCH = 0



def leader_epoch(services: Services, topic: str, index: int) -> int:
    """This broker's leader epoch of a partition: LEADER_EPOCH on a single broker; on a
    cluster broker the epoch of its lease while it leads the partition, else -1 (it does
    not lead it: NOT_LEADER_OR_FOLLOWER)."""
    cluster = services.cluster
    if cluster is None:
        return LEADER_EPOCH
    led = cluster.serving(topic, index)
    return -1 if led is None else led.lease.epoch


def epoch_error(current_leader_epoch: int, epoch: int) -> ErrorCode | None:
    """What a request naming the client's `current_leader_epoch` (-1: none) is answered
    when this broker's epoch is `epoch` (-1: not the leader), as Kafka's leader checks."""
    if epoch < 0:
        return ErrorCode.not_leader_or_follower
    if current_leader_epoch > epoch:
        return ErrorCode.unknown_leader_epoch
    if 0 <= current_leader_epoch < epoch:
        return ErrorCode.fenced_leader_epoch
    return None


# The null topic id of the wire (Kafka's Uuid.ZERO_UUID).
ZERO_UUID = uuid.UUID(int=0)


@dataclass(slots=True)
class RequestContext:
    services: Services
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str
    # The listener the request came in on (its name) and the connection's principal.
    listener: str = "PLAINTEXT"
    principal: str = "User:ANONYMOUS"
    # The connection it came on (coterie.broker.client_connection), for the handlers that
    # move its own state on (SASL); None for requests made up without one.
    connection: Any = None
    # Why the request was refused, for responses that cannot say it themselves (JoinGroup has
    # no error message): the server logs it with every INVALID_REQUEST it sends.
    refusal: str | None = None

    def respond(self, data: dict[str, Any]) -> Any:
        """Build this request's response entity, in the request's version, from plain data."""
        return build(response_schema(self.api_key, self.api_version), data)

    def respond_off_loop(self, data: dict[str, Any]) -> OffLoop:
        """As `respond`, for a large answer: built and encoded on a worker thread
        (coterie.broker.large). `data` must be fresh values nothing changes later."""
        return OffLoop(response_schema(self.api_key, self.api_version), data)

    @property
    def who(self) -> str:
        return f"{self.client_id or '-'}@{self.peer}"

    @property
    def client_host(self) -> str:
        """The client address as Kafka reports it in group descriptions ("/127.0.0.1"):
        one string for every member from that address (members keep it)."""
        return shared_str("/" + self.peer.rsplit(":", 1)[0])


class Parked:
    """A handler's answer that waits for other members (a JoinGroup until the join phase
    completes, a SyncGroup until the leader's assignment): the server answers with
    `answer(ctx, result)` once `future` has its result. Why not a coroutine: a parked
    coroutine handler costs a task, three coroutine frames and their bookkeeping, about
    2 KiB a request; with 10,000 members joining at once that memory, freed after the
    join, stayed scattered through the allocator's pools and cost about as much again as
    the members themselves."""

    __slots__ = ("answer", "ctx", "future")

    def __init__(self, future: Any, ctx: RequestContext,
                 answer: Callable[[RequestContext, Any], Any]) -> None:
        self.future = future
        self.ctx = ctx
        self.answer = answer


# Milliseconds values seen, each kept once: every member keeps its session and rebalance
# timeouts, and they are nearly always the same few values (an int above 256 costs 32
# bytes a copy). Bounded, so odd values from clients cannot grow it.
_SHARED_MILLIS: SharedTable[int] = SharedTable(1024)


def millis(value: Any) -> int:
    """A kio timedelta field as whole milliseconds (-1 stays -1)."""
    return _SHARED_MILLIS.share(round(value.total_seconds() * 1000))
