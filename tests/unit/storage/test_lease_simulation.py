"""Brokers and leases under faults, in virtual time (issue 24, the fault simulator's part).

Three brokers share four partitions and a group coordinator shard through leases in one store
(`coterie.storage.lease_table.LeaseTable`: the rule PostgreSQL evaluates, in memory). Each
broker does what coterie's brokers do over PostgreSQL: it registers and heartbeats with a
lease of its own, renews its tenures, takes the resources `spread` gives it among the live
brokers and hands back the ones another live broker should have; it believes it owns a
resource only as long as `Tenures` says (counted from when its request was sent); it writes
only what it believes it owns, each write conditional in the store on its lease; the owner of
the shard keeps the shard's state, replayed from the store's records when it takes the shard
and changed by its own acknowledged writes, as the group runtime does.

The faults, drawn by hypothesis and by a seeded long run: time passing; the store's answers
coming late (a write lands steps after it was sent: lease expiry while a write is in flight);
a broker paused and woken (its monotonic clock moved on meanwhile); a broker killed and
restarted (its in-flight writes may still land); the store unreachable for a while; two
brokers racing for one resource (every broker heartbeats when it is its turn, in any order).

Checked after every step:

* a broker that believes it owns a resource is, at that instant, its holder in the store at
  the same epoch, so no two brokers ever serve one resource at once (and a group's partitions
  cannot be handed out by two coordinators);
* never two writers at one epoch, and a resource's log never goes back to an older epoch;
* nothing acknowledged is lost: every acknowledged write is in the log at the offset the
  client was told, the one its broker numbered it with in its copy of the log;
* a broker's copy of a resource it serves is the stored log, then its writes on their way
  (each broker writes through from a local copy, each write refused unless the stored log
  ends where the copy did: coterie.broker.cluster, `expected_offset`);
* replay equals live: the shard state of a broker that believes it owns the shard equals the
  replay of the shard's log;
* after the faults stop and the killed brokers are back, every resource is owned by the
  broker `spread` names.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from coterie.storage.api import Lease, Resource
from coterie.storage.lease_table import LeaseTable
from coterie.storage.tenure import Tenures, spread

TTL = 3.0
BROKERS = (1, 2, 3)
SHARD = Resource.group_shard(0)
RESOURCES = (*(Resource("partition", f"t-{i}") for i in range(4)), SHARD)


class Unreachable(Exception):
    pass


DIVERGED = -1


@dataclass(frozen=True, slots=True)
class Entry:
    offset: int
    epoch: int
    writer: int
    value: int


@dataclass
class Store:
    leases: LeaseTable = field(default_factory=LeaseTable)
    logs: dict[Resource, list[Entry]] = field(
        default_factory=lambda: {r: [] for r in RESOURCES})
    down: bool = False

    def check(self) -> None:
        if self.down:
            raise Unreachable

    def append(self, lease: Lease, value: int, now: float, expected: int) -> int | None:
        """The offset of the write, or None when its lease is lost (nothing written);
        DIVERGED when the log does not end at `expected`, the offset the writer numbered it
        with in its copy (coterie.storage.postgres_log's `expected_offset`)."""
        self.check()
        if not self.leases.may_write(lease, now):
            return None
        log = self.logs[lease.resource]
        if len(log) != expected:
            return DIVERGED
        log.append(Entry(len(log), lease.epoch, lease.owner, value))
        return len(log) - 1

    def live_brokers(self, now: float) -> list[int]:
        return [b for b in BROKERS
                if self.leases.holder(Resource("broker", str(b)), now) is not None]


@dataclass
class InFlight:
    lease: Lease
    value: int
    acked_to: int | None  # the broker waiting for the answer; None once it crashed
    expected: int = 0  # the offset its broker numbered it with in its copy


@dataclass
class Broker:
    node_id: int
    alive: bool = True
    paused: bool = False
    tenures: Tenures = field(default_factory=Tenures)
    shard: dict[int, int] | None = None  # the shard's state while it owns the shard
    # Its copy of each resource it serves (coterie.broker.cluster): the store's log when it
    # took the resource, then its own writes, appended before they are sent.
    copies: dict[Resource, list[int]] = field(default_factory=dict)

    def acts(self) -> bool:
        return self.alive and not self.paused


def replay(log: list[Entry]) -> dict[int, int]:
    state: dict[int, int] = {}
    for e in log:
        state[e.value % 7] = e.value
    return state


class World:
    def __init__(self) -> None:
        self.now = 0.0
        self.store = Store()
        self.brokers = {b: Broker(b) for b in BROKERS}
        self.inflight: list[InFlight] = []
        self.acked: list[tuple[Resource, int, int]] = []
        self.counter = 0
        self.lost_writes = 0
        self.fenced_writes = 0
        self.diverged_writes = 0
        self.checked = 0  # acknowledged writes checked so far
        self.seen = dict.fromkeys(RESOURCES, 0)  # log entries checked so far
        self.shard_replayed: dict[int, int] = {}
        self.writers: dict[Resource, dict[int, int]] = {r: {} for r in RESOURCES}

    # -- a broker's round: register, renew, take its share, hand back the rest ------------
    def heartbeat(self, node_id: int) -> None:
        b = self.brokers[node_id]
        if not b.acts():
            return
        store, now = self.store, self.now
        try:
            store.check()
            me = Resource("broker", str(node_id))
            registration = store.leases.acquire(me, node_id, now, TTL)
            if registration is not None:
                b.tenures.granted(registration, now, TTL)
            lost, stray = b.tenures.renewed(store.leases.renew_all(node_id, now, TTL), now,
                                            TTL)
            for r in lost:
                self._lost(b, r)
            for lease in stray:
                store.leases.release(lease, now)
            take, give = b.tenures.moves(spread(RESOURCES, store.live_brokers(now)), node_id,
                                         now)
            for r in take:
                lease = store.leases.acquire(r, node_id, now, TTL)
                if lease is not None:
                    b.tenures.granted(lease, now, TTL)
                    b.copies[r] = [e.value for e in store.logs[r]]
                    if r == SHARD:
                        b.shard = replay(store.logs[SHARD])
            for lease in give:
                store.leases.release(lease, now)
                self._lost(b, lease.resource)
        except Unreachable:
            return

    def _lost(self, b: Broker, r: Resource) -> None:
        """Stop serving `r`: its tenure and its copy go (a failed write of a copy drops it:
        the copy may hold what the store does not)."""
        b.tenures.lost(r)
        b.copies.pop(r, None)
        if r == SHARD:
            b.shard = None

    # -- writes ---------------------------------------------------------------------------
    def write(self, node_id: int, which: int) -> None:
        """A client writes to resource `which` through broker `node_id`, or, two times in
        three, through the broker it found serving the resource (if any is)."""
        r = RESOURCES[which % len(RESOURCES)]
        if which % 3:
            node_id = next((b.node_id for b in self.brokers.values()
                            if b.alive and b.tenures.lease(r, self.now) is not None), node_id)
        b = self.brokers[node_id]
        if not b.acts():
            return
        lease = b.tenures.lease(r, self.now)
        copy = b.copies.get(r)
        if lease is None or copy is None:
            return  # NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR: the client looks again
        self.counter += 1
        copy.append(self.counter)  # the local append, numbered at the copy's end
        self.inflight.append(InFlight(lease, self.counter, node_id, len(copy) - 1))

    def land(self, which: int) -> None:
        """The store executes one of the writes sent so far (in any order, any time)."""
        if not self.inflight:
            return
        picked = self.inflight[which % len(self.inflight)]
        # One broker's writes under one lease land in the order sent (its group commit is
        # a queue); writes of different leases or brokers, in any order.
        w = next(x for x in self.inflight if x.lease == picked.lease)
        self.inflight.remove(w)
        try:
            offset = self.store.append(w.lease, w.value, self.now, w.expected)
        except Unreachable:
            self.lost_writes += 1  # never executed: the client got an error
            if w.acked_to is not None:
                self._lost(self.brokers[w.acked_to], w.lease.resource)
            return
        if offset is None or offset == DIVERGED:
            if offset is None:
                self.fenced_writes += 1
            else:
                self.diverged_writes += 1
            if w.acked_to is not None:
                self._lost(self.brokers[w.acked_to], w.lease.resource)
            return
        if w.acked_to is None:
            return  # written, but its broker died: nobody was told
        b = self.brokers[w.acked_to]
        if w.lease.resource not in b.copies:
            return  # its broker dropped the copy meanwhile: the client was told to retry
        # The client is told the offset its broker numbered the write with in its copy.
        self.acked.append((w.lease.resource, w.expected, w.value))
        if w.lease.resource == SHARD and b.shard is not None:
            b.shard[w.value % 7] = w.value

    # -- faults ---------------------------------------------------------------------------
    def crash(self, node_id: int) -> None:
        b = self.brokers[node_id]
        b.alive, b.paused, b.tenures, b.shard = False, False, Tenures(), None
        b.copies = {}
        for w in self.inflight:
            if w.acked_to == node_id:
                w.acked_to = None

    def restart(self, node_id: int) -> None:
        self.brokers[node_id].alive = True

    def pause(self, node_id: int) -> None:
        self.brokers[node_id].paused = True

    def resume(self, node_id: int) -> None:
        self.brokers[node_id].paused = False

    def step(self, action: str, a: int, c: int) -> None:
        node = BROKERS[a % len(BROKERS)]
        if action == "tick":
            self.now += 0.05 + (c % 20) / 20
        elif action == "heartbeat":
            self.heartbeat(node)
        elif action == "write":
            self.write(node, c)
        elif action == "land":
            self.land(c)
        elif action == "crash":
            self.crash(node)
        elif action == "restart":
            self.restart(node)
        elif action == "pause":
            self.pause(node)
        elif action == "resume":
            self.resume(node)
        elif action == "store_down":
            self.store.down = True
        elif action == "store_up":
            self.store.down = False
        self.check()

    # -- the invariants -------------------------------------------------------------------
    def check(self) -> None:
        now = self.now
        # The shard's log replayed, kept up to date with its new entries (replaying it
        # whole at every step would make a long run quadratic).
        for e in self.store.logs[SHARD][self.seen[SHARD]:]:
            self.shard_replayed[e.value % 7] = e.value
        for r in RESOURCES:
            believers = [b for b in self.brokers.values()
                         if b.alive and b.tenures.lease(r, now) is not None]
            assert len(believers) <= 1, f"{r}: {len(believers)} brokers serve it at {now}"
            for b in believers:
                assert self.store.leases.holder(r, now) == b.tenures.lease(r, now), \
                    f"broker {b.node_id} serves {r} without holding it in the store"
                if r == SHARD:
                    assert b.shard == self.shard_replayed, "replay != live"
                copy = b.copies.get(r)
                if copy is not None:
                    # The copy is the stored log, then what is still on its way there.
                    stored = [e.value for e in self.store.logs[r]]
                    assert copy[:len(stored)] == stored, f"{r}: broker {b.node_id}'s copy " \
                        "is not the stored log"
            # The log's entries since the last step (entries are only ever appended).
            log, writers = self.store.logs[r], self.writers[r]
            start = self.seen[r]
            for before, after in itertools.pairwise(log[max(0, start - 1):]):
                assert before.epoch <= after.epoch, f"{r}: epoch went back in its log"
            for e in log[start:]:
                assert writers.setdefault(e.epoch, e.writer) == e.writer, \
                    f"{r}: two writers at epoch {e.epoch}"
            self.seen[r] = len(log)
        self.check_acked(self.checked)

    def check_acked(self, start: int = 0) -> None:
        """Every acknowledged write from the `start`-th on is where it was put (all of them
        at `settle`; the ones since the last step otherwise, which keeps a long run linear)."""
        for r, offset, value in self.acked[start:]:
            assert self.store.logs[r][offset].value == value, "an acknowledged write is lost"
        self.checked = len(self.acked)

    def settle(self) -> None:
        """The faults stop: the store answers, the killed brokers come back, nobody is
        paused, the writes land, every broker heartbeats for a while; then each resource is
        served by the broker `spread` names (a returning broker took its share back)."""
        self.store.down = False
        for b in self.brokers.values():
            b.paused = False
            b.alive = True
        while self.inflight:
            self.land(0)
        for _ in range(int(3 * TTL / 0.5)):
            self.now += 0.5
            for node in BROKERS:
                self.heartbeat(node)
            self.check()
        self.check_acked()
        owners = spread(RESOURCES, self.store.live_brokers(self.now))
        for r in RESOURCES:
            serving = [b.node_id for b in self.brokers.values()
                       if b.alive and b.tenures.lease(r, self.now) is not None]
            assert serving == [owners[r]], f"{r}: served by {serving}, not {owners[r]}"


# How often each step is drawn: mostly the brokers' work, the faults now and then.
WEIGHTS = {"tick": 3, "heartbeat": 8, "write": 6, "land": 6, "crash": 1, "restart": 3,
           "pause": 1, "resume": 3, "store_down": 1, "store_up": 4}
ACTIONS = [a for a, n in WEIGHTS.items() for _ in range(n)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(ACTIONS), st.integers(0, 2), st.integers(0, 99)),
                max_size=150))
def test_leases_under_faults(steps):
    w = World()
    for action, a, c in steps:
        w.step(action, a, c)
    w.settle()


def run(steps: int, seed: int) -> World:
    """A long seeded run (the figures in docs/reliability.md come from this:
    `python -c "from tests.unit.storage.test_lease_simulation import run; run(1_000_000, 24)"`).
    """
    rnd = random.Random(seed)
    w = World()
    for i in range(steps):
        w.step(rnd.choice(ACTIONS), rnd.randrange(3), rnd.randrange(100))
        if i % 5_000 == 4_999:
            w.settle()
    w.settle()
    return w


def test_a_long_run_of_leases_under_faults():
    w = run(20_000, seed=24)
    assert len(w.acked) > 500  # writes were acknowledged...
    assert w.fenced_writes > 20  # ...and stale ones fenced...
    assert sum(e.epoch > 1 for log in w.store.logs.values() for e in log) > 100  # ...over failovers


def test_a_paused_owner_that_wakes_up_writes_nothing():
    """Broker 1 owns everything, sends a write and is paused past its lease; broker 2 takes
    over; broker 1 wakes up: it serves nothing and its write is fenced."""
    w = World()
    w.brokers[2].alive = w.brokers[3].alive = False
    w.heartbeat(1)
    assert all(w.brokers[1].tenures.lease(r, w.now) for r in RESOURCES)
    w.write(1, RESOURCES.index(SHARD))
    w.pause(1)
    w.brokers[2].alive = True
    w.now += TTL + 0.1
    w.heartbeat(2)
    w.heartbeat(2)  # sees itself live, takes everything
    assert w.store.leases.holder(SHARD, w.now).owner == 2
    w.resume(1)
    assert w.brokers[1].tenures.lease(SHARD, w.now) is None
    w.land(0)
    assert w.fenced_writes == 1 and w.store.logs[SHARD] == []
    w.check()


def test_two_brokers_racing_for_one_resource_one_wins():
    w = World()
    w.brokers[3].alive = False
    w.heartbeat(1)
    w.heartbeat(2)
    w.heartbeat(1)
    w.heartbeat(2)
    w.check()
    for r in RESOURCES:
        holder = w.store.leases.holder(r, w.now)
        assert holder is not None and holder.owner in (1, 2)


def test_a_write_of_a_killed_incarnation_is_fenced_after_its_restart():
    """Broker 1 sends a write to the shard and is killed; it restarts after its lease
    expired and takes the shard back, replaying it. The write of its former incarnation
    then lands: a new tenure has a new epoch even for the same node, so it is refused (else
    the shard's log would hold a write the new incarnation never replayed)."""
    w = World()
    w.brokers[2].alive = w.brokers[3].alive = False
    w.heartbeat(1)
    w.write(1, RESOURCES.index(SHARD))
    w.crash(1)
    w.now += TTL + 0.1
    w.restart(1)
    w.heartbeat(1)
    assert w.brokers[1].tenures.lease(SHARD, w.now).epoch == 2
    w.land(0)
    assert w.fenced_writes == 1 and w.store.logs[SHARD] == []
    w.check()
