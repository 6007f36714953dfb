"""Compacted topics with real clients (issue 14): the log cleaner keeps the last value of
every key, at its offset, and removes deletes once delete.retention.ms has passed.

A coterie broker with a short cleaner backoff; confluent-kafka creates a compacted topic of
small segments, produces ten versions of thirty keys, deletes five of them (tombstones), and
pads the log with one more key so the interesting records end up in sealed segments (the
cleaner never touches the active one). Reading from the beginning then gives each live key
once, with its last value, at the offset its producer was told; the deleted keys show only
their tombstone, and after a further pass (delete.retention.ms is 0 here) nothing at all.
All of it survives a kill -9. A record without a key is refused with INVALID_RECORD, as
Kafka refuses it.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.fixtures.coterie_broker import both_storages
from tests.integration.clients import broker_log_on_failure

pytestmark = both_storages  # every scenario on local files and on PostgreSQL

TOPIC = "kv"
KEYS = [f"k{i:02d}" for i in range(30)]
DELETED = KEYS[:5]


def _produce(bootstrap: str, records: list[tuple[str, str | None]]) -> dict[tuple, int]:
    """Produce (key, value) records in order; returns (key, value) -> offset."""
    offsets: dict[tuple, int] = {}
    errors: list[Any] = []

    def done(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            value = None if msg.value() is None else msg.value().decode()
            offsets[(msg.key().decode(), value)] = msg.offset()

    # Small batches: a produce larger than segment.bytes (2 KiB here) is refused.
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                         "batch.num.messages": 5})
    for key, value in records:
        producer.produce(TOPIC, key=key.encode(),
                         value=None if value is None else value.encode(),
                         partition=0, on_delivery=done)
        producer.poll(0)
    producer.flush(30)
    assert not errors, errors
    return offsets


def _read_all(bootstrap: str) -> list[tuple[int, str, str | None]]:
    """Every record of partition 0 from the log start to the high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        consumer.assign([TopicPartition(TOPIC, 0, low)])
        out: list[tuple[int, str, str | None]] = []
        deadline = time.monotonic() + 30
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            value = None if msg.value() is None else msg.value().decode()
            out.append((msg.offset(), msg.key().decode(), value))
        return out
    finally:
        consumer.close()


def _wait(what: str, check: Any, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_a_compacted_topic_keeps_the_last_value_of_each_key(coterie_factory):
    broker = coterie_factory(config={"log.cleaner.backoff.ms": "100"})
    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "2048",
        "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"})])[TOPIC].result(30)
    with broker_log_on_failure(broker.log_text):
        history = [(k, f"{k}-v{n}") for n in range(10) for k in KEYS]
        history += [(k, None) for k in DELETED]
        history += [("pad", f"pad-{n}") for n in range(60)]
        offsets = _produce(bootstrap, history)
        live = {k: f"{k}-v9" for k in KEYS[5:]}

        def cleaned_once() -> list | None:
            got = [r for r in _read_all(bootstrap) if r[1] != "pad"]
            return got if {k: v for _, k, v in got} == {**live, **dict.fromkeys(DELETED)} \
                and len(got) == len(KEYS) else None

        got = _wait("the first cleaning", cleaned_once)
        # Every survivor sits at the offset its producer was given.
        assert all(offsets[(k, v)] == o for o, k, v in got)

        # More writes make the log dirty again; the next pass drops the deletes (now clean
        # and older than delete.retention.ms = 0).
        _produce(bootstrap, [("pad", f"more-{n}") for n in range(60)])

        def deletes_gone() -> list | None:
            got = [r for r in _read_all(bootstrap) if r[1] != "pad"]
            return got if sorted((k, v) for _, k, v in got) == sorted(live.items()) else None

        got = _wait("the deletes to go", deletes_gone)
        before = _read_all(bootstrap)
        assert len(before) < len(history) / 4

        # A record without a key is refused.
        refused: list[Any] = []
        producer = Producer({"bootstrap.servers": bootstrap, "retries": 0})
        producer.produce(TOPIC, value=b"no key", partition=0,
                         on_delivery=lambda err, msg: refused.append(err))
        producer.flush(30)
        assert refused and refused[0] is not None
        assert refused[0].code() == KafkaError.INVALID_RECORD, refused

    broker.restart_after_kill9()
    with broker_log_on_failure(broker.log_text):
        assert _read_all(bootstrap) == before
        described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, TOPIC)])
        configs = next(iter(described.values())).result(30)
        assert configs["cleanup.policy"].value == "compact"
        assert configs["min.cleanable.dirty.ratio"].value == "0.01"
