"""The group types a shard serves: one registration each.

A registration names the `GroupKind` that serves one or more group types (built per shard
from a `ShardContext`) and the record families of its records. From them the shard knows
which kind gets which request, record and timer (`GroupShard`), and the codec door which
codec reads and writes which record (`coterie.group.codec`). Adding a group type is a package
of its own and one line here (docs/architecture.md, "Adding a group type").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from coterie.group.kind import GroupKind, ShardContext
from coterie.group.mixed.groups import MixedGroups
from coterie.group.records import classic_codec, consumer_codec, share_codec, streams_codec
from coterie.group.records.record import RecordFamily
from coterie.group.share.groups import ShareGroups
from coterie.group.streams.groups import StreamsGroups


@dataclass(frozen=True, slots=True)
class Registration:
    name: str
    build: Callable[[ShardContext], GroupKind]
    families: tuple[RecordFamily, ...]


REGISTERED: tuple[Registration, ...] = (
    Registration("classic and consumer groups, mixed", MixedGroups,
                 (classic_codec.FAMILY, consumer_codec.FAMILY)),
    Registration("streams groups (KIP-1071)", StreamsGroups, (streams_codec.FAMILY,)),
    Registration("share groups (KIP-932)", ShareGroups, (share_codec.FAMILY,)),
)

FAMILIES: tuple[RecordFamily, ...] = tuple(f for r in REGISTERED for f in r.families)
