"""The shard's own rules (issue 11): those that used to live in the broker's handlers
(OffsetCommit / OffsetFetch / OffsetDelete, DescribeGroups, ListGroups, DeleteGroups,
ConsumerGroupDescribe of other groups), offset expiry through the `Group` protocol, the
revert path, and replay-equals-live for offsets. Driven directly, with virtual time."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from coterie.common.partitioning import (
    give_back,
    hashes_of,
    java_string_hash,
    lend,
    partition_for,
)
from coterie.group.classic.messages import LeavingMember
from coterie.group.consumer.messages import ConsumerHeartbeatRequest
from coterie.group.offsets.messages import (
    CommitPartition,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
)
from coterie.group.records.offsets import OffsetCommitKey

from .mixed_harness import MixedHarness, mid
from .test_mixed_groups import classic_group, harness


def commit(h: MixedHarness, *parts: tuple[str, int, int], group_id: str = "g",
           member_id: str = "", epoch: int = -1, version: int = 9, metadata: str = "",
           retention_ms: int = -1) -> tuple[ErrorCode, ...]:
    req = OffsetCommitRequest(group_id, member_id, epoch, tuple(
        CommitPartition(t, p, o, metadata=metadata) for t, p, o in parts),
        version=version, retention_ms=retention_ms)
    return h.apply(h.shard.offset_commit(req, h.now)).codes


def committed(h: MixedHarness, group_id: str = "g") -> dict[tuple[str, int], int]:
    return {k: v.offset for k, v in h.shard.offsets.fetch_all(group_id).items()}


# -- OffsetCommit ---------------------------------------------------------------------------

def test_commit_checks_each_partition_against_the_topics_and_the_metadata_limit():
    h = harness(foo=2)
    codes = commit(h, ("foo", 0, 5), ("foo", 2, 5), ("nope", 0, 5), ("foo", -1, 5))
    assert codes == (ErrorCode.none, ErrorCode.unknown_topic_or_partition,
                     ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_or_partition)
    assert commit(h, ("foo", 1, 7), metadata="x" * 4097) == (
        ErrorCode.offset_metadata_too_large,)
    assert committed(h) == {("foo", 0): 5}
    # Records were written for exactly what was committed.
    assert [r.key for r in h.records if isinstance(r.key, OffsetCommitKey)] == [
        OffsetCommitKey("g", "foo", 0)]


def test_a_fenced_commit_refuses_every_partition_and_writes_nothing():
    h = harness(foo=2)
    members = classic_group(h, n=2)
    generation = h.classic_group().generation
    assert commit(h, ("foo", 0, 1), ("foo", 1, 1), member_id=members[0],
                  epoch=generation + 1) == (ErrorCode.illegal_generation,) * 2
    assert commit(h, ("foo", 0, 1), member_id="stranger", epoch=generation) == (
        ErrorCode.unknown_member_id,)
    assert committed(h) == {}
    assert commit(h, ("foo", 0, 1), member_id=members[0], epoch=generation) == (
        ErrorCode.none,)
    assert committed(h) == {("foo", 0): 1}


def test_an_explicit_retention_becomes_the_expire_timestamp():
    h = harness(foo=1)
    h.now = 1_000
    commit(h, ("foo", 0, 1), retention_ms=60_000, version=2)
    assert h.shard.offsets.fetch("g", "foo", 0).expire_timestamp_ms == 61_000
    commit(h, ("foo", 0, 2))
    assert h.shard.offsets.fetch("g", "foo", 0).expire_timestamp_ms == -1


# -- OffsetFetch ----------------------------------------------------------------------------

def test_fetch_all_is_sorted_and_asked_partitions_answer_in_order():
    h = harness(foo=3, bar=1)
    commit(h, ("foo", 2, 20), ("bar", 0, 1), ("foo", 0, 10))
    everything = h.shard.offset_fetch(OffsetFetchRequest("g"))
    assert [(o.topic, o.partition, o.value.offset) for o in everything.offsets] == [
        ("bar", 0, 1), ("foo", 0, 10), ("foo", 2, 20)]
    asked = h.shard.offset_fetch(OffsetFetchRequest("g", (("foo", 1), ("foo", 0))))
    assert [(o.partition, o.value and o.value.offset) for o in asked.offsets] == [
        (1, None), (0, 10)]


def test_fetch_by_a_consumer_group_member_is_fenced_by_its_epoch():
    h = harness(foo=2)
    member = mid("a")
    h.join(member)
    epoch = h.group().members[member].member_epoch
    ok = h.shard.offset_fetch(OffsetFetchRequest("g", None, member, epoch))
    assert ok.error == ErrorCode.none
    stale = h.shard.offset_fetch(OffsetFetchRequest("g", None, member, epoch + 1))
    assert stale.error == ErrorCode.stale_member_epoch
    unknown = h.shard.offset_fetch(OffsetFetchRequest("g", None, "nobody", 1))
    assert unknown.error == ErrorCode.unknown_member_id
    # An admin reads without naming a member.
    assert h.shard.offset_fetch(OffsetFetchRequest("g")).error == ErrorCode.none


# -- OffsetDelete ---------------------------------------------------------------------------

def test_offset_delete_rules():
    h = harness(foo=2, bar=2)
    gone = h.apply(h.shard.offset_delete(OffsetDeleteRequest("nobody", (("foo", 0),))))
    assert gone.error == ErrorCode.group_id_not_found
    member = mid("a")
    h.join(member, topics=("foo",))
    commit(h, ("foo", 0, 1), ("bar", 0, 1), ("bar", 1, 1), member_id=member,
           epoch=h.group().members[member].member_epoch)
    before = len(h.records)
    answer = h.apply(h.shard.offset_delete(OffsetDeleteRequest(
        "g", (("foo", 0), ("bar", 0), ("bar", 0)))))
    assert answer.codes == (ErrorCode.group_subscribed_to_topic, ErrorCode.none,
                            ErrorCode.none)
    assert committed(h) == {("foo", 0): 1, ("bar", 1): 1}
    # One tombstone, for the one offset that existed and was not protected.
    assert [(r.key, r.value) for r in h.records[before:]] == [
        (OffsetCommitKey("g", "bar", 0), None)]


# -- DescribeGroups / ListGroups / DeleteGroups / ConsumerGroupDescribe ----------------------

def test_describe_groups_by_version_and_group_kind():
    h = harness(foo=2)
    h.join(mid("a"), group_id="cg")
    commit(h, ("foo", 0, 1), group_id="offsets-only")
    for version in (5, 6):
        consumer = h.describe("cg", version)
        assert consumer.state == "Dead"
        assert consumer.error == (ErrorCode.group_id_not_found if version == 6
                                  else ErrorCode.none)
        only = h.describe("offsets-only", version)
        assert (only.error, only.state) == (ErrorCode.none, "Empty")
        unknown = h.describe("unknown", version)
        assert unknown.state == "Dead"
        assert unknown.error == (ErrorCode.group_id_not_found if version == 6
                                 else ErrorCode.none)
    assert h.describe("cg", 6).error_message == "Group cg is not a classic group."
    assert h.describe("", 5).error == ErrorCode.invalid_group_id
    classic_group(h, n=1)
    stable = h.describe("g", 6)
    assert (stable.error, stable.state, len(stable.members)) == (ErrorCode.none, "Stable", 1)


def test_list_groups_includes_offset_only_groups_and_filters():
    h = harness(foo=2)
    classic_group(h, n=1)
    h.join(mid("a"), group_id="cg")
    commit(h, ("foo", 0, 1), group_id="offsets-only")
    listed = {(g.group_id, g.state, g.group_type) for g in h.shard.list_groups()}
    assert listed == {("g", "Stable", "classic"), ("cg", "Reconciling", "consumer"),
                      ("offsets-only", "Empty", "classic")} or listed == {
        ("g", "Stable", "classic"), ("cg", "Stable", "consumer"),
        ("offsets-only", "Empty", "classic")}
    assert {g.group_id for g in h.shard.list_groups(types=["Consumer"])} == {"cg"}
    assert {g.group_id for g in h.shard.list_groups(states=[" empty "])} == {"offsets-only"}
    assert h.shard.list_groups(states=["dead"]) == []


def test_delete_groups_takes_offsets_along_and_refuses_live_groups():
    h = harness(foo=2)
    members = classic_group(h, n=1)
    assert h.apply(h.shard.delete_group("g", h.now)) == ErrorCode.non_empty_group
    assert h.apply(h.shard.delete_group("unknown", h.now)) == ErrorCode.group_id_not_found
    commit(h, ("foo", 0, 1), member_id=members[0], epoch=h.classic_group().generation)
    h.cleave(LeavingMember(members[0], None))
    assert h.apply(h.shard.delete_group("g", h.now)) == ErrorCode.none
    assert h.shard.groups.get("g") is None
    assert committed(h) == {}
    commit(h, ("foo", 1, 1), group_id="offsets-only")
    assert h.apply(h.shard.delete_group("offsets-only", h.now)) == ErrorCode.none
    assert not h.shard.offsets.has_offsets("offsets-only")
    # What was deleted stays deleted after a reload.
    fresh = h.replayed_shard()
    assert fresh.groups.get("g") is None
    assert fresh.offsets.groups() == set()


def test_consumer_group_describe_of_other_groups():
    h = harness(foo=2)
    classic_group(h, n=1)
    commit(h, ("foo", 0, 1), group_id="offsets-only")
    for gid in ("g", "offsets-only"):
        d = h.describe_consumer(gid)
        assert (d.error, d.error_message) == (ErrorCode.group_id_not_found,
                                              f"Group {gid} is not a consumer group.")
    assert h.describe_consumer("unknown").error == ErrorCode.group_id_not_found
    assert h.describe_consumer("").error == ErrorCode.invalid_group_id
    h.join(mid("a"), group_id="cg")
    assert h.describe_consumer("cg").error == ErrorCode.none


# -- offset expiry through the Group protocol -------------------------------------------------

def test_expiry_keeps_offsets_of_groups_with_members_and_counts_from_emptiness():
    retention = 7 * 24 * 3_600_000
    h = harness(foo=4)
    members = classic_group(h, n=1)
    commit(h, ("foo", 0, 1), member_id=members[0], epoch=h.classic_group().generation)
    h.join(mid("a"), group_id="cg")
    commit(h, ("foo", 1, 1), group_id="cg", member_id=mid("a"),
           epoch=h.group("cg").members[mid("a")].member_epoch)
    commit(h, ("foo", 2, 1), group_id="standalone")
    h.now += retention
    assert {r.key.group_id for r in h.shard.expire_offsets(h.now)} == {"standalone"}
    h.cleave(LeavingMember(members[0], None))
    emptied = h.now
    h.leave(mid("a"), group_id="cg")
    h.now = emptied + retention - 1
    # The consumer group's offset expires by its commit time; the classic group's waits a
    # full retention from the moment it became empty.
    assert {r.key.group_id for r in h.shard.expire_offsets(h.now)} == {"cg"}
    h.now = emptied + retention
    assert {r.key.group_id for r in h.shard.expire_offsets(h.now)} == {"g"}
    assert h.shard.offsets.groups() == set()


# -- the record path: replay equals live; revert on a failed append --------------------------

def test_a_reloaded_shard_has_the_same_offsets_and_durable_view():
    h = harness(foo=2)
    commit(h, ("foo", 0, 1), ("foo", 1, 2))
    commit(h, ("foo", 0, 3), group_id="other")
    h.apply(h.shard.offset_delete(OffsetDeleteRequest("g", (("foo", 1),))))
    h.shard.committed(h.records)
    fresh = h.replayed_shard()
    for gid in ("g", "other"):
        assert fresh.offsets.fetch_all(gid) == h.shard.offsets.fetch_all(gid)
    assert fresh.durable == h.shard.durable


def test_revert_puts_offsets_back_as_the_log_has_them():
    h = harness(foo=2)
    commit(h, ("foo", 0, 1))
    h.shard.committed(h.records)
    result = h.shard.offset_commit(OffsetCommitRequest("g", "", -1, (
        CommitPartition("foo", 0, 9), CommitPartition("foo", 1, 9))), h.now)
    assert committed(h) == {("foo", 0): 9, ("foo", 1): 9}  # applied at once
    revert = h.shard.revert("g", result.records, h.now)
    assert not revert.rebuilt
    assert committed(h) == {("foo", 0): 1}


def test_revert_rebuilds_a_consumer_group_from_the_log():
    h = harness(foo=2)
    first, second = mid("a"), mid("b")
    h.join(first)
    h.shard.committed(h.records)
    before = h.group().snapshot()
    result = h.shard.handle(h_join_request(second), h.now)
    assert second in h.group().members  # applied at once
    revert = h.shard.revert("g", result.records, h.now)
    assert revert.rebuilt
    assert h.group().snapshot() == before


def h_join_request(member_id: str) -> ConsumerHeartbeatRequest:
    return ConsumerHeartbeatRequest(
        group_id="g", member_id=member_id, member_epoch=0, rebalance_timeout_ms=30_000,
        subscribed_topic_names=("foo",), owned=(), client_id="client",
        client_host="/127.0.0.1")


# -- routing ---------------------------------------------------------------------------------

def test_groups_map_to_partitions_as_in_kafka():
    # Values of Java's String.hashCode.
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert java_string_hash("\U0001F600") == 1772899  # a surrogate pair: two code units
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("my-group", 50) == abs(java_string_hash("my-group")) % 50


def _hash_by_definition(s: str) -> int:
    """Java's String.hashCode as Java defines it: h = 31*h + c over the UTF-16 units."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) % 2**32
    return h - 2**32 if h >= 2**31 else h


@settings(deadline=None, max_examples=60)
@given(st.text(max_size=20) | st.integers(4090, 4100).map(lambda n: "é😀x" * (n // 3)))
def test_the_fast_hash_is_javas_hash(s):
    """The hash computed by dot products in chunks of 4,096 units (issue 23) equals the
    definition, across chunk boundaries and surrogate pairs, also when lent (`lend`)."""
    assert java_string_hash(s) == _hash_by_definition(s)
    long = s * 30 + "tail"
    assert java_string_hash(long) == _hash_by_definition(long)
    lent = hashes_of([long])
    lend(lent)
    try:
        assert java_string_hash(long) == _hash_by_definition(long)
    finally:
        give_back(lent)


# -- property: offsets replayed from the records equal the live offsets ---------------------

offset_ops = st.lists(st.one_of(
    st.tuples(st.just("commit"), st.sampled_from(["g", "h", "k"]),
              st.lists(st.tuples(st.sampled_from(["foo", "bar", "nope"]), st.integers(0, 2),
                                 st.integers(0, 99)), max_size=3)),
    st.tuples(st.just("delete"), st.sampled_from(["g", "h", "k"]),
              st.lists(st.tuples(st.sampled_from(["foo", "bar"]), st.integers(0, 2)),
                       max_size=3)),
    st.tuples(st.just("delete_group"), st.sampled_from(["g", "h", "k"]), st.none()),
    st.tuples(st.just("advance"), st.just(""),
              st.sampled_from([1_000, 3_600_000, 7 * 86_400_000])),
    st.tuples(st.just("join"), st.sampled_from(["g", "h"]), st.none()),
    st.tuples(st.just("leave"), st.sampled_from(["g", "h"]), st.none()),
), max_size=30)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(offset_ops)
def test_offsets_replayed_from_records_equal_the_live_ones(sequence):
    """Commits (standalone and by members), OffsetDelete, DeleteGroups, expiry and members
    coming and going, in any order: a shard that loads the records written so far has the
    same offsets and the same durable view, and no operation raises."""
    h = harness(foo=2, bar=3)
    members: dict[str, str] = {}
    for op, gid, arg in sequence:
        if op == "commit":
            member = members.get(gid)
            epoch = h.group(gid).members[member].member_epoch if member else -1
            commit(h, *[(t, p, o) for t, p, o in arg], group_id=gid,
                   member_id=member or "", epoch=epoch)
        elif op == "delete":
            h.apply(h.shard.offset_delete(OffsetDeleteRequest(gid, tuple(arg))))
        elif op == "delete_group":
            h.apply(h.shard.delete_group(gid, h.now))
        elif op == "advance":
            h.now += arg
            h.records += h.shard.expire_offsets(h.now)
        elif op == "join" and gid not in members:
            members[gid] = mid(f"{gid}-{len(h.records)}")
            h.join(members[gid], group_id=gid)
        elif op == "leave" and gid in members:
            h.leave(members.pop(gid), group_id=gid)
        h.shard.committed(h.records)
    fresh = h.replayed_shard()
    for gid in ("g", "h", "k"):
        assert fresh.offsets.fetch_all(gid) == h.shard.offsets.fetch_all(gid)
    assert fresh.offsets.groups() == h.shard.offsets.groups()
    assert fresh.durable == h.shard.durable
