import json
import uuid

import pytest

from coterie.log.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    StorageError,
    TopicExistsError,
    UnknownTopicError,
)
from coterie.log.manager import LogManager, TopicInfo

from .batches import make_batch

NOW = 1_700_000_000_000


@pytest.fixture
def manager(tmp_path):
    m = LogManager.open(tmp_path / "data", {"log.segment.bytes": "100000"}, NOW)
    yield m
    m.close()


def test_create_topic_and_partitions(manager, tmp_path):
    info = manager.create_topic("orders", 3, {"retention.ms": "1000"}, NOW)
    assert isinstance(info, TopicInfo) and isinstance(info.topic_id, uuid.UUID)
    assert (info.name, info.partitions, info.configs) == ("orders", 3, {"retention.ms": "1000"})
    assert manager.topics["orders"] is info
    assert manager.topic_by_id(info.topic_id) is info
    for i in range(3):
        assert (tmp_path / "data" / f"orders-{i}").is_dir()
        assert manager.partition("orders", i) is not None
    assert manager.partition("orders", 3) is None
    log = manager.partition("orders", 0)
    assert log.config.retention_ms == 1000 and log.config.segment_bytes == 100000
    with pytest.raises(TypeError):
        manager.topics["x"] = info  # read-only view
    saved = json.loads((tmp_path / "data" / "topics" / "orders.json").read_text())
    assert saved["topic_id"] == str(info.topic_id)


def test_create_errors(manager):
    manager.create_topic("a", 1, {}, NOW)
    with pytest.raises(TopicExistsError):
        manager.create_topic("a", 1, {}, NOW)
    with pytest.raises(InvalidTopicError):
        manager.create_topic("../a", 1, {}, NOW)
    with pytest.raises(InvalidPartitionsError):
        manager.create_topic("b", 0, {}, NOW)
    with pytest.raises(InvalidConfigError):
        manager.create_topic("b", 1, {"retention.ms": "x"}, NOW)
    assert set(manager.topics) == {"a"}


def test_delete_topic(manager, tmp_path):
    info = manager.create_topic("gone", 2, {}, NOW)
    manager.partition("gone", 0).append(make_batch(3), 0, NOW)
    manager.delete_topic("gone")
    assert "gone" not in manager.topics and manager.topic_by_id(info.topic_id) is None
    assert manager.partition("gone", 0) is None
    assert not any(p.name.startswith("gone") for p in (tmp_path / "data").iterdir())
    with pytest.raises(UnknownTopicError):
        manager.delete_topic("gone")
    again = manager.create_topic("gone", 1, {}, NOW)
    assert again.topic_id != info.topic_id
    assert manager.partition("gone", 0).log_end_offset == 0


def test_create_partitions(manager):
    manager.create_topic("t", 2, {}, NOW)
    with pytest.raises(InvalidPartitionsError):
        manager.create_partitions("t", 2, NOW)
    with pytest.raises(UnknownTopicError):
        manager.create_partitions("nope", 5, NOW)
    info = manager.create_partitions("t", 5, NOW)
    assert info.partitions == 5 and manager.topics["t"].partitions == 5
    assert manager.partition("t", 4) is not None


def test_topics_and_data_survive_reopen(tmp_path):
    data_dir = tmp_path / "data"
    m = LogManager.open(data_dir, {}, NOW)
    a = m.create_topic("a", 2, {"cleanup.policy": "compact"}, NOW)
    b = m.create_topic("b.c-d_e", 1, {}, NOW)
    m.create_partitions("a", 3, NOW)
    m.partition("a", 1).append(make_batch(4, key=b"k"), 0, NOW)
    m.close()
    m = LogManager.open(data_dir, {}, NOW + 5)
    assert m.topics["a"].topic_id == a.topic_id and m.topics["b.c-d_e"].topic_id == b.topic_id
    assert m.topics["a"].partitions == 3 and m.topics["a"].configs == {"cleanup.policy": "compact"}
    assert m.partition("a", 1).log_end_offset == 4
    assert m.partition("a", 1).config.cleanup_policy == "compact"
    assert m.topic_by_id(b.topic_id).name == "b.c-d_e"
    m.close()


def test_orphan_partition_dirs_are_removed_but_foreign_dirs_kept(tmp_path):
    data_dir = tmp_path / "data"
    m = LogManager.open(data_dir, {}, NOW)
    m.create_topic("t", 1, {}, NOW)
    m.close()
    (data_dir / "ghost-0").mkdir()
    (data_dir / "ghost-0" / "00000000000000000000.log").write_bytes(b"")
    (data_dir / "t-7").mkdir()
    (data_dir / "backup-2020").mkdir()
    (data_dir / "backup-2020" / "notes.txt").write_text("keep me")
    m = LogManager.open(data_dir, {}, NOW)
    assert not (data_dir / "ghost-0").exists() and not (data_dir / "t-7").exists()
    assert (data_dir / "backup-2020" / "notes.txt").exists()
    m.close()


def test_lock_prevents_second_open(tmp_path):
    m = LogManager.open(tmp_path / "data", {}, NOW)
    with pytest.raises(StorageError, match="in use"):
        LogManager.open(tmp_path / "data", {}, NOW)
    m.close()
    LogManager.open(tmp_path / "data", {}, NOW).close()


def test_unusable_data_dir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StorageError, match="not usable"):
        LogManager.open(blocker / "data", {}, NOW)


def test_retention_and_flush_over_all_partitions(tmp_path):
    m = LogManager.open(tmp_path / "data", {"log.segment.bytes": "300"}, NOW)
    m.create_topic("t", 2, {"retention.bytes": "0", "retention.ms": "-1"}, NOW)
    for i in range(2):
        for _ in range(10):
            m.partition("t", i).append(make_batch(2), 0, NOW)
    assert m.enforce_retention(NOW) > 0
    assert all(m.partition("t", i).segment_count == 1 for i in range(2))
    m.maybe_flush(NOW)
    m.close()


def test_alter_topic_configs(manager):
    manager.create_topic("t", 1, {}, NOW)
    info = manager.alter_topic_configs("t", {"max.message.bytes": "10"})
    assert info.configs == {"max.message.bytes": "10"}
    assert manager.partition("t", 0).config.max_message_bytes == 10
