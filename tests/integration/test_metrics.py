"""Prometheus metrics at `metrics.listen` (issue 28, point 2; docs/operations.md):
real brokers scraped over HTTP, each scrape parsed with prometheus_client's text parser.

A rebalance of two confluent-kafka consumers moves the request counters and the group's
members, epoch and rebalance series, and the lag per partition is the log end minus what
was committed; the per-partition series go with their setting; a scrape of a busy broker
answers; every series the doc names is in a scrape (and the cluster's lease series on
PostgreSQL storage); a SASL broker refuses a scrape without its users' credentials and
shows a principal only the groups and topics it may DESCRIBE.
"""

from __future__ import annotations

import base64
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.coterie_broker import CoterieBroker, free_port

pytestmark = pytest.mark.timeout(180)

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
Samples = dict[str, list[tuple[dict[str, str], float]]]


def scrape(port: int, path: str = "/metrics", auth: tuple[str, str] | None = None,
           timeout: float = 10.0) -> tuple[int, str]:
    """(status, body) of one GET."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def samples(port: int, auth: tuple[str, str] | None = None) -> Samples:
    """Every sample of a scrape, by sample name (parsed with the Prometheus text parser)."""
    status, body = scrape(port, auth=auth)
    assert status == 200, body
    out: Samples = {}
    for family in text_string_to_metric_families(body):
        out.setdefault(family.name, [])
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def value(got: Samples, name: str, **labels: str) -> float | None:
    """The one sample of `name` with these labels (among others), None if absent."""
    found = [v for ls, v in got.get(name, []) if all(ls.get(k) == x for k, x in labels.items())]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


def total(got: Samples, name: str, **labels: str) -> float:
    return sum(v for ls, v in got.get(name, []) if all(ls.get(k) == x
                                                      for k, x in labels.items()))


def wait_until(what: str, check: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def documented_series() -> list[str]:
    """The names in the first column of the doc's series table."""
    names = re.findall(r"^\| `([a-z_]+)` \| (?:counter|gauge|histogram) \|", DOC.read_text(),
                       re.MULTILINE)
    assert len(names) > 20, names
    return names


def metrics_broker(factory: Callable[..., CoterieBroker], **more: str) -> CoterieBroker:
    broker = factory(config={"metrics.listen": f"127.0.0.1:{free_port()}",
                             "group.initial.rebalance.delay.ms": "0", **more})
    broker.metrics_port = int(broker.config["metrics.listen"].rsplit(":", 1)[1])  # type: ignore[attr-defined]
    return broker


def produce(bootstrap: str, topic: str, per_partition: int, partitions: int,
            **conf: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, value=f"{p}-{i}".encode(), key=f"k{i % 5}".encode(),
                             partition=p)
    assert producer.flush(30) == 0


def create_topic(bootstrap: str, name: str, partitions: int, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config)])[name].result(30)


def consumer(bootstrap: str, group: str, **conf: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "session.timeout.ms": 10000, "heartbeat.interval.ms": 500, **conf})


def poll_until_assigned(consumers: list[Consumer], partitions: int,
                        during: Callable[[], None] = lambda: None) -> None:
    """Poll every consumer until their assignments cover `partitions` partitions without
    overlap, calling `during` between polls (a scrape during the rebalance)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.1)
        during()
        owned = [tp.partition for c in consumers for tp in c.assignment()]
        if sorted(owned) == list(range(partitions)) and all(c.assignment() for c in consumers):
            return
    raise AssertionError("the consumers never shared the partitions")


# -- a rebalance ------------------------------------------------------------------------------
def test_a_scrape_during_a_rebalance_shows_requests_members_epoch_and_lag(coterie_factory):
    broker = metrics_broker(coterie_factory)
    port = broker.metrics_port
    topic, group = "orders", "metrics-group"
    create_topic(broker.bootstrap, topic, 4)
    produce(broker.bootstrap, topic, 25, 4)
    before = samples(port)
    first = consumer(broker.bootstrap, group)
    second = consumer(broker.bootstrap, group)
    during: list[Samples] = []
    try:
        first.subscribe([topic])
        poll_until_assigned([first], 4)
        second.subscribe([topic])
        poll_until_assigned([first, second], 4, lambda: during.append(samples(port)))
        assert during, "no scrape was made during the rebalance"

        # Each consumer commits its partitions at offset 10 + partition: the lag is then
        # 25 - (10 + p), the log end being 25 everywhere.
        for c in (first, second):
            offsets = [TopicPartition(topic, tp.partition, 10 + tp.partition)
                       for tp in c.assignment()]
            c.commit(offsets=offsets, asynchronous=False)

        def settled() -> Samples | None:
            got = samples(port)
            stable = value(got, "coterie_group_state", group=group, state="Stable")
            return got if stable == 1 and value(got, "coterie_group_members",
                                                group=group) == 2 else None

        after = wait_until("the group Stable with 2 members", settled)
    finally:
        first.close()
        second.close()

    # The requests moved, per API and version.
    name = "kafka_network_requestmetrics_requests_total"
    for api in ("JoinGroup", "SyncGroup", "OffsetCommit", "Fetch"):
        assert total(after, name, request=api) > total(before, name, request=api), api
    joins = [ls for ls, _ in after[name] if ls["request"] == "JoinGroup"]
    assert all(ls["version"].isdigit() for ls in joins)
    assert total(after, "kafka_network_requestmetrics_total_time_seconds_count",
                 request="JoinGroup") == total(after, name, request="JoinGroup")
    # A first JoinGroup without a member id is answered MEMBER_ID_REQUIRED (KIP-394).
    assert total(after, "kafka_network_requestmetrics_errors_total", request="JoinGroup",
                 error="MEMBER_ID_REQUIRED") >= 2
    assert all(ls["version"].isdigit()
               for ls, _ in after["kafka_network_requestmetrics_errors_total"])
    # The group: two members, a generation per rebalance, both rebalances counted, timed.
    assert value(after, "coterie_group_epoch", group=group, type="classic") >= 2
    assert value(after, "coterie_group_rebalances_total", group=group) >= 2
    assert value(after, "coterie_group_time_to_stable_seconds_count", group=group) >= 2
    assert value(after, "kafka_server_group_coordinator_metrics_group_count",
                 protocol="classic") >= 1
    # A scrape during the rebalance saw the group with one member, or rebalancing.
    assert any(value(s, "coterie_group_members", group=group) == 1
               or value(s, "coterie_group_state", group=group, state="PreparingRebalance")
               or value(s, "coterie_group_state", group=group, state="CompletingRebalance")
               for s in during)
    # The lag per partition: log end minus the committed offset.
    for p in range(4):
        assert value(after, "kafka_log_log_log_end_offset", topic=topic, partition=str(p)) == 25
        assert value(after, "coterie_group_committed_offset", group=group, topic=topic,
                     partition=str(p)) == 10 + p
        assert value(after, "coterie_group_lag", group=group, topic=topic,
                     partition=str(p)) == 25 - (10 + p)
        assert value(after, "kafka_log_log_size_bytes", topic=topic, partition=str(p)) > 0
    # Bytes in and out of the topic; the connections.
    assert value(after, "kafka_server_brokertopicmetrics_bytes_in_total", topic=topic) > 0
    assert value(after, "kafka_server_brokertopicmetrics_bytes_out_total", topic=topic) > 0
    assert total(after, "kafka_server_socket_server_metrics_connection_creation_total") >= 2
    assert total(after, "kafka_server_socket_server_metrics_connection_count") >= 1


def test_the_per_partition_group_series_can_be_turned_off(coterie_factory):
    broker = metrics_broker(coterie_factory, **{
        "metrics.group.partition.series.enable": "false"})
    create_topic(broker.bootstrap, "quiet", 2)
    produce(broker.bootstrap, "quiet", 5, 2)
    c = consumer(broker.bootstrap, "quiet-group")
    try:
        c.subscribe(["quiet"])
        poll_until_assigned([c], 2)
        c.commit(offsets=[TopicPartition("quiet", p, 3) for p in range(2)], asynchronous=False)
        got = wait_until("the group's members series", lambda: (
            s := samples(broker.metrics_port)) and value(
                s, "coterie_group_members", group="quiet-group") == 1 and s)
    finally:
        c.close()
    assert value(got, "kafka_log_log_log_end_offset", topic="quiet", partition="0") == 5
    assert not got.get("coterie_group_lag")
    assert not got.get("coterie_group_committed_offset")


def test_other_paths_and_methods_are_refused(coterie_factory):
    broker = metrics_broker(coterie_factory)
    assert scrape(broker.metrics_port, "/")[0] == 404
    assert scrape(broker.metrics_port, "/metrics/../admin")[0] == 404
    request = urllib.request.Request(f"http://127.0.0.1:{broker.metrics_port}/metrics",
                                     data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 405
    assert scrape(broker.metrics_port)[0] == 200  # and the broker still serves


def test_a_scrape_of_a_busy_broker_answers(coterie_factory):
    broker = metrics_broker(coterie_factory)
    create_topic(broker.bootstrap, "busy", 4)
    stop = threading.Event()
    sent = [0]

    def flood() -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0,
                             "batch.num.messages": 1, "queue.buffering.max.messages": 100000})
        while not stop.is_set():
            for _ in range(500):
                try:
                    producer.produce("busy", value=b"x" * 100)
                except BufferError:
                    break
            producer.poll(0)
            sent[0] += 1
        producer.purge()
        producer.flush(10)

    threads = [threading.Thread(target=flood) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        wait_until("the producers to get going", lambda: sent[0] > 10)
        counts = []
        for _ in range(5):
            started = time.monotonic()
            got = samples(broker.metrics_port)
            assert time.monotonic() - started < 5, "a scrape took too long"
            counts.append(total(got, "kafka_network_requestmetrics_requests_total",
                                request="Produce"))
            time.sleep(0.2)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert counts[-1] > counts[0] > 0


def test_every_documented_series_is_in_a_scrape(coterie_factory):
    broker = metrics_broker(coterie_factory, **{"log.cleaner.backoff.ms": "100",
                                                "log.retention.check.interval.ms": "200"})
    create_topic(broker.bootstrap, "docs", 2)
    create_topic(broker.bootstrap, "compacted", 1, **{
        "cleanup.policy": "compact", "segment.bytes": "2048",
        "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"})
    produce(broker.bootstrap, "docs", 10, 2)
    produce(broker.bootstrap, "compacted", 120, 1, **{"batch.num.messages": "5",
                                                      "linger.ms": "0"})
    c = consumer(broker.bootstrap, "docs-group")
    try:
        c.subscribe(["docs"])
        poll_until_assigned([c], 2)
        wait_until("a record fetched", lambda: (m := c.poll(0.2)) is not None
                   and m.error() is None)
        c.commit(offsets=[TopicPartition("docs", p, 4) for p in range(2)], asynchronous=False)
        got = wait_until("a cleaner run, a retention run and the group Stable", lambda: (
            s := samples(broker.metrics_port))
            and total(s, "coterie_log_cleaner_runs_total") >= 1
            and total(s, "coterie_log_retention_runs_total") >= 1
            and value(s, "coterie_group_time_to_stable_seconds_count", group="docs-group")
            and s)
    finally:
        c.close()
    missing = [name for name in documented_series()
               if not name.startswith("coterie_cluster_") and not got.get(name)
               and not got.get(name + "_count")]
    assert not missing, missing
    # Not on local files: the cluster's leases.
    assert not got.get("coterie_cluster_leases_held")


@pytest.mark.parametrize("storage", ["postgresql"], indirect=True)
def test_a_cluster_broker_shows_its_leases(coterie_factory):
    broker = metrics_broker(coterie_factory)
    create_topic(broker.bootstrap, "leased", 3)
    got = wait_until("the leases", lambda: (s := samples(broker.metrics_port)) and total(
        s, "coterie_cluster_leases_held_by_kind", kind="partition") >= 3 and s)
    held = value(got, "coterie_cluster_leases_held")
    assert held == total(got, "coterie_cluster_leases_held_by_kind") > 0
    missing = [n for n in documented_series() if n.startswith("coterie_cluster_")
               and not got.get(n)]
    assert not missing, missing


# -- security ---------------------------------------------------------------------------------
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
USERS = ("admin", "alice", "bob")
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" '
        + " ".join(f'user_{u}="{u}-secret"' for u in USERS) + ";")


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[CoterieBroker]:
    b = CoterieBroker(tmp_path / "data", config={
        "authorizer.class.name": STANDARD, "super.users": "User:admin"})
    b.sasl_port = free_port()  # type: ignore[attr-defined]
    b.metrics_port = free_port()  # type: ignore[attr-defined]
    b.config.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{b.sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "group.initial.rebalance.delay.ms": "0",
        "metrics.listen": f"127.0.0.1:{b.metrics_port}",
    })
    b.start()
    yield b
    b.stop()


def _sasl(b: CoterieBroker, user: str, **more: Any) -> dict[str, Any]:
    return {"bootstrap.servers": f"127.0.0.1:{b.sasl_port}",  # type: ignore[attr-defined]
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": f"{user}-secret", **more}


def test_a_sasl_broker_needs_credentials_and_shows_what_the_principal_may_describe(secured):
    b = secured
    port = b.metrics_port  # type: ignore[attr-defined]
    admin = AdminClient(_sasl(b, "admin"))
    for f in admin.create_topics([NewTopic("team-a-topic", 1, 1),
                                  NewTopic("team-b-topic", 1, 1)]).values():
        f.result(30)
    allow = [AclBinding(ResourceType.GROUP, "team-a", ResourcePatternType.LITERAL,
                        "User:alice", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW),
             AclBinding(ResourceType.TOPIC, "team-a-topic", ResourcePatternType.LITERAL,
                        "User:alice", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)]
    for f in admin.create_acls(allow).values():
        f.result(30)
    producer = Producer(_sasl(b, "admin"))
    for topic in ("team-a-topic", "team-b-topic"):
        producer.produce(topic, value=b"v")
    assert producer.flush(30) == 0
    # Two groups with committed offsets, made by the super user.
    for group, topic in (("team-a", "team-a-topic"), ("team-b", "team-b-topic")):
        c = Consumer(_sasl(b, "admin", **{"group.id": group, "enable.auto.commit": False}))
        try:
            c.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        finally:
            c.close()

    # No credentials, a wrong password, an unknown user, a malformed header: 401.
    status, _ = scrape(port)
    assert status == 401
    assert scrape(port, auth=("alice", "wrong"))[0] == 401
    assert scrape(port, auth=("mallory", "x"))[0] == 401
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics",
                                     headers={"Authorization": "Basic !!!not-base64"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 401
    assert refused.value.headers["WWW-Authenticate"].startswith("Basic")

    everything = samples(port, auth=("admin", "admin-secret"))
    groups = {ls["group"] for ls, _ in everything["coterie_group_committed_offset"]}
    assert {"team-a", "team-b"} <= groups
    alice = samples(port, auth=("alice", "alice-secret"))
    assert {ls["group"] for ls, _ in alice["coterie_group_committed_offset"]} == {"team-a"}
    assert value(alice, "coterie_group_lag", group="team-a", topic="team-a-topic",
                 partition="0") == 0
    topics = {ls["topic"] for name, rows in alice.items() for ls, _ in rows if "topic" in ls}
    assert topics == {"team-a-topic"}
    # Series without a group or topic are there for her too.
    assert alice["kafka_network_requestmetrics_requests_total"]
    bob = samples(port, auth=("bob", "bob-secret"))
    assert not any("group" in ls or "topic" in ls for rows in bob.values() for ls, _ in rows)
    assert bob["kafka_network_requestmetrics_requests_total"]


def test_a_kip848_consumer_group_has_its_epoch_and_rebalances(coterie_factory):
    broker = metrics_broker(coterie_factory)
    create_topic(broker.bootstrap, "modern", 2)
    produce(broker.bootstrap, "modern", 4, 2)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "modern-group",
                  "group.protocol": "consumer", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["modern"])
        poll_until_assigned([c], 2)
        c.commit(offsets=[TopicPartition("modern", p, 1) for p in range(2)],
                 asynchronous=False)
        got = wait_until("the consumer group Stable", lambda: (
            s := samples(broker.metrics_port)) and value(
                s, "coterie_group_state", group="modern-group", type="consumer",
                state="Stable") == 1 and s)
    finally:
        c.close()
    assert value(got, "coterie_group_members", group="modern-group") == 1
    assert value(got, "coterie_group_epoch", group="modern-group", type="consumer") >= 1
    assert value(got, "coterie_group_rebalances_total", group="modern-group") >= 1
    assert value(got, "kafka_server_group_coordinator_metrics_group_count",
                 protocol="consumer") == 1
    for p in range(2):
        assert value(got, "coterie_group_lag", group="modern-group", topic="modern",
                     partition=str(p)) == 3
    assert total(got, "kafka_network_requestmetrics_requests_total",
                 request="ConsumerGroupHeartbeat") >= 1


def test_series_are_capped_and_odd_names_are_escaped(coterie_factory):
    broker = metrics_broker(coterie_factory, **{"metrics.series.max": "3"})
    create_topic(broker.bootstrap, "capped", 2)
    produce(broker.bootstrap, "capped", 5, 2)
    odd = 'a "quoted" \\ group\nwith ünïcode <script>'
    groups = [odd, "g1", "g2", "g3", "g4"]
    for group in groups:
        c = consumer(broker.bootstrap, group)
        try:
            c.commit(offsets=[TopicPartition("capped", p, 2) for p in range(2)],
                     asynchronous=False)
        finally:
            c.close()
    got = samples(broker.metrics_port)
    shown = {ls["group"] for ls, _ in got["coterie_group_committed_offset"]}
    # The first three groups in id order; two groups left out, and of the per-partition
    # series of those three (six) three are left out.
    assert shown <= set(sorted(groups)[:3]) and odd in shown
    assert len(got["coterie_group_committed_offset"]) == 3
    assert value(got, "coterie_metrics_series_dropped", family="group") == 2
    assert value(got, "coterie_metrics_series_dropped", family="group_partition") == 3
    assert value(got, "coterie_group_lag", group=odd, topic="capped", partition="0") == 3
    assert len(got["kafka_log_log_log_end_offset"]) == 3
    assert value(got, "coterie_metrics_series_dropped", family="log_partition") > 0
