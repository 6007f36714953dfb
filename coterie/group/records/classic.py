"""A classic group as a coordinator record (Kafka's GroupMetadataKey / GroupMetadataValue).

One record holds the whole group: its generation, protocol, leader and every member with the
subscription it sent for the chosen protocol and its assignment. The classic core writes it
when a join phase ends, when the leader's assignment arrives, when a static member is
replaced, and replays it (`coterie.group.classic.group.ClassicGroup.from_record`) live and at
start-up alike; a tombstone deletes the group.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    # Metadata of the member for the group's chosen protocol, and its assignment.
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberMetadata, ...]
