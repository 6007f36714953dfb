"""Topic-name rules, the same as Kafka's, and which names are internal topics.

A topic name becomes part of a directory name (`<topic>-<partition>`), so the rules are also
what keeps a client from naming a path outside the data directory.

Internal topics belong to the broker's own coordinators, which create them at start-up with
their own settings and read them back on every start. A client may neither delete them nor
change their partition count (that would lose every group, or re-map every group to another
partition), Metadata marks them `is_internal` (clients leave them out of regex
subscriptions), and Metadata does not auto-create a missing one under the broker defaults.
The list is Kafka's (`__consumer_offsets`, `__transaction_state`, `__share_group_state`) plus
coterie's `__group_events`; a topic whose name merely starts with "__" is an ordinary topic,
as in Kafka.
"""

from __future__ import annotations

import re

from coterie.common.limits import shown

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")

# Every internal topic, present or future, is named here and nowhere else decides.
INTERNAL_TOPICS: frozenset[str] = frozenset({
    "__consumer_offsets",  # group coordinator: groups and committed offsets
    "__group_events",  # coterie's group-event stream (coterie.broker.group_events)
    "__transaction_state",  # transaction coordinator (coterie.broker.transactions)
    "__share_group_state",  # share-group state (Kafka's; not in coterie yet)
})


def is_internal_topic(name: str | None) -> bool:
    """Whether `name` is one of the broker's internal topics (see the module docstring)."""
    return name in INTERNAL_TOPICS


def internal_topic_refusal(verb: str, name: str) -> str:
    """The message refusing to `verb` internal topic `name`, worded like the refusals Kafka's
    broker gives for writes to internal topics ("Cannot ... internal topic <name>")."""
    return f"Cannot {verb} internal topic {name}"


def validate_topic_name(name: str | None) -> str | None:
    """Return why `name` is not a legal topic name, or None if it is."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_NAME_LENGTH:
        return (
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
            f"topic name: {shown(name)}"
        )
    if not _LEGAL.fullmatch(name):
        return (
            f'Topic name "{shown(name)}" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'"
        )
    return None
