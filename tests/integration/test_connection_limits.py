"""Connections that misbehave cost the broker bounded resources and never silence it.

Each scenario runs against a real broker over TCP:

* `connections.max.idle.ms`: a connection that sent half a frame and nothing more is closed
  once it has been idle that long; one whose request the broker itself is holding (a
  long-poll Fetch) is not idle, and gets its answer.
* `max.connections.per.ip` and `max.connections` (Kafka's names): connections over the limit
  are closed at once, with one log line for many refusals; connections under it are served.
* A client that pipelines requests and never reads an answer stops being served once a
  bounded amount of answers waits for it (the broker stops reading from it), while every
  other client keeps being answered.
* When the process runs out of descriptors, the accept loop says so in one line, not one
  line per retry, and serves again once descriptors are free.
"""

from __future__ import annotations

import datetime
import socket
import struct
import time

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v16.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest

from coterie.wire.codec import encode_request
from tests.integration.test_data_plane_raw import create
from tests.integration.test_descriptor_limits import LimitedBroker
from tests.kafka_raw import RawConnection


def _answers(broker) -> bool:
    with RawConnection(broker.host, broker.port, timeout=10) as c:
        got = c.request(ApiVersionsRequest(client_software_name="t",
                                           client_software_version="1"))
    return got.error_code == ErrorCode.none


def _closed_within(conn: RawConnection, seconds: float) -> bool:
    return conn.is_closed_by_peer(wait=seconds)


def test_idle_connections_close_but_parked_requests_are_not_idle(coterie_factory):
    broker = coterie_factory(config={"connections.max.idle.ms": "1000"})
    with RawConnection(broker.host, broker.port) as admin:
        topic_id = create(admin, "quiet", 1).topic_id
    half = RawConnection(broker.host, broker.port)
    half.send_bytes(struct.pack(">i", 100) + b"\x00\x12")  # 2 of 100 promised bytes
    parked = RawConnection(broker.host, broker.port, timeout=15)
    parked.send(FetchRequest(
        max_wait=datetime.timedelta(seconds=4), min_bytes=1, max_bytes=1 << 20,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=(FetchTopic(topic_id=topic_id, partitions=(FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=1 << 20),)),),
        forgotten_topics_data=(), rack_id=""))
    started = time.monotonic()
    try:
        assert _closed_within(half, 6.0), "a half-sent frame held its connection"
        assert time.monotonic() - started >= 0.9  # not before the idle time
        # The parked Fetch (4 s, longer than the idle time) is answered, not cut off.
        frame = parked.recv_frame()
        assert len(frame) > 8
        assert time.monotonic() - started >= 3.5
    finally:
        half.close()
        parked.close()
    assert "idle for more than connections.max.idle.ms (1000 ms)" in broker.log_text()
    assert _answers(broker)


def test_connections_over_the_per_ip_limit_are_refused_with_one_log_line(coterie_factory):
    broker = coterie_factory(config={"max.connections.per.ip": "3"})
    time.sleep(0.3)  # the start-up probe's connection is gone
    kept = [RawConnection(broker.host, broker.port) for _ in range(3)]
    try:
        for c in kept:  # all three are served
            assert c.request(ApiVersionsRequest(client_software_name="t",
                                                client_software_version="1")).error_code == 0
        refused = [RawConnection(broker.host, broker.port) for _ in range(20)]
        assert all(_closed_within(c, 5.0) for c in refused)
        for c in refused:
            c.close()
        kept.pop().close()
        time.sleep(0.3)
        assert _answers(broker)  # a slot is free again
    finally:
        for c in kept:
            c.close()
    lines = [line for line in broker.log_text().splitlines()
             if "max.connections.per.ip (3) reached" in line]
    assert len(lines) == 1, lines


def test_broker_wide_connection_limit(coterie_factory):
    broker = coterie_factory(config={"max.connections": "2"})
    time.sleep(0.3)  # the start-up probe's connection is gone
    kept = [RawConnection(broker.host, broker.port) for _ in range(2)]
    try:
        time.sleep(0.2)
        extra = RawConnection(broker.host, broker.port)
        assert _closed_within(extra, 5.0)
        extra.close()
    finally:
        for c in kept:
            c.close()
    time.sleep(0.3)
    assert _answers(broker)
    assert "max.connections (2) reached" in broker.log_text()


def test_a_client_that_never_reads_is_bounded_and_others_are_served(coterie):
    """500,000 pipelined all-topics Metadata requests (22 bytes each, each answered with
    about 40 KB) and no reading: the broker stops reading that connection once about a
    megabyte of answers waits for it, so its memory stays bounded and other clients are
    answered meanwhile. (Answering one 256 KB read's worth, 12,000 requests, before
    checking would have queued half a gigabyte.)"""
    with RawConnection(coterie.host, coterie.port) as admin:
        for i in range(100):
            create(admin, f"many-{i}", 8)
    request = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)
    frames = encode_request(1, request, client_id="hog") * 500_000
    hog = socket.create_connection((coterie.host, coterie.port))
    hog.settimeout(3)
    try:
        sent = 0
        try:
            while sent < len(frames):  # stops when the broker stops reading
                sent += hog.send(frames[sent:sent + 65536])
        except TimeoutError:
            pass
        assert sent < len(frames), "the broker read every request without being read"
        for _ in range(5):
            assert _answers(coterie)
        rss_kib = _rss_kib(coterie.proc.pid)
        assert rss_kib < 300 * 1024, f"broker RSS {rss_kib} KiB with one unread client"
    finally:
        hog.close()
    time.sleep(0.5)
    assert _answers(coterie)


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_out_of_descriptors_is_one_log_line_and_service_resumes(tmp_path):
    broker = LimitedBroker(tmp_path / "data", 128)
    broker.start()
    hogs: list[socket.socket] = []
    try:
        for _ in range(400):  # far more than the broker's 128 descriptors
            try:
                hogs.append(socket.create_connection((broker.host, broker.port), timeout=2))
            except OSError:
                break
        time.sleep(3.0)  # the accept loop retries about once a second meanwhile
        for h in hogs:
            h.close()
        hogs.clear()
        deadline = time.monotonic() + 20
        while True:
            try:
                if _answers(broker):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        for h in hogs:
            h.close()
        broker.stop()
    log = broker.log_text()
    reports = [line for line in log.splitlines() if "cannot accept connections" in line]
    assert len(reports) == 1, log[-3000:]
    assert "out of system resource" not in log
    assert "Traceback" not in log
