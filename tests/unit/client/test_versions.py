"""Version choice: the highest version inside the broker's range, the caller's range and
what kio can encode."""

from __future__ import annotations

from coterie.client.versions import MEMBER_API_RANGES, ApiKey, kio_has, pick_version


def test_highest_common_version_is_chosen() -> None:
    assert pick_version(ApiKey.JOIN_GROUP, (0, 9), (0, 9)) == 9
    assert pick_version(ApiKey.JOIN_GROUP, (2, 7), (0, 9)) == 7
    assert pick_version(ApiKey.JOIN_GROUP, (0, 12), (0, 5)) == 5


def test_disjoint_ranges_or_an_unknown_api_give_none() -> None:
    assert pick_version(ApiKey.JOIN_GROUP, (6, 9), (0, 5)) is None
    assert pick_version(ApiKey.HEARTBEAT, None, (0, 4)) is None


def test_a_version_kio_lacks_is_skipped_for_the_next_lower_one() -> None:
    assert not kio_has(ApiKey.JOIN_GROUP, 10)
    assert pick_version(ApiKey.JOIN_GROUP, (0, 10), (0, 10)) == 9


def test_every_member_range_is_fully_covered_by_kio() -> None:
    for api_key, (low, high) in MEMBER_API_RANGES.items():
        assert all(kio_has(api_key, v) for v in range(low, high + 1)), ApiKey(api_key).name
