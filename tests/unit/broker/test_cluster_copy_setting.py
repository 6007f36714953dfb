"""`cluster.copy.bytes` (how much of a partition a cluster broker copies and keeps) is
checked at start-up like every other setting, and reaches the broker as a number."""

from __future__ import annotations

from pathlib import Path

import pytest

from coterie.broker.config import BrokerConfig, ConfigError


def load(**overrides: str) -> BrokerConfig:
    cfg = BrokerConfig.load("127.0.0.1", 0, Path("unused"),
                            overrides={k.replace("_", "."): v for k, v in overrides.items()})
    cfg.validate()
    return cfg


def test_the_default_is_256_mib_and_a_value_is_taken():
    assert load().copy_bytes == 256 * 1024 * 1024
    assert load(cluster_copy_bytes="65536").copy_bytes == 65536


@pytest.mark.parametrize("value", ["0", "-1", "lots"])
def test_a_bad_copy_bound_stops_the_broker(value):
    with pytest.raises(ConfigError, match=r"cluster\.copy\.bytes"):
        load(cluster_copy_bytes=value)
