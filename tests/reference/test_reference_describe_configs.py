"""The DescribeConfigs scenario of tests/integration/test_describe_configs.py, run as written
against Apache Kafka 4.2.1 started with the same broker settings (a broker of its own: the
session's shared one has other settings). Skipped, naming what is missing, without java or
mvn."""

from __future__ import annotations

import pytest

from tests.fixtures.reference_broker import ReferenceBroker, reference_tools_missing
from tests.integration import test_describe_configs as scenarios

pytestmark = [pytest.mark.reference, pytest.mark.timeout(600)]


def test_describe_configs(tmp_path):
    missing = reference_tools_missing()
    if missing:
        pytest.skip(f"reference broker needs java and mvn on PATH: missing {', '.join(missing)}")
    broker = ReferenceBroker(tmp_path / "data", config=scenarios.SETTINGS)
    broker.start()
    try:
        scenarios.scenario(broker.bootstrap)
    finally:
        broker.stop()


def test_alter_configs(tmp_path):
    missing = reference_tools_missing()
    if missing:
        pytest.skip(f"reference broker needs java and mvn on PATH: missing {', '.join(missing)}")
    broker = ReferenceBroker(tmp_path / "data", config=scenarios.SETTINGS)
    broker.start()
    try:
        scenarios.alter_scenario(broker.bootstrap)
    finally:
        broker.stop()


def test_describe_cluster(reference_kafka):
    from tests.integration import test_describe_cluster

    test_describe_cluster.scenario(reference_kafka.bootstrap)


def test_delete_records(reference_kafka):
    from tests.integration import test_delete_records

    test_delete_records.scenario(reference_kafka.bootstrap, topic="purged-reference")


def test_group_configs(tmp_path):
    missing = reference_tools_missing()
    if missing:
        pytest.skip(f"reference broker needs java and mvn on PATH: missing {', '.join(missing)}")
    broker = ReferenceBroker(tmp_path / "data", config=scenarios.SETTINGS)
    broker.start()
    try:
        scenarios.group_scenario(broker.bootstrap)
    finally:
        broker.stop()


def test_dynamic_broker_configs(tmp_path):
    missing = reference_tools_missing()
    if missing:
        pytest.skip(f"reference broker needs java and mvn on PATH: missing {', '.join(missing)}")
    broker = ReferenceBroker(tmp_path / "data", config=scenarios.SETTINGS)
    broker.start()
    try:
        scenarios.dynamic_scenario(broker.bootstrap)
    finally:
        broker.stop()
