"""The simple share assignor of KIP-932 share groups (Kafka 4.2's `simple`), pure.

What a share group needs from its assignor differs from a consumer group's: a partition may
be consumed by several members at once (the share-partition leader hands out records one by
one and tracks their acknowledgement), so nothing has to be revoked before it moves, and a
group with more members than partitions should still keep every member busy. The rules, as
Kafka 4.2's SimpleAssignor states them:

- every partition of a topic some member subscribes to is assigned, to members subscribing
  to that topic only;
- each partition of a topic with P partitions and M subscribers is shared by
  s = ceil(M / P) members (one when there are at least as many partitions as members);
- each subscriber gets its share of that topic's s * P assignments, counts within one of
  each other; and
- as much of the current assignment as that allows is kept.

How it is done here (coterie's own procedure; Kafka's homogeneous and heterogeneous builders
reach the same shape by other steps). Topics are taken one by one in name order. For each,
the subscribers' quotas are fixed first: s * P split evenly, the remainder going to the
subscribers that hold the fewest assignments so far across the topics already done (ties:
those that held more of this topic before, then by member id). Because the remainder
always goes to the least loaded, members with the same subscriptions end within one of each
other over all their topics, not only per topic. Then each subscriber keeps what it held of
the topic while its quota and the partition's sharing allow; then every partition short of
s holders takes the subscribers with the most quota left that do not hold it yet. Should
that greedy fill ever be stuck (the kept partitions can leave only members that already hold
a partition with room), the topic is dealt afresh: slot i of the s * P slots, partition by
partition, to the i-th subscriber in a cycle (quota order), which always satisfies both
counts because s <= M.

Deterministic: the same subscriptions, partition counts and current assignment give the same
result, whatever the order of the mappings given. No group state, no I/O: the share group
coordinator (`coterie.group.share`) maps topic names to ids around it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

TopicPartition = tuple[str, int]
"""(topic name, partition index)."""


def assign(subscriptions: Mapping[str, Iterable[str]], partitions: Mapping[str, int],
           current: Mapping[str, Iterable[TopicPartition]] | None = None,
           ) -> dict[str, frozenset[TopicPartition]]:
    """The target assignment: member id -> the partitions it gets. `subscriptions`: member
    id -> subscribed topic names; `partitions`: topic name -> partition count (topics
    missing here do not exist and are not assigned); `current`: what members hold now (kept
    where the rules allow). Every member of `subscriptions` is in the result."""
    members = sorted(subscriptions)
    subscribed = {m: frozenset(subscriptions[m]) for m in members}
    held: dict[str, set[TopicPartition]] = {
        m: set((current or {}).get(m, ())) for m in members}
    out: dict[str, set[TopicPartition]] = {m: set() for m in members}
    load = dict.fromkeys(members, 0)
    topics = sorted({t for subs in subscribed.values() for t in subs})
    for topic in topics:
        count = partitions.get(topic, 0)
        subscribers = [m for m in members if topic in subscribed[m]]
        if count <= 0 or not subscribers:
            continue
        previous = {m: sorted(p for t, p in held[m] if t == topic and 0 <= p < count)
                    for m in subscribers}
        owners = _assign_topic(count, subscribers, previous, load)
        for p, holders in enumerate(owners):
            for m in holders:
                out[m].add((topic, p))
                load[m] += 1
    return {m: frozenset(out[m]) for m in members}


def _assign_topic(count: int, subscribers: list[str], previous: Mapping[str, list[int]],
                  load: Mapping[str, int]) -> list[list[str]]:
    """One topic's partitions -> their holders (module docstring)."""
    sharing = -(-len(subscribers) // count)  # ceil(M / P)
    base, extra = divmod(sharing * count, len(subscribers))
    by_need = sorted(subscribers, key=lambda m: (load[m], -len(previous[m]), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_need)}
    owners = _sticky_fill(count, sharing, subscribers, previous, quota)
    if owners is None:
        owners = [[] for _ in range(count)]
        for slot in range(sharing * count):
            owners[slot // sharing].append(by_need[slot % len(by_need)])
    return owners


def _sticky_fill(count: int, sharing: int, subscribers: list[str],
                 previous: Mapping[str, list[int]],
                 quota: Mapping[str, int]) -> list[list[str]] | None:
    """Keep what members held, then fill; None if the fill gets stuck."""
    owners: list[list[str]] = [[] for _ in range(count)]
    taken = dict.fromkeys(subscribers, 0)
    for m in subscribers:
        for p in previous[m]:
            if taken[m] < quota[m] and len(owners[p]) < sharing:
                owners[p].append(m)
                taken[m] += 1
    order = {m: i for i, m in enumerate(subscribers)}
    for p in range(count):
        while len(owners[p]) < sharing:
            free = [m for m in subscribers if taken[m] < quota[m] and m not in owners[p]]
            if not free:
                return None
            pick = min(free, key=lambda m: (taken[m] - quota[m], order[m]))
            owners[p].append(pick)
            taken[pick] += 1
    return owners
