"""Streams groups (KIP-1071, Kafka 4.2) driven through a whole `GroupShard` with virtual time:
joins that create the group and ask for internal topics, scaling with revoke-before-assign,
failures, topology epochs, statuses, leaving, offsets, the rules of "any group", and the other
group types' APIs on a streams group's id (and the reverse)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coterie.group.classic.messages import (
    DescribeGroupRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeavingMember,
)
from coterie.group.consumer.messages import ConsumerHeartbeatRequest
from coterie.group.offsets.messages import (
    CommitPartition,
    DeleteGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
)
from coterie.group.records.tasks import TaskSet
from coterie.group.streams.config import StreamsGroupConfig
from coterie.group.streams.kinds import StreamsTimer
from coterie.group.streams.messages import (
    Endpoint,
    StreamsHeartbeatRequest,
    StreamsHeartbeatResponse,
)
from coterie.group.streams.status import StreamsGroupStatus
from coterie.group.streams.topology import Subtopology, Topology
from coterie.group.timers import TimerKey

from ..consumer_harness import mid as consumer_mid
from .streams_harness import StreamsHarness
from .topologies import CHANGELOG, REPARTITION, wordcount

TOPICS = {"lines": 4}
READY = {"lines": 4, REPARTITION: 4, CHANGELOG: 4}
ALL_ACTIVE = {("0", p) for p in range(4)} | {("1", p) for p in range(4)}


def codes(response: StreamsHeartbeatResponse) -> list[StreamsGroupStatus]:
    return [s.code for s in response.status]


def active(tasks: TaskSet) -> set[tuple[str, int]]:
    return {(s, p) for s, ps in tasks.active.items() for p in ps}


class Members:
    """Members heartbeating as Kafka Streams does: each reports the tasks it was last given
    (after revoking what it was asked to give back)."""

    def __init__(self, h: StreamsHarness) -> None:
        self.h = h
        self.epochs: dict[str, int] = {}
        self.tasks: dict[str, TaskSet] = {}

    def take(self, mid: str, r: StreamsHeartbeatResponse) -> StreamsHeartbeatResponse:
        assert r.error == ErrorCode.none, r
        self.epochs[mid] = r.member_epoch
        if r.assignment is not None:
            self.tasks[mid] = r.assignment
        self.check()
        return r

    def join(self, mid: str, topology: Topology | None = None, **fields: object,
             ) -> StreamsHeartbeatResponse:
        return self.take(mid, self.h.join(mid, topology or wordcount(), **fields))

    def beat(self, mid: str) -> StreamsHeartbeatResponse:
        return self.take(mid, self.h.heartbeat(mid, self.epochs[mid],
                                               owned=self.tasks.get(mid, TaskSet())))

    def forget(self, mid: str) -> None:
        self.epochs.pop(mid, None)
        self.tasks.pop(mid, None)

    def check(self) -> None:
        """No active task is run by two members at once."""
        seen: set[tuple[str, int]] = set()
        for tasks in self.tasks.values():
            mine = active(tasks)
            assert not mine & seen
            seen |= mine

    def settle(self, rounds: int = 6) -> None:
        for _ in range(rounds):
            for mid in sorted(self.epochs):
                self.beat(mid)
        assert self.h.group().state() == "Stable"


def ready_group(h: StreamsHarness, members: Members, *mids: str) -> None:
    """Members joined and the internal topics created: the group is stable."""
    for mid in mids:
        r = members.join(mid)
        h.create_requested(r)
    members.settle()


# == joining ====================================================================================
def test_first_join_creates_the_group_and_asks_for_the_internal_topics() -> None:
    h = StreamsHarness(TOPICS)
    r = h.join("m1", wordcount())
    assert r.error == ErrorCode.none and r.member_id == "m1"
    assert r.member_epoch == 2  # Kafka 4.2 starts a new group at epoch 2
    assert codes(r) == [StreamsGroupStatus.MISSING_INTERNAL_TOPICS]
    assert {(t.name, t.partitions) for t in r.topics_to_create} == {
        (REPARTITION, 4), (CHANGELOG, 4)}
    assert r.assignment == TaskSet()
    group = h.group()
    assert group.state() == "NotReady" and group.topology == wordcount()
    assert h.shard.list_groups() == [group.listing()]
    assert group.listing().group_type == "streams"
    # The broker creates them: the group's epoch moves, and its member gets every task.
    h.create_requested(r)
    assert group.group_epoch == 3 and group.state() == "Assigning"
    r = h.heartbeat("m1", 2, owned=TaskSet())
    assert r.status == () and r.topics_to_create == ()
    assert r.member_epoch == 3 and active(r.assignment) == ALL_ACTIVE
    assert h.group().state() == "Stable"


def test_face_checks_answer_invalid_request_with_kafkas_messages() -> None:
    h = StreamsHarness(TOPICS)
    r = h.heartbeat("m1", 0)
    assert (r.error, r.error_message) == (ErrorCode.invalid_request,
                                          "RebalanceTimeoutMs must be provided in first request.")
    r = h.join("m1", wordcount(), instance_id="i1")
    assert (r.error, r.error_message) == (ErrorCode.invalid_request,
                                          "Static membership is not yet supported.")
    r = h.heartbeat("m1", 3, topology=wordcount())
    assert r.error_message == "Topology can only be provided when (re-)joining."
    r = h.heartbeat("", 0)
    assert r.error_message == "MemberId can't be empty."
    r = h.heartbeat("m1", -3)
    assert r.error_message == "MemberEpoch is -3, but must be greater than or equal to -2."
    assert "app" not in h.shard.groups


def test_unknown_group_and_member() -> None:
    h = StreamsHarness(TOPICS)
    r = h.heartbeat("m1", 3)
    assert (r.error, r.error_message) == (ErrorCode.group_id_not_found,
                                          "Streams group app not found.")
    h.join("m1", wordcount())
    r = h.heartbeat("m9", 2)
    assert (r.error, r.error_message) == (ErrorCode.unknown_member_id,
                                          "Member m9 is not a member of group app.")
    r = h.heartbeat("m1", 7)
    assert r.error == ErrorCode.fenced_member_epoch


def test_missing_source_topics_then_created() -> None:
    h = StreamsHarness({})
    r = h.join("m1", wordcount())
    assert codes(r) == [StreamsGroupStatus.MISSING_SOURCE_TOPICS]
    assert "lines" in r.status[0].detail and r.topics_to_create == ()
    assert h.group().state() == "NotReady"
    h.set_topics(TOPICS)
    r = h.heartbeat("m1", h.group().members["m1"].member_epoch, owned=TaskSet())
    assert codes(r) == [StreamsGroupStatus.MISSING_INTERNAL_TOPICS]
    h.create_requested(r)
    r = h.heartbeat("m1", r.member_epoch, owned=TaskSet())
    assert active(r.assignment) == ALL_ACTIVE


def test_incorrectly_partitioned_internal_topic() -> None:
    h = StreamsHarness({"lines": 4, CHANGELOG: 2})
    r = h.join("m1", wordcount())
    assert codes(r) == [StreamsGroupStatus.INCORRECTLY_PARTITIONED_TOPICS]


# == scaling ====================================================================================
def test_scale_one_to_three_to_two_revokes_before_it_assigns() -> None:
    h = StreamsHarness(TOPICS)
    m = Members(h)
    ready_group(h, m, "m1")
    assert active(m.tasks["m1"]) == ALL_ACTIVE
    epoch = h.group().group_epoch
    m.join("m2")
    m.join("m3")
    assert h.group().group_epoch == epoch + 2
    # m1 must give tasks back first: it stays at its epoch meanwhile.
    r = m.beat("m1")
    assert r.member_epoch == epoch and len(active(r.assignment)) < 8
    m.settle()
    counts = sorted(len(active(t)) for t in m.tasks.values())
    assert counts == [2, 3, 3] and set().union(*map(active, m.tasks.values())) == ALL_ACTIVE
    assert {e for e in m.epochs.values()} == {h.group().group_epoch}
    # Down to two: m3 leaves, its tasks move.
    r = h.leave("m3")
    assert (r.error, r.member_epoch) == (ErrorCode.none, -1)
    m.forget("m3")
    m.settle()
    assert sorted(len(active(t)) for t in m.tasks.values()) == [4, 4]
    assert set().union(*map(active, m.tasks.values())) == ALL_ACTIVE


def test_a_member_that_lost_the_answer_giving_it_tasks_is_told_them_again() -> None:
    """m2 joins m1's group; once m1 released them, m2 is given its tasks at the epoch it
    already has, and that answer is lost. Kafka 4.2 would never send them again (it sends
    tasks only to a joining member and when they change): m2 would run nothing while the
    coordinator believes it runs them. m2 reports the tasks it has (none), so coterie sends
    them again; a settled member reporting the tasks it has gets none."""
    h = StreamsHarness(READY)
    m = Members(h)
    ready_group(h, m, "m1")
    m.join("m2")
    m.beat("m1")  # m1 is told to give half of its tasks back
    m.beat("m1")  # ... and reports it did
    epoch = m.epochs["m2"]
    lost = h.heartbeat("m2", epoch, owned=TaskSet())
    assert lost.assignment is not None and active(lost.assignment), lost
    assert lost.member_epoch == epoch  # the same epoch: nothing tells m2 it missed them
    again = h.heartbeat("m2", epoch, owned=TaskSet())
    assert again.assignment == lost.assignment
    m.tasks["m2"] = again.assignment
    assert m.beat("m2").assignment is None
    assert active(m.tasks["m1"]) | active(m.tasks["m2"]) == ALL_ACTIVE


def test_a_failed_member_is_fenced_by_its_session_timeout_and_its_tasks_move() -> None:
    h = StreamsHarness(TOPICS)
    m = Members(h)
    ready_group(h, m, "m1", "m2")
    epoch = h.group().group_epoch
    m.forget("m2")  # m2's process dies: it stops heartbeating; m1 goes on
    for _ in range(3):
        h.advance(20_000)
        m.beat("m1")
    assert "m2" not in h.group().members
    assert h.group().group_epoch == epoch + 1
    m.settle()
    assert active(m.tasks["m1"]) == ALL_ACTIVE


def test_a_member_that_never_revokes_is_fenced_by_its_rebalance_timeout() -> None:
    h = StreamsHarness(TOPICS)
    m = Members(h)
    ready_group(h, m, "m1")
    m.join("m2")
    r = h.heartbeat("m1", m.epochs["m1"], owned=m.tasks["m1"])
    epoch = r.member_epoch
    assert TimerKey(StreamsTimer.STREAMS_REVOCATION, "app", "m1", epoch) in h.timers
    h.heartbeat("m1", epoch, owned=m.tasks["m1"])  # still running what it must give back
    h.advance(30_000)
    assert "m1" not in h.group().members


# == topology epochs ============================================================================
def test_rolling_upgrade_topology_epochs() -> None:
    h = StreamsHarness(READY)
    m = Members(h)
    ready_group(h, m, "m1")
    upgraded = Topology(2, wordcount().subtopologies)
    r = h.join("m2", upgraded)
    assert (r.error, r.error_message) == (ErrorCode.invalid_request,
                                          "Topology updates are not supported yet.")
    assert "m2" not in h.group().members
    older = Topology(0, wordcount().subtopologies)
    r = m.join("m3", older)
    assert codes(r) == [StreamsGroupStatus.STALE_TOPOLOGY]
    assert r.status[0].detail == ("The member's topology epoch 0 is behind the group's "
                                  "topology epoch 1.")
    assert h.group().topology == wordcount()
    r = m.beat("m3")
    assert codes(r) == [StreamsGroupStatus.STALE_TOPOLOGY]


# == leaving, shutdown, endpoints ===============================================================
def test_leave_of_the_last_member_empties_the_group() -> None:
    h = StreamsHarness(READY)
    m = Members(h)
    ready_group(h, m, "m1")
    r = h.leave("m1")
    assert r.error == ErrorCode.none
    assert h.group().state() == "Empty"
    assert not [k for k in h.timers if k.group_id == "app"]
    r = h.leave("m1")
    assert r.error == ErrorCode.unknown_member_id


def test_shutdown_application_is_told_to_every_member() -> None:
    h = StreamsHarness(READY)
    m = Members(h)
    ready_group(h, m, "m1", "m2")
    r = h.heartbeat("m1", m.epochs["m1"], owned=m.tasks["m1"], shutdown_application=True)
    assert StreamsGroupStatus.SHUTDOWN_APPLICATION in codes(r)
    r = m.beat("m2")
    assert StreamsGroupStatus.SHUTDOWN_APPLICATION in codes(r)
    assert "m1" in r.status[-1].detail


def test_endpoints_follow_the_assignment() -> None:
    h = StreamsHarness(READY)
    r = h.join("m1", wordcount(), endpoint=Endpoint("host1", 8080))
    # Kafka 4.2 leaves the endpoint epoch out of the answer that creates the group (it
    # sends the endpoints all the same): the member asks again.
    assert r.endpoint_information_epoch == 0 and r.endpoints is not None
    r = h.heartbeat("m1", r.member_epoch, owned=TaskSet())
    assert r.endpoint_information_epoch >= 1 and r.endpoints is not None
    (ep,) = r.endpoints
    assert ep.endpoint == Endpoint("host1", 8080)
    assert dict(ep.active) == {"lines": (0, 1, 2, 3), REPARTITION: (0, 1, 2, 3)}
    r = h.heartbeat("m1", r.member_epoch, endpoint_information_epoch=r.endpoint_information_epoch)
    assert r.endpoints is None


def test_initial_rebalance_delay() -> None:
    h = StreamsHarness(READY, StreamsGroupConfig(initial_rebalance_delay_ms=3_000))
    r1 = h.join("m1", wordcount())
    r2 = h.join("m2", wordcount())
    for r in (r1, r2):
        assert codes(r) == [StreamsGroupStatus.ASSIGNMENT_DELAYED]
        assert r.status[0].detail == ("Assignment delayed due to the configured initial "
                                      "rebalance delay.")
        assert r.member_epoch == 1 and r.assignment == TaskSet()
    assert h.group().state() == "Assigning"
    h.advance(3_000)
    assert h.group().assignment_epoch == h.group().group_epoch
    a = h.heartbeat("m1", 1, owned=TaskSet())
    b = h.heartbeat("m2", 1, owned=TaskSet())
    assert len(active(a.assignment)) + len(active(b.assignment)) == 8


def test_group_configs_override_the_broker_settings() -> None:
    h = StreamsHarness(READY)
    h.shard.set_group_config("app", {"streams.heartbeat.interval.ms": 1234,
                                     "streams.num.standby.replicas": 1})
    m = Members(h)
    r = m.join("m1")
    assert r.heartbeat_interval_ms == 1234
    m.join("m2")
    m.settle()
    standby = sum(len(ps) for t in m.tasks.values() for ps in t.standby.values())
    assert standby == 4  # the stateful subtopology's tasks, on the other process


# == offsets and the rules of "any group" =======================================================
def commit(h: StreamsHarness, member: str, epoch: int, version: int = 9) -> ErrorCode:
    resp = h.request(OffsetCommitRequest(
        group_id="app", member_id=member, epoch=epoch, version=version,
        partitions=(CommitPartition("lines", 0, 10),)))
    return resp.codes[0]


def test_offset_commit_fencing_for_streams_members() -> None:
    h = StreamsHarness(READY)
    m = Members(h)
    ready_group(h, m, "m1")
    epoch = m.epochs["m1"]
    assert commit(h, "m1", epoch) == ErrorCode.none
    assert commit(h, "m1", epoch + 1) == ErrorCode.stale_member_epoch
    assert commit(h, "nobody", epoch) == ErrorCode.unknown_member_id
    assert commit(h, "m1", epoch, version=8) == ErrorCode.unsupported_version
    assert commit(h, "", -1) == ErrorCode.unknown_member_id  # the group has members
    fetched = h.request(OffsetFetchRequest("app", None, member_id="m1", member_epoch=epoch + 1))
    assert fetched.error == ErrorCode.stale_member_epoch
    deleted = h.request(OffsetDeleteRequest("app", (("lines", 0),)))
    assert deleted.codes == (ErrorCode.group_subscribed_to_topic,)
    h.leave("m1")
    assert commit(h, "", -1) == ErrorCode.none  # an admin tool, into the empty group


def test_describe_list_and_delete() -> None:
    h = StreamsHarness(READY)
    m = Members(h)
    ready_group(h, m, "m1")
    d = h.describe()
    assert (d.error, d.group_state, d.topology) == (ErrorCode.none, "Stable", wordcount())
    assert [x.member_id for x in d.members] == ["m1"]
    assert active(d.members[0].assignment) == ALL_ACTIVE
    assert h.describe("nope").error_message == "Group nope not found."
    classic = h.request(DescribeGroupRequest("app", 6))
    assert classic.error == ErrorCode.group_id_not_found
    assert [(g.group_id, g.state, g.group_type) for g in h.shard.list_groups(types=["streams"])
            ] == [("app", "Stable", "streams")]
    assert h.request(DeleteGroupRequest("app")) == ErrorCode.non_empty_group
    h.leave("m1")
    assert h.request(DeleteGroupRequest("app")) == ErrorCode.none
    assert "app" not in h.shard.groups
    assert "app" not in h.replayed_shard().groups


def test_other_types_apis_on_a_streams_id_and_the_reverse() -> None:
    h = StreamsHarness(READY)
    h.join("m1", wordcount())
    r = h.request(ConsumerHeartbeatRequest(
        group_id="app", member_id=consumer_mid("c1"), member_epoch=0, rebalance_timeout_ms=30_000,
        subscribed_topic_names=("lines",), owned=()))
    assert (r.error, r.error_message) == (ErrorCode.group_id_not_found,
                                          "Group app is not a consumer group.")
    h.request(ConsumerHeartbeatRequest(
        group_id="cg", member_id=consumer_mid("c1"), member_epoch=0, rebalance_timeout_ms=30_000,
        subscribed_topic_names=("lines",), owned=()))
    r = h.join("m1", wordcount(), group_id="cg")
    assert (r.error, r.error_message) == (ErrorCode.group_id_not_found,
                                          "Group cg is not a streams group.")
    d = h.describe("cg")
    assert d.error_message == "Group cg is not a streams group."


def test_replay_of_the_records_equals_the_live_state() -> None:
    h = StreamsHarness(TOPICS)
    m = Members(h)
    ready_group(h, m, "m1", "m2")
    m.join("m3")
    m.beat("m1")
    fresh = h.replayed_shard()
    assert fresh.groups["app"].snapshot() == h.group().snapshot()


def test_subtopology_ids_in_owned_tasks_are_checked() -> None:
    h = StreamsHarness(READY)
    r = h.join("m1", wordcount())
    r = h.heartbeat("m1", r.member_epoch, owned=TaskSet.of({"9": [0]}))
    assert (r.error, r.error_message) == (ErrorCode.invalid_request,
                                          "Subtopology 9 does not exist in the topology.")


def test_a_topology_without_state_gets_no_standbys() -> None:
    h = StreamsHarness({"in": 2}, StreamsGroupConfig(initial_rebalance_delay_ms=0,
                                                     num_standby_replicas=1))
    stateless = Topology(1, (Subtopology("0", source_topics=("in",)),))
    m = Members(h)
    m.join("m1", stateless)
    m.join("m2", stateless)
    m.settle()
    assert all(not t.standby for t in m.tasks.values())


def classic_join(h: StreamsHarness, group_id: str = "app", member_id: str = "") -> object:
    return h.request(JoinGroupRequest(
        group_id=group_id, member_id=member_id, protocol_type="consumer",
        protocols=(("range", b""),), session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
        group_instance_id=None, require_known_member_id=False, client_id="classic",
        client_host="/127.0.0.2", token=1))


def test_a_classic_join_replaces_only_an_empty_streams_group() -> None:
    h = StreamsHarness(READY)
    h.join("m1", wordcount())
    r = classic_join(h)
    assert r.error == ErrorCode.inconsistent_group_protocol
    h.leave("m1")
    assert classic_join(h, member_id="someone").error == ErrorCode.unknown_member_id
    classic_join(h)
    assert h.shard.groups["app"].group_type == "classic"
    # The streams group's tombstones were written (the classic group's record comes when
    # its first generation completes).
    assert "app" not in h.replayed_shard().groups


def test_a_streams_join_replaces_an_empty_classic_group() -> None:
    h = StreamsHarness(READY)
    classic_join(h, group_id="old")
    h.advance(0)
    joined = h.answers.get(1) or h.shard.groups["old"]
    member = next(iter(h.shard.groups["old"].members))
    r = h.join("m1", wordcount(), group_id="old")
    assert (r.error, r.error_message) == (ErrorCode.group_id_not_found,
                                          "Group old is not a streams group.")
    h.request(LeaveGroupRequest("old", (LeavingMember(member),)))
    assert h.shard.groups["old"].group_type == "classic" and joined is not None
    r = h.join("m1", wordcount(), group_id="old")
    assert r.error == ErrorCode.none
    assert h.shard.groups["old"].group_type == "streams"
    assert h.replayed_shard().groups["old"].group_type == "streams"


def test_a_failed_append_is_undone_from_the_durable_records() -> None:
    h = StreamsHarness(READY)
    m = Members(h)
    ready_group(h, m, "m1")
    h.shard.committed(h.records)
    before = h.group().snapshot()
    result = h.shard.handle(StreamsHeartbeatRequest(
        group_id="app", member_id="m2", member_epoch=0, rebalance_timeout_ms=30_000,
        topology=wordcount(), owned=TaskSet(), process_id="p2"), h.now)
    assert "m2" in h.group().members
    undo = h.shard.revert("app", result.records, h.now)
    assert undo.rebuilt and h.group().snapshot() == before
    assert {op.key.member_id for op in undo.result.timers} == {"m1"}
