"""Listeners on a cluster (issue 25 on the PostgreSQL storage): three brokers each with a
PLAINTEXT and an SSL listener register both addresses, and a client is told the addresses
of the listener it came in on, every broker's, whichever broker it asks."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.fixtures.coterie_broker import free_port
from tests.fixtures.coterie_cluster import CoterieCluster, uri_of, wait_until
from tests.fixtures.postgres import PostgresServer
from tests.integration.test_tls import certs  # noqa: F401 - the session's certificates

pytestmark = pytest.mark.timeout(240)


def _listed(admin: AdminClient, ports: dict[int, int]):
    """The cluster's metadata as `admin`'s broker answers it, once it lists the three
    brokers at `ports` (a broker learns of the others' registrations at its rounds, a
    moment after they start)."""
    md = admin.list_topics(timeout=10)
    return md if {b.id: b.port for b in md.brokers.values()} == ports else None


def test_each_listener_names_every_brokers_address_on_it(
        tmp_path: Path, postgres_server: PostgresServer, certs: Path) -> None:  # noqa: F811
    dsn = postgres_server.create_database()
    cluster = CoterieCluster(tmp_path, uri_of(postgres_server, dsn),
                             config={"ssl.keystore.location": str(certs / "server.pem")})
    ssl_ports = {}
    for node, b in enumerate(cluster.brokers, start=1):
        ssl_ports[node] = free_port()
        b.config["listeners"] = (f"PLAINTEXT://127.0.0.1:{b.port},"
                                 f"SSL://127.0.0.1:{ssl_ports[node]}")
    try:
        cluster.start()
        over_ssl = {"security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem")}
        plain_ports = {n: cluster.broker(n).port for n in (1, 2, 3)}
        for node in (1, 2, 3):
            on_ssl = AdminClient({"bootstrap.servers": f"127.0.0.1:{ssl_ports[node]}",
                                  **over_ssl})
            wait_until(lambda a=on_ssl: _listed(a, ssl_ports), 30,
                       f"node {node} naming the three brokers' SSL addresses")
            on_plain = AdminClient({"bootstrap.servers": cluster.broker(node).bootstrap})
            wait_until(lambda a=on_plain: _listed(a, plain_ports), 30,
                       f"node {node} naming the three brokers' PLAINTEXT addresses")
        bootstrap = ",".join(f"127.0.0.1:{p}" for p in ssl_ports.values())
        admin = AdminClient({"bootstrap.servers": bootstrap, **over_ssl})  # kept until done
        admin.create_topics([NewTopic("spread-tls", 3, 1)])["spread-tls"].result(30)
        p = Producer({"bootstrap.servers": bootstrap, **over_ssl, "acks": "all"})
        for i in range(300):
            p.produce("spread-tls", value=f"v{i}".encode())
        assert p.flush(30) == 0
        c = Consumer({"bootstrap.servers": bootstrap, **over_ssl, "group.id": "tls-cluster",
                      "auto.offset.reset": "earliest"})
        c.subscribe(["spread-tls"])
        got: set[bytes] = set()

        def all_read() -> bool:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.add(m.value())
            return len(got) == 300

        wait_until(all_read, 60, "every record read over TLS", interval=0)
        c.close()
    finally:
        cluster.stop()
        with contextlib.suppress(Exception):
            postgres_server.drop_database(dsn)
