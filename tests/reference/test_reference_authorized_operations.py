"""The authorized-operations scenario of tests/integration/test_authorized_operations.py,
run as written against Apache Kafka 4.2.1 (no authorizer configured), so coterie's bitfields
and which Metadata entries carry them are Kafka's. Skipped, naming what is missing, without
java or mvn."""

from __future__ import annotations

import pytest

from tests.integration import test_authorized_operations as authorized_operations

pytestmark = [pytest.mark.reference, pytest.mark.timeout(600)]


def test_authorized_operations(reference_kafka):
    authorized_operations.scenario(reference_kafka.bootstrap)
