"""The sticky placement algorithm shared by `sticky` and `cooperative-sticky`.

Input: the spec and each member's *claim* (the partitions it says it owns and the generation
they come from). Output: each member's target partitions. The two assignors differ only in
how they read claims and in what cooperative-sticky withholds afterwards.

Theory of operation (the order of priorities is Kafka's AbstractStickyAssignor's: balance,
then rack alignment, then stickiness; except that on the general path stickiness comes before
rack alignment, see 4):

1. Claims are validated and de-conflicted. A claim counts only if the member still subscribes
   to the topic and the partition exists. When several members claim one partition the
   highest generation wins; if two or more members tie at the highest generation nobody keeps
   it (it is reassigned like an unowned partition). This is per partition, as in Kafka 4.x,
   and independent of the order members are read in.
2. Identical subscriptions (after dropping topics that do not exist) take the *constrained*
   path: with P partitions and M members every member gets floor(P/M) or ceil(P/M), and
   exactly P mod M members get the ceiling. Each member keeps its claimed partitions up to
   its quota; members claiming at least the ceiling get the ceiling while ceiling places
   remain (member id order). The rest form a pool, handed out round-robin (topic, partition
   order) to members under the floor, then one each to members at the floor while ceiling
   places remain. Work is O(P + M) plus a sort of each member's claim.
3. Different subscriptions take the *general* path: keep every valid claim; give each other
   partition (topics with fewer subscribers first) to its least-loaded subscriber; then move
   partitions from the most- to the least-loaded subscriber of each topic while the two
   differ by two or more, preferring partitions the holder did not own before. Each move
   lowers the sum of squared loads, so the loop ends, and when it ends no partition can move
   to a subscriber with two fewer partitions than its holder (Kafka's guarantee for unequal
   subscriptions; it is not always the global optimum).
4. Rack awareness (KIP-881) is on when Kafka would turn it on: some member has a rack, member
   and replica racks intersect, and not every partition has replicas on every rack. It never
   costs balance. On the constrained path (as in Kafka) a member keeps only claimed partitions
   with a replica on its rack (members without a rack keep everything); the pool goes first
   to same-rack members within their quotas, scarcest partitions first; a partition no
   same-rack member can take goes back to the member that gave it up if it has room (Kafka
   leaves that to chance, so an unalignable partition could wander on every rebalance);
   the rest are handed out as above. On the general path claims are kept whatever their rack
   (Kafka drops mismatched ones there too, but then a round in which nothing changed can move
   partitions, which is worse than a missed alignment): new partitions go to a same-rack
   subscriber when one is among the least loaded, and balancing moves partitions off-rack
   to their holder first.

Pure and deterministic: every order that matters is sorted (sets are never iterated into the
result), so equal specs give equal assignments in any process.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from coterie.assign.spec import AssignmentSpec, AssignorError, TopicPartition


@dataclass(frozen=True, slots=True)
class Claim:
    """The partitions a member says it owns and the generation they come from."""

    owned: frozenset[TopicPartition]
    generation: int


@dataclass(slots=True)
class _Racks:
    """Rack data when rack-aware assignment is on."""

    member_rack: dict[str, str]
    partition_racks: dict[str, Mapping[int, frozenset[str]]]
    members_per_rack: dict[str, int]

    def racks_of(self, tp: TopicPartition) -> frozenset[str]:
        return self.partition_racks[tp[0]].get(tp[1], frozenset())

    def mismatch(self, member: str, tp: TopicPartition) -> bool:
        rack = self.member_rack.get(member)
        return rack is not None and rack not in self.racks_of(tp)

    def aligned(self, member: str, tp: TopicPartition) -> bool:
        rack = self.member_rack.get(member)
        return rack is not None and rack in self.racks_of(tp)


@dataclass(frozen=True, slots=True)
class Plan:
    """The targets, and who won each validly claimed partition (step 1): cooperative-sticky
    needs the winners to tell keeping a partition from taking it over."""

    targets: dict[str, list[TopicPartition]]
    winners: dict[TopicPartition, str]


def sticky_plan(spec: AssignmentSpec, claims: Mapping[str, Claim]) -> Plan:
    """Each member's target partitions (every member of the spec has an entry) and the
    winners of the claims."""
    members = sorted(spec.members)
    topics = spec.topics
    subs: dict[str, frozenset[str]] = {}
    for m in members:
        subs[m] = frozenset(t for t in spec.members[m].subscribed_topics
                            if t in topics and topics[t].partitions > 0)
    winners = _resolve_claims(members, subs, spec, claims)
    owned: dict[str, list[TopicPartition]] = {m: [] for m in members}
    for tp, m in winners.items():
        owned[m].append(tp)
    racks = _rack_info(spec, members, subs)
    if not members:
        return Plan({}, winners)
    first = subs[members[0]]
    if all(subs[m] == first for m in members):
        return Plan(_constrained(members, sorted(first), spec, owned, racks), winners)
    return Plan(_general(members, subs, spec, owned, racks), winners)


def _resolve_claims(members: list[str], subs: dict[str, frozenset[str]], spec: AssignmentSpec,
                    claims: Mapping[str, Claim]) -> dict[TopicPartition, str]:
    """Valid, de-conflicted claims: partition -> the member that keeps a right to it."""
    topics = spec.topics
    best: dict[TopicPartition, str] = {}
    tied: set[TopicPartition] = set()
    for m in members:
        claim = claims.get(m)
        if claim is None or not claim.owned:
            continue
        sub = subs[m]
        gen = claim.generation
        for tp in claim.owned:
            topic, partition = tp
            if topic not in sub or not 0 <= partition < topics[topic].partitions:
                continue
            other = best.get(tp)
            if other is None:
                best[tp] = m
                continue
            other_gen = claims[other].generation
            if gen > other_gen:
                best[tp] = m
                tied.discard(tp)
            elif gen == other_gen:
                tied.add(tp)
    for tp in tied:
        del best[tp]
    return best


def _rack_info(spec: AssignmentSpec, members: list[str],
               subs: dict[str, frozenset[str]]) -> _Racks | None:
    """Rack data if rack-aware assignment applies (Kafka's useRackAwareAssignment)."""
    member_rack = {m: r for m in members if (r := spec.members[m].rack)}
    if not member_rack:
        return None
    subscribed = sorted(set().union(*subs.values()))
    replica_racks: set[str] = set()
    for t in subscribed:
        for racks in spec.topics[t].partition_racks.values():
            replica_racks.update(racks)
    if replica_racks.isdisjoint(member_rack.values()):
        return None
    everywhere = True
    for t in subscribed:
        topic = spec.topics[t]
        for p in range(topic.partitions):
            if topic.partition_racks.get(p, frozenset()) != replica_racks:
                everywhere = False
                break
        if not everywhere:
            break
    if everywhere:
        return None
    per_rack: dict[str, int] = {}
    for r in member_rack.values():
        per_rack[r] = per_rack.get(r, 0) + 1
    return _Racks(member_rack, {t: spec.topics[t].partition_racks for t in subscribed}, per_rack)


def _constrained(members: list[str], topic_names: list[str], spec: AssignmentSpec,
                 owned: dict[str, list[TopicPartition]],
                 racks: _Racks | None) -> dict[str, list[TopicPartition]]:
    """Identical subscriptions: quota arithmetic (step 2 of the module docstring)."""
    counts = {t: spec.topics[t].partitions for t in topic_names}
    total = sum(counts.values())
    minq, slots = divmod(total, len(members))
    maxq = minq + 1 if slots else minq
    assignment: dict[str, list[TopicPartition]] = {}
    taken: set[TopicPartition] = set()
    dropped: dict[TopicPartition, str] = {}  # claims given up for a rack mismatch
    for m in members:
        own = owned[m]
        if racks is not None:
            kept_racks = []
            for tp in own:
                if racks.mismatch(m, tp):
                    dropped[tp] = m
                else:
                    kept_racks.append(tp)
            own = kept_racks
        # Kafka keeps the lowest partition numbers first, which spreads topics evenly.
        own.sort(key=lambda tp: (tp[1], tp[0]))
        if slots and len(own) >= maxq:
            keep = own[:maxq]
            slots -= 1
        else:
            keep = own[:minq]
        assignment[m] = keep
        taken.update(keep)
    if taken:
        pool = [(t, p) for t in topic_names for p in range(counts[t]) if (t, p) not in taken]
    else:
        pool = [(t, p) for t in topic_names for p in range(counts[t])]

    if racks is not None:
        pool, slots = _rack_fill(members, assignment, pool, minq, slots, racks)
        # Stickiness still comes third, not never: a partition no same-rack member could take
        # goes back to the member that gave it up, if that member has room. Without this a
        # partition that cannot be aligned would wander on every rebalance.
        rest = []
        for tp in pool:
            m = dropped.get(tp)
            if m is not None:
                got = assignment[m]
                if len(got) < minq or (len(got) == minq and slots):
                    if len(got) == minq:
                        slots -= 1
                    got.append(tp)
                    continue
            rest.append(tp)
        pool = rest

    under = deque(m for m in members if len(assignment[m]) < minq)
    at_min = deque(m for m in members if len(assignment[m]) == minq) if slots else deque()
    for tp in pool:
        if under:
            m = under.popleft()
            got = assignment[m]
            got.append(tp)
            if len(got) < minq:
                under.append(m)
            elif slots:
                at_min.append(m)
            continue
        while at_min and len(assignment[at_min[0]]) != minq:
            at_min.popleft()
        if not at_min or not slots:
            raise AssignorError("sticky: partitions left over after every member reached quota")
        m = at_min.popleft()
        assignment[m].append(tp)
        slots -= 1
    if under:
        raise AssignorError("sticky: a member stayed under quota with no partitions left")
    return assignment


def _rack_fill(members: list[str], assignment: dict[str, list[TopicPartition]],
               pool: list[TopicPartition], minq: int, slots: int,
               racks: _Racks) -> tuple[list[TopicPartition], int]:
    """Give pool partitions to same-rack members within quota; return the rest and the
    ceiling places still free. Partitions with the fewest same-rack members go first."""
    per_rack = racks.members_per_rack

    def scarcity(tp: TopicPartition) -> int:
        return sum(per_rack.get(r, 0) for r in racks.racks_of(tp))

    pool = sorted(pool, key=scarcity)  # stable: topic, partition order within a scarcity
    under: dict[str, deque[str]] = {}
    at_min: dict[str, deque[str]] = {}
    for m in members:
        rack = racks.member_rack.get(m)
        if rack is None:
            continue
        n = len(assignment[m])
        if n < minq:
            under.setdefault(rack, deque()).append(m)
        elif n == minq:
            at_min.setdefault(rack, deque()).append(m)
    left: list[TopicPartition] = []
    for tp in pool:
        tp_racks = sorted(racks.racks_of(tp))
        chosen = None
        for r in tp_racks:
            q = under.get(r)
            while q:
                m = q.popleft()
                if len(assignment[m]) < minq:
                    chosen = m
                    break
            if chosen is not None:
                break
        if chosen is None and slots:
            for r in tp_racks:
                q = at_min.get(r)
                while q:
                    m = q.popleft()
                    if len(assignment[m]) == minq:
                        chosen = m
                        break
                if chosen is not None:
                    break
        if chosen is None:
            left.append(tp)
            continue
        got = assignment[chosen]
        got.append(tp)
        rack = racks.member_rack[chosen]
        if len(got) < minq:
            under[rack].append(chosen)
        elif len(got) == minq:
            at_min.setdefault(rack, deque()).append(chosen)
        else:
            slots -= 1
    return left, slots


class _Held:
    """One member's partitions of one topic, in four buckets by how cheap they are to move:
    0 not rack-aligned and new to the member, 1 not aligned and owned before, 2 aligned and
    new, 3 aligned and owned before."""

    __slots__ = ("buckets", "size")

    def __init__(self) -> None:
        self.buckets: tuple[list[TopicPartition], ...] = ([], [], [], [])
        self.size = 0

    def add(self, bucket: int, tp: TopicPartition) -> None:
        self.buckets[bucket].append(tp)
        self.size += 1

    def pop_cheapest(self) -> TopicPartition:
        for bucket in self.buckets:
            if bucket:
                self.size -= 1
                return bucket.pop()
        raise AssignorError("sticky: moving a partition from a member that holds none")


def _general(members: list[str], subs: dict[str, frozenset[str]], spec: AssignmentSpec,
             owned: dict[str, list[TopicPartition]],
             racks: _Racks | None) -> dict[str, list[TopicPartition]]:
    """Different subscriptions: keep, fill the least loaded, then balance (step 3)."""
    subscribers: dict[str, list[str]] = {}
    for m in members:
        for t in subs[m]:
            subscribers.setdefault(t, []).append(m)
    topic_order = sorted(subscribers, key=lambda t: (len(subscribers[t]), t))
    load = dict.fromkeys(members, 0)
    held: dict[str, dict[str, _Held]] = {m: {t: _Held() for t in subs[m]} for m in members}
    previous: dict[TopicPartition, str] = {}

    def bucket(m: str, tp: TopicPartition) -> int:
        aligned = racks is not None and racks.aligned(m, tp)
        return 2 * aligned + (previous.get(tp) == m)

    taken: set[TopicPartition] = set()
    for m in members:
        for tp in sorted(owned[m]):
            previous[tp] = m
            held[m][tp[0]].add(bucket(m, tp), tp)
            load[m] += 1
            taken.add(tp)

    for t in topic_order:
        subs_t = subscribers[t]
        heap = [(load[m], m) for m in subs_t]
        heapq.heapify(heap)
        rack_heaps: dict[str, list[tuple[int, str]]] = {}
        if racks is not None:
            for m in subs_t:
                r = racks.member_rack.get(m)
                if r is not None:
                    rack_heaps.setdefault(r, []).append((load[m], m))
            for h in rack_heaps.values():
                heapq.heapify(h)
        for p in range(spec.topics[t].partitions):
            tp = (t, p)
            if tp in taken:
                continue
            least = _fresh_top(heap, load)
            chosen = least[1]
            if racks is not None and rack_heaps:
                # Rack alignment only breaks ties among the least loaded: it never costs balance.
                aligned = None
                for r in racks.racks_of(tp):
                    h = rack_heaps.get(r)
                    if h:
                        top = _fresh_top(h, load)
                        if top[0] == least[0] and (aligned is None or top[1] < aligned):
                            aligned = top[1]
                if aligned is not None:
                    chosen = aligned
            held[chosen][t].add(bucket(chosen, tp), tp)
            load[chosen] += 1

    _balance(topic_order, subscribers, held, load, bucket)
    return {m: [tp for h in held[m].values() for b in h.buckets for tp in b] for m in members}


def _fresh_top(heap: list[tuple[int, str]], load: dict[str, int]) -> tuple[int, str]:
    """Top of a heap holding one entry per member whose recorded loads may have fallen
    behind (loads only grow while filling): refresh stale tops until the top is current."""
    while True:
        recorded, m = heap[0]
        if recorded == load[m]:
            return recorded, m
        heapq.heapreplace(heap, (load[m], m))


def _balance(topic_order: list[str], subscribers: dict[str, list[str]],
             held: dict[str, dict[str, _Held]], load: dict[str, int],
             place: Callable[[str, TopicPartition], int]) -> None:
    """Move partitions within each topic from its most-loaded holder to its least-loaded
    subscriber while they differ by two or more; repeat until a pass moves nothing.
    `place` says which bucket a partition lands in at its new holder."""
    moved = True
    while moved:
        moved = False
        for t in topic_order:
            subs_t = subscribers[t]
            if len(subs_t) < 2:
                continue
            lo = [(load[m], m) for m in subs_t]
            hi = [(-load[m], m) for m in subs_t if held[m][t].size]
            heapq.heapify(lo)
            heapq.heapify(hi)
            while hi:
                while lo[0][0] != load[lo[0][1]]:
                    heapq.heappop(lo)
                while hi and (-hi[0][0] != load[hi[0][1]] or not held[hi[0][1]][t].size):
                    heapq.heappop(hi)
                if not hi:
                    break
                b_load, b = lo[0]
                a = hi[0][1]
                if load[a] <= b_load + 1:
                    break
                tp = held[a][t].pop_cheapest()
                held[b][t].add(place(b, tp), tp)
                load[a] -= 1
                load[b] += 1
                heapq.heappush(lo, (load[a], a))
                heapq.heappush(lo, (load[b], b))
                if held[a][t].size:
                    heapq.heappush(hi, (-load[a], a))
                heapq.heappush(hi, (-load[b], b))
                moved = True
