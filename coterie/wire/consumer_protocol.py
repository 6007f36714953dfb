"""The embedded "consumer" protocol's bytes: subscriptions (JoinGroup member metadata) and
assignments (SyncGroup member assignment).

Three parties read these bytes: the coordinator (OffsetDelete must know which topics a live
group still subscribes to; describe tools decode assignments), a classic-protocol leader
(coterie's member library builds an assignment spec from the members' subscriptions) and
every member (it decodes its own assignment). They all use this one module. The byte layout is
Kafka's ConsumerProtocolSubscription / ConsumerProtocolAssignment: an int16 version followed by
the fields of that version, encoded by kio's generated codecs. Versions 0-3 are read; members
write the version their features need (KIP-429 owned partitions need v1, the generation v2,
the rack v3).

Decoding is strict where a member relies on it (`decode_assignment` raises
`ConsumerProtocolError`, so an undecodable assignment reaches the user as an error) and
lenient where the coordinator only peeks (`subscribed_topics` answers "no topics").

It lives in `coterie.wire`, the lowest layer, because it is a wire format that the assignors,
the group coordinator and the client all read; none of them may be imported by the others
for it.

No ``from __future__ import annotations`` here: kio inspects field types at runtime.
"""

import io
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from kio.index import load_entity_schema
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import read_int16
from kio.serial.writers import write_int16
from kio.static.constants import EntityType
from kio.static.primitive import i32

from coterie.wire.bounds import check_entity

MAX_SUBSCRIPTION_VERSION = 3
MAX_ASSIGNMENT_VERSION = 3
PROTOCOL_TYPE = "consumer"

TopicPartition = tuple[str, int]


class ConsumerProtocolError(ValueError):
    """Bytes that are not a consumer-protocol subscription or assignment."""


@dataclass(frozen=True, slots=True)
class Subscription:
    """A consumer's JoinGroup metadata for one assignor (protocol name)."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: frozenset[TopicPartition] = frozenset()
    generation_id: int = -1
    rack_id: str | None = None
    version: int = field(default=MAX_SUBSCRIPTION_VERSION, compare=False)


@dataclass(frozen=True, slots=True)
class Assignment:
    """A consumer's SyncGroup assignment."""

    partitions: frozenset[TopicPartition]
    user_data: bytes | None = None
    version: int = field(default=MAX_ASSIGNMENT_VERSION, compare=False)


@cache
def _schema(name: str, version: int) -> Any:
    return load_entity_schema(name, version, EntityType.data)


@cache
def _module(name: str, version: int) -> Any:
    import importlib

    return importlib.import_module(f"kio.schema.{name}.v{version}.data")


def _grouped(partitions: Iterable[TopicPartition], cls: Any) -> tuple[Any, ...]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return tuple(cls(topic=t, partitions=tuple(i32(p) for p in sorted(ps)))
                 for t, ps in sorted(by_topic.items()))


def _flatten(groups: Iterable[Any]) -> frozenset[TopicPartition]:
    return frozenset((g.topic, int(p)) for g in groups for p in g.partitions)


def _write(version: int, entity: Any, schema: Any) -> bytes:
    buffer = io.BytesIO()
    write_int16(buffer, version)
    entity_writer(schema)(buffer, entity)
    return buffer.getvalue()


def _read(name: str, data: bytes, max_version: int) -> Any:
    try:
        version, size = read_int16(bytes(data), 0)
        # Newer versions only append fields, so a reader of our newest version reads them
        # (Kafka's rule for these two schemas).
        schema = _schema(name, min(int(version), max_version))
        # These bytes come from clients (JoinGroup metadata, a leader's SyncGroup
        # assignments): every declared count is held against them first, since kio's native
        # reader reserves an array's declared count and a count near 2**31 would abort the
        # broker (`bounds`).
        check_entity(data, size, schema)
        entity, _ = entity_reader(schema)(data, size)
    except Exception as exc:
        raise ConsumerProtocolError(f"undecodable {name.replace('_', ' ')}: {exc}") from exc
    if int(version) < 0:
        raise ConsumerProtocolError(f"{name.replace('_', ' ')} with version {version}")
    return int(version), entity


def encode_subscription(sub: Subscription) -> bytes:
    """The JoinGroup metadata bytes of `sub` at `sub.version`."""
    version = sub.version
    if not 0 <= version <= MAX_SUBSCRIPTION_VERSION:
        raise ConsumerProtocolError(f"subscription version {version} not in 0..3")
    name = "consumer_protocol_subscription"
    mod = _module(name, version)
    kwargs: dict[str, Any] = {"topics": tuple(sub.topics), "user_data": sub.user_data}
    if version >= 1:
        kwargs["owned_partitions"] = _grouped(sub.owned_partitions, mod.TopicPartition)
    if version >= 2:
        kwargs["generation_id"] = i32(sub.generation_id)
    if version >= 3:
        kwargs["rack_id"] = sub.rack_id
    return _write(version, mod.ConsumerProtocolSubscription(**kwargs), _schema(name, version))


def decode_subscription(data: bytes) -> Subscription:
    """Parse JoinGroup metadata; raise ConsumerProtocolError if it is not a subscription."""
    version, s = _read("consumer_protocol_subscription", data, MAX_SUBSCRIPTION_VERSION)
    return Subscription(
        topics=tuple(s.topics),
        user_data=None if s.user_data is None else bytes(s.user_data),
        owned_partitions=_flatten(getattr(s, "owned_partitions", ())),
        generation_id=int(getattr(s, "generation_id", -1)),
        rack_id=getattr(s, "rack_id", None),
        version=version,
    )


def encode_assignment(assignment: Assignment) -> bytes:
    """The SyncGroup assignment bytes of `assignment` at `assignment.version`."""
    version = assignment.version
    if not 0 <= version <= MAX_ASSIGNMENT_VERSION:
        raise ConsumerProtocolError(f"assignment version {version} not in 0..3")
    name = "consumer_protocol_assignment"
    mod = _module(name, version)
    entity = mod.ConsumerProtocolAssignment(
        assigned_partitions=_grouped(assignment.partitions, mod.TopicPartition),
        user_data=assignment.user_data)
    return _write(version, entity, _schema(name, version))


def decode_assignment(data: bytes) -> Assignment:
    """Parse a SyncGroup assignment; raise ConsumerProtocolError if it is not one. Empty
    bytes are an empty assignment (what Kafka hands a member the leader left out)."""
    if not data:
        return Assignment(frozenset())
    version, a = _read("consumer_protocol_assignment", data, MAX_ASSIGNMENT_VERSION)
    return Assignment(
        partitions=_flatten(a.assigned_partitions),
        user_data=None if a.user_data is None else bytes(a.user_data),
        version=version,
    )


def subscribed_topics(metadata: bytes) -> set[str]:
    """Topic names in a consumer's subscription metadata (empty if it does not decode)."""
    try:
        return set(decode_subscription(metadata).topics)
    except ConsumerProtocolError:
        return set()
