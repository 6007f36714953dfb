"""The share groups' own configs: share.auto.offset.reset takes Kafka 4.2's three forms."""

from __future__ import annotations

import pytest

from coterie.broker.group_configs import GroupConfigs
from coterie.group import ConsumerGroupConfig
from coterie.log.errors import InvalidConfigError


def _configs(tmp_path) -> GroupConfigs:
    return GroupConfigs(tmp_path, {}, ConsumerGroupConfig(), lambda group, configs: None)


@pytest.mark.parametrize("value", ["latest", "earliest", "by_duration:PT1H",
                                   "by_duration:P1DT2H30M", "by_duration:PT0.5S"])
def test_accepted(tmp_path, value):
    _configs(tmp_path).check({"share.auto.offset.reset": value})


@pytest.mark.parametrize("value", ["nearest", "by_duration:", "by_duration:1h",
                                   "by_duration:-PT1H", "by_duration:PT-1H", "BY_DURATION:PT1H"])
def test_refused_with_kafkas_wording(tmp_path, value):
    with pytest.raises(InvalidConfigError,
                       match=f"Invalid value {value} for configuration share.auto.offset.reset"):
        _configs(tmp_path).check({"share.auto.offset.reset": value})
