"""share.auto.offset.reset: where a new share partition starts."""

from __future__ import annotations

import pytest

from coterie.share import OffsetNotAvailable, parse_duration_ms, resolve_start_offset

HOUR = 3_600_000


def resolve(strategy: str, lookup=lambda ts: None) -> int:
    return resolve_start_offset(strategy, log_start_offset=10, log_end_offset=90,
                                now=100 * HOUR, offset_for_timestamp=lookup)


def test_earliest_and_latest():
    assert resolve("earliest") == 10
    assert resolve("latest") == 90
    assert resolve(" LATEST ") == 90


def test_by_duration_looks_up_now_minus_the_duration():
    asked = []

    def lookup(ts: int) -> int:
        asked.append(ts)
        return 42

    assert resolve("by_duration:PT1H30M", lookup) == 42
    assert asked == [100 * HOUR - 90 * 60_000]


def test_by_duration_with_no_record_that_recent_is_offset_not_available():
    with pytest.raises(OffsetNotAvailable):  # Kafka 4.2: OFFSET_NOT_AVAILABLE, retried
        resolve("by_duration:P1D")


def test_by_duration_never_starts_below_the_log_start():
    assert resolve("by_duration:PT1S", lambda ts: 3) == 10


# The values are java.time.Duration.parse(text).toMillis() (checked with the JDK).
@pytest.mark.parametrize(("text", "ms"), [
    ("PT0S", 0), ("PT1.5S", 1500), ("P2D", 172_800_000), ("P1DT2H3M4.005S", 93_784_005),
    ("pt10m", 600_000), ("PT-1H+90M", 1_800_000), ("PT1.S", 1000), ("P-1DT25H", HOUR),
    ("-PT-1S", 1000), ("PT0,25S", 250),
])
def test_iso_durations_as_java_reads_them(text, ms):
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "P", "PT", "1H", "PT1H2", "P1Y", "P1W", "PT-1S", "-PT1S",
                                  "P1DT", "PT1.S1"])
def test_bad_or_negative_durations_are_refused(text):
    with pytest.raises(ValueError):
        parse_duration_ms(text)


def test_unknown_strategies_are_refused():
    for strategy in ("none", "by_duration", "by_duration:", "by_duration:xyz", "smallest"):
        with pytest.raises(ValueError):
            resolve(strategy)
