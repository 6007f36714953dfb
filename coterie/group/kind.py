"""What serves group types in a shard: the `GroupKind` protocol, and what a shard shares.

A shard (`coterie.group.shard`) owns one registry of groups, the committed offsets and the
topic picture, and routes everything a group type must do to the `GroupKind` registered for
it (`coterie.group.registry`): the requests of its APIs (by request class), the records of
its families (by key class), its timers (by timer-kind enum), and the moments a type must
act in (loading finished, a group rebuilt after a failed append, topics changed, a group's
configs changed). One kind may serve several group types: the mixed kind
(`coterie.group.mixed`) serves classic and consumer groups together, as groups convert
between the two.

`ShardContext` is what the shard hands a kind when it builds it: the one registry of groups
(each type sees its own through `typed_groups.GroupsOf`), the offsets (read only: the rules
about "an id with only committed offsets"), the topic picture, the settings and the member
id generators.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from coterie.group.group import Group
from coterie.group.offsets.store import OffsetStore
from coterie.group.records.record import Record
from coterie.group.result import Result, TimerOp
from coterie.group.timers import TimerKey, TimerKind
from coterie.group.topic_image import TopicImage, Topics


@dataclass(slots=True)
class ShardContext:
    """What a shard shares with the kinds it serves (module docstring)."""

    partition: int
    config: Any  # coterie.group.config.ShardConfig (which imports the types' configs)
    groups: dict[str, Group]
    offsets: OffsetStore
    topics: Topics
    new_member_id: Callable[[str], str]
    new_consumer_member_id: Callable[[], str]


Handler = Callable[[Any, int], Any]


class GroupKind(Protocol):
    """What serves one or more group types in a shard (module docstring)."""

    # The record key classes this kind replays, and the timer-kind enums it owns.
    record_keys: tuple[type, ...]
    timer_kinds: tuple[type[TimerKind], ...]

    def requests(self) -> Mapping[type, Handler]:
        """Request class -> `handler(request, now_ms)`, returning a `Result` (or, for the
        settled-heartbeat shortcut, None to take the general path)."""
        ...

    def replay(self, record: Record) -> None:
        """Apply one record of its families: the only way its groups' durable state
        changes, live and at start-up alike."""
        ...

    def on_timer(self, key: TimerKey, now_ms: int) -> Result: ...

    def timers_after_load(self, now_ms: int) -> list[TimerOp]:
        """Loading is done: the deadlines its groups must meet again (none is durable),
        and whatever of its volatile tables is derived from durable state."""
        ...

    def after_rebuild(self, group_id: str, failed: list[Record], now_ms: int) -> Result:
        """`group_id` (one of its groups) was rebuilt from its durable records after the
        append of `failed` failed: re-derive what no record holds."""
        ...

    def on_topics(self, previous: TopicImage, now_ms: int) -> Result:
        """The shard's topic picture changed (`previous` was the last one)."""
        ...

    def set_group_config(self, group_id: str, config: Mapping[str, Any]) -> None:
        """A group's own settings (DescribeConfigs' GROUP resource), by Kafka's names; a
        kind takes those it knows and ignores the rest."""
        ...
