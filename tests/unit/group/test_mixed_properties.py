"""Properties of mixed groups under random interleavings: consumer-protocol clients and
classic clients (JoinGroup / SyncGroup / Heartbeat / LeaveGroup, eager or cooperative) share
one group id, so the group is upgraded, runs mixed and is downgraded as they come and go.

Simulated clients behave as their protocol says. A consumer-protocol client owns what the
coordinator told it it may use and has not released. A classic client owns what its last
SyncGroup gave it; an eager one drops everything before it rejoins, a cooperative one keeps
its partitions, lists them in its subscription, and drops what a SyncGroup leaves out (then
rejoins). In a classic group the JoinGroup leader assigns with coterie's classic leader step
(range for eager clients, cooperative-sticky for cooperative ones). Clients also lose
answers (consumer protocol), leave, crash and restart (a static classic client comes back
under its instance id), while time passes and a topic grows (a classic group's leader
rejoins when it sees that).

(1) Safety, after every step: no partition is owned by two clients, whatever their protocols
    and whatever the group's type. While the group is a consumer group, every client owns
    only partitions its member holds in the coordinator's view, and no two members hold the
    same partition. (A member the coordinator removed owns nothing any more, as in the
    consumer-group property.)
    Liveness: once the operations stop and the running clients keep going, the group comes
    to rest: a consumer group at its target with every client owning exactly its target,
    or a Stable classic group whose members own their assignments, every partition once.
(2) Replaying every record written (through the bytes) rebuilds the consumer groups exactly
    and every classic group at rest in a persisted state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from coterie.assign.classic_leader import JoinedMember, lead
from coterie.assign.registry import lookup
from coterie.group.classic.config import ClassicConfig
from coterie.group.classic.membership import ClassicState
from coterie.group.classic.messages import JoinGroupResponse, LeavingMember, SyncGroupResponse
from coterie.group.consumer.config import ConsumerGroupConfig
from coterie.group.consumer.group import ConsumerGroupState
from coterie.group.consumer.messages import ConsumerHeartbeatRequest
from coterie.wire.consumer_protocol import decode_assignment

from .consumer_harness import mid
from .mixed_harness import MixedHarness

CONSUMERS = 3
CLASSICS = 3  # the last one is static
TOPICS = ("foo", "bar")
E = ErrorCode


@dataclass
class ConsumerClient:
    index: int
    running: bool = False  # a process is up (started, not left or crashed)
    incarnation: int = 0
    member_id: str = ""
    joined: bool = False
    silent: bool = False
    epoch: int = 0
    owned: set = field(default_factory=set)  # (topic id, partition)
    revoking: set = field(default_factory=set)
    report_owned: bool = True
    needs_full: bool = True


@dataclass
class ClassicClient:
    index: int
    instance_id: str | None
    running: bool = False
    member_id: str = ""
    generation: int = -1
    phase: str = "idle"  # idle, joining, joined, syncing, stable
    token: Any = None
    assignments: dict | None = None  # the leader's, to send with its SyncGroup
    owned: set = field(default_factory=set)  # partition names, "foo-1"
    rejoin: bool = False
    silent: bool = False


class World:
    def __init__(self, cooperative: bool) -> None:
        self.h = MixedHarness(
            {"foo": 3, "bar": 2},
            config=ConsumerGroupConfig(),
            classic_config=ClassicConfig(initial_rebalance_delay_ms=0))
        self.topics = {"foo": 3, "bar": 2}
        self.cooperative = cooperative
        self.protocol = "cooperative-sticky" if cooperative else "range"
        self.consumers = [ConsumerClient(i) for i in range(CONSUMERS)]
        self.classics = [ClassicClient(CONSUMERS + i, f"s{i}" if i == CLASSICS - 1 else None)
                         for i in range(CLASSICS)]
        # The generation of a classic group whose assignment missed partitions when its leader
        # was quietly replaced by a restarted static instance (see on_join), if any.
        self.stranded_generation: int | None = None

    def client(self, i: int) -> ConsumerClient | ClassicClient:
        return self.consumers[i] if i < CONSUMERS else self.classics[i - CONSUMERS]

    # -- consumer-protocol clients ----------------------------------------------------------
    def heartbeat(self, c: ConsumerClient, lost: bool = False) -> None:
        if c.silent:
            return
        if not c.joined:
            if not c.member_id:
                c.incarnation += 1
                c.member_id = mid(f"k{c.index}x{c.incarnation}")
                c.needs_full = True
            epoch = 0
        else:
            epoch = c.epoch
        full = c.needs_full or epoch == 0
        owned = None
        if full or c.report_owned:
            owned = () if epoch == 0 else self.h.wire(self.h.names(c.owned))
        resp = self.h.request(ConsumerHeartbeatRequest(
            group_id="g", member_id=c.member_id, member_epoch=epoch,
            rebalance_timeout_ms=10_000 if full else -1,
            subscribed_topic_names=TOPICS if full else None, owned=owned))
        if lost:
            c.needs_full = True
            return
        if resp.error == E.none:
            c.joined, c.epoch, c.needs_full = True, resp.member_epoch, False
            if owned is not None:
                c.report_owned = False
            if resp.assignment is not None:
                given = {(t.topic_id, p) for t in resp.assignment for p in t.partitions}
                c.owned |= given
                c.revoking = c.owned - given
            return
        if resp.error == E.coordinator_not_available:  # not persisted: try again, in full
            c.needs_full = True
            return
        if resp.error in (E.unknown_member_id, E.fenced_member_epoch, E.group_id_not_found):
            c.joined, c.epoch, c.owned, c.revoking = False, 0, set(), set()
            c.needs_full = True
            return
        raise AssertionError(f"unexpected {resp}")

    def ack(self, c: ConsumerClient) -> None:
        if c.revoking:
            c.owned -= c.revoking
            c.revoking = set()
            c.report_owned = True

    # -- classic clients --------------------------------------------------------------------
    def step(self, c: ClassicClient) -> None:
        """One move of a classic client: collect a parked answer, or heartbeat, or rejoin."""
        if c.silent:
            return
        h = self.h
        if c.phase == "joining":
            answer = h.answers.get(c.token)
            if answer is not None:
                self.on_join(c, answer)
            return
        if c.phase == "joined":
            self.send_sync(c)
            return
        if c.phase == "syncing":
            answer = h.answers.get(c.token)
            if answer is not None:
                self.on_sync(c, answer)
            return
        if c.phase == "stable" and not c.rejoin:
            code = h.cheartbeat(c.member_id, c.generation, instance_id=c.instance_id)
            if code == E.rebalance_in_progress:
                c.rejoin = True
            elif code != E.none:
                self.lost(c, code)
            return
        self.send_join(c)

    def send_join(self, c: ClassicClient) -> None:
        if not self.cooperative:
            c.owned = set()  # eager: everything is revoked before rejoining
        c.rejoin = False
        c.phase = "joining"
        c.token = self.h.cjoin(c.member_id, topics=TOPICS, owned=sorted(c.owned),
                               protocol=self.protocol, instance_id=c.instance_id,
                               session_ms=15_000, rebalance_ms=10_000, version=2)
        answer = self.h.answers.get(c.token)
        if answer is not None:
            self.on_join(c, answer)

    def on_join(self, c: ClassicClient, answer: JoinGroupResponse) -> None:
        h = self.h
        if answer.error == E.member_id_required:
            c.member_id = answer.member_id
            self.send_join(c)
            return
        if answer.error == E.rebalance_in_progress:
            c.phase, c.rejoin = "stable", True  # rejoin at the next step
            return
        if answer.error != E.none:
            self.lost(c, answer.error)
            return
        c.member_id, c.generation = answer.member_id, answer.generation_id
        if answer.leader == answer.member_id and not answer.members:
            self.note_stranded(answer.generation_id)
        assignments = None
        if answer.members:  # the leader of a classic group's generation
            self.stranded_generation = None  # a fresh assignment, made with today's metadata
            counts = {n: i.partitions for n, i in h.coordinator.consumer.image.by_name.items()}
            assignments = lead(lookup(self.protocol), [
                JoinedMember(m.member_id, m.group_instance_id, m.metadata)
                for m in answer.members], counts)
        c.phase, c.assignments = "joined", assignments  # SyncGroup at the next step

    def note_stranded(self, generation: int) -> None:
        """A restarted static leader took over a Stable group without a rebalance (KIP-345;
        Kafka answers it with no member list, or with skip_assignment from v9). Like Java's
        and librdkafka's leaders it takes the metadata it sees now as its baseline, so if
        partitions appeared after the generation's assignment was made (the old process
        would have rejoined for them, but died first), nobody notices: Kafka leaves them
        unassigned until the next rebalance. Remember the generation that is stuck so."""
        group = self.h.coordinator.classic.groups.get("g")
        if group is None or group.generation != generation:
            return
        covered = {f"{t}-{p}" for m in group.members.values() if m.assignment
                   for t, p in decode_assignment(m.assignment).partitions}
        if set(self.h.tps(*covered)) != everything(self):
            self.stranded_generation = generation

    def send_sync(self, c: ClassicClient) -> None:
        c.phase = "syncing"
        c.token = self.h.csync(c.member_id, c.generation, c.assignments,
                               instance_id=c.instance_id)
        sync = self.h.answers.get(c.token)
        if sync is not None:
            self.on_sync(c, sync)

    def on_sync(self, c: ClassicClient, answer: SyncGroupResponse) -> None:
        if answer.error == E.rebalance_in_progress:
            c.phase, c.rejoin = "stable", True
            return
        if answer.error != E.none:
            self.lost(c, answer.error)
            return
        given = {f"{t}-{p}" for t, p in decode_assignment(answer.assignment).partitions}
        revoked = c.owned - given
        c.owned = given
        c.phase = "stable"
        # KIP-429: rejoin after revoking (and a rejoin asked for meanwhile still stands).
        c.rejoin = c.rejoin or (bool(revoked) and self.cooperative)

    def lost(self, c: ClassicClient, code: ErrorCode) -> None:
        assert code in (E.unknown_member_id, E.illegal_generation, E.fenced_instance_id), code
        c.owned, c.phase, c.rejoin, c.generation = set(), "idle", False, -1
        if code == E.unknown_member_id:
            c.member_id = ""
        if code == E.fenced_instance_id:
            c.silent = True

    # -- both -------------------------------------------------------------------------------
    def start(self, i: int) -> None:
        """A process starts (again): a new incarnation, owning nothing yet."""
        c = self.client(i)
        if c.running or c.silent:
            return
        c.running, c.member_id, c.owned = True, "", set()
        if isinstance(c, ConsumerClient):
            c.joined, c.revoking = False, set()
        else:
            c.phase, c.generation, c.rejoin = "idle", -1, False

    def leave(self, i: int) -> None:
        """The process leaves the group and stops."""
        c = self.client(i)
        if not c.running or c.silent:
            return
        c.running = False
        if isinstance(c, ConsumerClient):
            if c.joined:
                c.owned, c.revoking = set(), set()
                self.h.leave(c.member_id)
            c.joined, c.member_id = False, ""
            return
        if c.member_id and c.phase != "idle":
            c.owned = set()
            self.h.cleave(LeavingMember(c.member_id, c.instance_id))
        c.phase, c.member_id, c.generation, c.rejoin = "idle", "", -1, False

    def crash(self, i: int) -> None:
        """The process dies without a word: it still owns what it owned until the
        coordinator removes its member."""
        c = self.client(i)
        if c.running and not c.silent:
            c.silent, c.running = True, False

    def restart(self, i: int) -> None:
        """A crashed process is replaced by a new one."""
        c = self.client(i)
        if c.silent:
            c.silent = False
            self.start(i)

    def move(self, i: int, lost: bool = False, ack: bool = False) -> None:
        c = self.client(i)
        if not c.running or c.silent:
            return
        if isinstance(c, ConsumerClient):
            if ack:
                self.ack(c)
            self.heartbeat(c, lost)
        else:
            self.step(c)

    def grow(self) -> None:
        """Topic foo gets a partition. A consumer group learns it from the coordinator; in a
        classic group the leader notices the new metadata and rejoins (Java's and
        librdkafka's leaders do), which starts a rebalance."""
        self.topics["foo"] += 1
        self.h.set_topics(self.topics)
        group = self.h.coordinator.classic.groups.get("g")
        for c in self.classics:
            if group is not None and c.running and c.member_id == group.leader:
                c.rejoin = True

    # -- invariants -------------------------------------------------------------------------
    def after_step(self) -> None:
        """Clients whose member the coordinator removed own nothing; then check safety."""
        h = self.h
        consumer_group = h.coordinator.consumer.groups.get("g")
        classic_group = h.coordinator.classic.groups.get("g")
        members = set(consumer_group.members) if consumer_group else set()
        if classic_group is not None:
            members |= set(classic_group.members)
        for c in self.consumers:
            if c.member_id and c.member_id not in members and (c.joined or c.silent):
                c.owned, c.revoking = set(), set()
        for c in self.classics:
            if c.member_id and c.member_id not in members and c.phase != "idle":
                c.owned = set()
        check_safety(self)


def owned_by_id(w: World, c: ClassicClient) -> set:
    return set(w.h.tps(*c.owned))


def check_safety(w: World) -> None:
    owner: dict = {}
    for c in w.consumers:
        for tp in c.owned:
            assert tp not in owner, f"{tp} owned by {owner[tp]} and {c.index}"
            owner[tp] = c.index
    for c in w.classics:
        for tp in owned_by_id(w, c):
            assert tp not in owner, f"{tp} owned by {owner[tp]} and {c.index}"
            owner[tp] = c.index
    group = w.h.coordinator.consumer.groups.get("g")
    if group is None:
        return
    held: dict = {}
    for m in group.members.values():
        for tp in m.holds():
            assert tp not in held, f"{tp} held by {held[tp]} and {m.member_id}"
            held[tp] = m.member_id
            assert group.partition_epochs[tp] == m.member_epoch
    assert len(group.partition_epochs) == len(held)
    for c in w.consumers:
        if c.owned:
            assert c.member_id in group.members
            assert c.owned <= group.members[c.member_id].holds()
    for c in w.classics:
        if c.owned:
            assert c.member_id in group.members, f"classic client {c.index} is no member"
            assert owned_by_id(w, c) <= group.members[c.member_id].holds()


def check_replay(w: World) -> None:
    live = w.h.coordinator
    fresh = w.h.replayed()
    assert set(fresh.consumer.groups) == set(live.consumer.groups)
    for gid, group in live.consumer.groups.items():
        assert fresh.consumer.groups[gid].snapshot() == group.snapshot()
    assert set(fresh.classic.groups) <= set(live.classic.groups)
    for gid, group in live.classic.groups.items():
        if group.state in (ClassicState.COMPLETING_REBALANCE, ClassicState.STABLE) or (
                group.state is ClassicState.EMPTY and gid in fresh.classic.groups):
            replayed = fresh.classic.groups[gid]
            assert replayed.to_record() == group.to_record()
            assert replayed.state == group.state


def everything(w: World) -> set:
    image = w.h.coordinator.consumer.image
    return {(image.by_name[t].topic_id, p) for t in TOPICS
            for p in range(image.by_name[t].partitions)}


def converged(w: World) -> bool:
    h = w.h
    live_consumers = [c for c in w.consumers if c.running]
    live_classics = [c for c in w.classics if c.running]
    group = h.coordinator.consumer.groups.get("g")
    if group is not None:
        expected = {c.member_id for c in live_consumers} | {c.member_id for c in live_classics}
        if set(group.members) != expected:
            return False
        if group.state() not in (ConsumerGroupState.STABLE, ConsumerGroupState.EMPTY):
            return False
        for c in live_consumers:
            target = group.target_of(c.member_id)
            member = group.members[c.member_id]
            if not member.is_reconciled_to(group.assignment_epoch) or c.owned != set(target):
                return False
            if c.revoking:
                return False
        for c in live_classics:
            member = group.members[c.member_id]
            if c.phase != "stable" or c.rejoin or c.generation != member.member_epoch:
                return False
            if not member.is_reconciled_to(group.assignment_epoch):
                return False
            if owned_by_id(w, c) != set(group.target_of(c.member_id)):
                return False
        if group.members and set().union(*group.targets.values()) != everything(w):
            return False
        return group.group_epoch == group.assignment_epoch or not group.members
    classic = h.coordinator.classic.groups.get("g")
    if classic is None:
        return not live_consumers and not live_classics
    if live_consumers:
        return False
    if not live_classics:
        return not classic.members or classic.state is ClassicState.EMPTY
    if classic.state is not ClassicState.STABLE:
        return False
    if set(classic.members) != {c.member_id for c in live_classics}:
        return False
    owned: set = set()
    for c in live_classics:
        if c.phase != "stable" or c.rejoin or c.generation != classic.generation:
            return False
        assignment = decode_assignment(classic.members[c.member_id].assignment).partitions
        if {f"{t}-{p}" for t, p in assignment} != c.owned:
            return False
        owned |= owned_by_id(w, c)
    if classic.generation == w.stranded_generation:
        return owned <= everything(w)  # Kafka's limitation, see World.note_stranded
    return owned == everything(w)


def converge(w: World) -> None:
    """Everyone still running keeps going, once a second, acknowledging at once."""
    for _ in range(200):
        w.h.advance(1_000)
        w.after_step()
        for i in range(CONSUMERS + CLASSICS):
            w.move(i, ack=True)
            w.after_step()
        if converged(w):
            return
    raise AssertionError("the group did not come to rest")


client_index = st.integers(0, CONSUMERS + CLASSICS - 1)
masks = st.integers(0, 2 ** (CONSUMERS + CLASSICS) - 1)
round_ = st.tuples(st.just("round"), st.tuples(masks, masks),
                   st.permutations(range(CONSUMERS + CLASSICS)))
move = st.tuples(st.just("move"), client_index, st.booleans())
ops = st.lists(st.one_of(
    round_, round_, round_, round_, move, move, move, move,
    st.tuples(st.just("ack"), st.integers(0, CONSUMERS - 1), st.none()),
    st.tuples(st.just("advance"), st.sampled_from([1_000, 5_000, 12_000]), st.none()),
    st.tuples(st.just("start"), client_index, st.none()),
    st.tuples(st.just("start"), client_index, st.none()),
    st.tuples(st.just("leave"), client_index, st.none()),
    st.tuples(st.just("crash"), client_index, st.none()),
    st.tuples(st.just("restart"), client_index, st.none()),
    st.tuples(st.just("grow"), st.none(), st.none()),
), min_size=30, max_size=100)


def play(w: World, op: str, arg: Any, extra: Any) -> None:
    """Carry out one operation of a sequence, then check the step."""
    if op == "round":
        lost, acks = arg
        for i in extra:
            w.move(i, lost=bool(lost >> i & 1), ack=bool(acks >> i & 1))
            w.after_step()
    elif op == "move":
        w.move(arg, lost=extra)
    elif op == "ack":
        w.ack(w.consumers[arg])
    elif op == "advance":
        w.h.advance(arg)
    elif op == "start":
        w.start(arg)
    elif op == "leave":
        w.leave(arg)
    elif op == "crash":
        w.crash(arg)
    elif op == "restart":
        w.restart(arg)
    elif op == "grow":
        w.grow()
    w.after_step()


def run(sequence, cooperative: bool) -> World:
    w = World(cooperative)
    for op, arg, extra in sequence:
        play(w, op, arg, extra)
    return w


# A static classic leader assigns, topic foo grows before its SyncGroup, and it crashes before
# rejoining for the new partitions; its restart takes over the Stable group quietly. (The
# new group's first join phase ends on its 0 ms initial-delay timer: "advance" 0 fires it,
# then the leader collects its answer and assigns before foo grows.)
STRANDED = ([("round", (0, 0), [0, 1, 2, 3, 4, 5])] * 4 + [("ack", 0, None)] * 9
            + [("grow", None, None), ("ack", 0, None), ("start", 5, None),
               ("round", (0, 0), [0, 1, 2, 3, 4, 5]), ("advance", 0, None),
               ("move", 5, False), ("grow", None, None), ("grow", None, None),
               ("round", (0, 0), [0, 1, 2, 3, 4, 5])]
            + [("ack", 0, None)] * 7 + [("crash", 5, None), ("restart", 5, None),
                                         ("move", 0, False)])


def test_restarted_static_leader_keeps_a_stale_assignment_as_in_kafka():
    """Kafka (KIP-345) answers the restarted static leader of a Stable group at once, with the
    group's assignment and no rebalance; the partitions added after that assignment stay
    unassigned, and the group rests like that."""
    w = run(STRANDED, cooperative=False)
    converge(w)
    classic = w.h.classic_group()
    assert classic.state is ClassicState.STABLE and classic.generation == 1
    assert w.stranded_generation == 1
    assert w.classics[2].owned == {"foo-0", "foo-1", "foo-2", "foo-3", "bar-0", "bar-1"}
    w.grow()  # the next metadata change: the leader rejoins and everything is assigned
    converge(w)
    assert w.h.classic_group().generation == 2
    assert owned_by_id(w, w.classics[2]) == everything(w)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops, st.booleans())
@example(STRANDED, False)
def test_no_partition_owned_twice_across_protocols_and_the_group_comes_to_rest(sequence,
                                                                               cooperative):
    w = run(sequence, cooperative)
    converge(w)
    check_safety(w)
    check_replay(w)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops, st.booleans())
def test_replay_of_mixed_sequences_equals_live(sequence, cooperative):
    for prefix_end in range(0, len(sequence) + 1, 10):
        check_replay(run(sequence[:prefix_end], cooperative))
