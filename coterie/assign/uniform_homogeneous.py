"""The `uniform` assignor when every member subscribes to the same topics (Kafka 4.x's
`UniformHomogeneousAssignmentBuilder`, re-derived; see `coterie.assign.uniform`).

Theory of operation. With P partitions and N members, balance fixes every member's share:
q = P // N, and P % N members get q + 1. Stickiness then decides who gets which:
  1. each member keeps what it owns of the subscribed topics (`uniform_partitions.claim`);
  2. the P % N extra partitions go, in member order, to members that already hold more
     than q; a member holding q or fewer passes its extra on to later members unless there
     are no more members left than extras (Kafka 4.1+, KAFKA-18688). That moves the fewest
     partitions any balanced answer can;
  3. a member over its share keeps its lowest partitions (topic name, then index) and
     releases the rest; a member within its share keeps its owned frozenset object as is;
  4. the partitions nobody kept, in (topic, index) order, then the released ones, are dealt
     out in that order to the members under their share, in member order, each taking a
     contiguous run as long as its deficit.
Member order is member id order (Kafka uses its group spec's order, a hash map's); given
the same member and topic order the answer is Kafka 4.2's (`test_uniform_kafka` checks it
against Kafka's jar). Every member's share is met exactly, so the result is balanced within
one partition, and the number of kept partitions that change owner is the least any balanced
assignment allows: the sum over members of (kept - share) where positive.

Cost. A round where nobody changed does one set difference over the owned partitions (a C
loop), one pass over the members, and builds one `MemberAssignment` per member; no
partition is touched by Python bytecode. A full round slices one cached, ordered tuple of
all partitions.
"""

from __future__ import annotations

from collections.abc import Sequence

from coterie.assign.spec import TopicPartition
from coterie.assign.uniform_partitions import TopicShape, claim, universe


def assign_homogeneous(shape: TopicShape, owned: Sequence[frozenset[TopicPartition]],
                       generations: Sequence[int]) -> list[frozenset[TopicPartition]]:
    """Targets for members 0..N-1 (in member order) that all subscribe to the topics of
    `shape` (sorted names and partition counts of the existing subscribed topics)."""
    n = len(owned)
    uni = universe(shape)
    total = len(uni.ordered)
    if total == 0:
        return [frozenset()] * n
    claims = claim(owned, uni.members, generations)
    kept = claims.kept
    counts = list(map(len, kept))
    share, extra = divmod(total, n)
    shares = _shares(counts, share, extra)

    final = list(kept)
    released: list[TopicPartition] = []
    short: list[tuple[int, int]] = []
    for i, (count, quota) in enumerate(zip(counts, shares, strict=True)):
        if count > quota:
            ordered = sorted(kept[i])
            final[i] = frozenset(ordered[:quota])
            released.extend(ordered[quota:])
        elif count < quota:
            short.append((i, quota - count))
    if not short:
        return final

    unowned = claims.unowned
    pool: Sequence[TopicPartition]
    if len(unowned) == total:
        pool = uni.ordered  # nobody kept anything, so nothing was released either
    else:
        dealt = _in_order(unowned, uni.ordered)
        dealt.extend(released)
        pool = dealt
    start = 0
    for i, need in short:
        chunk = pool[start:start + need]
        start += need
        final[i] = kept[i].union(chunk) if kept[i] else frozenset(chunk)
    return final


def _shares(counts: list[int], share: int, extra: int) -> list[int]:
    """Each member's share: `share`, plus one for `extra` members, chosen in member order:
    a member that already holds more than `share` takes one while any are left; a member
    that would have to be given it passes it on unless the members left (itself included)
    are no more than the extras left."""
    n = len(counts)
    shares = [share] * n
    for i, count in enumerate(counts):
        if extra == 0:
            break
        if count > share or n - i <= extra:
            shares[i] = share + 1
            extra -= 1
    return shares


def _in_order(some: frozenset[TopicPartition],
              ordered: tuple[TopicPartition, ...]) -> list[TopicPartition]:
    """`some` (a subset of `ordered`) in the order of `ordered`: a sort when it is small, a
    filtering pass when it is large (both give (topic name, index) order)."""
    if len(some) * 16 < len(ordered):
        return sorted(some)
    return [tp for tp in ordered if tp in some]
