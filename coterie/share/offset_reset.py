"""Where a new share partition starts: Kafka's share.auto.offset.reset group config
(earliest, latest, by_duration:<ISO-8601 duration>). The broker passes in what it knows of
the log, so this stays pure."""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import Final

__all__ = ["OffsetNotAvailable", "parse_duration_ms", "resolve_start_offset"]

DEFAULT_STRATEGY: Final = "latest"  # GroupConfig.SHARE_AUTO_OFFSET_RESET_DEFAULT

# java.time.Duration.parse's grammar (days, hours, minutes, seconds with up to 9 decimals),
# which Kafka's ShareGroupAutoOffsetResetStrategy uses.
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE)


class OffsetNotAvailable(LookupError):
    """by_duration found no record that recent: Kafka 4.2 fails the share partition's
    initialization with OFFSET_NOT_AVAILABLE (ShareFetchUtils.offsetForTimestamp) and tries
    again on the next fetch; the broker answers the same."""


def parse_duration_ms(text: str) -> int:
    """Milliseconds of an ISO-8601 duration such as `PT1H30M` or `P1DT0.5S`; ValueError for
    anything Java's Duration.parse refuses, and for a negative duration, which Kafka refuses."""
    m = _DURATION.fullmatch(text.strip())
    if m is None or m.group(3) == "T" or not any(m.group(i) for i in (2, 4, 5, 6)):
        raise ValueError(f"not an ISO-8601 duration: {text!r}")
    sign, days, _, hours, minutes, seconds, fraction = m.groups()
    total = (Decimal(days or 0) * 86400 + Decimal(hours or 0) * 3600
             + Decimal(minutes or 0) * 60 + Decimal(seconds or 0))
    if fraction:
        frac = Decimal("0." + fraction)
        total += -frac if (seconds or "").startswith("-") else frac
    if sign == "-":
        total = -total
    if total < 0:
        raise ValueError(f"a negative duration is not allowed: {text!r}")
    return int(total * 1000)


def resolve_start_offset(strategy: str, *, log_start_offset: int, log_end_offset: int,
                         now: int, offset_for_timestamp: Callable[[int], int | None]) -> int:
    """The start offset of a new share partition.

    earliest: the log start; latest: the log end; by_duration:<d>: the first offset whose
    timestamp is at or after `now - d` (`offset_for_timestamp`, ListOffsets' lookup), and
    `OffsetNotAvailable` when there is none, as in Kafka 4.2. ValueError for any other
    strategy (Kafka refuses it when the config is set).
    """
    s = strategy.strip().lower()
    if s == "earliest":
        return log_start_offset
    if s == "latest":
        return log_end_offset
    if s.startswith("by_duration:"):
        timestamp = now - parse_duration_ms(strategy.strip()[len("by_duration:"):])
        found = offset_for_timestamp(timestamp)
        if found is None:
            raise OffsetNotAvailable(f"no record at or after timestamp {timestamp}")
        return max(found, log_start_offset)
    raise ValueError(f"unknown share.auto.offset.reset strategy {strategy!r}")
