"""Properties of consumer groups under random interleavings, with simulated clients.

Clients join (dynamic, or static with an instance id), heartbeat, lose answers, acknowledge
revocations late, change subscriptions (names or a regex), leave (for good, or for a while
if static), go silent (crash), while time passes and topics grow, appear and disappear.

(1) Safety: no partition is ever owned by two members at once. A client owns what the
    coordinator told it it may use and it has not released yet; a member the coordinator
    removed (session or revocation timeout) owns nothing any more. Checked after every step,
    together with: a client owns only partitions its member holds in the coordinator's view,
    and no two members hold the same partition there.
    Liveness: once the operations stop and every remaining client keeps heartbeating (and
    acknowledges revocations), the group reaches its target: group epoch = target epoch,
    every member STABLE at it, every client owning exactly its target.
(2) Replaying the records written (after a round trip through the byte codec) rebuilds the
    live groups exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from coterie.group.consumer.group import ConsumerGroupState
from coterie.group.consumer.groups import ConsumerGroups
from coterie.group.consumer.messages import ConsumerHeartbeatRequest, TopicPartitions
from coterie.group.records import consumer_codec as codec
from coterie.group.records.consumer import Partitions

from .consumer_harness import ConsumerHarness, mid

DYNAMIC = 4
STATIC = 2
# (topic names, regex): both are always sent together, "" meaning no regex.
SUBSCRIPTIONS = [(("foo",), ""), (("foo", "bar"), ""), ((), "ba.*|foo"), (("bar",), "")]


@dataclass
class Client:
    index: int
    instance_id: str | None
    incarnation: int = 0
    member_id: str = ""
    joined: bool = False  # has a member (as far as it knows)
    silent: bool = False  # crashed: sends nothing more
    epoch: int = 0
    owned: set = field(default_factory=set)
    revoking: set = field(default_factory=set)
    report_owned: bool = True
    needs_full: bool = True
    subscription: tuple = SUBSCRIPTIONS[0]
    new_subscription: bool = False


class World:
    def __init__(self) -> None:
        self.h = ConsumerHarness({"foo": 3, "bar": 2})
        self.topics = {"foo": 3, "bar": 2}
        self.clients = [Client(i, None) for i in range(DYNAMIC)] + [
            Client(DYNAMIC + i, f"i{i}") for i in range(STATIC)]

    # -- client actions ---------------------------------------------------------------------
    def new_incarnation(self, c: Client) -> None:
        c.incarnation += 1
        c.member_id = mid(f"c{c.index}x{c.incarnation}")
        c.silent = False
        c.joined, c.epoch, c.owned, c.revoking = False, 0, set(), set()
        c.needs_full = True

    def request(self, c: Client, epoch: int | None = None) -> ConsumerHeartbeatRequest:
        epoch = c.epoch if epoch is None else epoch
        full = c.needs_full or epoch == 0
        names, regex = (c.subscription if (full or c.new_subscription) else (None, None))
        owned = None
        if full or c.report_owned:
            owned = () if epoch == 0 else self.wire(c.owned)
        return ConsumerHeartbeatRequest(
            group_id="g", member_id=c.member_id, member_epoch=epoch,
            instance_id=c.instance_id if full else None,
            rebalance_timeout_ms=10_000 if full else -1,
            subscribed_topic_names=names, subscribed_topic_regex=regex, owned=owned)

    def wire(self, owned: set) -> tuple[TopicPartitions, ...]:
        by_topic: dict = {}
        for t, p in owned:
            by_topic.setdefault(t, []).append(p)
        return tuple(TopicPartitions(t, tuple(sorted(ps))) for t, ps in by_topic.items())

    def heartbeat(self, c: Client, lost: bool = False) -> None:
        if c.silent:
            return
        if not c.joined:
            if c.member_id == "":
                self.new_incarnation(c)
            req = self.request(c, epoch=0)
        else:
            req = self.request(c)
        resp = self.h.request(req)
        if lost:
            c.needs_full = True
            return
        if resp.error == ErrorCode.none:
            c.joined, c.epoch, c.needs_full = True, resp.member_epoch, False
            c.new_subscription = False
            if req.owned is not None:
                c.report_owned = False
            if resp.assignment is not None:
                given = {(t.topic_id, p) for t in resp.assignment for p in t.partitions}
                c.owned |= given  # the coordinator only gives partitions nobody holds
                c.revoking = c.owned - given
            return
        if resp.error in (ErrorCode.unknown_member_id, ErrorCode.fenced_member_epoch):
            c.joined, c.epoch, c.owned, c.revoking = False, 0, set(), set()
            c.needs_full = True
            return
        if resp.error == ErrorCode.unreleased_instance_id:
            return  # the previous incarnation is still there: try again later
        if resp.error == ErrorCode.fenced_instance_id:
            c.silent, c.joined, c.owned, c.revoking = True, False, set(), set()
            return
        raise AssertionError(f"unexpected {resp}")

    def ack(self, c: Client) -> None:
        if c.revoking:
            c.owned -= c.revoking
            c.revoking = set()
            c.report_owned = True

    def leave(self, c: Client, temporary: bool) -> None:
        if c.silent or not c.joined:
            return
        c.owned, c.revoking = set(), set()  # a leaving consumer stops using everything first
        epoch = -2 if temporary and c.instance_id else -1
        self.h.request(ConsumerHeartbeatRequest("g", c.member_id, epoch,
                                                instance_id=c.instance_id))
        c.joined = False
        c.member_id = ""  # a later join is a new process (new member id)

    def crash(self, c: Client) -> None:
        if c.joined:
            c.silent = True

    def restart(self, c: Client) -> None:
        """A crashed process is replaced by a new one."""
        if c.silent:
            c.silent, c.joined, c.member_id = False, False, ""
            c.owned, c.revoking = set(), set()

    def resubscribe(self, c: Client, choice: int) -> None:
        c.subscription = SUBSCRIPTIONS[choice]
        c.new_subscription = True

    # -- the world --------------------------------------------------------------------------
    def change_topics(self, change: int) -> None:
        topics = dict(self.topics)
        recreate = []
        if change == 0:
            topics["foo"] += 1
        elif change == 1:
            topics["baz"] = topics.get("baz", 0) + 2
        elif change == 2:
            topics.pop("baz", None)
        else:
            recreate = ["bar"]
        self.topics = topics
        self.h.set_topics(topics, recreate=recreate)

    def after_step(self) -> None:
        """Members the coordinator removed own nothing; then check the invariants."""
        group = self.h.coordinator.groups.get("g")
        members = group.members if group else {}
        for c in self.clients:
            if c.member_id and c.member_id not in members and (c.joined or c.silent):
                c.owned, c.revoking = set(), set()
        check_safety(self)


def check_safety(w: World) -> None:
    group = w.h.coordinator.groups.get("g")
    members = group.members if group else {}
    held: dict = {}
    for m in members.values():
        for tp in m.holds():
            assert tp not in held, f"{tp} held by {held[tp]} and {m.member_id}"
            held[tp] = m.member_id
        for tp in m.holds():
            assert group.partition_epochs[tp] == m.member_epoch
    if group is not None:
        assert len(group.partition_epochs) == len(held)
    owner: dict = {}
    for c in w.clients:
        for tp in c.owned:
            assert tp not in owner, f"{tp} owned by clients {owner[tp]} and {c.index}"
            owner[tp] = c.index
        if c.owned:
            member = members.get(c.member_id)
            assert member is not None, f"client {c.index} owns partitions but is no member"
            assert c.owned <= member.holds()


def check_replay(w: World) -> None:
    fresh = ConsumerGroups(w.h.config, lambda: "unused")
    for record in w.h.records:
        fresh.replay(codec.decode(*codec.encode(record)))
    assert set(fresh.groups) == set(w.h.coordinator.groups)
    for gid, group in w.h.coordinator.groups.items():
        assert fresh.groups[gid].snapshot() == group.snapshot()


def converge(w: World) -> None:
    """Everyone still running heartbeats every second, acknowledging at once."""
    for _ in range(120):
        w.h.advance(1_000)
        w.after_step()
        for c in w.clients:
            if not c.silent and (c.joined or c.member_id):
                w.ack(c)
                w.heartbeat(c)
                w.after_step()
        if converged(w):
            check_target_complete(w)
            return
    raise AssertionError("the group did not converge")


def check_target_complete(w: World) -> None:
    """At rest, every partition of every subscribed topic is someone's target."""
    group = w.h.coordinator.groups.get("g")
    if group is None or not group.members:
        return
    image = w.h.coordinator.image
    wanted = set()
    for m in group.members.values():
        for name in group.subscription_of(m):
            info = image.by_name.get(name)
            if info is not None:
                wanted |= {(info.topic_id, p) for p in range(info.partitions)}
    assert set().union(*group.targets.values()) == wanted


def converged(w: World) -> bool:
    group = w.h.coordinator.groups.get("g")
    if group is None:
        return True
    live = [c for c in w.clients if c.joined and not c.silent]
    if set(group.members) != {c.member_id for c in live}:
        return False  # silent members not expired yet, or clients still joining
    if group.state() not in (ConsumerGroupState.STABLE, ConsumerGroupState.EMPTY):
        return False
    for c in live:
        member = group.members[c.member_id]
        target: Partitions = group.target_of(c.member_id)
        if not member.is_reconciled_to(group.assignment_epoch) or member.assigned != target:
            return False
        if c.owned != set(target) or c.revoking:
            return False
    return group.group_epoch == group.assignment_epoch or not group.members


client_index = st.integers(0, DYNAMIC + STATIC - 1)
heartbeat = st.tuples(st.just("heartbeat"), client_index, st.booleans() | st.just(False))
ack = st.tuples(st.just("ack"), client_index, st.none())
small_step = st.tuples(st.just("advance"), st.sampled_from([1_000, 5_000, 12_000]), st.none())
# A round: every running client heartbeats (or joins) once, in a random order; bit i of `lost` loses
# client i's answer, bit i of `acks` makes it acknowledge its revocations first.
masks = st.integers(0, 2 ** (DYNAMIC + STATIC) - 1)
round_ = st.tuples(st.just("round"), st.tuples(masks, masks), st.permutations(
    range(DYNAMIC + STATIC)))
# Heartbeats dominate, as in a real group; disruptions are rarer.
ops = st.lists(st.one_of(
    round_, round_, round_, round_, heartbeat, heartbeat, heartbeat, heartbeat,
    ack, ack, small_step, small_step,
    st.tuples(st.just("leave"), client_index, st.booleans()),
    st.tuples(st.just("crash"), client_index, st.none()),
    st.tuples(st.just("restart"), client_index, st.none()),
    st.tuples(st.just("resubscribe"), client_index, st.integers(0, len(SUBSCRIPTIONS) - 1)),
    st.tuples(st.just("advance"), st.just(46_000), st.none()),
    st.tuples(st.just("topics"), st.integers(0, 3), st.none()),
), min_size=40, max_size=120)


def run(sequence) -> World:
    w = World()
    for op, arg, extra in sequence:
        c = w.clients[arg] if op not in ("advance", "topics", "round") else None
        if op == "round":
            lost, acks = arg
            for i in extra:
                client = w.clients[i]
                if client.silent:
                    continue
                if acks >> i & 1:
                    w.ack(client)
                w.heartbeat(client, lost=bool(lost >> i & 1))
                w.after_step()
        elif op == "heartbeat":
            w.heartbeat(c, lost=extra)
        elif op == "ack":
            w.ack(c)
        elif op == "leave":
            w.leave(c, temporary=extra)
        elif op == "crash":
            w.crash(c)
        elif op == "restart":
            w.restart(c)
        elif op == "resubscribe":
            w.resubscribe(c, extra)
        elif op == "advance":
            w.h.advance(arg)
        elif op == "topics":
            w.change_topics(arg)
        w.after_step()
    return w


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_no_partition_owned_twice_and_the_group_converges(sequence):
    w = run(sequence)
    converge(w)
    check_safety(w)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_replay_equals_live(sequence):
    w = World()
    for prefix_end in range(0, len(sequence) + 1, 10):
        # Replay at several points, not only at the end.
        w = run(sequence[:prefix_end])
        check_replay(w)
    w = run(sequence)
    converge(w)
    check_replay(w)
