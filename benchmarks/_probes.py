"""Healthy heartbeat probes: two group members that keep heartbeating while a benchmark
loads the broker, timing every answer (issue 13, "Fairness"; issue 14).

A classic member (JoinGroup/SyncGroup, then Heartbeat v4) and a consumer-protocol member
(ConsumerGroupHeartbeat v1), each on its own connection and thread of the calling process,
send one heartbeat every `every` seconds. Between `start_window` and `end_window` their
latencies and error codes are recorded (a healthy member expired: UNKNOWN_MEMBER_ID,
FENCED_MEMBER_EPOCH, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS). The broker needs
PROBE_SETTINGS (session timeouts of SESSION_MS, no initial rebalance delay) and the topic the
consumer member subscribes to.
"""

from __future__ import annotations

import datetime
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.sync_group.v5.request import SyncGroupRequest, SyncGroupRequestAssignment

from tests.kafka_raw import RawConnection

SESSION_MS = 10_000
PROBE_SETTINGS = {
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    "group.consumer.min.session.timeout.ms": str(SESSION_MS),
    "group.initial.rebalance.delay.ms": "0",
}
TIMEDELTA = datetime.timedelta


@dataclass
class Probe:
    """What one healthy member saw."""
    name: str
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def classic_member(host: str, port: int) -> tuple[RawConnection, Callable[[], int]]:
    """Join group "healthy-classic" as its only member; returns the connection and a
    heartbeat that answers its error code."""
    conn = RawConnection(host, port, timeout=60)
    member_id = ""
    while True:
        join = conn.request(JoinGroupRequest(
            group_id="healthy-classic", session_timeout=TIMEDELTA(milliseconds=SESSION_MS),
            rebalance_timeout=TIMEDELTA(seconds=30), member_id=member_id,
            group_instance_id=None, protocol_type="consumer",
            protocols=(JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00"),),
            reason=None))
        if join.error_code == ErrorCode.member_id_required:
            member_id = join.member_id
            continue
        assert join.error_code == ErrorCode.none, join
        break
    sync = conn.request(SyncGroupRequest(
        group_id="healthy-classic", generation_id=join.generation_id, member_id=member_id,
        group_instance_id=None, protocol_type="consumer", protocol_name="range",
        assignments=(SyncGroupRequestAssignment(member_id=member_id, assignment=b""),)))
    assert sync.error_code == ErrorCode.none, sync
    request = HeartbeatRequest(group_id="healthy-classic", generation_id=join.generation_id,
                               member_id=member_id, group_instance_id=None)
    return conn, lambda: conn.request(request).error_code


def consumer_member(host: str, port: int, topic: str
                    ) -> tuple[RawConnection, Callable[[], int]]:
    """Join group "healthy-consumer" (KIP-848) subscribed to `topic`; returns a heartbeat."""
    conn = RawConnection(host, port, timeout=60)
    first = conn.request(ConsumerGroupHeartbeatRequest(
        group_id="healthy-consumer", member_id=str(uuid.uuid4()), member_epoch=0, instance_id=None,
        rack_id=None, rebalance_timeout=TIMEDELTA(seconds=30), subscribed_topic_names=(topic,),
        subscribed_topic_regex=None, server_assignor=None, topic_partitions=()))
    assert first.error_code == ErrorCode.none, first
    member_id, epoch = first.member_id, first.member_epoch

    def beat() -> int:
        nonlocal epoch
        answer = conn.request(ConsumerGroupHeartbeatRequest(
            group_id="healthy-consumer", member_id=member_id, member_epoch=epoch,
            instance_id=None, rack_id=None, rebalance_timeout=TIMEDELTA(milliseconds=-1),
            subscribed_topic_names=None, subscribed_topic_regex=None, server_assignor=None,
            topic_partitions=None))
        if answer.error_code == ErrorCode.none:
            epoch = answer.member_epoch
        return answer.error_code
    return conn, beat


def _probe_loop(probe: Probe, beat: Callable[[], int], every: float,
                stop: threading.Event, recording: threading.Event) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        try:
            code = beat()
        except OSError as e:
            probe.errors.append(f"connection: {e}")
            return
        took = time.perf_counter() - started
        if recording.is_set():
            probe.latencies.append(took)
            if code != ErrorCode.none:
                probe.errors.append(ErrorCode(code).name)
        time.sleep(max(0.0, every - took))


def summary(name: str, probes: list[Probe], note: str) -> dict:
    """One window's figures: heartbeats answered (n), p50 / p99 / max (ms), errors."""
    lat = sorted(x * 1000 for p in probes for x in p.latencies)
    errors = [e for p in probes for e in p.errors]
    if not lat:
        return {"case": name, "n": 0, "p50": float("nan"), "p99": float("nan"),
                "max": float("nan"), "errors": errors, "note": note}
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    return {"case": name, "n": len(lat), "p50": statistics.median(lat), "p99": p99,
            "max": lat[-1], "errors": errors, "note": note}


class HeartbeatProbes:
    """The two healthy members, heartbeating from `__enter__` to `__exit__`; figures are
    kept only between `start_window()` and `end_window()`."""

    def __init__(self, host: str, port: int, topic: str, every: float = 0.05) -> None:
        self.host, self.port, self.topic, self.every = host, port, topic, every
        self._stop, self._recording = threading.Event(), threading.Event()
        self._members: list[tuple[str, tuple[RawConnection, Callable[[], int]]]] = []
        self.probes: list[Probe] = []
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> HeartbeatProbes:
        self._members = [("classic", classic_member(self.host, self.port)),
                         ("consumer", consumer_member(self.host, self.port, self.topic))]
        self.probes = [Probe(name) for name, _ in self._members]
        self._threads = [threading.Thread(target=_probe_loop, daemon=True, args=(
            probe, beat, self.every, self._stop, self._recording))
            for probe, (_, (_, beat)) in zip(self.probes, self._members, strict=True)]
        for t in self._threads:
            t.start()
        return self

    def start_window(self) -> None:
        for p in self.probes:
            p.latencies.clear()
            p.errors.clear()
        self._recording.set()

    def end_window(self, name: str, note: str) -> dict:
        self._recording.clear()
        return summary(name, self.probes, note)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(10)
        for _, (conn, _) in self._members:
            conn.close()
