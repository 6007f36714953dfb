"""Runs kafka-python's own leader-side assignors on a coterie AssignmentSpec: an independent
implementation for differential tests.

kafka-python 3.0.12 splits members into static and dynamic with `itertools.groupby` over the
members in the order given and keeps one run per kind, so members of an earlier run of the
same kind are dropped when static and dynamic members interleave (a static, a dynamic, then a
static member: the first static member gets nothing). Its leader receives members in the
coordinator's order; here they are handed over static first, which is the order under which
kafka-python computes what it means to.
"""

from __future__ import annotations

from types import SimpleNamespace

from coterie.assign.spec import AssignmentSpec, TopicPartition


def kafka_python_assign(assignor: type,
                        spec: AssignmentSpec) -> dict[str, frozenset[TopicPartition]]:
    def partitions_for_topic(topic: str) -> set[int] | None:
        t = spec.topics.get(topic)
        return None if t is None else set(range(t.partitions))

    cluster = SimpleNamespace(partitions_for_topic=partitions_for_topic)
    members = [
        SimpleNamespace(member_id=m.member_id, group_instance_id=m.instance_id,
                        metadata=SimpleNamespace(topics=sorted(m.subscribed_topics)))
        for m in sorted(spec.members.values(), key=lambda m: m.instance_id is None)
    ]
    result = assignor.assign(cluster, members)
    return {mid: frozenset((topic, p) for topic, ps in a.assigned_partitions for p in ps)
            for mid, a in result.items()}
