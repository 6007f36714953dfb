"""StreamsGroupHeartbeat throughput next to ConsumerGroupHeartbeat throughput, on one coterie
broker, in one run (issue 26, "Benchmark"); with `--kafka`, the reference Apache Kafka broker
the same way in the same run.

One broker pinned to one core (`--server-core`). On it, `--members` KIP-848 consumer members
(benchmarks/heartbeats.py's `join_members`: `--groups` groups on one topic of
`--partitions` partitions) and as many streams members in as many streams groups, each
declaring a one-subtopology topology reading that topic (a stateless application: no
internal topics), joined and heartbeated with their owned tasks until no member's epoch or
tasks change. Each member then sends what a settled member sends: its member epoch and every
other field null ("unchanged"). The load generator of heartbeats.py (`drive`, an epoll loop
pinned to `--client-core`) keeps C heartbeats in flight over the consumer members, then over
the streams members, level by level, `--reps` times; per kind and level the best sweep is
kept. Every answer is checked (no error, the steady-state size, the right correlation id).
The summary gives each kind's best heartbeats/s at p99 below `--p99-ms` and heartbeats per
broker CPU-second, and streams / consumer as ratios.

    .venv/bin/python benchmarks/streams_heartbeats.py                 # about 2 minutes
    .venv/bin/python benchmarks/streams_heartbeats.py --kafka         # and Kafka, about 4
    .venv/bin/python benchmarks/streams_heartbeats.py --members 100 --levels 8,32 --reps 1
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import socket
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _brokers import create_topic, free_port, load_reference_kafka, prepare_reference
from heartbeats import (
    HOST,
    KAFKA_SETTINGS,
    RETRIABLE,
    TOPIC,
    Sample,
    Server,
    coterie_cmd,
    drive,
    join_members,
    running,
    settle,
    steady_answer,
)
from kio.schema.errors import ErrorCode
from kio.schema.streams_group_heartbeat.v0.request import (
    StreamsGroupHeartbeatRequest,
    Subtopology,
    TaskIds,
    Topology,
)
from kio.schema.streams_group_heartbeat.v0.response import StreamsGroupHeartbeatResponse
from kio.serial import entity_reader

from coterie.wire.codec import encode_request
from tests.kafka_raw import RawConnection

SESSION_MS = 60_000
STREAMS_SETTINGS = {
    "group.streams.session.timeout.ms": str(SESSION_MS),
    "group.streams.max.session.timeout.ms": str(SESSION_MS),
    "group.streams.initial.rebalance.delay.ms": "0",
}
# The client id the members joined with (tests.kafka_raw): a streams member whose client id
# changes is a changed member (a record and a group epoch bump), as in Kafka 4.2.
CLIENT_ID = "raw-test"
TOPOLOGY = Topology(epoch=0, subtopologies=(Subtopology(
    subtopology_id="0", source_topics=(TOPIC,), source_topic_regex=(),
    state_changelog_topics=(), repartition_sink_topics=(), repartition_source_topics=(),
    copartition_groups=()),))


@dataclass
class StreamsMember:
    group: str
    member_id: str
    conn: RawConnection
    process_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    epoch: int = 0
    active: tuple[TaskIds, ...] = ()
    steady: bytearray = field(default_factory=bytearray)


def _full(m: StreamsMember) -> bool:
    """One heartbeat reporting everything (with the topology when joining); True when the
    member's epoch or tasks changed."""
    request = StreamsGroupHeartbeatRequest(
        group_id=m.group, member_id=m.member_id, member_epoch=m.epoch,
        endpoint_information_epoch=0,
        rebalance_timeout=datetime.timedelta(milliseconds=SESSION_MS),
        topology=TOPOLOGY if m.epoch == 0 else None, active_tasks=m.active,
        standby_tasks=(), warmup_tasks=(), process_id=m.process_id, client_tags=(),
        task_offsets=None, task_end_offsets=None)
    for _ in range(300):
        resp = m.conn.request(request)
        if resp.error_code not in RETRIABLE:
            break
        time.sleep(0.1)
    if resp.error_code != ErrorCode.none:
        raise RuntimeError(f"streams heartbeat of {m.member_id} failed: {resp}")
    active = m.active
    if resp.active_tasks is not None:
        active = tuple(TaskIds(subtopology_id=t.subtopology_id,
                               partitions=tuple(t.partitions)) for t in resp.active_tasks)
    changed = resp.member_epoch != m.epoch or active != m.active
    m.epoch, m.active = resp.member_epoch, active
    return changed


def join_streams(port: int, members: int, groups: int) -> list[StreamsMember]:
    out = [StreamsMember(f"streams-bench-{i % groups}", str(uuid.uuid4()),
                         RawConnection(HOST, port)) for i in range(members)]
    settle(out, _full, "the streams groups")
    for m in out:
        m.steady = bytearray(encode_request(0, StreamsGroupHeartbeatRequest(
            group_id=m.group, member_id=m.member_id, member_epoch=m.epoch,
            endpoint_information_epoch=0, active_tasks=None, standby_tasks=None,
            warmup_tasks=None, client_tags=None, task_offsets=None, task_end_offsets=None),
            client_id=CLIENT_ID))
    return out


def streams_steady_answer(members: list[StreamsMember]) -> int:
    """Send every member's steady heartbeat once, check the answers, return the frame size."""
    read_header = entity_reader(StreamsGroupHeartbeatResponse.__header_schema__)
    read_body = entity_reader(StreamsGroupHeartbeatResponse)
    size = 0
    for m in members:
        m.conn.send_bytes(bytes(m.steady))
        frame = m.conn.recv_frame()
        _, at = read_header(frame, 0)
        body, _ = read_body(frame, at)
        if (body.error_code != ErrorCode.none or body.member_epoch != m.epoch
                or body.active_tasks is not None):
            raise RuntimeError(f"unexpected steady answer for {m.member_id}: {body}")
        size = 4 + len(frame)
    return size


def _settle(server: Server, args: argparse.Namespace, log) -> list[tuple]:
    """Both kinds of members on `server`: [(kind's server view, members, sockets, size)]."""
    create_topic(f"{HOST}:{server.port}", TOPIC, args.partitions)
    started = time.monotonic()
    consumers = join_members(server.port, args.members, args.groups)
    consumer_size = len(steady_answer(consumers))
    streams = join_streams(server.port, args.members, args.groups)
    streams_size = streams_steady_answer(streams)
    log(f"{server.name}: {args.members} consumer and {args.members} streams members settled "
        f"in {time.monotonic() - started:.1f} s; answers {consumer_size} and {streams_size} "
        "bytes")
    return [(Server(f"{server.name} consumer", server.proc, server.port), consumers,
             [m.conn.sock for m in consumers], consumer_size),
            (Server(f"{server.name} streams", server.proc, server.port), streams,
             [m.conn.sock for m in streams], streams_size)]


def summary(samples: list[Sample], p99_ms: float) -> str:
    lines = []
    names = sorted({s.server for s in samples})
    best: dict[str, Sample] = {}
    for s in samples:
        if s.p99_ms < p99_ms and (s.server not in best
                                  or s.throughput > best[s.server].throughput):
            best[s.server] = s
    per_cpu = {n: statistics.median([s.per_cpu for s in samples
                                     if s.server == n and s.concurrency >= 8] or [0.0])
               for n in names}
    for n in names:
        s = best.get(n)
        lines.append(f"{n}: " + (f"no level with p99 < {p99_ms:g} ms" if s is None else
                     f"{s.throughput:,.0f} heartbeats/s at concurrency {s.concurrency} "
                     f"(p99 {s.p99_ms:.2f} ms); {per_cpu[n]:,.0f} per server CPU-s"))
    for broker in ("coterie", "kafka"):
        c, st = f"{broker} consumer", f"{broker} streams"
        if c in best and st in best:
            lines.append(f"{broker}: streams / consumer heartbeats/s "
                         f"{best[st].throughput / best[c].throughput:.2f}, per CPU-s "
                         f"{per_cpu[st] / per_cpu[c]:.2f}")
    if "coterie streams" in best and "kafka streams" in best:
        lines.append("streams heartbeats, coterie / kafka: "
                     f"{best['coterie streams'].throughput / best['kafka streams'].throughput:.2f}"
                     f" per s, {per_cpu['coterie streams'] / per_cpu['kafka streams']:.2f}"
                     " per CPU-s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=300)
    parser.add_argument("--groups", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=120)
    parser.add_argument("--levels", default="1,8,32,64,128")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--duration", type=float, default=2.0)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--p99-ms", type=float, default=10.0)
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)
    parser.add_argument("--kafka", action="store_true",
                        help="also measure the reference Apache Kafka broker (needs java)")
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",")]
    if max(levels) > args.members:
        parser.error("every concurrency level must be at most --members")
    os.sched_setaffinity(0, {args.client_core})
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    samples: list[Sample] = []
    with tempfile.TemporaryDirectory(prefix="coterie-streams-hb-") as tmp, \
            contextlib.ExitStack() as stack:
        work = Path(tmp)
        port = free_port()
        coterie = stack.enter_context(running(
            "coterie", coterie_cmd(port, work / "data", None, STREAMS_SETTINGS),
            args.server_core, work / "coterie.log", port))
        targets = _settle(coterie, args, log)
        if args.kafka:
            reason = prepare_reference(log)
            if reason is not None:
                log(f"no reference broker: {reason}")
            else:
                kafka_port = free_port()
                kafka_cmd = load_reference_kafka().prepare(
                    kafka_port, work / "kafka-data",
                    overrides={**KAFKA_SETTINGS, **STREAMS_SETTINGS})
                kafka = stack.enter_context(running("kafka", kafka_cmd, args.server_core,
                                                    work / "kafka.log", kafka_port))
                targets += _settle(kafka, args, log)
        for _, _, socks, _ in targets:
            for sock in socks:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setblocking(False)
        for level in [lv for _ in range(args.reps) for lv in levels]:
            for server, members, socks, size in targets:
                s = drive(server, members, socks, level, size, args.warmup, args.duration)
                samples.append(s)
                log(f"  {s.server:16} C={level:<4} {s.throughput:9,.0f}/s "
                    f"p99 {s.p99_ms:6.2f} ms server CPU {s.server_cpu:4.0%} bad {s.bad}")
    best: dict[tuple[str, int], Sample] = {}
    for s in samples:
        key = (s.server, s.concurrency)
        if key not in best or s.throughput > best[key].throughput:
            best[key] = s
    samples = list(best.values())
    for s in sorted(samples, key=lambda s: (s.concurrency, s.server)):
        print(f"| {s.concurrency} | {s.server} | {s.throughput:,.0f} | {s.p50_ms:.2f} "
              f"| {s.p99_ms:.2f} | {s.server_cpu:.0%} | {s.per_cpu:,.0f} | {s.bad} |")
    print()
    print(summary(samples, args.p99_ms))
    return 1 if any(s.bad for s in samples) else 0


if __name__ == "__main__":
    sys.exit(main())
