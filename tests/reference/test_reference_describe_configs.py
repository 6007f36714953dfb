"""The config and log-administration scenarios of tests/integration (describe and alter
configs, group configs, the broker's configs, dynamic broker configs, DescribeCluster,
DeleteRecords), run as
written against Apache Kafka 4.2.1. The config scenarios share one broker of this module's
own, started with their broker settings (the session's shared broker has other settings).
Skipped, naming what is missing, without java or mvn."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fixtures.reference_broker import ReferenceBroker, reference_tools_missing
from tests.integration import test_delete_records as delete_records
from tests.integration import test_describe_cluster as describe_cluster
from tests.integration import test_describe_configs as scenarios

pytestmark = [pytest.mark.reference, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def configured_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReferenceBroker]:
    missing = reference_tools_missing()
    if missing:
        pytest.skip(f"reference broker needs java and mvn on PATH: missing {', '.join(missing)}")
    broker = ReferenceBroker(tmp_path_factory.mktemp("configured") / "data",
                             config=scenarios.SETTINGS)
    broker.start()
    yield broker
    broker.stop()


def test_describe_configs(configured_kafka):
    scenarios.scenario(configured_kafka.bootstrap)


def test_broker_configs(configured_kafka):
    scenarios.broker_scenario(configured_kafka.bootstrap)


def test_alter_configs(configured_kafka):
    scenarios.alter_scenario(configured_kafka.bootstrap)


def test_group_configs(configured_kafka):
    scenarios.group_scenario(configured_kafka.bootstrap)


def test_dynamic_broker_configs(configured_kafka):
    scenarios.dynamic_scenario(configured_kafka.bootstrap)


def test_dynamic_broker_config_names(configured_kafka):
    scenarios.dynamic_names_scenario(configured_kafka.bootstrap)


def test_describe_cluster(reference_kafka):
    describe_cluster.scenario(reference_kafka.bootstrap)


def test_delete_records(reference_kafka):
    delete_records.scenario(reference_kafka.bootstrap, topic="purged-reference")
