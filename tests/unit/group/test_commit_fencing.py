"""OffsetCommit fencing for commits from outside group management (issue 10, item 8).

librdkafka consumers that only assign() partitions (no subscribe) still send their own member
id, with generation or member epoch -1. Kafka 4.2 accepts such a commit into a group that does
not exist or has no members, whatever the member id; only a group with members refuses it
(UNKNOWN_MEMBER_ID). Commits that claim a generation are fenced as before.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coterie.group.classic.membership import ClassicState
from coterie.group.classic.messages import LeavingMember
from coterie.group.shard import commit_refusal

from .mixed_harness import MixedHarness
from .test_mixed_groups import classic_group, harness


def _code(h: MixedHarness, member_id: str, epoch: int, version: int = 9,
          instance_id: str | None = None, group_id: str = "g") -> ErrorCode | None:
    refusal = commit_refusal(h.shard.groups.get(group_id), group_id, member_id, epoch,
                             instance_id, version)
    return None if refusal is None else refusal.code


def test_negative_generation_commits_into_unknown_group_whatever_the_member_id():
    h = harness()
    for version in (2, 7, 8, 9):
        assert _code(h, "", -1, version, group_id="nobody") is None
        assert _code(h, "rdkafka-4b1d-member", -1, version, group_id="nobody") is None
    assert _code(h, "rdkafka-4b1d-member", 3, 8, group_id="nobody") == (
        ErrorCode.illegal_generation)
    assert _code(h, "rdkafka-4b1d-member", 3, 9, group_id="nobody") == (
        ErrorCode.group_id_not_found)


def test_negative_generation_commits_into_an_empty_classic_group():
    h = harness()
    members = classic_group(h, n=1)
    h.cleave(LeavingMember(members[0], None))
    assert h.classic_group().state is ClassicState.EMPTY
    assert _code(h, "someone-else", -1) is None
    assert _code(h, members[0], -1) is None
    assert _code(h, "", -1) is None


def test_negative_generation_into_a_group_with_members_is_unknown_member():
    h = harness()
    members = classic_group(h, n=2)
    assert _code(h, "", -1) == ErrorCode.unknown_member_id
    assert _code(h, "stranger", -1) == ErrorCode.unknown_member_id
    generation = h.classic_group().generation
    assert _code(h, members[0], generation) is None
    assert _code(h, members[0], generation + 1) == ErrorCode.illegal_generation
    assert _code(h, "stranger", generation) == ErrorCode.unknown_member_id
