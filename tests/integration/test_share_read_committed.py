"""share.isolation.level with real clients: a transactional confluent-kafka producer aborts
one transaction and commits another; a read_committed share group gets only the committed
records, a read_uncommitted one gets both; an open transaction holds read_committed delivery
at the last stable offset until it commits."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from tests.integration.test_share_consumers import SHARE_CONFIG


@pytest.fixture
def share_broker(coterie_factory):
    return coterie_factory(config=SHARE_CONFIG)


def _group(admin: AdminClient, group: str, isolation: str) -> None:
    entries = [ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
               for name, value in (("share.auto.offset.reset", "earliest"),
                                   ("share.isolation.level", isolation))]
    (future,) = admin.incremental_alter_configs([ConfigResource(
        ResourceType.GROUP, group, incremental_configs=entries)]).values()
    future.result(10)


def _drain(consumer: ShareConsumer, want: int, seconds: float) -> list[bytes]:
    """Poll until `want` records came or `seconds` passed; then once more, briefly, so that
    a record delivered beyond `want` would show."""
    got: list[bytes] = []
    deadline = time.monotonic() + seconds
    while len(got) < want and time.monotonic() < deadline:
        got += [m.value() for m in consumer.poll(0.5) or () if m.error() is None]
    got += [m.value() for m in consumer.poll(1.0) or () if m.error() is None]
    return got


def test_read_committed_share_groups_skip_aborted_records_and_wait_for_open_ones(share_broker):
    broker = share_broker
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(15)
    _group(admin, "committed", "read_committed")
    _group(admin, "uncommitted", "read_uncommitted")

    tx = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "orders-tx",
                   "linger.ms": 0})
    tx.init_transactions(15)
    tx.begin_transaction()
    for v in (b"aborted-0", b"aborted-1", b"aborted-2"):
        tx.produce("orders", v)
    tx.flush(10)
    tx.abort_transaction(15)
    tx.begin_transaction()
    for v in (b"committed-0", b"committed-1"):
        tx.produce("orders", v)
    tx.commit_transaction(15)
    # A transaction left open, then a plain record behind it.
    tx.begin_transaction()
    tx.produce("orders", b"open-0")
    tx.flush(10)
    plain = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    plain.produce("orders", b"plain-0")
    assert plain.flush(10) == 0

    committed = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "committed"})
    uncommitted = ShareConsumer({"bootstrap.servers": broker.bootstrap,
                                 "group.id": "uncommitted"})
    committed.subscribe(["orders"])
    uncommitted.subscribe(["orders"])
    try:
        assert sorted(_drain(uncommitted, 7, 30)) == sorted([
            b"aborted-0", b"aborted-1", b"aborted-2", b"committed-0", b"committed-1",
            b"open-0", b"plain-0"])
        # Held at the open transaction's first offset: neither open-0 nor plain-0 yet.
        assert sorted(_drain(committed, 2, 30)) == [b"committed-0", b"committed-1"]
        assert _drain(committed, 1, 2) == []
        tx.commit_transaction(15)
        assert sorted(_drain(committed, 2, 30)) == [b"open-0", b"plain-0"]
    finally:
        committed.close()
        uncommitted.close()
