"""The internal topics a broker creates for its coordinators, with their settings.

Why in one place: a single broker creates each of them the first time it starts, and a
cluster broker must create the same ones, in the database, before it can serve; both read
the sizes and configs from here, so the two cannot disagree about what
`__consumer_offsets` (the group coordinator's log), `__transaction_state` (the transaction
coordinator's) or `__group_events` (the group-event stream, when enabled) look like.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from coterie.broker.group_events import EVENTS_DEFAULTS, EVENTS_TOPIC
from coterie.broker.groups import GROUP_DEFAULTS
from coterie.broker.offsets_topic import OFFSETS_TOPIC
from coterie.broker.transactions import TXN_DEFAULTS, TXN_TOPIC


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """A topic to create: its name, partition count and configs."""

    name: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)


def offsets_topic(props: Mapping[str, str]) -> TopicSpec:
    p = {**GROUP_DEFAULTS, **props}
    return TopicSpec(OFFSETS_TOPIC, int(p["offsets.topic.num.partitions"]), {
        "cleanup.policy": "compact", "segment.bytes": p["offsets.topic.segment.bytes"]})


def txn_topic(props: Mapping[str, str]) -> TopicSpec:
    p = {**TXN_DEFAULTS, **props}
    return TopicSpec(TXN_TOPIC, int(p["transaction.state.log.num.partitions"]), {
        "cleanup.policy": "compact", "segment.bytes": p["transaction.state.log.segment.bytes"]})


def events_topic(props: Mapping[str, str]) -> TopicSpec | None:
    """The group-event stream's topic; None when the stream is off."""
    p = {**EVENTS_DEFAULTS, **props}
    if p["group.events.enable"].strip().lower() != "true":
        return None
    return TopicSpec(EVENTS_TOPIC, max(1, int(p["group.events.partitions"])), {
        "cleanup.policy": "delete", "retention.ms": p["group.events.retention.ms"]})


def internal_topics(props: Mapping[str, str]) -> list[TopicSpec]:
    """Every internal topic a broker with `props` serves."""
    events = events_topic(props)
    return [offsets_topic(props), txn_topic(props), *([events] if events else [])]
