"""Healthy heartbeats while one client misbehaves (issue 13, "Fairness").

A coterie broker runs on a free loopback port. Two healthy members keep heartbeating on their
own connections the whole time: a classic member (JoinGroup/SyncGroup, then Heartbeat v4,
session timeout 10 s) and a consumer-protocol member (ConsumerGroupHeartbeat v1, the broker's
session timeout 10 s). Each sends one heartbeat every `--every` seconds (50 ms) and times its
answer. They run as threads of this process, which does nothing else; every hostile client
runs in a process of its own, so a hostile client's own work never delays a probe.

Each case below runs for `--seconds` (20 s) after a quiet baseline of the same length:

* **offset-fetch**: one connection sends, again and again, a legal OffsetFetch naming
  250,000 partitions (about 4 MB; 250 topics of 1,000 partitions; the names need not exist,
  each gets an answer) and reads each answer.
* **metadata-pipeline**: ten connections pipeline all-topics Metadata requests (100 topics of
  8 partitions exist) as fast as the socket takes them and never read an answer.
* **many-groups**: 10,000 offset-only groups exist (one OffsetCommit each, made before the
  case); one connection then loops ListGroups, DescribeGroups of all 10,000 and an
  OffsetFetch of 1,000 groups at once.
* **connection-flood**: 2,000 connections, each sending the first half of a frame and then
  nothing (a half-sent request holds its buffer until `connections.max.idle.ms`).

Reported per case: the probes' heartbeat latency p50 / p99 / max (ms), heartbeats answered,
and heartbeats answered with an error (a healthy member expired: UNKNOWN_MEMBER_ID,
FENCED_MEMBER_EPOCH, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS). Target: p99 < 100 ms and no
error in every case.

    .venv/bin/python benchmarks/hostile.py                       # about 3.5 minutes
    .venv/bin/python benchmarks/hostile.py --cases offset-fetch --seconds 10
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import multiprocessing
import os
import resource
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _brokers import create_topic, run_broker  # noqa: E402
from kio.schema.consumer_group_heartbeat.v1.request import (  # noqa: E402
    ConsumerGroupHeartbeatRequest,
)
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest  # noqa: E402
from kio.schema.errors import ErrorCode  # noqa: E402
from kio.schema.heartbeat.v4.request import HeartbeatRequest  # noqa: E402
from kio.schema.join_group.v9.request import (  # noqa: E402
    JoinGroupRequest,
    JoinGroupRequestProtocol,
)
from kio.schema.list_groups.v5.request import ListGroupsRequest  # noqa: E402
from kio.schema.metadata.v12.request import MetadataRequest  # noqa: E402
from kio.schema.offset_commit.v9.request import (  # noqa: E402
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_fetch.v9.request import (  # noqa: E402
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from kio.schema.sync_group.v5.request import (  # noqa: E402
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)

from coterie.wire.codec import encode_request  # noqa: E402
from tests.kafka_raw import RawConnection  # noqa: E402

SESSION_MS = 10_000
TOPIC = "hostile-probe"
BROKER_SETTINGS = {
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    "group.consumer.min.session.timeout.ms": str(SESSION_MS),
    "group.initial.rebalance.delay.ms": "0",
    "max.connections.per.ip": "100000",
}
CASES = ("offset-fetch", "metadata-pipeline", "many-groups", "connection-flood")
TIMEDELTA = datetime.timedelta


@dataclass
class Probe:
    """What one healthy member saw."""
    name: str
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


# == the healthy members ======================================================================
def _classic_member(host: str, port: int) -> tuple[RawConnection, Callable[[], int]]:
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


def _consumer_member(host: str, port: int) -> tuple[RawConnection, Callable[[], int]]:
    """Join group "healthy-consumer" (KIP-848) and settle; returns a heartbeat."""
    conn = RawConnection(host, port, timeout=60)
    first = conn.request(ConsumerGroupHeartbeatRequest(
        group_id="healthy-consumer", member_id=str(uuid.uuid4()), member_epoch=0, instance_id=None,
        rack_id=None, rebalance_timeout=TIMEDELTA(seconds=30), subscribed_topic_names=(TOPIC,),
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


# == the hostile clients (each in a process of its own) =======================================
def _offset_fetch(host: str, port: int, stop: Callable[[], bool]) -> str:
    topics = tuple(OffsetFetchRequestTopics(name=f"t{t:03d}",
                                            partition_indexes=tuple(range(1000)))
                   for t in range(250))
    request = OffsetFetchRequest(groups=(OffsetFetchRequestGroup(
        group_id="big-fetch", member_id=None, member_epoch=-1, topics=topics),),
        require_stable=False)
    frame = encode_request(1, request, client_id="hostile")
    done = 0
    with RawConnection(host, port, timeout=120) as conn:
        while not stop():
            conn.send_bytes(frame)
            conn.recv_frame()
            done += 1
    return f"{done} OffsetFetch requests of 250,000 partitions ({len(frame):,} bytes each)"


def _metadata_pipeline(host: str, port: int, stop: Callable[[], bool]) -> str:
    frame = encode_request(1, MetadataRequest(
        topics=None, allow_auto_topic_creation=False,
        include_topic_authorized_operations=False), client_id="hostile") * 4096
    socks = [socket.create_connection((host, port)) for _ in range(10)]
    sent = 0
    for s in socks:
        s.setblocking(False)
    while not stop():
        progress = False
        for s in socks:
            with contextlib.suppress(BlockingIOError):
                sent += s.send(frame)
                progress = True
        if not progress:
            time.sleep(0.01)
    for s in socks:
        s.close()
    return f"{sent // (len(frame) // 4096):,} Metadata requests pipelined on 10 connections"


def _many_groups(host: str, port: int, stop: Callable[[], bool]) -> str:
    names = tuple(f"idle-{i:05d}" for i in range(10_000))
    rounds = 0
    with RawConnection(host, port, timeout=120) as conn:
        while not stop():
            conn.request(ListGroupsRequest(states_filter=(), types_filter=()))
            conn.request(DescribeGroupsRequest(groups=names,
                                               include_authorized_operations=False))
            conn.request(OffsetFetchRequest(groups=tuple(
                OffsetFetchRequestGroup(group_id=g, member_id=None, member_epoch=-1,
                                        topics=None) for g in names[:1000]),
                require_stable=False))
            rounds += 1
    return f"{rounds} rounds of ListGroups + DescribeGroups(10,000) + OffsetFetch(1,000 groups)"


def _connection_flood(host: str, port: int, stop: Callable[[], bool]) -> str:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    half = struct.pack(">i", 100) + b"\x00" * 10
    socks = []
    with contextlib.suppress(OSError):
        for _ in range(2000):
            s = socket.create_connection((host, port), timeout=5)
            s.sendall(half)
            socks.append(s)
    opened = len(socks)
    while not stop():
        time.sleep(0.1)
    for s in socks:
        s.close()
    return f"{opened} connections holding a half-sent frame"


HOSTILE: dict[str, Callable[[str, int, Callable[[], bool]], str]] = {
    "offset-fetch": _offset_fetch,
    "metadata-pipeline": _metadata_pipeline,
    "many-groups": _many_groups,
    "connection-flood": _connection_flood,
}


def _hostile_main(case: str, host: str, port: int, stop: multiprocessing.Event,
                  out: multiprocessing.Queue) -> None:
    try:
        out.put(HOSTILE[case](host, port, stop.is_set))
    except Exception as e:  # reported, not raised: the case's figures say what happened
        out.put(f"hostile client failed: {type(e).__name__}: {e}")


# == set-up ===================================================================================
def _prepare(host: str, port: int, bootstrap: str, cases: list[str]) -> None:
    create_topic(bootstrap, TOPIC, 4)
    if "metadata-pipeline" in cases:
        for i in range(100):
            create_topic(bootstrap, f"meta-{i:03d}", 8)
    if "many-groups" in cases:
        part = (OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                             committed_leader_epoch=-1,
                                             committed_metadata=None),)
        with RawConnection(host, port, timeout=60) as conn:
            for i in range(10_000):
                conn.send(OffsetCommitRequest(
                    group_id=f"idle-{i:05d}", generation_id_or_member_epoch=-1,
                    member_id="", group_instance_id=None,
                    topics=(OffsetCommitRequestTopic(name=TOPIC, partitions=part),)))
                if i % 100 == 99:  # read the answers in batches: a pipelined client
                    for _ in range(100):
                        conn.recv_frame()


def _summary(name: str, probes: list[Probe], note: str) -> dict:
    lat = sorted(x * 1000 for p in probes for x in p.latencies)
    errors = [e for p in probes for e in p.errors]
    if not lat:
        return {"case": name, "n": 0, "p50": float("nan"), "p99": float("nan"),
                "max": float("nan"), "errors": errors, "note": note}
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    return {"case": name, "n": len(lat), "p50": statistics.median(lat), "p99": p99,
            "max": lat[-1], "errors": errors, "note": note}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--every", type=float, default=0.05)
    parser.add_argument("--override", action="append", default=[],
                        help="a broker property key=value (repeatable)")
    parser.add_argument("--profile", type=Path, default=None,
                        help="run the broker under cProfile, writing its figures here")
    args = parser.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    for c in cases:
        if c not in HOSTILE:
            parser.error(f"unknown case {c!r}; known: {', '.join(CASES)}")
    overrides = dict(BROKER_SETTINGS)
    overrides.update(kv.split("=", 1) for kv in args.override)
    ctx = multiprocessing.get_context("spawn")
    results = []
    with tempfile.TemporaryDirectory(prefix="coterie-hostile-") as tmp, \
            run_broker("coterie", Path(tmp), overrides, args.profile) as bootstrap:
        host, port_s = bootstrap.rsplit(":", 1)
        port = int(port_s)
        _prepare(host, port, bootstrap, cases)
        members = [("classic", _classic_member(host, port)),
                   ("consumer", _consumer_member(host, port))]
        stop, recording = threading.Event(), threading.Event()
        probes = [Probe(name) for name, _ in members]
        threads = [threading.Thread(target=_probe_loop,
                                    args=(probe, beat, args.every, stop, recording),
                                    daemon=True)
                   for probe, (_, (_, beat)) in zip(probes, members, strict=True)]
        for t in threads:
            t.start()
        try:
            for case in ["baseline", *cases]:
                for p in probes:
                    p.latencies.clear()
                    p.errors.clear()
                note = "no hostile client"
                proc = None
                if case != "baseline":
                    halt, out = ctx.Event(), ctx.Queue()
                    proc = ctx.Process(target=_hostile_main,
                                       args=(case, host, port, halt, out))
                    proc.start()
                recording.set()
                time.sleep(args.seconds)
                recording.clear()
                if proc is not None:
                    halt.set()
                    proc.join(120)
                    if proc.is_alive():
                        proc.kill()
                    with contextlib.suppress(Exception):
                        note = out.get(timeout=5)
                    time.sleep(1.0)  # the broker closes the hostile connections
                results.append(_summary(case, probes, note))
                r = results[-1]
                print(f"{case:18s} p50 {r['p50']:7.1f} ms  p99 {r['p99']:7.1f} ms  "
                      f"max {r['max']:7.1f} ms  heartbeats {r['n']:5d}  "
                      f"errors {len(r['errors'])}  ({note})", flush=True)
        finally:
            stop.set()
            for t in threads:
                t.join(10)
            for _, (conn, _) in members:
                conn.close()
    print()
    print("| case | heartbeats | p50 ms | p99 ms | max ms | errors | hostile client |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        errs = ", ".join(sorted(set(r["errors"]))) or "0"
        print(f"| {r['case']} | {r['n']} | {r['p50']:.1f} | {r['p99']:.1f} | {r['max']:.1f} "
              f"| {errs} | {r['note']} |")
    worst = max((r["p99"] for r in results), default=0.0)
    print(f"\ntarget: p99 < 100 ms and no errors in every case; worst p99 {worst:.1f} ms, "
          f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
