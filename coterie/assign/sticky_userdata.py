"""The sticky assignors' subscription user data: what a member says it owned, and since when.

In the classic protocol a sticky member reports its previous assignment inside the opaque
`user_data` of its subscription, and the leader's assignor reads everyone's. Real clients
disagree on the bytes, so the decoder accepts every layout they send:

- Java `StickyAssignor` (and aiokafka): `StickyAssignorUserData` version 1, no version prefix,
  big-endian, Kafka's classic (non-flexible) encoding:

      int32 topic_count
        { int16 name_length, name (UTF-8), int32 partition_count, { int32 partition } }
      int32 generation

  Version 0 (clients before Kafka 2.3) is the same without the trailing generation. Java
  writes version 1 and reads version 1, then version 0.
- Java `CooperativeStickyAssignor`: one int32, the generation (owned partitions travel in the
  subscription's own `owned_partitions` field, KIP-429).
- librdkafka's `cooperative-sticky` (it has no eager `sticky`): the Java version 1 layout above,
  with owned partitions and generation also in the subscription's own fields.
- kafka-python 3.x `sticky`: the Java layout *preceded by an int16 schema version* (its
  generic data encoder writes that header), so `00 01` + version 1. Java and librdkafka cannot
  read it (to them it is a corrupt buffer, which they ignore) and kafka-python 3.x cannot read
  the Java layout; coterie reads both and writes the Java layout.

A layout matches only if it consumes the bytes exactly; anything else raises AssignorError.
Whether an undecodable blob is fatal is the assignor's call (coterie's sticky assignors ignore
it, as Java does, so one odd member cannot block a group's rebalance).

Why hand-written with `struct` rather than kio: kio ships the request/response and
consumer-protocol schemas but not `StickyAssignorUserData`, and the layout is three fixed-width
fields and a short string, so a few lines of `struct` are smaller than a generated reader and
let the decoder try layouts without exceptions on the common path.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import NamedTuple

from coterie.assign.spec import NO_GENERATION, AssignorError, TopicPartition

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class DecodedUserData(NamedTuple):
    """What a member's sticky user data says: the partitions it owned and their generation
    (NO_GENERATION when the layout carries none)."""

    owned: frozenset[TopicPartition]
    generation: int


EMPTY = DecodedUserData(frozenset(), NO_GENERATION)


def encode_sticky_user_data(owned: Iterable[TopicPartition], generation: int) -> bytes:
    """Java `StickyAssignor`'s user data (version 1): owned partitions grouped by topic, then
    the generation. Topics and partitions are written sorted so equal input gives equal bytes
    (Java's order is a hash map's; readers do not care)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in owned:
        by_topic.setdefault(topic, []).append(partition)
    out = bytearray(_I32.pack(len(by_topic)))
    for topic in sorted(by_topic):
        name = topic.encode("utf-8")
        if len(name) > 0x7FFF:
            raise AssignorError(f"topic name too long for sticky user data: {len(name)} bytes")
        partitions = sorted(set(by_topic[topic]))
        out += _I16.pack(len(name))
        out += name
        try:
            out += struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
        except struct.error as e:
            raise AssignorError(f"partition index out of int32 range in {topic!r}") from e
    out += _int32(generation)
    return bytes(out)


def _int32(value: int) -> bytes:
    try:
        return _I32.pack(value)
    except struct.error as e:
        raise AssignorError(f"generation {value} out of int32 range") from e


def encode_cooperative_user_data(generation: int) -> bytes:
    """Java `CooperativeStickyAssignor`'s user data: the generation as one int32."""
    return _int32(generation)


def _read_assignment(data: bytes, pos: int) -> tuple[frozenset[TopicPartition], int] | None:
    """Read the topic/partition array at `pos`; None if the bytes do not hold one."""
    end = len(data)
    if pos + 4 > end:
        return None
    (topic_count,) = _I32.unpack_from(data, pos)
    pos += 4
    # Each topic entry takes at least 6 bytes: a count larger than that allows is garbage
    # (and this bound keeps a hostile count from driving a long loop).
    if topic_count < 0 or topic_count * 6 > end - pos:
        return None
    owned: list[TopicPartition] = []
    for _ in range(topic_count):
        if pos + 2 > end:
            return None
        (name_len,) = _I16.unpack_from(data, pos)
        pos += 2
        if name_len < 0 or pos + name_len + 4 > end:
            return None
        try:
            topic = data[pos:pos + name_len].decode("utf-8")
        except UnicodeDecodeError:
            return None
        pos += name_len
        (count,) = _I32.unpack_from(data, pos)
        pos += 4
        if count < 0 or pos + 4 * count > end:
            return None
        partitions = struct.unpack_from(f">{count}i", data, pos)
        pos += 4 * count
        owned.extend((topic, p) for p in partitions)
    return frozenset(owned), pos


def _read_sticky(data: bytes, pos: int, version: int) -> DecodedUserData | None:
    """Java's sticky layout of `version` (0 or 1) starting at `pos`, consuming every byte."""
    read = _read_assignment(data, pos)
    if read is None:
        return None
    owned, pos = read
    if version == 0:
        return DecodedUserData(owned, NO_GENERATION) if pos == len(data) else None
    if pos + 4 != len(data):
        return None
    return DecodedUserData(owned, _I32.unpack_from(data, pos)[0])


def decode_user_data(data: bytes) -> DecodedUserData:
    """Decode any sticky or cooperative-sticky user data a real client sends.

    Tried in order, each required to consume the bytes exactly: empty (no previous
    assignment), the cooperative int32 generation, Java's sticky version 1, version 0, and
    kafka-python 3.x's version-prefixed form. Raises AssignorError for anything else.
    """
    data = bytes(data)
    if not data:
        return EMPTY
    if len(data) == 4:
        # Java cooperative-sticky: just the generation. (A sticky version 0 with no topics
        # is also four bytes, all zero; it owns nothing either way.)
        return DecodedUserData(frozenset(), _I32.unpack(data)[0])
    for version in (1, 0):
        decoded = _read_sticky(data, 0, version)
        if decoded is not None:
            return decoded
    if len(data) >= 2:
        (prefix,) = _I16.unpack_from(data, 0)
        if prefix in (0, 1):
            decoded = _read_sticky(data, 2, prefix)
            if decoded is not None:
                return decoded
    raise AssignorError(f"undecodable sticky assignor user data ({len(data)} bytes)")
