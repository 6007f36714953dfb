"""Where a streams member's reconciliation stands (KIP-1071; Kafka 4.2's streams `MemberState`).

The four states mirror the consumer group's (`coterie.group.consumer.member.MemberState`),
with tasks in place of partitions:

- STABLE: the member is at its epoch and holds everything its target gives it there;
- UNREVOKED_TASKS: the member must give back its tasks pending revocation before it moves on;
  it keeps its epoch meanwhile, so that its offset commits stay valid while it revokes;
- UNRELEASED_TASKS: the member is at the target epoch, but some of its target tasks are still
  held elsewhere (another member runs them as active, or its own process still holds them in
  another role) and will be handed over once they are let go;
- UNKNOWN: a state byte this coordinator does not know (written by a newer one); the member
  is made to drop everything and start over.

The values are the bytes Kafka persists in `StreamsGroupCurrentMemberAssignmentValue.State`.
They are not the consumer group's: streams counts from 1, so a stored 0 reads as UNKNOWN.
"""

from __future__ import annotations

import enum


class MemberState(enum.Enum):
    """A streams member's reconciliation state; values are Kafka's persisted bytes."""

    STABLE = 1
    UNREVOKED_TASKS = 2
    UNRELEASED_TASKS = 3
    UNKNOWN = 127

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        """The state a stored byte names; UNKNOWN for any byte not listed (so a record from a
        newer coordinator fences its member instead of failing the group's load)."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN
