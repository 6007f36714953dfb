"""Properties of consumer groups assigned by a client-side assignor, under random
interleavings: members (most asking for "client:odd", some for no assignor) join, heartbeat,
leave, the chosen member prepares and installs valid, invalid or failed assignments (or some
other member tries to), time passes (rounds time out) and topics grow.

(1) Safety: no partition is ever owned by two clients at once, whatever was installed.
(2) Liveness: once the operations stop and everyone keeps heartbeating, the group reaches a
    complete target (every partition of every subscribed topic exactly once, only to a
    subscriber) and every client owns exactly its target.
(3) Replaying the records written (through the byte codec) rebuilds the live group.
"""

from __future__ import annotations

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from coterie.group.consumer.client_assignment import (
    InstallAssignmentRequest,
    InstalledMember,
    PrepareAssignmentRequest,
)
from coterie.group.consumer.group import ConsumerGroupState
from coterie.group.consumer.groups import ConsumerGroups
from coterie.group.consumer.kinds import ConsumerTimer
from coterie.group.consumer.messages import TopicPartitions
from coterie.group.records import consumer_codec as codec

from .consumer_harness import ConsumerHarness, mid

POOL = [mid(f"M{i}") for i in range(4)]
SUBSCRIPTIONS = [("foo",), ("foo", "bar")]
CLIENT = "client:odd"


class World:
    def __init__(self) -> None:
        self.h = ConsumerHarness({"foo": 3, "bar": 2})
        self.epochs: dict[str, int] = {}
        self.owned: dict[str, set[str]] = {}
        self.topics = {"foo": 3, "bar": 2}

    # -- the clients ------------------------------------------------------------------------
    def join(self, member_id: str, subscription: tuple[str, ...], client: bool) -> None:
        if member_id in self.epochs:
            return
        r = self.h.join(member_id, topics=subscription, assignor=CLIENT if client else None)
        assert r.error == ErrorCode.none, r.error_message
        self.epochs[member_id] = r.member_epoch
        self.owned[member_id] = self.h.assigned(r) or set()

    def beat(self, member_id: str) -> None:
        if member_id not in self.epochs:
            return
        r = self.h.heartbeat(member_id, self.epochs[member_id],
                             owned=sorted(self.owned[member_id]))
        if r.error in (ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id):
            del self.epochs[member_id], self.owned[member_id]  # lost; it may join again
            return
        assert r.error == ErrorCode.none, r.error_message
        self.epochs[member_id] = r.member_epoch
        if r.assignment is not None:
            self.owned[member_id] = self.h.assigned(r)

    def leave(self, member_id: str) -> None:
        if member_id in self.epochs:
            self.h.leave(member_id)
            del self.epochs[member_id], self.owned[member_id]

    # -- the chosen member's round ------------------------------------------------------------
    def install(self, kind: str, data: st.DataObject) -> None:
        """A member's round, as a client runs it right after a heartbeat."""
        group = self.h.coordinator.groups.get("g")
        pending = self.h.coordinator.client_rounds.get("g")
        if group is not None and pending is not None and pending.group_epoch != group.group_epoch:
            self.beat(pending.member_id)  # the heartbeat opens the round for the new epoch
            pending = self.h.coordinator.client_rounds.get("g")
        if pending is None or group is None or pending.member_id not in group.members:
            return
        chosen = pending.member_id
        epoch = group.members[chosen].member_epoch
        p = self.h.apply(self.h.coordinator.prepare_assignment(
            PrepareAssignmentRequest("g", chosen, epoch), self.h.now))
        if p.error != ErrorCode.none:
            return
        names = {t.topic_id: t for t in p.topics}
        out: dict[str, dict] = {m.member_id: {} for m in p.members}
        for topic_id, t in names.items():
            subs = [m.member_id for m in p.members if topic_id in m.subscribed_topic_ids]
            for part in range(t.partitions):
                owner = data.draw(st.sampled_from(subs))
                out[owner].setdefault(topic_id, []).append(part)
        if kind == "invalid" and p.members:
            victim = data.draw(st.sampled_from(sorted(out)))
            extra = data.draw(st.sampled_from(sorted(names)))
            out[victim].setdefault(extra, []).append(names[extra].partitions)  # out of range
        members = tuple(InstalledMember(m, tuple(TopicPartitions(t, tuple(ps))
                                                 for t, ps in parts.items()))
                        for m, parts in out.items())
        installer = chosen if kind != "wrong member" else data.draw(st.sampled_from(POOL))
        installer_epoch = (group.members[installer].member_epoch
                           if installer in group.members else 1)
        r = self.h.apply(self.h.coordinator.install_assignment(InstallAssignmentRequest(
            "g", installer, installer_epoch, p.group_epoch, 1 if kind == "error" else 0,
            members), self.h.now))
        if installer == chosen and kind in ("valid", "error"):
            assert r.error == ErrorCode.none, r.error_message
        if installer == chosen and kind == "invalid":
            assert r.error == ErrorCode.invalid_request
        if installer != chosen:
            assert r.error != ErrorCode.none
        event(f"install: {kind}" + ("" if installer == chosen else " (refused)"))
        if installer == chosen:
            assert self.h.coordinator.client_rounds.get("g") is None
            assert group.assignment_epoch == group.group_epoch

    # -- checks -------------------------------------------------------------------------------
    def check_safety(self) -> None:
        seen: dict[str, str] = {}
        for member_id, parts in self.owned.items():
            for tp in parts:
                assert tp not in seen, f"{tp} owned by {seen[tp]} and {member_id}"
                seen[tp] = member_id

    def check_replay(self) -> None:
        fresh = ConsumerGroups(self.h.config, lambda: "unused")
        for record in self.h.records:
            fresh.replay(codec.decode(*codec.encode(record)))
        assert set(fresh.groups) == set(self.h.coordinator.groups)
        for gid, group in self.h.coordinator.groups.items():
            assert fresh.groups[gid].snapshot() == group.snapshot()

    def converge(self) -> None:
        group = self.h.coordinator.groups.get("g")
        for _ in range(40):
            self.h.advance(1_000)
            for member_id in sorted(self.epochs):
                self.beat(member_id)
                self.check_safety()
            if group is None or not group.members:
                return
            if group.state() is ConsumerGroupState.STABLE and all(
                    self.owned[m] == self.h.names(group.target_of(m)) for m in self.epochs):
                self.check_target_complete()
                return
        raise AssertionError(f"no convergence: {group.state()}")

    def check_target_complete(self) -> None:
        group = self.h.coordinator.groups["g"]
        image = self.h.coordinator.image
        given_to: dict = {}
        for member_id, m in group.members.items():
            for tp in group.target_of(member_id):
                assert tp not in given_to, f"{tp} in two targets"
                assert image.by_id[tp[0]] in group.subscription_of(m)
                given_to[tp] = member_id
        wanted = {(image.by_name[n].topic_id, p) for n in group.subscribed_topics()
                  if n in image.by_name for p in range(image.by_name[n].partitions)}
        assert set(given_to) == wanted


OPS = st.one_of(
    st.tuples(st.just("join"), st.sampled_from(POOL), st.sampled_from(SUBSCRIPTIONS),
              st.sampled_from([True, True, True, False])),
    st.tuples(st.just("beat"), st.sampled_from(POOL)),
    st.tuples(st.just("beat"), st.sampled_from(POOL)),
    st.tuples(st.just("leave"), st.sampled_from(POOL)),
    st.tuples(st.just("install"),
              st.sampled_from(["valid", "valid", "invalid", "error", "wrong member"])),
    st.tuples(st.just("install"), st.just("valid")),
    st.tuples(st.just("advance"), st.integers(100, 6_000)),
    st.tuples(st.just("grow"), st.sampled_from(["foo", "bar"])),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(OPS, min_size=1, max_size=40), data=st.data())
def test_client_assigned_groups_are_safe_live_and_replayable(ops, data):
    w = World()
    w.join(POOL[0], SUBSCRIPTIONS[0], True)  # the bootstrap target: everything to M0
    w.join(POOL[1], SUBSCRIPTIONS[1], True)  # group epoch 2: the first round is open
    for op in ops:
        match op:
            case ("join", member_id, subscription, client):
                w.join(member_id, subscription, client)
            case ("beat", member_id):
                w.beat(member_id)
            case ("leave", member_id):
                w.leave(member_id)
            case ("install", kind):
                w.install(kind, data)
            case ("advance", ms):
                fired = w.h.advance(ms)
                if any(key.kind is ConsumerTimer.CONSUMER_CLIENT_ASSIGNMENT for key in fired):
                    event("a round timed out")
            case ("grow", topic):
                w.topics[topic] += 1
                w.h.set_topics(dict(w.topics))
        w.check_safety()
    w.converge()
    w.check_replay()
