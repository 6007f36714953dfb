"""The settings added for issue 10 are checked at start-up, like every other setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from coterie.broker.config import BrokerConfig, ConfigError


def load(**overrides: str) -> BrokerConfig:
    return BrokerConfig.load("127.0.0.1", 0, Path("unused"),
                             overrides={k.replace("_", "."): v for k, v in overrides.items()})


def test_defaults():
    cfg = load()
    assert cfg.max_partitions_per_request == 10_000
    assert cfg.props["log.max.open.files"] == "-1"


@pytest.mark.parametrize("value", ["0", "-5", "lots"])
def test_bad_partition_cap_stops_the_broker(value):
    with pytest.raises(ConfigError, match=r"max\.partitions\.per\.request"):
        load(max_partitions_per_request=value)


@pytest.mark.parametrize("value", ["0", "-2", "some"])
def test_bad_open_file_cap_stops_the_broker(value):
    with pytest.raises(ConfigError, match=r"log\.max\.open\.files"):
        load(log_max_open_files=value)


def test_good_values():
    cfg = load(max_partitions_per_request="5", log_max_open_files="64")
    assert cfg.max_partitions_per_request == 5
