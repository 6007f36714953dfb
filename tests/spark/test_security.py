"""A Spark job over SASL_SSL with SCRAM-SHA-512, against a broker that enforces ACLs (issue
25, point 5): the `coterie` format's writer and batch reader take Spark's Kafka security
options (`kafka.security.protocol`, `kafka.sasl.mechanism`, `kafka.sasl.jaas.config`, the PEM
truststore), the driver and the executors each log in, and the broker's ACLs apply to what
the job may read and write."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from pyspark.errors import PySparkException

from tests.fixtures.coterie_broker import CoterieBroker, free_port
from tests.integration.test_tls import certs  # noqa: F401 - the session's certificates
from tests.spark.helpers import create_topic

pytestmark = pytest.mark.timeout(240)

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
OPEN, CLOSED = "spark-secure", "spark-closed"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory,
            certs: Path) -> Iterator[CoterieBroker]:  # noqa: F811
    """PLAINTEXT for the operator (ANONYMOUS, a super user) and SASL_SSL with SCRAM-SHA-512
    for the job, whose user `spark` may read and write OPEN and nothing of CLOSED."""
    b = CoterieBroker(tmp_path_factory.mktemp("spark-secured") / "data", config={
        "authorizer.class.name": STANDARD, "super.users": "User:ANONYMOUS"})
    b.sasl_ssl_port = free_port()  # type: ignore[attr-defined]
    b.config.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{b.port},"
                     f"SASL_SSL://127.0.0.1:{b.sasl_ssl_port}",
        "ssl.keystore.location": str(certs / "server.pem"),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    })
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "spark", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
            b"spark-secret")]).values():
        f.result(10)
    create_topic(b.bootstrap, OPEN, 2)
    create_topic(b.bootstrap, CLOSED, 1)
    acls = [AclBinding(ResourceType.TOPIC, OPEN, ResourcePatternType.LITERAL, "User:spark",
                       "*", op, AclPermissionType.ALLOW)
            for op in (AclOperation.READ, AclOperation.WRITE)]
    for f in admin.create_acls(acls, request_timeout=10).values():
        f.result(10)
    yield b
    b.stop()


def _security(b: CoterieBroker, ca: Path, password: str = "spark-secret") -> dict[str, str]:
    return {
        "bootstrap.servers": f"127.0.0.1:{b.sasl_ssl_port}",  # type: ignore[attr-defined]
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
                                  f'required username="spark" password="{password}";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(ca),
    }


def test_a_spark_job_writes_and_reads_over_sasl_ssl_within_its_acls(
        spark, secured: CoterieBroker, certs: Path) -> None:  # noqa: F811
    options = _security(secured, certs / "ca.pem")
    rows = [(f"k{i}", f"v{i}") for i in range(40)]
    df = spark.createDataFrame(rows, "key string, value string")
    (df.write.format("coterie").options(**options).option("topic", OPEN)
     .mode("append").save())
    back = (spark.read.format("coterie").options(**options).option("subscribe", OPEN)
            .load().selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v")
            .collect())
    assert sorted((r.k, r.v) for r in back) == sorted(rows)
    # What the job's principal may not do, it cannot do through Spark either.
    with pytest.raises(PySparkException, match=r"(?i)authoriz"):
        (df.write.format("coterie").options(**options).option("topic", CLOSED)
         .mode("append").save())
    with pytest.raises(PySparkException, match=r"(?i)authenticat"):
        (spark.read.format("coterie").options(**_security(secured, certs / "ca.pem", "wrong"))
         .option("subscribe", OPEN).load().collect())
