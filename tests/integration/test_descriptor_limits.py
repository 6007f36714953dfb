"""One CreateTopics or CreatePartitions cannot exhaust descriptors or half-create a topic
(issue 10).

Before: every segment kept three files open, so 400 partitions exhausted a 1,024-descriptor
limit, the request half-created its topic, and the broker could not start again. Now the
partitions share a bounded set of open segment files (coterie.log.open_files), requests above
`max.partitions.per.request` are refused before anything is written, and a creation that
fails on disk leaves nothing behind. Every test runs a real `coterie serve` over TCP.
"""

from __future__ import annotations

import datetime
import os
import resource
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from kio.records.readers import read_batch
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.errors import ErrorCode

from tests.fixtures.coterie_broker import CoterieBroker, terminate, wait_for_port
from tests.integration.test_data_plane_raw import create, fetch, produce
from tests.integration.test_internal_topics import grow, metadata
from tests.kafka_raw import RawConnection, make_batch

TIMEOUT = datetime.timedelta(seconds=30)
LIMIT = 256


class LimitedBroker(CoterieBroker):
    """A coterie process started with RLIMIT_NOFILE set to `nofile` (soft and hard)."""

    def __init__(self, data_dir: Path, nofile: int, config: dict[str, str] | None = None):
        super().__init__(data_dir, config=config)
        self.nofile = nofile

    def start(self, timeout: float = 60.0) -> None:
        nofile = self.nofile

        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child process
        self.proc = subprocess.Popen(self._command(), stdout=log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                     preexec_fn=limit)
        log.close()
        wait_for_port(self.host, self.port, timeout, self.proc)

    def stop(self) -> None:
        """SIGTERM and wait for the clean shutdown, which flushes every partition: with
        thousands of partitions on a busy machine that takes longer than the usual 10 s."""
        terminate(self.proc, 90)

    def open_paths(self) -> list[str]:
        """What the broker process has open right now, by target."""
        assert self.proc is not None
        out = []
        for fd in os.listdir(f"/proc/{self.proc.pid}/fd"):
            try:
                out.append(os.readlink(f"/proc/{self.proc.pid}/fd/{fd}"))
            except OSError:
                continue  # closed since listed
        return out


@pytest.fixture
def limited(tmp_path: Path) -> Iterator:
    started: list[LimitedBroker] = []

    def make(nofile: int = LIMIT, config: dict[str, str] | None = None) -> LimitedBroker:
        broker = LimitedBroker(tmp_path / f"data{len(started)}", nofile, config)
        started.append(broker)
        broker.start()
        return broker

    yield make
    for broker in started:
        broker.stop()


def create_many(conn: RawConnection, topics: dict[str, int], validate_only: bool = False):
    return conn.request(CreateTopicsRequest(
        topics=tuple(CreatableTopic(name=n, num_partitions=p, replication_factor=-1,
                                    assignments=(), configs=()) for n, p in topics.items()),
        timeout=TIMEOUT, validate_only=validate_only)).topics


def values(conn: RawConnection, topic_id, partition: int) -> list[bytes]:
    part = fetch(conn, topic_id, partition, 0, max_bytes=4 << 20)
    assert part.error_code == ErrorCode.none
    out, pos = [], 0
    while pos < len(part.records):
        batch, size = read_batch(part.records, pos)
        out += [r.value for r in batch.records]
        pos += size
    return out


# (topic, partition) -> what is produced there; three partitions get batches big enough
# (> 64 KiB) for Fetch to send them from the segment file with sendfile.
BIG = b"B" * 100_000


def produced(topic: str, partition: int) -> list[bytes]:
    if partition % 97 == 0:
        return [BIG + str(partition).encode()]
    return [f"{topic}/{partition}".encode()]


def test_thousands_of_partitions_under_a_256_descriptor_limit(limited):
    broker = limited(LIMIT)
    wide = {"wide-a": 2000, "wide-b": 600}  # plus 50 of __consumer_offsets
    with RawConnection(broker.host, broker.port) as conn:
        # One request for 2,000 partitions: three files each used to need 6,000 descriptors.
        ids = {}
        for name, count in wide.items():
            made = create(conn, name, count)
            assert made.error_code == ErrorCode.none, made.error_message
            ids[name] = made.topic_id
        # More partitions in use than the open-file set holds (128 here): it must evict.
        used = [(t, p) for t in wide for p in range(0, wide[t], 8)]
        assert len(used) > LIMIT
        for topic, p in used:
            assert produce(conn, topic, p, make_batch(produced(topic, p))).error_code == 0
        for topic, p in used:
            assert values(conn, ids[topic], p) == produced(topic, p)
        paths = broker.open_paths()
        assert len(paths) < LIMIT
        # Segment files (not the broker's own stdout, which is a .log file too).
        segments = [p for p in paths if p.startswith(str(broker.data_dir))
                    and p.endswith(".log")]
        assert 0 < len(segments) <= LIMIT // 2
        assert not any(p.endswith((".index", ".timeindex")) for p in paths)
    broker.kill9()
    broker.start()  # the same limit: loading 2,650 partitions must fit in it
    with RawConnection(broker.host, broker.port) as conn:
        for topic, p in used:
            assert values(conn, ids[topic], p) == produced(topic, p)
        again = produce(conn, "wide-a", 8, make_batch([b"after restart"]))
        assert (again.error_code, again.base_offset) == (ErrorCode.none, 1)
        assert {n: len(t.partitions) for n, t in metadata(conn, list(wide)).items()} == wide
    log = broker.log_text()
    assert "Too many open files" not in log
    assert "cannot accept connections" not in log  # the accept loop never ran out


def test_requests_above_the_cap_are_refused_before_the_disk(coterie_factory):
    broker = coterie_factory(config={"max.partitions.per.request": "100"})
    data = broker.data_dir
    message = "This request would create {} partitions, more than max.partitions.per.request " \
              "(100) allows in one request."
    with RawConnection(broker.host, broker.port) as conn:
        for validate_only in (True, False):
            (big,) = create_many(conn, {"big": 101}, validate_only)
            assert (big.error_code, big.error_message) == (
                ErrorCode.policy_violation, message.format(101))
            # All topics of one request count together.
            pair = create_many(conn, {"left": 60, "right": 60, "taken": 1, "bad/": 1},
                               validate_only)
            codes = {t.name: t.error_code for t in pair}
            assert codes == {"left": ErrorCode.policy_violation,
                             "right": ErrorCode.policy_violation,
                             "taken": ErrorCode.policy_violation,
                             "bad/": ErrorCode.invalid_topic_exception}
            assert pair[0].error_message == message.format(121)
        assert not [p for p in data.iterdir() if p.name.split("-")[0] in {"big", "left"}]
        assert set(metadata(conn, ["big", "left", "right", "taken"])) == {
            "big", "left", "right", "taken"}
        assert all(t.error_code == ErrorCode.unknown_topic_or_partition
                   for t in metadata(conn, ["big", "left"]).values())
        (exact,) = create_many(conn, {"exact": 100})
        assert exact.error_code == ErrorCode.none
        assert create(conn, "small", 1).error_code == ErrorCode.none
        for validate_only in (True, False):
            refused = grow(conn, "small", 102, validate_only)
            assert (refused.error_code, refused.error_message) == (
                ErrorCode.policy_violation, message.format(101))
        assert not (data / "small-1").exists()
        assert grow(conn, "small", 101).error_code == ErrorCode.none
        assert len(metadata(conn, ["small"])["small"].partitions) == 101
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    future = admin.create_topics([NewTopic("huge", 500, 1)], operation_timeout=5)["huge"]
    with pytest.raises(KafkaException) as caught:
        future.result(timeout=15)
    assert caught.value.args[0].code() == KafkaError.POLICY_VIOLATION
    assert "max.partitions.per.request" in caught.value.args[0].str()


def test_a_creation_that_fails_on_disk_leaves_nothing(coterie):
    data = coterie.data_dir
    (data / "half-3").write_bytes(b"a file where partition 3's directory must go")
    with RawConnection(coterie.host, coterie.port) as conn:
        assert create(conn, "grow", 2).error_code == ErrorCode.none
        (data / "grow-4").write_bytes(b"in the way")
        (data / "auto-0").write_bytes(b"in the way")
        half = create(conn, "half", 8)
        assert half.error_code == ErrorCode.kafka_storage_error
        assert "half-3" in half.error_message and "cannot create topic 'half'" in (
            half.error_message)
        more = grow(conn, "grow", 6)
        assert more.error_code == ErrorCode.kafka_storage_error
        assert "grow-4" in more.error_message
        auto = metadata(conn, ["auto"], auto=True)["auto"]
        assert auto.error_code == ErrorCode.kafka_storage_error
        # The same connection still answers (no handler crashed), and nothing is half made.
        shown = metadata(conn, ["half", "grow", "auto"])
        assert shown["half"].error_code == ErrorCode.unknown_topic_or_partition
        assert shown["auto"].error_code == ErrorCode.unknown_topic_or_partition
        assert len(shown["grow"].partitions) == 2
    assert sorted(p.name for p in data.iterdir() if p.is_dir() and p.name.startswith(
        ("half-", "grow-", "auto-"))) == ["grow-0", "grow-1"]
    assert not (data / "topics" / "half.json").exists()
    coterie.restart_after_kill9()
    for leftover in ("half-3", "grow-4", "auto-0"):
        (data / leftover).unlink()
    with RawConnection(coterie.host, coterie.port) as conn:
        shown = metadata(conn, ["half", "grow"])
        assert shown["half"].error_code == ErrorCode.unknown_topic_or_partition
        assert len(shown["grow"].partitions) == 2
        assert create(conn, "half", 8).error_code == ErrorCode.none
        assert grow(conn, "grow", 6).error_code == ErrorCode.none
        assert produce(conn, "half", 7, make_batch([b"x"])).error_code == ErrorCode.none


def test_one_request_cannot_run_the_broker_out_of_descriptors(limited):
    """Under 256 descriptors, a 3,000-partition CreateTopics succeeds, the broker still
    accepts connections afterwards, stops cleanly and starts again, without a word about
    descriptors in its log."""
    broker = limited(LIMIT)
    with RawConnection(broker.host, broker.port) as conn:
        (made,) = create_many(conn, {"huge": 3000})
        assert made.error_code == ErrorCode.none, made.error_message
    deadline = time.monotonic() + 10
    conns = [RawConnection(broker.host, broker.port) for _ in range(20)]
    try:
        for c in conns:
            assert len(metadata(c, ["huge"])["huge"].partitions) == 3000
            assert time.monotonic() < deadline
    finally:
        for c in conns:
            c.close()
    assert len(broker.open_paths()) < LIMIT
    # A clean stop flushes and closes every partition under the same limit, and the next
    # start trusts what it wrote.
    broker.stop()
    assert broker.proc is not None and broker.proc.returncode == 0
    broker.start()
    with RawConnection(broker.host, broker.port) as conn:
        assert len(metadata(conn, ["huge"])["huge"].partitions) == 3000
        assert produce(conn, "huge", 2999, make_batch([b"x"])).error_code == ErrorCode.none
    log = broker.log_text()
    assert "Too many open files" not in log
    assert "Traceback" not in log
