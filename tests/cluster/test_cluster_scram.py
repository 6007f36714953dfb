"""SCRAM credentials on a cluster (issue 25 on the PostgreSQL storage): a user made through
one broker logs in on another at once (the database's rows, then NOTIFY), and a credential
deleted through the other no longer logs in on the first."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kio.schema.errors import ErrorCode

from tests.fixtures.coterie_broker import CoterieBroker, free_port
from tests.fixtures.coterie_cluster import CoterieCluster, uri_of, wait_until
from tests.fixtures.postgres import PostgresServer
from tests.integration.test_sasl_scram import scram_login
from tests.kafka_raw import RawConnection

pytestmark = pytest.mark.timeout(180)

SHA512 = ScramMechanism.SCRAM_SHA_512


def _logs_in(b: CoterieBroker, password: str) -> bool:
    with RawConnection(b.host, b.sasl_port) as conn:  # type: ignore[attr-defined]
        answer = scram_login(conn, "SCRAM-SHA-512", "alice", password)
    return answer.error_code == ErrorCode.none


def test_a_credential_altered_through_one_broker_logs_in_on_another(
        tmp_path: Path, postgres_server: PostgresServer) -> None:
    dsn = postgres_server.create_database()
    cluster = CoterieCluster(tmp_path, uri_of(postgres_server, dsn), size=2,
                             config={"sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    for b in cluster.brokers:
        b.sasl_port = free_port()  # type: ignore[attr-defined]
        b.config["listeners"] = (f"PLAINTEXT://127.0.0.1:{b.port},"
                                 f"SASL_PLAINTEXT://127.0.0.1:{b.sasl_port}")
    one, two = cluster.brokers
    try:
        cluster.start()
        # The admin clients are kept in variables: a future outlives no destroyed client.
        admin_one = AdminClient({"bootstrap.servers": one.bootstrap})
        admin_two = AdminClient({"bootstrap.servers": two.bootstrap})
        admin_one.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(SHA512, 4096), b"alice-secret")])["alice"].result(10)
        wait_until(lambda: _logs_in(two, "alice-secret"), 10, "alice logs in on broker 2")
        assert not _logs_in(two, "guess")
        described = admin_two.describe_user_scram_credentials(["alice"])["alice"].result(10)
        assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
            (SHA512, 4096)]
        admin_two.alter_user_scram_credentials([UserScramCredentialDeletion(
            "alice", SHA512)])["alice"].result(10)
        wait_until(lambda: not _logs_in(one, "alice-secret"), 10,
                   "alice refused on broker 1 once deleted through broker 2")
    finally:
        cluster.stop()
        with contextlib.suppress(Exception):
            postgres_server.drop_database(dsn)
