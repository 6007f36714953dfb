"""Creating, deleting and growing topics: the operations several handlers (and the group
runtime's internal topics) share.

Each one tells whoever listens (`on_change`: the group runtime, whose consumer groups
re-resolve their regexes and get a new epoch when topics they subscribe to change) the
broker's topics afterwards. Creation is all-or-nothing (`LogManager`): on StorageError
nothing was created and nobody is told.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from coterie.log.errors import InvalidTopicError, StorageError
from coterie.log.manager import LogManager, TopicInfo
from coterie.log.names import internal_topic_refusal, is_internal_topic

log = logging.getLogger("coterie.broker")


class TopicAdmin:
    def __init__(self, logs: LogManager, clock: Callable[[], int]) -> None:
        self.logs = logs
        self.now_ms = clock
        self.listeners: list[Callable[[dict[str, TopicInfo]], None]] = []

    def changed(self) -> None:
        """Tell every listener the topics as they are now (also after a cluster broker
        learned of topics another broker changed)."""
        for listener in self.listeners:
            listener(dict(self.logs.topics))

    def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> TopicInfo:
        try:
            info = self.logs.create_topic(name, partitions, configs, self.now_ms())
        except StorageError as e:
            log.error("%s; nothing was created", e)
            raise
        log.info("created topic %s with %d partitions (id %s)", name, partitions, info.topic_id)
        self.changed()
        return info

    def delete_topic(self, name: str) -> None:
        """Delete a topic; internal topics are refused (InvalidTopicError): their
        coordinators hold them open and would lose every group and offset."""
        if is_internal_topic(name):
            raise InvalidTopicError(internal_topic_refusal("delete", name))
        self.logs.delete_topic(name)
        log.info("deleted topic %s", name)
        self.changed()

    def create_partitions(self, name: str, total: int) -> None:
        """Grow a topic; internal topics are refused (InvalidTopicError): a group's partition
        follows from the partition count, so every group would move."""
        if is_internal_topic(name):
            raise InvalidTopicError(internal_topic_refusal("add partitions to", name))
        try:
            self.logs.create_partitions(name, total, self.now_ms())
        except StorageError as e:
            log.error("%s; nothing was created", e)
            raise
        log.info("topic %s now has %d partitions", name, total)
        self.changed()
