"""All topics and partition logs under one data directory.

Layout::

    <data_dir>/.lock                   flock'd while a broker uses the directory
    <data_dir>/topics/<topic>.json     name, topic id, partition count, topic configs
    <data_dir>/<topic>-<partition>/    one PartitionLog each, as in Kafka

The topic file is the source of truth. Creating a topic or adding partitions creates the
partition directories first and then writes the topic file atomically (temp file, fsync,
rename); deleting removes the topic file before the directories. So a crash in between
leaves at most orphan partition directories, which the next open removes.

Creation is all-or-nothing in the running broker too: if anything fails midway (EMFILE,
ENOSPC, a path that is not a directory), every partition directory the call made is removed
again, the topic file is left as it was and the registry is unchanged, and the caller gets
StorageError. Every partition's segment files are opened through one OpenFiles set
(coterie.log.open_files), which bounds the descriptors all partitions hold together, so no
number of partitions can exhaust the process's descriptors.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import errno
import fcntl
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import NoReturn

from coterie.log.config import LogConfig, validate_topic_configs
from coterie.log.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    StorageError,
    TopicExistsError,
    UnknownTopicError,
)
from coterie.log.files import TMP_SUFFIX, atomic_write, fsync_dir
from coterie.log.names import validate_topic_name
from coterie.log.open_files import OpenFiles, capacity_from
from coterie.log.partition import (
    CLEAN_SHUTDOWN_FILE,
    RECOVERY_POINT_FILE,
    PartitionLog,
    write_copy,
)
from coterie.log.producers import ProducerStates
from coterie.log.segment import parse_segment_base

LOCK_FILE = ".lock"
TOPICS_DIR = "topics"
_PARTITION_DIR = re.compile(r"(?P<topic>[a-zA-Z0-9._-]+)-(?P<index>\d+)")
_DELETE_SUFFIX = "-delete"


@dataclass
class TopicInfo:
    """A topic as the broker describes it; persisted as JSON."""

    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(
            {
                "name": self.name,
                "topic_id": str(self.topic_id),
                "partitions": self.partitions,
                "configs": self.configs,
            },
            indent=2,
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> TopicInfo:
        raw = json.loads(text)
        return cls(
            name=str(raw["name"]),
            topic_id=uuid.UUID(raw["topic_id"]),
            partitions=int(raw["partitions"]),
            configs={str(k): str(v) for k, v in raw.get("configs", {}).items()},
        )


def new_topic_id() -> uuid.UUID:
    """A random id, avoiding the all-zero id and ids whose base64 form starts with '-'
    (Kafka avoids those so they cannot be mistaken for command-line options)."""
    while True:
        candidate = uuid.uuid4()
        encoded = base64.urlsafe_b64encode(candidate.bytes).decode()
        if candidate.int != 0 and not encoded.startswith("-"):
            return candidate


class LogManager:
    """Owns the data directory: its lock, the topic registry and every PartitionLog."""

    def __init__(
        self,
        data_dir: Path,
        broker_props: Mapping[str, str],
        lock_fd: int,
        files: OpenFiles | None = None,
    ) -> None:
        self._data_dir = data_dir
        self._broker_props = dict(broker_props)
        self._lock_fd = lock_fd
        self._files = OpenFiles(capacity_from(broker_props)) if files is None else files
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._closed = False
        # A cluster broker's copies keep a bounded number of recent bytes and are trimmed
        # by whole segments (coterie.broker.cluster): their segments are kept this small.
        self.segment_bytes_cap: int | None = None

    # --------------------------------------------------------------------------- opening

    @classmethod
    def open(cls, data_dir: Path, broker_props: Mapping[str, str], now_ms: int) -> LogManager:
        """Lock `data_dir` (creating it if needed) and load every topic in it.

        Raises StorageError with a one-line explanation if the directory cannot be used.
        """
        data_dir = Path(data_dir)
        LogConfig.from_properties(broker_props, {})  # fail early on bad broker settings
        files = OpenFiles(capacity_from(broker_props))
        lock_fd = _lock_data_dir(data_dir)
        manager = cls(data_dir, broker_props, lock_fd, files)
        try:
            manager._load(now_ms)
        except BaseException:
            manager.close()
            raise
        return manager

    def _load(self, now_ms: int) -> None:
        topics_dir = self._data_dir / TOPICS_DIR
        try:
            topics_dir.mkdir(exist_ok=True)
            for path in sorted(topics_dir.iterdir()):
                if path.name.endswith(TMP_SUFFIX):
                    path.unlink()
                    continue
                if not path.name.endswith(".json"):
                    continue
                try:
                    info = TopicInfo.from_json(path.read_text())
                except (ValueError, KeyError, TypeError) as e:
                    raise StorageError(f"topic metadata file {path} is unreadable: {e}") from e
                self._register(info)
            self._remove_orphans()
        except OSError as e:
            raise StorageError(f"cannot load data directory {self._data_dir}: {e}") from e
        for info in self._topics.values():
            config = self._log_config(info.configs)
            for index in range(info.partitions):
                directory = self._partition_dir(info.name, index)
                try:
                    self._logs[(info.name, index)] = PartitionLog.open(
                        directory, config, now_ms, self._files
                    )
                except OSError as e:
                    raise StorageError(f"cannot open partition log {directory}: {e}") from e

    def _remove_orphans(self) -> None:
        """Delete partition directories no topic file claims (left by an interrupted
        delete_topic or create_partitions), and leftovers of earlier deletions."""
        for path in self._data_dir.iterdir():
            if not path.is_dir() or path.name == TOPICS_DIR:
                continue
            if path.name.endswith(_DELETE_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)
                continue
            match = _PARTITION_DIR.fullmatch(path.name)
            if match is None:
                continue
            info = self._topics.get(match["topic"])
            orphan = info is None or int(match["index"]) >= info.partitions
            if orphan and _looks_like_partition_dir(path):
                shutil.rmtree(path, ignore_errors=True)

    # ------------------------------------------------------------------------- queries

    @property
    def data_dir(self) -> Path:
        return self._data_dir

    @property
    def topics(self) -> Mapping[str, TopicInfo]:
        """Read-only view of all topics by name."""
        return MappingProxyType(self._topics)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def partition(self, name: str, index: int) -> PartitionLog | None:
        return self._logs.get((name, index))

    @property
    def open_files(self) -> OpenFiles:
        """The set of open segment files shared by every partition here."""
        return self._files

    def log_config(self, name: str) -> LogConfig | None:
        """The effective settings of a topic (broker defaults overlaid with its configs)."""
        info = self._topics.get(name)
        return None if info is None else self._log_config(info.configs)

    # ------------------------------------------------------------------------ changes

    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str], now_ms: int,
        topic_id: uuid.UUID | None = None,
    ) -> TopicInfo:
        problem = validate_topic_name(name)
        if problem is not None:
            raise InvalidTopicError(problem)
        if name in self._topics:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        if partitions < 1:
            raise InvalidPartitionsError(
                f"Number of partitions must be larger than 0, got {partitions}."
            )
        problem = validate_topic_configs(configs)
        if problem is not None:
            raise InvalidConfigError(problem)
        config = self._partition_config(configs)
        info = TopicInfo(name, topic_id or new_topic_id(), partitions, dict(configs))
        try:
            self._open_partitions(info, range(partitions), config, now_ms)
            self._write_topic(info)
        except BaseException as e:
            self._discard_partitions(name, range(partitions))
            with contextlib.suppress(OSError):  # written, but its directory fsync failed
                self._topic_file(name).unlink()
            _reraise_as_storage_error(f"cannot create topic '{name}'", e)
        self._register(info)
        return info

    def delete_topic(self, name: str) -> None:
        info = self._topics.get(name)
        if info is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        path = self._topic_file(name)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        fsync_dir(path.parent)
        del self._topics[name]
        self._by_id.pop(info.topic_id, None)
        for index in range(info.partitions):
            log = self._logs.pop((name, index), None)
            if log is not None:
                log.close_unclean()
            directory = self._partition_dir(name, index)
            # Rename first so a half-deleted directory is never mistaken for live data.
            doomed = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{_DELETE_SUFFIX}")
            with contextlib.suppress(FileNotFoundError):
                directory.rename(doomed)
                shutil.rmtree(doomed, ignore_errors=True)

    def create_partitions(self, name: str, new_total: int, now_ms: int) -> TopicInfo:
        info = self._topics.get(name)
        if info is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        if new_total <= info.partitions:
            raise InvalidPartitionsError(
                f"Topic currently has {info.partitions} partitions, which is higher than or "
                f"equal to the requested {new_total}."
            )
        old_total = info.partitions
        config = self._partition_config(info.configs)
        updated = TopicInfo(info.name, info.topic_id, new_total, dict(info.configs))
        try:
            self._open_partitions(info, range(old_total, new_total), config, now_ms)
            self._write_topic(updated)
        except BaseException as e:
            self._discard_partitions(name, range(old_total, new_total))
            with contextlib.suppress(OSError):  # in case the new file landed after all
                self._write_topic(info)
            _reraise_as_storage_error(f"cannot add partitions to topic '{name}'", e)
        self._register(updated)
        return updated

    def replace_partition(self, name: str, index: int, log_start: int, log_end: int,
                          chunks: Iterable[bytes], now_ms: int,
                          producers: ProducerStates | None = None) -> PartitionLog:
        """Make this partition's local log a copy of batches stored elsewhere (a cluster
        broker taking a partition over: coterie.broker.cluster): the old files go, the
        batches are laid out as segments (`partition.write_copy`) and opened as after a
        crash, so the indexes, producer state and aborted transactions come from them
        (from `producers`, the state as of `log_start`, and the batches after it, when the
        batches are the partition's recent ones only)."""
        info = self._topics.get(name)
        if info is None or not 0 <= index < info.partitions:
            raise UnknownTopicError(f"Topic '{name}' has no partition {index}.")
        old = self._logs.pop((name, index), None)
        if old is not None:
            old.close_unclean()
        directory = self._partition_dir(name, index)
        shutil.rmtree(directory, ignore_errors=True)
        config = self._partition_config(info.configs)
        write_copy(directory, log_start, log_end, chunks, config.segment_bytes, producers)
        log = PartitionLog.open(directory, config, now_ms, self._files)
        self._logs[(name, index)] = log
        return log

    def set_broker_props(self, broker_props: Mapping[str, str], check_only: bool = False) -> None:
        """New broker-level defaults (dynamic broker configs): every topic's settings are
        resolved again and applied to its partitions at once. Raises InvalidConfigError,
        changing nothing, if any topic's settings would not be usable."""
        configs = {name: LogConfig.from_properties(broker_props, info.configs)
                   for name, info in self._topics.items()}
        LogConfig.from_properties(broker_props, {})
        if check_only:
            return
        self._broker_props = dict(broker_props)
        for name, config in configs.items():
            for index in range(self._topics[name].partitions):
                log = self._logs.get((name, index))
                if log is not None:
                    log.update_config(self._capped(config))

    def check_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Raise what `alter_topic_configs(name, configs)` would raise, changing nothing
        (AlterConfigs with validate_only)."""
        if name not in self._topics:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        problem = validate_topic_configs(configs)
        if problem is not None:
            raise InvalidConfigError(problem)
        self._log_config(configs)

    def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicInfo:
        """Replace a topic's configs (the whole set) and apply them to its partitions."""
        info = self._topics.get(name)
        if info is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        problem = validate_topic_configs(configs)
        if problem is not None:
            raise InvalidConfigError(problem)
        config = self._partition_config(configs)
        updated = TopicInfo(info.name, info.topic_id, info.partitions, dict(configs))
        self._write_topic(updated)
        self._register(updated)
        for index in range(info.partitions):
            log = self._logs.get((name, index))
            if log is not None:
                log.update_config(config)
        return updated

    # --------------------------------------------------------------------- maintenance

    def compacted_partitions(self) -> list[tuple[str, int, PartitionLog]]:
        """Every partition the log cleaner looks after (cleanup.policy has "compact")."""
        return [(name, index, log) for (name, index), log in self._logs.items()
                if log.config.compacts]

    def enforce_retention(self, now_ms: int, retired: list[Path] | None = None) -> int:
        """Apply retention to every partition; returns the number of segments deleted
        (with `retired`, their files are left renamed there to unlink later:
        `PartitionLog.enforce_retention`)."""
        return sum(log.enforce_retention(now_ms, retired) for log in self._logs.values())

    def expire_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forget idle producers in every partition (producer.id.expiration.ms)."""
        return sum(log.expire_producers(now_ms, expiration_ms) for log in self._logs.values())

    def maybe_flush(self, now_ms: int) -> None:
        for log in self._logs.values():
            log.maybe_flush(now_ms)

    def close(self) -> None:
        """Close every partition cleanly and release the directory lock. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            for log in self._logs.values():
                log.close()
        finally:
            self._logs.clear()
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)

    # ------------------------------------------------------------------------ helpers

    def _log_config(self, configs: Mapping[str, str]) -> LogConfig:
        return LogConfig.from_properties(self._broker_props, configs)

    def _partition_config(self, configs: Mapping[str, str]) -> LogConfig:
        return self._capped(self._log_config(configs))

    def _capped(self, config: LogConfig) -> LogConfig:
        """What the partitions' files use: the topic's settings, with segments no larger
        than `segment_bytes_cap` when one is set (a cluster broker's copies, trimmed by
        whole segments to their bound)."""
        cap = self.segment_bytes_cap
        if cap is None or config.segment_bytes <= cap:
            return config
        return dataclasses.replace(config, segment_bytes=cap)

    def _register(self, info: TopicInfo) -> None:
        self._topics[info.name] = info
        self._by_id[info.topic_id] = info

    def _partition_dir(self, name: str, index: int) -> Path:
        return self._data_dir / f"{name}-{index}"

    def _topic_file(self, name: str) -> Path:
        return self._data_dir / TOPICS_DIR / f"{name}.json"

    def _open_partitions(
        self, info: TopicInfo, indexes: range, config: LogConfig, now_ms: int
    ) -> None:
        """Create fresh partition logs. Their files are closed again at once: a large new
        topic must not push the partitions in use out of the open-file set."""
        for index in indexes:
            directory = self._partition_dir(info.name, index)
            if directory.exists():  # stale data from an interrupted delete: never reuse it
                shutil.rmtree(directory)
            log = PartitionLog.open(directory, config, now_ms, self._files)
            self._logs[(info.name, index)] = log
            log.release_files()

    def _discard_partitions(self, name: str, indexes: range) -> None:
        """Undo `_open_partitions` as far as it got: close and remove each new partition.
        Best effort; a directory left behind is an orphan the next start removes."""
        for index in indexes:
            log = self._logs.pop((name, index), None)
            if log is not None:
                log.close_unclean()
            shutil.rmtree(self._partition_dir(name, index), ignore_errors=True)

    def _write_topic(self, info: TopicInfo) -> None:
        atomic_write(self._topic_file(info.name), info.to_json().encode())


def _reraise_as_storage_error(what: str, error: BaseException) -> NoReturn:
    """Raise what a failed creation raises: StorageError with the cause on one line for
    OSError and StorageError, anything else (a bug, KeyboardInterrupt) unchanged."""
    if isinstance(error, OSError | StorageError):
        raise StorageError(f"{what}: {error}") from error
    raise error


def _lock_data_dir(data_dir: Path) -> int:
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise StorageError(f"data directory {data_dir} is not usable: {e.strerror or e}") from e
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise StorageError(
                f"data directory {data_dir} is in use by another broker (lock on "
                f"{data_dir / LOCK_FILE} is held)"
            ) from e
        raise StorageError(f"cannot lock data directory {data_dir}: {e.strerror or e}") from e
    if not os.access(data_dir, os.W_OK):
        os.close(fd)
        raise StorageError(f"data directory {data_dir} is not writable")
    return fd


def _looks_like_partition_dir(path: Path) -> bool:
    """Only directories holding nothing but our own files are removed as orphans; anything
    else an operator put in the data directory is left alone."""
    for child in path.iterdir():
        name = child.name
        if name in (CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_FILE) or name.endswith(TMP_SUFFIX):
            continue
        if parse_segment_base(name) is None:
            return False
    return True
