"""Topic-name rules, the same as Kafka's.

A topic name becomes part of a directory name (`<topic>-<partition>`), so the rules are also
what keeps a client from naming a path outside the data directory.
"""

from __future__ import annotations

import re

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str | None) -> str | None:
    """Return why `name` is not a legal topic name, or None if it is."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_NAME_LENGTH:
        return (
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
            f"topic name: {name}"
        )
    if not _LEGAL.fullmatch(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'"
        )
    return None
