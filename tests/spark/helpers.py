"""Producing and inspecting test data with confluent-kafka (a client independent of coterie's)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


@dataclass(frozen=True)
class Sent:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes], ...]


def create_topic(bootstrap: str, topic: str, partitions: int,
                 config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                             replication_factor=1, config=config or {})],
                                   operation_timeout=30).values():
        fut.result(timeout=30)


def produce(bootstrap: str, topic: str, count: int, *, partitions: int, start: int = 0,
            base_ts: int = 1_700_000_000_000, headers: bool = True,
            one_by_one: bool = False) -> list[Sent]:
    """`count` records spread round-robin over `partitions`; returns them with their offsets
    (`one_by_one`: each record its own batch)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    acked: list[Sent] = []

    def delivered(hdrs: list[tuple[str, bytes]]):
        def on_delivery(err, msg) -> None:
            assert err is None, err
            acked.append(Sent(msg.topic(), msg.partition(), msg.offset(), msg.key(),
                              msg.value(), msg.timestamp()[1], tuple(hdrs)))
        return on_delivery

    for i in range(start, start + count):
        hdrs = [("n", str(i).encode()), ("parity", b"even" if i % 2 == 0 else b"odd")]
        producer.produce(topic, key=f"key-{i}".encode(), value=f"value-{i}".encode(),
                         partition=i % partitions, timestamp=base_ts + i,
                         headers=hdrs if headers else None,
                         on_delivery=delivered(hdrs if headers else []))
        if one_by_one:
            producer.flush(30)
    producer.flush(30)
    assert len(acked) == count
    return acked


def group_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    """The committed offsets of `group`, as confluent-kafka's AdminClient lists them."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    result = futures[group].result(timeout=30)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions
            if tp.offset >= 0}


def by_position(rows: Sequence) -> dict[tuple[str, int, int], object]:
    return {(r.topic, r.partition, r.offset): r for r in rows}
