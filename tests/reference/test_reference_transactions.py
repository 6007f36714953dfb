"""The transaction scenarios of tests/integration/test_transactions.py, run as written
against Apache Kafka 4.2.1: what they expect of coterie is what Kafka does (commit and abort
seen through read_committed readers, offsets sent to transactions with classic and
consumer-protocol groups, kafka-python's transactional producer, zombie fencing, and a
kill -9 of the broker mid-transaction, on a broker of its own since the session's is shared).
Skipped, naming what is missing, without java or mvn."""

from __future__ import annotations

import pytest

from tests.fixtures.reference_broker import (
    REFERENCE_GROUP_SETTINGS,
    ReferenceBroker,
    reference_tools_missing,
)
from tests.integration import test_transactions as scenarios

pytestmark = [pytest.mark.reference, pytest.mark.timeout(600)]


def test_commit_and_abort_with_read_committed_consumers(reference_kafka):
    scenarios.test_commit_and_abort_with_read_committed_consumers(reference_kafka)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_offsets_sent_to_a_transaction_commit_with_it(reference_kafka, protocol):
    scenarios.test_offsets_sent_to_a_transaction_commit_with_it(reference_kafka, protocol)


def test_kafka_python_transactional_producer(reference_kafka):
    scenarios.test_kafka_python_transactional_producer(reference_kafka)


def test_a_second_producer_fences_the_first(reference_kafka):
    scenarios.test_a_second_producer_fences_the_first(reference_kafka)


def test_kill9_mid_transaction_aborts_on_its_timeout(tmp_path):
    missing = reference_tools_missing()
    if missing:
        pytest.skip(f"reference broker needs java and mvn on PATH: missing {', '.join(missing)}")
    broker = ReferenceBroker(tmp_path / "data", config=REFERENCE_GROUP_SETTINGS)
    broker.start()
    try:
        scenarios.test_kill9_mid_transaction_aborts_on_its_timeout(broker)
    finally:
        broker.stop()


def test_a_version_2_transaction_on_the_wire(reference_kafka):
    from tests.integration import test_transactions_v2

    test_transactions_v2.test_a_version_2_transaction_on_the_wire(reference_kafka)
