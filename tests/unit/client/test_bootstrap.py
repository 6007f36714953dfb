"""Bootstrap server lists as users write them."""

from __future__ import annotations

import pytest

from coterie.client.cluster import parse_bootstrap


def test_comma_separated_lists_and_sequences() -> None:
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap(["a:1", "[::1]:9092"]) == [("a", 1), ("::1", 9092)]


@pytest.mark.parametrize("bad", ["", "host", "host:port", ":9092", ","])
def test_malformed_lists_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_bootstrap(bad)
