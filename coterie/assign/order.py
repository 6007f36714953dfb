"""The member order Kafka's classic assignors use, shared by every coterie assignor.

Range and round-robin hand out partitions by position in a sorted member list, so the order
*is* the assignment. The Java client (`AbstractPartitionAssignor.MemberInfo`) and kafka-python
put static members (those with a `group.instance.id`) first, ordered by instance id, then
dynamic members ordered by member id. Ordering static members by instance id is what keeps
their assignment across restarts, when the coordinator hands them fresh member ids.

Strings compare by code point (Python's order, which is also UTF-8 byte order as librdkafka
and kafka-python compare). Java compares UTF-16 code units, which differs only between
characters above U+FFFF and characters in U+E000..U+FFFF; member and instance ids in practice
are ASCII. librdkafka differs in one more way: it compares a static with a dynamic member by
member id, so in a group mixing static and dynamic members a librdkafka leader can order them
differently from the Java client; coterie follows the Java client.
"""

from __future__ import annotations

from coterie.assign.spec import AssignmentSpec, MemberSpec


def member_sort_key(member: MemberSpec) -> tuple[int, str, str]:
    """Static members first by instance id, then dynamic members by member id (member id
    breaks the tie between two members claiming one instance id, which a valid group never
    has, so the order stays total)."""
    if member.instance_id is not None:
        return (0, member.instance_id, member.member_id)
    return (1, member.member_id, "")


def ordered_members(spec: AssignmentSpec) -> list[str]:
    """Member ids of `spec` in Kafka's assignor order."""
    return sorted(spec.members, key=lambda mid: member_sort_key(spec.members[mid]))
