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
import multiprocessing
import os
import resource
import socket
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _brokers import create_topic, run_broker  # noqa: E402
from _probes import PROBE_SETTINGS, HeartbeatProbes  # noqa: E402
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest  # noqa: E402
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

from coterie.wire.codec import encode_request  # noqa: E402
from tests.kafka_raw import RawConnection  # noqa: E402

TOPIC = "hostile-probe"
BROKER_SETTINGS = {**PROBE_SETTINGS, "max.connections.per.ip": "100000"}
CASES = ("offset-fetch", "metadata-pipeline", "many-groups", "connection-flood")


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
        with HeartbeatProbes(host, port, TOPIC, args.every) as probes:
            for case in ["baseline", *cases]:
                note = "no hostile client"
                proc = None
                if case != "baseline":
                    halt, out = ctx.Event(), ctx.Queue()
                    proc = ctx.Process(target=_hostile_main,
                                       args=(case, host, port, halt, out))
                    proc.start()
                probes.start_window()
                time.sleep(args.seconds)
                result = probes.end_window(case, note)
                if proc is not None:
                    halt.set()
                    proc.join(120)
                    if proc.is_alive():
                        proc.kill()
                    with contextlib.suppress(Exception):
                        result["note"] = note = out.get(timeout=5)
                    time.sleep(1.0)  # the broker closes the hostile connections
                results.append(result)
                r = results[-1]
                print(f"{case:18s} p50 {r['p50']:7.1f} ms  p99 {r['p99']:7.1f} ms  "
                      f"max {r['max']:7.1f} ms  heartbeats {r['n']:5d}  "
                      f"errors {len(r['errors'])}  ({note})", flush=True)
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
