"""`coterie topics ...` against a real coterie broker over TCP (click's CliRunner in-process):
create, list, describe (partitions, leader, replicas, ISR, configs, sizes), alter (partitions
and configs), delete, each checked through the broker's answers; bad input exits 1 or 2."""

from __future__ import annotations

import json
import uuid

import pytest
from click.testing import CliRunner, Result
from confluent_kafka import Producer

from coterie.cli.main import main
from coterie.cli.topics import PARTITION_COLUMNS
from tests.fixtures.coterie_broker import free_port

pytestmark = pytest.mark.timeout(120)


def cli(broker, *args: str) -> Result:
    return CliRunner().invoke(main, [*args, "--bootstrap-server", broker.bootstrap,
                                     "--timeout", "20"])


def cli_json(broker, *args: str):
    result = cli(broker, *args, "--output", "json")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def test_create_describe_alter_delete(coterie):
    create_describe_alter_delete(coterie)


def create_describe_alter_delete(coterie) -> None:
    """The scenario, on any broker (tests/reference runs it on Kafka 4.2.1 too)."""
    name = f"events-{uuid.uuid4().hex[:6]}"
    created = cli(coterie, "topics", "create", name, "--partitions", "2",
                  "--config", "retention.ms=3600000")
    assert created.exit_code == 0, created.stderr
    again = cli(coterie, "topics", "create", name, "--partitions", "2")
    assert again.exit_code == 1 and f"topic '{name}' already exists" in again.stderr
    assert cli(coterie, "topics", "create", name, "--if-not-exists").exit_code == 0

    p = Producer({"bootstrap.servers": coterie.bootstrap, "linger.ms": 0})
    for i in range(20):
        p.produce(name, value=b"x" * 100, partition=i % 2)
    assert p.flush(15) == 0

    listed = {t["topic"]: t for t in cli_json(coterie, "topics", "list")}
    assert listed[name] == {"topic": name, "partition_count": 2, "replication_factor": 1,
                            "internal": False}
    # (Kafka makes __consumer_offsets at the first group's need, coterie at start.)
    assert all(t["internal"] for n, t in listed.items() if n == "__consumer_offsets")
    public = {t["topic"]: t for t in cli_json(coterie, "topics", "list", "--exclude-internal")}
    assert name in public and not any(t["internal"] for t in public.values())
    assert set(public) == {n for n, t in listed.items() if not t["internal"]}

    (doc,) = cli_json(coterie, "topics", "describe", name)
    assert doc["configs"] == {"retention.ms": "3600000"}
    assert [(q["partition"], q["leader"], q["replicas"], q["isr"]) for q in doc["partitions"]] \
        == [(0, 1, [1], [1]), (1, 1, [1], [1])]
    assert all(q["size"] > 10 * 100 for q in doc["partitions"])  # ten 100-byte values each
    assert doc["size"] == sum(q["size"] for q in doc["partitions"])

    table = cli(coterie, "topics", "describe", name)
    assert table.exit_code == 0, table.stderr
    summary, header, *rows = table.stdout.splitlines()
    assert f"Topic: {name}" in summary and "PartitionCount: 2" in summary
    assert "Configs: retention.ms=3600000" in summary
    assert header.split() == list(PARTITION_COLUMNS)
    assert [r.split()[:5] for r in rows] == [[name, "0", "1", "1", "1"],
                                             [name, "1", "1", "1", "1"]]

    altered = cli(coterie, "topics", "alter", name, "--partitions", "3",
                  "--add-config", "cleanup.policy=compact", "--delete-config", "retention.ms")
    assert altered.exit_code == 0, altered.stderr
    (doc,) = cli_json(coterie, "topics", "describe", name)
    assert doc["partition_count"] == 3
    assert doc["configs"] == {"cleanup.policy": "compact"}
    shrink = cli(coterie, "topics", "alter", name, "--partitions", "1")
    assert shrink.exit_code == 1 and "INVALID_PARTITIONS" in shrink.stderr

    deleted = cli(coterie, "topics", "delete", name)
    assert deleted.exit_code == 0, deleted.stderr
    gone = cli(coterie, "topics", "describe", name)
    assert gone.exit_code == 1 and f"topic '{name}' does not exist" in gone.stderr
    assert cli(coterie, "topics", "delete", name).exit_code == 1
    assert cli(coterie, "topics", "delete", name, "--if-exists").exit_code == 0


def test_bad_input(coterie):
    assert cli(coterie, "topics", "alter", "t").exit_code == 2  # nothing to alter
    bad_config = cli(coterie, "topics", "create", "t", "--config", "novalue")
    assert bad_config.exit_code == 2 and "KEY=VALUE" in bad_config.stderr
    assert cli(coterie, "topics", "create", "t", "--partitions", "0").exit_code == 2
    unreachable = CliRunner().invoke(main, ["topics", "list", "--bootstrap-server",
                                            "127.0.0.1:1", "--timeout", "1"])
    assert unreachable.exit_code == 1 and unreachable.stderr.startswith("coterie: error:")
    missing = cli(coterie, "topics", "list", "--command-config", "/nonexistent.properties")
    assert missing.exit_code == 2  # click checks the file exists


def test_command_config_secures_the_connection(coterie_factory, tmp_path):
    """--command-config: a Kafka client properties file; SASL/SCRAM over a SASL_PLAINTEXT
    listener logs in, a wrong password ends in exit 1 and the broker's reason."""
    sasl_port = free_port()
    broker = coterie_factory(start=False, config={
        "sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    broker.config["listeners"] = (f"PLAINTEXT://127.0.0.1:{broker.port},"
                                  f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}")
    broker.args += ["--add-scram", "SCRAM-SHA-512=[name=ops,password=ops-secret]"]
    broker.start()

    def with_password(password: str) -> Result:
        props = tmp_path / f"client-{password}.properties"
        props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                         "sasl.jaas.config=org.apache.kafka.common.security.scram."
                         f'ScramLoginModule required username="ops" password="{password}";\n')
        return CliRunner().invoke(main, ["topics", "list", "--output", "json",
                                         "--bootstrap-server", f"127.0.0.1:{sasl_port}",
                                         "--command-config", str(props), "--timeout", "10"])

    ok = with_password("ops-secret")
    assert ok.exit_code == 0, ok.stderr
    assert "__consumer_offsets" in {t["topic"] for t in json.loads(ok.stdout)}
    refused = with_password("wrong")
    assert refused.exit_code == 1
    assert "authentication" in refused.stderr.lower() and "Traceback" not in refused.output
