"""GroupMember against a real broker: a group forms, the seed's errors make members rejoin
(and say whether the assignment was revoked or lost), fatal errors stop the member with a
typed exception, an undecodable assignment is reported once, static members keep their place.

Each test runs against coterie and, marked `reference`, against Apache Kafka.
"""

from __future__ import annotations

import asyncio

import pytest

from coterie.client.errors import (
    AssignmentError,
    FencedInstanceIdError,
    InconsistentGroupProtocolError,
    InvalidSessionTimeoutError,
)
from coterie.client.member import MemberState
from coterie.client.protocol import Generation, JoinedMember
from coterie.client.tasks import PROTOCOL_NAME, PROTOCOL_TYPE, TaskDistribution
from tests.integration import member_helpers
from tests.integration.member_helpers import (
    FAST,
    RecordingProtocol,
    Target,
    eventually,
    in_thread,
    member,
    new_group,
    raw_describe,
    raw_impersonate,
    raw_leave,
    run,
    stable_together,
)

group_broker = member_helpers.group_broker


def test_a_group_of_members_forms_with_one_leader_and_per_member_assignments(
        group_broker: Target) -> None:
    group = new_group()

    async def scenario() -> None:
        members = [member(group_broker, group, f"m{i}") for i in range(3)]
        for m in members:
            await m.start()
        generation = await stable_together(members)
        leaders = [m for m in members if m.is_leader]
        assert len(leaders) == 1
        protocols = [m.protocol for m in members]
        assert isinstance(leaders[0].protocol, RecordingProtocol)
        seen = leaders[0].protocol.seen_members[-1]
        assert sorted(j.metadata for j in seen) == [b"m0", b"m1", b"m2"]
        for m, p in zip(members, protocols, strict=True):
            assert isinstance(p, RecordingProtocol)
            assert p.assignments[-1] == b"for:" + p.label.encode()
            assert m.generation is not None and m.generation.generation_id == generation
            assert m.generation.leader_id == leaders[0].member_id
        # One member leaves: the other two rebalance into a generation without it.
        await members[2].close()
        assert members[2].state is MemberState.CLOSED
        later = await stable_together(members[:2], after=generation)
        assert later > generation
        leader = next(m for m in members[:2] if m.is_leader)
        assert isinstance(leader.protocol, RecordingProtocol)
        assert sorted(j.metadata for j in leader.protocol.seen_members[-1]) == [b"m0", b"m1"]
        for m in members[:2]:
            await m.close()

    run(scenario())


def test_rebalance_in_progress_revokes_and_rejoins_with_the_same_member_id(
        group_broker: Target) -> None:
    group = new_group()

    async def scenario() -> None:
        a, b = member(group_broker, group, "a"), member(group_broker, group, "b")
        await a.start()
        await b.start()
        first = await stable_together([a, b])
        ids = (a.member_id, b.member_id)
        c = member(group_broker, group, "c")
        await c.start()
        second = await stable_together([a, b, c], after=first)
        assert second > first
        assert (a.member_id, b.member_id) == ids
        for m in (a, b):
            assert isinstance(m.protocol, RecordingProtocol)
            assert ("revoked", first, m.member_id) in m.protocol.events
            assert "lost" not in m.protocol.kinds()
        for m in (a, b, c):
            await m.close()

    run(scenario())


def test_unknown_member_id_loses_the_assignment_and_joins_as_a_new_member(
        group_broker: Target) -> None:
    group = new_group()

    async def scenario() -> None:
        a, b = member(group_broker, group, "a"), member(group_broker, group, "b")
        await a.start()
        await b.start()
        first = await stable_together([a, b])
        old_id = a.member_id
        assert await in_thread(raw_leave, group_broker, group, old_id) == 0
        await eventually(lambda: a.member_id not in ("", old_id) and a.generation_id > first,
                         "a to rejoin under a new member id")
        assert isinstance(a.protocol, RecordingProtocol)
        assert ("lost", first, old_id) in a.protocol.events
        assert ("revoked", first, old_id) not in a.protocol.events
        await stable_together([a, b], after=first)
        await a.close()
        await b.close()

    run(scenario())


def test_illegal_generation_loses_the_assignment_and_rejoins_with_the_same_id(
        group_broker: Target) -> None:
    """The group moves on without `a` (a raw client rejoins in its name), so a's next
    heartbeat names a generation that is over."""
    group = new_group()

    async def scenario() -> None:
        b = member(group_broker, group, "b")
        await b.start()
        await b.wait_stable(30)
        # A slow heartbeat, so that the group can move on between two of a's heartbeats.
        a = member(group_broker, group, "a", heartbeat_interval_ms=4000)
        await a.start()
        first = await stable_together([a, b])
        a_id = a.member_id
        lease = a.lease_deadline
        await eventually(lambda: a.lease_deadline != lease, "a's next heartbeat", 10)
        code, moved_to = await in_thread(raw_impersonate, group_broker, group, a_id,
                                         "coterie-test", [("v1", b"impostor")])
        assert code == 0 and moved_to > first
        assert isinstance(a.protocol, RecordingProtocol)
        await eventually(lambda: ("lost", first, a_id) in a.protocol.events,
                         "a to notice ILLEGAL_GENERATION", 10)
        assert ("revoked", first, a_id) not in a.protocol.events
        final = await stable_together([a, b], after=moved_to)
        assert final > moved_to and a.member_id == a_id
        await a.close()
        await b.close()

    run(scenario())


def test_request_rejoin_sends_new_metadata_in_a_new_generation(group_broker: Target) -> None:
    group = new_group()

    async def scenario() -> None:
        proto = RecordingProtocol("x", protocols=[("v1", b"before")])
        leader = member(group_broker, group, "x", protocol=proto)
        await leader.start()
        first = (await leader.wait_stable(30)).generation_id
        proto.protocols = [("v1", b"after")]
        leader.request_rejoin("metadata changed")
        await eventually(lambda: leader.generation_id > first, "a new generation")
        assert proto.seen_members[-1][0].metadata == b"after"
        assert ("revoked", first, leader.member_id) in proto.events
        await leader.close()

    run(scenario())


def test_joining_with_another_protocol_type_fails_with_a_typed_error(
        group_broker: Target) -> None:
    group = new_group()

    async def scenario() -> None:
        alpha = member(group_broker, group, "alpha",
                       protocol=RecordingProtocol("alpha", protocol_type="alpha"))
        await alpha.start()
        generation = (await alpha.wait_stable(30)).generation_id
        beta = member(group_broker, group, "beta",
                      protocol=RecordingProtocol("beta", protocol_type="beta"))
        with pytest.raises(InconsistentGroupProtocolError) as info:
            async with beta:
                await beta.wait_stable(30)
        assert info.value.error_code == 23
        assert beta.state is MemberState.FAILED and beta.error is info.value
        await asyncio.sleep(1.5)
        assert alpha.generation_id == generation  # the existing group was not disturbed
        await alpha.close()

    run(scenario())


def test_a_session_timeout_the_broker_refuses_is_a_typed_error(group_broker: Target) -> None:
    async def scenario() -> None:
        m = member(group_broker, new_group(), "short", session_timeout_ms=1000,
                   heartbeat_interval_ms=100, lease_margin_ms=100)
        await m.start()
        with pytest.raises(InvalidSessionTimeoutError):
            await m.wait_stable(30)
        with pytest.raises(InvalidSessionTimeoutError):
            await m.wait_closed()
        await m.close()

    run(scenario())


def test_a_second_process_with_the_same_instance_id_fences_the_first(
        group_broker: Target) -> None:
    group = new_group()

    async def scenario() -> None:
        first = member(group_broker, group, "s1", group_instance_id="worker-1")
        await first.start()
        generation = (await first.wait_stable(30)).generation_id
        second = member(group_broker, group, "s2", group_instance_id="worker-1")
        await second.start()
        await second.wait_stable(30)
        with pytest.raises(FencedInstanceIdError):
            await asyncio.wait_for(first.wait_closed(), 15)
        assert first.state is MemberState.FAILED
        assert isinstance(first.protocol, RecordingProtocol)
        assert ("lost", generation, first.member_id) in first.protocol.events
        assert second.state is MemberState.STABLE
        await first.close()
        await second.close()

    run(scenario())


def test_an_undecodable_assignment_is_reported_once_not_retried_in_a_loop(
        group_broker: Target) -> None:
    """The leader hands a worker bytes that are not a task assignment: the worker stops with
    AssignmentError and leaves; the group settles without it and stays settled."""
    group = new_group()

    def garbage_for_others(generation: Generation,
                           members: list[JoinedMember]) -> dict[str, bytes]:
        return {m.member_id: b'{"version": 1, "tasks": []}' if m.member_id ==
                generation.member_id else b"\xff\x00 not json" for m in members}

    async def scenario() -> None:
        rogue = RecordingProtocol("rogue", protocol_type=PROTOCOL_TYPE,
                                  protocols=[(PROTOCOL_NAME, b'{"version": 1}')],
                                  assign_with=garbage_for_others)
        leader = member(group_broker, group, "rogue", protocol=rogue)
        await leader.start()
        await leader.wait_stable(30)
        worker = TaskDistribution(group_broker.bootstrap, group, ["t1"], client_id="victim",
                                  **FAST)
        with pytest.raises(AssignmentError) as info:
            async with worker:
                await worker.wait_closed()
        assert isinstance(info.value.__cause__, ValueError)
        assert worker.member.state is MemberState.FAILED
        assert worker.member.rebalances == 1  # one assignment seen, no retry loop
        # The leader goes on alone and stays put: nobody keeps rejoining.
        await eventually(lambda: len(rogue.seen_members[-1]) == 1 and
                         leader.state is MemberState.STABLE, "the group to settle", 20)
        settled = leader.generation_id
        await asyncio.sleep(2.5)
        assert leader.generation_id == settled
        await leader.close()

    run(scenario())


def test_a_static_member_closes_without_leaving_and_takes_its_place_back(
        group_broker: Target) -> None:
    group = new_group()

    async def scenario() -> None:
        other = member(group_broker, group, "dynamic")
        await other.start()
        await other.wait_stable(30)
        static = member(group_broker, group, "static", group_instance_id="static-1")
        await static.start()
        generation = await stable_together([other, static])
        assert isinstance(static.protocol, RecordingProtocol)
        assignment = static.protocol.assignments[-1]
        await static.close()  # no LeaveGroup: the coordinator keeps the member
        await asyncio.sleep(1.5)
        assert other.generation_id == generation
        described = await in_thread(raw_describe, group_broker, group)
        assert sorted(m.group_instance_id or "" for m in described.members) == ["", "static-1"]
        again = member(group_broker, group, "static", group_instance_id="static-1")
        await again.start()
        await again.wait_stable(30)
        assert again.generation_id == generation == other.generation_id  # no rebalance
        assert isinstance(again.protocol, RecordingProtocol)
        assert again.protocol.assignments[-1] == assignment
        await again.close(leave=True)
        await other.close()

    run(scenario())


def test_closing_during_a_parked_join_leaves_at_once(coterie_factory) -> None:
    """With the initial rebalance delay the first JoinGroup parks; close() must not wait for
    it, and the LeaveGroup it sends (on a fresh connection) removes the member."""
    broker = coterie_factory(config={"group.initial.rebalance.delay.ms": "5000"})
    target = Target("coterie", broker.host, broker.port, broker)
    group = new_group()

    async def scenario() -> None:
        m = member(target, group, "impatient")
        await m.start()
        await eventually(lambda: m.member_id != "", "the member id (MEMBER_ID_REQUIRED)", 10)
        await asyncio.sleep(0.5)
        assert m.state is MemberState.JOINING
        start = asyncio.get_running_loop().time()
        await m.close()
        assert asyncio.get_running_loop().time() - start < 2.0
        assert m.state is MemberState.CLOSED and m.error is None
        described = await in_thread(raw_describe, target, group)
        assert list(described.members) == []
        assert isinstance(m.protocol, RecordingProtocol) and m.protocol.events == []

    run(scenario())
