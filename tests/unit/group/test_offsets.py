"""OffsetStore: commands only emit records; state comes only from replaying them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coterie.group.offsets.store import OffsetCommitRequestEntry, OffsetStore, metadata_too_large
from coterie.group.records.classic import GroupMetadataKey, GroupMetadataValue
from coterie.group.records.classic_codec import decode, encode
from coterie.group.records.offsets import OffsetCommitKey, OffsetCommitValue
from coterie.group.records.record import Record

NOW = 1_700_000_000_000
DAY = 86_400_000
RETENTION = 7 * DAY


def applied(store: OffsetStore, records: list[Record]) -> list[Record]:
    """Replay `records` as the caller does once they are durable; return them for asserts."""
    for record in records:
        store.replay(record)
    return records


def commit(store: OffsetStore, group: str, now_ms: int, *entries: OffsetCommitRequestEntry):
    return applied(store, store.commit(group, entries, now_ms))


def entry(
    topic: str = "t", partition: int = 0, offset: int = 10, **kwargs
) -> OffsetCommitRequestEntry:
    return OffsetCommitRequestEntry(topic=topic, partition=partition, offset=offset, **kwargs)


def snapshot(store: OffsetStore) -> dict[str, dict[tuple[str, int], OffsetCommitValue]]:
    return {group: store.fetch_all(group) for group in store.groups()}


# --------------------------------------------------------------------------------------------
# Commit, replay, fetch.
# --------------------------------------------------------------------------------------------


def test_commit_does_not_mutate_until_replayed() -> None:
    store = OffsetStore()
    records = store.commit("g", [entry(offset=5, leader_epoch=3, metadata="m")], NOW)
    assert records == [
        Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(5, 3, "m", NOW, -1)),
    ]
    assert store.fetch("g", "t", 0) is None
    assert not store.has_offsets("g")
    assert store.groups() == set()

    applied(store, records)
    assert store.fetch("g", "t", 0) == OffsetCommitValue(5, 3, "m", NOW, -1)
    assert store.has_offsets("g")
    assert store.groups() == {"g"}
    assert store.fetch_all("g") == {("t", 0): OffsetCommitValue(5, 3, "m", NOW, -1)}


def test_null_metadata_is_stored_empty_and_expiry_is_kept() -> None:
    store = OffsetStore()
    commit(store, "g", NOW, entry(metadata=None, expire_timestamp_ms=NOW + 5))
    assert store.fetch("g", "t", 0) == OffsetCommitValue(10, -1, "", NOW, NOW + 5)


def test_later_commit_overwrites() -> None:
    store = OffsetStore()
    commit(store, "g", NOW, entry(offset=1), entry(partition=1, offset=2))
    commit(store, "g", NOW + 1, entry(offset=3))
    assert store.fetch_all("g") == {
        ("t", 0): OffsetCommitValue(3, -1, "", NOW + 1),
        ("t", 1): OffsetCommitValue(2, -1, "", NOW),
    }


def test_groups_are_separate() -> None:
    store = OffsetStore()
    commit(store, "a", NOW, entry(offset=1))
    commit(store, "b", NOW, entry(offset=2))
    assert store.fetch("a", "t", 0).offset == 1
    assert store.fetch("b", "t", 0).offset == 2
    assert store.fetch("c", "t", 0) is None
    assert store.fetch_all("c") == {}


def test_fetch_all_is_a_copy() -> None:
    store = OffsetStore()
    commit(store, "g", NOW, entry())
    store.fetch_all("g").clear()
    assert store.fetch("g", "t", 0) is not None


def test_replay_ignores_group_metadata_records() -> None:
    store = OffsetStore()
    store.replay(
        Record(GroupMetadataKey("g"), GroupMetadataValue("consumer", 1, None, None, 0, ()))
    )
    store.replay(Record(GroupMetadataKey("g"), None))
    assert store.groups() == set()


def test_replay_rejects_mismatched_value() -> None:
    store = OffsetStore()
    with pytest.raises(TypeError):
        store.replay(
            Record(OffsetCommitKey("g", "t", 0), GroupMetadataValue("", 0, None, None, 0, ()))
        )


def test_replay_through_the_codec() -> None:
    # Recovery path: bytes from the log, decoded, replayed.
    live = OffsetStore()
    records = commit(live, "g", NOW, entry(offset=1, leader_epoch=4, metadata="x"))
    records += applied(live, live.delete("g", [("t", 0)]))
    records += commit(live, "g", NOW + 1, entry(partition=2, offset=9))
    recovered = OffsetStore()
    for record in records:
        recovered.replay(decode(*encode(record)))
    assert snapshot(recovered) == snapshot(live)


# --------------------------------------------------------------------------------------------
# Tombstones.
# --------------------------------------------------------------------------------------------


def test_delete_emits_tombstones_only_for_existing_offsets() -> None:
    store = OffsetStore()
    commit(store, "g", NOW, entry(partition=0), entry(partition=1))
    records = store.delete("g", [("t", 0), ("t", 0), ("t", 7), ("other", 0)])
    assert records == [Record(OffsetCommitKey("g", "t", 0), None)]
    assert store.fetch("g", "t", 0) is not None  # not yet replayed
    applied(store, records)
    assert store.fetch("g", "t", 0) is None
    assert store.fetch("g", "t", 1) is not None
    assert store.delete("nope", [("t", 0)]) == []


def test_last_tombstone_removes_the_group() -> None:
    store = OffsetStore()
    commit(store, "g", NOW, entry())
    applied(store, store.delete("g", [("t", 0)]))
    assert not store.has_offsets("g")
    assert store.groups() == set()


def test_delete_group() -> None:
    store = OffsetStore()
    commit(store, "g", NOW, entry(partition=0), entry(topic="u", partition=3))
    commit(store, "h", NOW, entry())
    records = store.delete_group("g")
    assert set(records) == {
        Record(OffsetCommitKey("g", "t", 0), None),
        Record(OffsetCommitKey("g", "u", 3), None),
    }
    applied(store, records)
    assert store.groups() == {"h"}
    assert store.delete_group("g") == []


def test_replaying_a_tombstone_for_an_unknown_key_is_harmless() -> None:
    # Compaction can leave a tombstone whose earlier value is gone.
    store = OffsetStore()
    store.replay(Record(OffsetCommitKey("g", "t", 0), None))
    commit(store, "g", NOW, entry(partition=1))
    store.replay(Record(OffsetCommitKey("g", "t", 0), None))
    assert store.fetch_all("g") == {("t", 1): OffsetCommitValue(10, -1, "", NOW)}


# --------------------------------------------------------------------------------------------
# Expiry (KIP-211).
# --------------------------------------------------------------------------------------------


def expired_keys(store: OffsetStore, now_ms: int, empty_since: dict[str, int | None]):
    records = store.expire(now_ms, RETENTION, empty_since)
    assert all(r.value is None for r in records)
    return {(r.key.group_id, r.key.topic, r.key.partition) for r in records}


def test_standalone_offsets_expire_retention_after_commit() -> None:
    store = OffsetStore()
    commit(store, "solo", NOW, entry())
    assert expired_keys(store, NOW + RETENTION - 1, {}) == set()
    assert expired_keys(store, NOW + RETENTION, {}) == {("solo", "t", 0)}


def test_empty_group_expires_retention_after_it_became_empty() -> None:
    store = OffsetStore()
    commit(store, "g", NOW, entry())
    empty_since = NOW + DAY
    assert expired_keys(store, empty_since + RETENTION - 1, {"g": empty_since}) == set()
    assert expired_keys(store, empty_since + RETENTION, {"g": empty_since}) == {("g", "t", 0)}


def test_commit_after_becoming_empty_counts_from_the_commit() -> None:
    store = OffsetStore()
    empty_since = NOW
    commit(store, "g", NOW + DAY, entry())
    assert expired_keys(store, empty_since + RETENTION, {"g": empty_since}) == set()
    assert expired_keys(store, NOW + DAY + RETENTION, {"g": empty_since}) == {("g", "t", 0)}


def test_group_with_members_never_expires() -> None:
    store = OffsetStore()
    commit(store, "g", NOW, entry(), entry(partition=1, expire_timestamp_ms=NOW + 1))
    assert expired_keys(store, NOW + 100 * RETENTION, {"g": None}) == set()


def test_explicit_expire_timestamp_wins_for_empty_and_standalone_groups() -> None:
    store = OffsetStore()
    for group in ("g", "solo"):
        commit(
            store,
            group,
            NOW,
            entry(partition=0, expire_timestamp_ms=NOW + 10),
            entry(partition=1, expire_timestamp_ms=NOW + RETENTION * 3),
            entry(partition=2),
        )
    empty = {"g": NOW}
    assert expired_keys(store, NOW + 9, empty) == set()
    assert expired_keys(store, NOW + 10, empty) == {("g", "t", 0), ("solo", "t", 0)}
    # Past the normal retention, the explicit later expiry still holds its offset.
    assert expired_keys(store, NOW + RETENTION, empty) == {
        ("g", "t", 0),
        ("solo", "t", 0),
        ("g", "t", 2),
        ("solo", "t", 2),
    }


def test_expire_does_not_mutate_and_replay_removes() -> None:
    store = OffsetStore()
    commit(store, "g", NOW, entry())
    records = store.expire(NOW + RETENTION, RETENTION, {"g": NOW})
    assert store.has_offsets("g")
    applied(store, records)
    assert not store.has_offsets("g")
    assert store.expire(NOW + RETENTION, RETENTION, {"g": NOW}) == []


# --------------------------------------------------------------------------------------------
# offset.metadata.max.bytes
# --------------------------------------------------------------------------------------------


def test_metadata_too_large_counts_utf16_units_like_java_string_length() -> None:
    assert not metadata_too_large(None, 0)
    assert not metadata_too_large("", 0)
    assert not metadata_too_large("abcd", 4)
    assert metadata_too_large("abcde", 4)
    # "é" is 2 UTF-8 bytes but 1 UTF-16 unit: Kafka accepts 4 of them under a limit of 4.
    assert not metadata_too_large("éééé", 4)
    # "😀" is outside the BMP: a surrogate pair, so 2 units in Java.
    assert metadata_too_large("😀😀😀", 5)
    assert not metadata_too_large("😀😀", 4)


# --------------------------------------------------------------------------------------------
# Property: the emitted records are the whole truth.
# --------------------------------------------------------------------------------------------

groups = st.sampled_from(["a", "b", "c"])
topic_partitions = st.tuples(st.sampled_from(["t", "u"]), st.integers(0, 3))
entries = st.builds(
    OffsetCommitRequestEntry,
    topic=st.sampled_from(["t", "u"]),
    partition=st.integers(0, 3),
    offset=st.integers(0, 1000),
    leader_epoch=st.integers(-1, 5),
    metadata=st.none() | st.text(max_size=5),
    expire_timestamp_ms=st.just(-1) | st.integers(NOW, NOW + 2 * RETENTION),
)
operations = st.one_of(
    st.tuples(st.just("commit"), groups, st.lists(entries, max_size=4)),
    st.tuples(st.just("delete"), groups, st.lists(topic_partitions, max_size=4)),
    st.tuples(st.just("delete_group"), groups),
    st.tuples(
        st.just("expire"),
        st.dictionaries(groups, st.none() | st.integers(NOW, NOW + RETENTION)),
    ),
    st.tuples(st.just("tick"), st.integers(0, 2 * RETENTION)),
)


@settings(max_examples=200)
@given(st.lists(operations, max_size=30))
def test_replaying_emitted_records_rebuilds_the_live_store(ops) -> None:
    live = OffsetStore()
    log: list[Record] = []
    now = NOW
    for op in ops:
        before = snapshot(live)
        match op:
            case ("commit", group, commits):
                records = live.commit(group, commits, now)
            case ("delete", group, partitions):
                records = live.delete(group, partitions)
            case ("delete_group", group):
                records = live.delete_group(group)
            case ("expire", empty_since):
                records = live.expire(now, RETENTION, empty_since)
            case ("tick", delta):
                now += delta
                continue
        # Emitting never changes the store; replaying does.
        assert snapshot(live) == before
        applied(live, records)
        log.extend(records)

    recovered = OffsetStore()
    for record in log:
        recovered.replay(decode(*encode(record)))
    # v1 (explicit-expiry) values lose the leader epoch on disk; compare everything else.
    assert strip_epochs_of_expiring(snapshot(recovered)) == strip_epochs_of_expiring(snapshot(live))
    assert recovered.groups() == live.groups()

    plain = OffsetStore()
    for record in log:
        plain.replay(record)
    assert snapshot(plain) == snapshot(live)


def strip_epochs_of_expiring(state):
    return {
        group: {
            tp: (
                OffsetCommitValue(
                    v.offset, -1, v.metadata, v.commit_timestamp_ms, v.expire_timestamp_ms
                )
                if v.expire_timestamp_ms != -1
                else v
            )
            for tp, v in offsets.items()
        }
        for group, offsets in state.items()
    }


@settings(max_examples=100)
@given(st.lists(operations, max_size=20))
def test_commands_do_not_mutate(ops) -> None:
    store = OffsetStore()
    commit(store, "a", NOW, entry(), entry(topic="u", partition=2))
    before = snapshot(store)
    for op in ops:
        match op:
            case ("commit", group, commits):
                store.commit(group, commits, NOW)
            case ("delete", group, partitions):
                store.delete(group, partitions)
            case ("delete_group", group):
                store.delete_group(group)
            case ("expire", empty_since):
                store.expire(NOW + 10 * RETENTION, RETENTION, empty_since)
            case _:
                pass
    assert snapshot(store) == before
