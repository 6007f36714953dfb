"""How the operator commands read their option values (no broker needed): Kafka's
`--topic T[:P,...]`, `--to-datetime`, and the one-of rule of the `--to-*` options."""

from __future__ import annotations

import datetime

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coterie.cli.groups import (
    _reset_spec,
    parse_datetime,
    parse_duration_ms,
    parse_topic_partitions,
)


def test_topic_specs_name_topics_or_some_of_their_partitions():
    assert parse_topic_partitions(("a", "b:2,0", "b:1", "c:3")) == {
        "a": None, "b": (0, 1, 2), "c": (3,)}
    assert parse_topic_partitions(("a", "a:1")) == {"a": None}  # all of it stays all of it


@pytest.mark.parametrize("spec", [":1", "a:", "a:x", "a:-1", "a:1,,x"])
def test_malformed_topic_specs_are_usage_errors(spec):
    with pytest.raises(click.BadParameter):
        parse_topic_partitions((spec,))


@given(st.lists(st.integers(0, 10_000), min_size=1))
def test_any_partition_list_reads_back_sorted_and_unique(partitions):
    spec = "t:" + ",".join(map(str, partitions))
    assert parse_topic_partitions((spec,)) == {"t": tuple(sorted(set(partitions)))}


def test_datetimes_with_a_zone_are_exact_and_without_one_are_local():
    assert parse_datetime("2024-01-02T03:04:05.678Z") == 1704164645678
    assert parse_datetime("2024-01-02T04:04:05.678+01:00") == 1704164645678
    local = datetime.datetime(2024, 1, 2, 3, 4, 5, 678000).astimezone()
    assert parse_datetime("2024-01-02T03:04:05.678") == int(local.timestamp() * 1000)
    with pytest.raises(click.BadParameter):
        parse_datetime("yesterday")


def test_exactly_one_reset_target():
    assert _reset_spec(False, False, None, -3, None).kind == "shift"
    with pytest.raises(click.UsageError, match="exactly one"):
        _reset_spec(True, True, None, None, None)
    with pytest.raises(click.UsageError, match="exactly one"):
        _reset_spec(False, False, None, None, None)
    with pytest.raises(click.BadParameter):
        _reset_spec(False, False, None, None, -1)


@pytest.mark.parametrize(("text", "ms"), [
    ("PT15M", 15 * 60_000), ("P1DT2H", 26 * 3_600_000), ("PT0.5S", 500), ("pt1h30m", 5_400_000),
    ("P2D", 2 * 86_400_000), ("PT1M-30S", 30_000), ("PT0S", 0)])
def test_by_duration_reads_java_durations(text, ms):
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "P", "PT", "P1DT", "15M", "PT1X", "-PT5M", "P1W"])
def test_malformed_or_negative_durations_are_usage_errors(text):
    with pytest.raises(click.BadParameter):
        parse_duration_ms(text)


def test_by_duration_is_a_time_that_long_before_now():
    import time

    spec = _reset_spec(False, False, None, None, None, "PT1H")
    assert spec.kind == "datetime"
    assert abs(spec.value - (time.time() * 1000 - 3_600_000)) < 5_000
    with pytest.raises(click.UsageError):
        _reset_spec(False, True, None, None, None, "PT1H")
