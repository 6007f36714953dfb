"""Reading the embedded "consumer" protocol's member metadata (its subscription).

The coordinator treats member metadata as opaque except where Kafka's own admin operations
need to look inside: OffsetDelete refuses to delete offsets of a topic that a live consumer
group still subscribes to. Decoding is kio's (ConsumerProtocolSubscription v0-v3); anything
that does not decode is treated as "no topics", never as an error.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from kio.index import load_entity_schema
from kio.serial import entity_reader
from kio.serial.readers import read_int16
from kio.static.constants import EntityType

MAX_SUBSCRIPTION_VERSION = 3


@cache
def _reader(version: int) -> Any:
    return entity_reader(load_entity_schema("consumer_protocol_subscription", version,
                                            EntityType.data))


def subscribed_topics(metadata: bytes) -> set[str]:
    """Topic names in a consumer's subscription metadata (empty if it does not decode)."""
    try:
        version, size = read_int16(metadata, 0)
        subscription, _ = _reader(min(int(version), MAX_SUBSCRIPTION_VERSION))(metadata, size)
    except Exception:
        return set()
    return set(subscription.topics)
