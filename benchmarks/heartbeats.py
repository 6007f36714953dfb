"""ConsumerGroupHeartbeat throughput of coterie on one core, next to a bare asyncio
request/response loop on the same core, in the same run (issue 5).

Two servers take turns on one CPU core (`--server-core`, pinned with sched_setaffinity):

* **coterie**: `python -m coterie serve` on a free loopback port (as benchmarks/_brokers.py
  starts it), with `group.consumer.session.timeout.ms=60000` so that members the load
  generator leaves alone while the other server is measured keep their sessions.
* **bare loop**: an asyncio server started from this script that serves each connection as
  coterie does (one coroutine per connection, `reader.read` of up to 256 KiB, Kafka frames of
  a 4-byte size and a body, answered in order, `writer.write` + `drain`), but answers every
  frame with one fixed pre-encoded response, coterie's own steady-state heartbeat answer
  (same bytes, same size), with only the correlation id copied from the request. It is the
  cost of asyncio's streams and a loopback socket: what no Python broker can avoid.

The load generator is this script's own process, pinned to the other core
(`--client-core`). Before measuring it creates a topic of `--partitions` partitions and
joins `--members` members, spread evenly over `--groups` groups subscribed to it, each
member on its own TCP connection: an epoch-0 heartbeat each, then full heartbeats (owned
partitions reported) until a whole pass changes no member's epoch or assignment. It then
encodes, once per member, the heartbeat a settled consumer sends: current member epoch,
every other field null / -1 ("unchanged"); only the correlation id is patched per send.

Measurement: for every concurrency level C (`--levels`), C heartbeats are in flight at all
times, one per connection; whenever an answer arrives the next idle member (round robin over
all members, so every member keeps heartbeating) sends its heartbeat. The generator is a
plain epoll loop over non-blocking sockets, much cheaper per request than either server.
After `--warmup` seconds, answers are counted for `--duration` seconds; the latency of
each is from just before its send to its answer. Every answer's correlation id, error code
(must be NONE) and size (the steady-state size, i.e. no new assignment) is checked. The CPU
time the server and the generator used during the window is printed as a share of the window:
a server near 100 % and a generator well below it mean the figure is the server's.

With `--kafka`, the reference Apache Kafka broker (scripts/reference_kafka.py; needs java)
runs too, started pinned to the same server core (all its threads), with its own members
joined and settled the same way, measured by the same generator at the same levels in the
same run. Target (issue 13): coterie's heartbeats/s at least Kafka's on one core.

The servers run the same levels, alternating (coterie, bare, kafka, level by level), so that
load from other work on the machine hits both alike. The sweep is run `--reps` times (3)
and, per server and level, the sweep with the highest throughput is kept (other work on the
machine only ever slows a sweep down). The summary takes, for each server, the
best throughput among the levels whose p99 is below `--p99-ms` (10 ms), and gives the ratio
coterie / bare loop. Target (issue 13): at least 0.60 (issue 5's was 0.50). On a shared
machine the server does not always get its whole core; heartbeats per CPU-second of the
server (throughput / server CPU) is what such sharing skews least, so the summary also
gives its median over the levels of 8 and more and the ratio of those medians.

    .venv/bin/python benchmarks/heartbeats.py                 # about 2.5 minutes
    .venv/bin/python benchmarks/heartbeats.py --override group.events.enable=false
    .venv/bin/python benchmarks/heartbeats.py --members 50 --levels 1,8,32 --reps 1  # smoke
    .venv/bin/python benchmarks/heartbeats.py --profile /tmp/coterie.prof   # cProfile broker
    .venv/bin/python benchmarks/heartbeats.py --kafka     # and the reference broker
    .venv/bin/python benchmarks/heartbeats.py --postgresql  # and a broker on PostgreSQL
    .venv/bin/python benchmarks/heartbeats.py --postgresql --cluster  # and three of them

With `--postgresql`, coterie also runs as one broker of a cluster on PostgreSQL (issue 24; a
server of the script's own, `synchronous_commit=on`), pinned to the same server core, with
its own members, measured the same way in the same run. In a cluster a group's heartbeats go
to the one broker coordinating it, so a cluster's heartbeats/s are this figure times its
brokers, as long as the groups are spread over them. With `--cluster`, three brokers on one
database (a server of their own) are measured as one server: the groups' coordinators
spread evenly over the three, each member connected to its group's coordinator, the three
pinned together to the server core, their CPU summed.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import contextlib
import datetime
import gc
import os
import select
import signal
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _brokers import (  # noqa: E402
    HOST,
    create_topic,
    free_port,
    load_reference_kafka,
    prepare_reference,
    wait_until_serving,
)
from confluent_kafka.admin import AdminClient  # noqa: E402
from kio.schema.consumer_group_heartbeat.v1.request import (  # noqa: E402
    ConsumerGroupHeartbeatRequest,
    TopicPartitions,
)
from kio.schema.consumer_group_heartbeat.v1.response import (  # noqa: E402
    ConsumerGroupHeartbeatResponse,
)
from kio.schema.errors import ErrorCode  # noqa: E402
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest  # noqa: E402
from kio.serial import entity_reader  # noqa: E402

from coterie.wire.codec import encode_request  # noqa: E402
from tests.fixtures import postgres  # noqa: E402
from tests.kafka_raw import RawConnection  # noqa: E402

TOPIC = "heartbeat-bench"
CLIENT_ID = "consumer-heartbeat-bench-1"
SESSION_MS = 60_000
REBALANCE_MS = 60_000
BROKER_SETTINGS = {
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    "group.consumer.max.session.timeout.ms": str(SESSION_MS),
    "group.initial.rebalance.delay.ms": "0",
}
# The reference broker: the same session timeout, and the GC-light defaults otherwise.
KAFKA_SETTINGS = {
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    "group.consumer.max.session.timeout.ms": str(SESSION_MS),
}
RETRIABLE = frozenset({ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator,
                       ErrorCode.coordinator_not_available})
READ_CHUNK = 256 * 1024  # as coterie/broker/server.py reads
_SIZE = struct.Struct(">i")
CORR_AT = 8  # request frame: size(4) api_key(2) api_version(2) correlation_id(4)
# Response frame (header v1: correlation id + tagged fields): size(4) correlation_id(4)
# tags(1) throttle_time_ms(4) error_code(2).
ERROR_AT = 13
DEFAULT_LEVELS = "1,8,32,64,96,128,256"


# -- the bare asyncio loop (runs in its own process) -------------------------------------------

def serve_bare(port: int, response: bytes) -> None:
    """Answer every Kafka frame on every connection with `response` (a whole frame, size
    included), its correlation id replaced by the request's."""
    head, tail = response[:4], response[8:]

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        buf = bytearray()
        try:
            while True:
                data = await reader.read(READ_CHUNK)
                if not data:
                    break
                buf += data
                while len(buf) >= 4:
                    end = 4 + _SIZE.unpack_from(buf, 0)[0]
                    if len(buf) < end:
                        break
                    frame = bytes(buf[4:end])
                    del buf[:end]
                    writer.write(head + frame[4:8] + tail)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(serve, HOST, port, limit=READ_CHUNK,
                                            reuse_address=True)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        async with server:
            await stop.wait()

    asyncio.run(main())


# -- servers under test ------------------------------------------------------------------------

@dataclass
class Server:
    name: str
    proc: subprocess.Popen
    port: int
    # More processes that count as this server (the other brokers of a cluster).
    more: list[subprocess.Popen] = field(default_factory=list)

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server's processes so far."""
        total = 0
        for proc in (self.proc, *self.more):
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def running(name: str, cmd: list[str], core: int, log_path: Path, port: int) -> Iterator[Server]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    with open(log_path, "ab") as log:
        # Pinned before it starts, so that every thread it makes (a JVM's many) shares the
        # one core.
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env,
                                preexec_fn=lambda: os.sched_setaffinity(0, {core}))
    try:
        wait_until_serving(f"{HOST}:{port}", proc, log_path,
                           metadata_probe=name == "kafka")
        yield Server(name, proc, port)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def coterie_cmd(port: int, data_dir: Path, profile: Path | None,
                overrides: dict[str, str]) -> list[str]:
    data_dir.mkdir(parents=True)
    cmd = [sys.executable]
    if profile is not None:
        cmd += ["-m", "cProfile", "-o", str(profile)]
    cmd += ["-m", "coterie", "serve", "--host", HOST, "--port", str(port),
            "--data-dir", str(data_dir)]
    for key, value in {**BROKER_SETTINGS, **overrides}.items():
        cmd += ["--override", f"{key}={value}"]
    return cmd


# -- members -----------------------------------------------------------------------------------

@dataclass
class Member:
    group: str
    member_id: str
    conn: RawConnection
    epoch: int = 0
    assigned: tuple[TopicPartitions, ...] = ()
    steady: bytearray = field(default_factory=bytearray)


def _member_id() -> str:
    """A member id as the Java client makes one (URL-safe base64 of a random UUID)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _full_heartbeat(m: Member) -> bool:
    """One heartbeat with every field set (a join when the epoch is 0); True when the member's
    epoch or assignment changed."""
    request = ConsumerGroupHeartbeatRequest(
        group_id=m.group, member_id=m.member_id, member_epoch=m.epoch,
        rebalance_timeout=datetime.timedelta(milliseconds=REBALANCE_MS),
        subscribed_topic_names=(TOPIC,), topic_partitions=m.assigned)
    for _ in range(300):
        resp = m.conn.request(request)
        if resp.error_code not in RETRIABLE:
            break
        time.sleep(0.1)
    if resp.error_code != ErrorCode.none:
        raise RuntimeError(f"heartbeat of {m.member_id} in {m.group} failed: {resp}")
    assigned = m.assigned
    if resp.assignment is not None:
        assigned = tuple(TopicPartitions(topic_id=t.topic_id, partitions=tuple(t.partitions))
                         for t in resp.assignment.topic_partitions)
    changed = resp.member_epoch != m.epoch or assigned != m.assigned
    m.epoch, m.assigned = resp.member_epoch, assigned
    return changed


def join_members(port: int, members: int, groups: int) -> list[Member]:
    """Join every member and heartbeat until the groups are settled."""
    out = [Member(f"heartbeat-bench-{i % groups}", _member_id(), RawConnection(HOST, port))
           for i in range(members)]
    for g in range(groups):
        # Kafka creates __consumer_offsets when a coordinator is first looked up.
        for _ in range(300):
            found = out[0].conn.request(FindCoordinatorRequest(
                key_type=0, coordinator_keys=(f"heartbeat-bench-{g}",)))
            if found.coordinators[0].error_code == ErrorCode.none:
                break
            time.sleep(0.1)
    _settle_members(out)
    return out


def settle(members: list, full: Callable[[Any], bool], what: str) -> None:
    """Join every member, then heartbeat (`full`: one heartbeat reporting everything, True
    when the member's epoch or assignment changed) until a whole pass changes nothing."""
    for m in members:
        full(m)
    for _ in range(100):
        if not any([full(m) for m in members]):
            return
    raise RuntimeError(f"{what} did not settle in 100 passes")


def _settle_members(out: list[Member]) -> None:
    """Settle every member, then encode each one's steady-state heartbeat."""
    settle(out, _full_heartbeat, "the groups")
    for m in out:
        m.steady = bytearray(encode_request(0, ConsumerGroupHeartbeatRequest(
            group_id=m.group, member_id=m.member_id, member_epoch=m.epoch,
            topic_partitions=None), client_id=CLIENT_ID))


def spread_groups(ports: dict[int, int], groups: int) -> dict[str, int]:
    """`groups` group names whose coordinators are spread evenly over a cluster's brokers
    (node id -> port), each with the port of its coordinator."""
    probe = RawConnection(HOST, next(iter(ports.values())))
    wanted = {node: 0 for node in ports}
    chosen: dict[str, int] = {}
    share = -(-groups // len(ports))
    try:
        for i in range(10_000):
            if len(chosen) == groups:
                return chosen
            name = f"heartbeat-bench-{i}"
            for _ in range(300):
                found = probe.request(FindCoordinatorRequest(
                    key_type=0, coordinator_keys=(name,))).coordinators[0]
                if found.error_code == ErrorCode.none:
                    break
                time.sleep(0.1)
            else:
                raise RuntimeError(f"no coordinator for {name}")
            if wanted.get(found.node_id, share) < share:
                wanted[found.node_id] += 1
                chosen[name] = ports[found.node_id]
    finally:
        probe.close()
    raise RuntimeError(f"could not spread {groups} groups over {sorted(ports)}")


def join_spread(placed: dict[str, int], members: int) -> list[Member]:
    """Join `members` members over the groups of `placed` (name -> coordinator's port),
    each connected to its group's coordinator, and settle them."""
    names = list(placed)
    out = [Member(names[i % len(names)], _member_id(),
                  RawConnection(HOST, placed[names[i % len(names)]])) for i in range(members)]
    _settle_members(out)
    return out


def steady_answer(members: list[Member]) -> bytes:
    """Send every member's steady-state heartbeat once, check the answers (no error, same
    epoch, no assignment) and return one of them, as a whole frame."""
    read_header = entity_reader(ConsumerGroupHeartbeatResponse.__header_schema__)
    read_body = entity_reader(ConsumerGroupHeartbeatResponse)
    frame = b""
    for m in members:
        m.conn.send_bytes(bytes(m.steady))
        frame = m.conn.recv_frame()
        _, at = read_header(frame, 0)
        body, _ = read_body(frame, at)
        if (body.error_code != ErrorCode.none or body.member_epoch != m.epoch
                or body.assignment is not None):
            raise RuntimeError(f"unexpected steady-state answer for {m.member_id}: {body}")
    return _SIZE.pack(len(frame)) + frame


# -- the load generator ------------------------------------------------------------------------

@dataclass
class Sample:
    server: str
    concurrency: int
    throughput: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    server_cpu: float
    client_cpu: float
    bad: int

    @property
    def per_cpu(self) -> float:
        """Heartbeats per CPU-second the server used: its cost, whatever else ran."""
        return self.throughput / max(self.server_cpu, 1e-9)


def _percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def drive(server: Server, members: list[Member], socks: list[socket.socket], concurrency: int,
          expected_size: int, warmup: float, duration: float) -> Sample:
    """Keep `concurrency` heartbeats in flight for warmup + duration seconds; measure the
    answers of the last `duration` seconds."""
    ep = select.epoll()
    fd_index = {s.fileno(): i for i, s in enumerate(socks)}
    for s in socks:
        ep.register(s.fileno(), select.EPOLLIN)
    requests = [m.steady for m in members]
    sent_at = [0.0] * len(members)
    pending = [b""] * len(members)
    idle = collections.deque(range(len(members)))
    latencies: list[float] = []
    record = latencies.append
    bad = 0
    corr = 0
    pack_into = _SIZE.pack_into
    perf = time.perf_counter

    def send(i: int) -> None:
        nonlocal corr
        corr = (corr + 1) & 0x7FFFFFFF
        req = requests[i]
        pack_into(req, CORR_AT, corr)
        sent_at[i] = perf()
        if socks[i].send(req) != len(req):
            raise RuntimeError("short send")

    gc.collect()
    gc.disable()
    try:
        start = perf()
        measure_from = start + warmup
        stop_at = measure_from + duration
        in_flight = 0
        for _ in range(concurrency):
            send(idle.popleft())
            in_flight += 1
        server_cpu0 = client_cpu0 = None
        while in_flight:
            events = ep.poll(1.0)
            if not events and perf() > stop_at + 30:
                raise RuntimeError(f"{server.name}: {in_flight} heartbeats never answered")
            for fd, _ in events:
                i = fd_index[fd]
                try:
                    chunk = socks[i].recv(65536)
                except ssl.SSLWantReadError:  # a TLS record not whole yet
                    continue
                if not chunk:
                    raise RuntimeError(f"{server.name} closed a connection")
                data = pending[i] + chunk
                if len(data) < 4 or len(data) < 4 + _SIZE.unpack_from(data, 0)[0]:
                    pending[i] = data
                    continue
                pending[i] = b""
                now = perf()
                in_flight -= 1
                if now >= measure_from:
                    if server_cpu0 is None:
                        server_cpu0, client_cpu0 = server.cpu_seconds(), time.process_time()
                    if now < stop_at:
                        record(now - sent_at[i])
                if (len(data) != expected_size or data[ERROR_AT:ERROR_AT + 2] != b"\0\0"
                        or data[4:8] != requests[i][CORR_AT:CORR_AT + 4]):
                    bad += 1
                idle.append(i)
                if now < stop_at:
                    send(idle.popleft())
                    in_flight += 1
            if server_cpu0 is None and perf() >= measure_from:
                server_cpu0, client_cpu0 = server.cpu_seconds(), time.process_time()
        window = max(perf(), stop_at) - measure_from
        server_cpu = (server.cpu_seconds() - (server_cpu0 or 0.0)) / window
        client_cpu = (time.process_time() - (client_cpu0 or 0.0)) / window
    finally:
        gc.enable()
        ep.close()
    if not latencies:
        raise RuntimeError(f"{server.name}: no answer in the measuring window")
    latencies.sort()
    return Sample(server.name, concurrency, len(latencies) / duration,
                  _percentile(latencies, 0.50) * 1000, _percentile(latencies, 0.99) * 1000,
                  latencies[-1] * 1000, server_cpu, client_cpu, bad)


def connect_all(port: int, count: int) -> list[socket.socket]:
    socks = []
    for _ in range(count):
        s = socket.create_connection((HOST, port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        socks.append(s)
    return socks


# -- report ------------------------------------------------------------------------------------

def table(samples: list[Sample]) -> str:
    lines = ["| concurrency | server | heartbeats/s | p50 ms | p99 ms | max ms | server CPU "
             "| generator CPU | bad answers | heartbeats per server CPU-s | coterie / bare "
             "(per s, per CPU-s) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    by_level: dict[int, dict[str, Sample]] = collections.defaultdict(dict)
    for s in samples:
        by_level[s.concurrency][s.server] = s
    for level in sorted(by_level):
        pair = by_level[level]
        ratio = ""
        if "coterie" in pair and "bare loop" in pair:
            c, b = pair["coterie"], pair["bare loop"]
            ratio = f"{c.throughput / b.throughput:.2f}, {c.per_cpu / b.per_cpu:.2f}"
        for name in ("coterie", "coterie-pg", "coterie-pg x3", "bare loop", "kafka"):
            s = pair.get(name)
            if s is None:
                continue
            lines.append(f"| {level} | {name} | {s.throughput:,.0f} | {s.p50_ms:.2f} "
                         f"| {s.p99_ms:.2f} | {s.max_ms:.1f} | {s.server_cpu:.0%} "
                         f"| {s.client_cpu:.0%} | {s.bad} | {s.per_cpu:,.0f} "
                         f"| {ratio if name == 'coterie' else ''} |")
    return "\n".join(lines)


def summary(samples: list[Sample], p99_ms: float) -> tuple[str, float | None]:
    best: dict[str, Sample] = {}
    for s in samples:
        if s.p99_ms < p99_ms and (s.server not in best or s.throughput > best[s.server].throughput):
            best[s.server] = s
    lines = []
    for name in ("coterie", "coterie-pg", "coterie-pg x3", "bare loop", "kafka"):
        if name in ("kafka", "coterie-pg", "coterie-pg x3") and \
                not any(s.server == name for s in samples):
            continue
        s = best.get(name)
        lines.append(f"{name}: " + (f"no level with p99 < {p99_ms:g} ms" if s is None else
                     f"{s.throughput:,.0f} heartbeats/s at concurrency {s.concurrency} "
                     f"(p50 {s.p50_ms:.2f} ms, p99 {s.p99_ms:.2f} ms)"))
    ratio = None
    if "coterie" in best and "bare loop" in best:
        ratio = best["coterie"].throughput / best["bare loop"].throughput
        lines.append(f"ratio coterie / bare loop at p99 < {p99_ms:g} ms: {ratio:.2f} "
                     f"(target >= 0.60: {'met' if ratio >= 0.6 else 'not met'})")
    if "coterie" in best and "coterie-pg" in best:
        vs = best["coterie-pg"].throughput / best["coterie"].throughput
        lines.append(f"ratio coterie on PostgreSQL / coterie on files at p99 < {p99_ms:g} ms: "
                     f"{vs:.2f}")
    if "coterie" in best and "kafka" in best:
        vs = best["coterie"].throughput / best["kafka"].throughput
        lines.append(f"ratio coterie / kafka at p99 < {p99_ms:g} ms: {vs:.2f} "
                     f"(target >= 1.00: {'met' if vs >= 1.0 else 'not met'})")
    # What other work on the machine cannot skew: heartbeats per CPU-second the server got.
    per_cpu = {name: [s.per_cpu for s in samples if s.server == name and s.concurrency >= 8]
               for name in ("coterie", "bare loop")}
    if all(per_cpu.values()):
        c, b = (statistics.median(per_cpu[n]) for n in ("coterie", "bare loop"))
        lines.append(f"heartbeats per server CPU-second, median over the levels >= 8: "
                     f"coterie {c:,.0f} ({1e6 / c:.0f} us each), bare loop {b:,.0f} "
                     f"({1e6 / b:.0f} us each), ratio {c / b:.2f}")
        on_pg = [s.per_cpu for s in samples if s.server == "coterie-pg" and s.concurrency >= 8]
        if on_pg:
            g = statistics.median(on_pg)
            lines.append(f"coterie on PostgreSQL {g:,.0f} heartbeats per CPU-second "
                         f"({1e6 / g:.0f} us each); on PostgreSQL / on files {g / c:.2f}")
        three = [s.per_cpu for s in samples
                 if s.server == "coterie-pg x3" and s.concurrency >= 8]
        if three:
            t = statistics.median(three)
            lines.append(f"three brokers on PostgreSQL {t:,.0f} heartbeats per CPU-second of "
                         f"the three ({1e6 / t:.0f} us each); / one broker on files "
                         f"{t / c:.2f}")
        kafka = [s.per_cpu for s in samples if s.server == "kafka" and s.concurrency >= 8]
        if kafka:
            k = statistics.median(kafka)
            lines.append(f"kafka {k:,.0f} heartbeats per CPU-second ({1e6 / k:.0f} us each); "
                         f"coterie / kafka {c / k:.2f}")
    return "\n".join(lines), ratio


def _settle(server: Server, args: argparse.Namespace,
            log: Callable[[str], None]) -> tuple[list[Member], bytes]:
    """Create the topic on `server`, join the members and settle them; returns them and
    the steady-state answer."""
    create_topic(f"{HOST}:{server.port}", TOPIC, args.partitions)
    started = time.monotonic()
    members = join_members(server.port, args.members, args.groups)
    response = steady_answer(members)
    log(f"{server.name}: {args.members} members in {args.groups} groups settled in "
        f"{time.monotonic() - started:.1f} s; steady-state request "
        f"{len(members[0].steady)} bytes, answer {len(response)} bytes")
    return members, response


def _three_brokers(stack: contextlib.ExitStack, work: Path, args: argparse.Namespace,
                   overrides: dict[str, str], log: Callable[[str], None]
                   ) -> tuple[Server, list[Member], list[socket.socket], int]:
    """Three brokers on one database of a PostgreSQL server of their own, pinned together
    to the server core (this machine has two cores: the figure is what the three cost per
    heartbeat, and each broker is a third of the load), the groups' coordinators spread
    evenly over them; measured as one server."""
    pg = postgres.start_server({"synchronous_commit": "on"})
    stack.callback(pg.stop)
    uri = f"postgresql://coterie@127.0.0.1:{pg.port}/" + \
        pg.create_database().rsplit("dbname=", 1)[1]
    servers: dict[int, Server] = {}
    for node in (1, 2, 3):
        port = free_port()
        cmd = [*coterie_cmd(port, work / f"data-pg{node}", None, overrides),
               "--storage", uri, "--node-id", str(node),
               "--override", "offsets.topic.num.partitions=12"]
        servers[node] = stack.enter_context(running(
            f"coterie-pg{node}", cmd, args.server_core, work / f"coterie-pg{node}.log", port))
    first = servers[1]
    started = time.monotonic()
    create_topic(f"{HOST}:{first.port}", TOPIC, args.partitions)
    # Every broker has its share of the coordinators before the groups are placed.
    deadline = time.monotonic() + 60
    while True:
        md = AdminClient({"bootstrap.servers": f"{HOST}:{first.port}", "log_level": 4}) \
            .list_topics("__consumer_offsets", timeout=10).topics.get("__consumer_offsets")
        leaders = {p.leader for p in md.partitions.values()} if md is not None else set()
        if leaders == {1, 2, 3}:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"__consumer_offsets led by {leaders}, not by all three")
        time.sleep(0.2)
    groups = max(args.groups, 3)
    placed = spread_groups({n: s.port for n, s in servers.items()}, groups)
    members = join_spread(placed, args.members)
    response = steady_answer(members)
    log(f"coterie-pg x3: {args.members} members in {groups} groups over three brokers "
        f"settled in {time.monotonic() - started:.1f} s")
    cluster = Server("coterie-pg x3", first.proc, first.port,
                     more=[servers[2].proc, servers[3].proc])
    return cluster, members, [m.conn.sock for m in members], len(response)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=500)
    parser.add_argument("--groups", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--levels", default=DEFAULT_LEVELS,
                        help=f"concurrency levels (default {DEFAULT_LEVELS}), each at most "
                             "--members")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds per level")
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per level")
    parser.add_argument("--reps", type=int, default=3,
                        help="sweeps over the levels; per server and level the sweep with the "
                             "highest throughput is kept (default 3)")
    parser.add_argument("--p99-ms", type=float, default=10.0)
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)
    parser.add_argument("--only", choices=("coterie", "bare", "kafka"), default=None)
    parser.add_argument("--kafka", action="store_true",
                        help="also measure the reference Apache Kafka broker (needs java; "
                             "pinned to the same core, same load generator, same run)")
    parser.add_argument("--postgresql", action="store_true",
                        help="also measure coterie as one broker of a cluster on PostgreSQL "
                             "(a server of its own, started by this script)")
    parser.add_argument("--cluster", action="store_true",
                        help="also measure three coterie brokers on one PostgreSQL database, "
                             "the groups spread over them, all pinned to the server core")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="another broker property for coterie (repeatable)")
    parser.add_argument("--profile", type=Path, default=None,
                        help="run the broker under cProfile, writing stats to this file")
    parser.add_argument("--serve-bare", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--response", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_bare is not None:
        serve_bare(args.serve_bare, bytes.fromhex(args.response))
        return 0
    levels = [int(x) for x in args.levels.split(",")]
    overrides = dict(item.split("=", 1) for item in args.override)
    if max(levels) > args.members:
        parser.error("every concurrency level must be at most --members")
    os.sched_setaffinity(0, {args.client_core})
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    load = os.getloadavg()
    log(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    samples: list[Sample] = []
    with tempfile.TemporaryDirectory(prefix="coterie-heartbeats-") as tmp, \
            contextlib.ExitStack() as stack:
        work = Path(tmp)
        # Each server under test: (server, its members, their sockets, steady answer size).
        targets: list[tuple[Server, list[Member], list[socket.socket], int]] = []
        port = free_port()
        coterie = stack.enter_context(running(
            "coterie", coterie_cmd(port, work / "data", args.profile, overrides),
            args.server_core, work / "coterie.log", port))
        members, response = _settle(coterie, args, log)
        targets.append((coterie, members, [m.conn.sock for m in members], len(response)))
        if args.postgresql:
            # One broker of a cluster on PostgreSQL (issue 24): a steady heartbeat writes
            # nothing, but the broker renews its leases and checks that its coordinators'
            # records reached the database before each answer (server `_after`).
            pg = postgres.start_server({"synchronous_commit": "on"})
            stack.callback(pg.stop)
            name = pg.create_database().rsplit("dbname=", 1)[1]
            pg_port = free_port()
            pg_cmd = [*coterie_cmd(pg_port, work / "data-pg", None, overrides),
                      "--storage", f"postgresql://coterie@127.0.0.1:{pg.port}/{name}",
                      "--node-id", "1"]
            on_pg = stack.enter_context(running("coterie-pg", pg_cmd, args.server_core,
                                                work / "coterie-pg.log", pg_port))
            pg_members, pg_response = _settle(on_pg, args, log)
            targets.append((on_pg, pg_members, [m.conn.sock for m in pg_members],
                            len(pg_response)))
        if args.cluster:
            targets.append(_three_brokers(stack, work, args, overrides, log))
        bare_port = free_port()
        bare_cmd = [sys.executable, str(Path(__file__).resolve()), "--serve-bare",
                    str(bare_port), "--response", response.hex()]
        bare = stack.enter_context(running("bare loop", bare_cmd, args.server_core,
                                           work / "bare.log", bare_port))
        targets.append((bare, members, connect_all(bare_port, args.members), len(response)))
        if args.kafka:
            reason = prepare_reference(log)
            if reason is not None:
                log(f"no reference broker: {reason}")
            else:
                kafka_port = free_port()
                kafka_cmd = load_reference_kafka().prepare(
                    kafka_port, work / "kafka-data", overrides=KAFKA_SETTINGS)
                kafka = stack.enter_context(running("kafka", kafka_cmd, args.server_core,
                                                    work / "kafka.log", kafka_port))
                k_members, k_response = _settle(kafka, args, log)
                targets.append((kafka, k_members, [m.conn.sock for m in k_members],
                                len(k_response)))
        for _, _, socks, _ in targets:
            for sock in socks:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setblocking(False)
        for level in [lv for _ in range(args.reps) for lv in levels]:
            for server, server_members, socks, size in targets:
                if args.only and not server.name.startswith(args.only):
                    continue
                s = drive(server, server_members, socks, level, size, args.warmup,
                          args.duration)
                samples.append(s)
                log(f"  {s.server:9} C={level:<4} {s.throughput:9,.0f}/s "
                    f"p50 {s.p50_ms:6.2f} ms p99 {s.p99_ms:6.2f} ms "
                    f"server CPU {s.server_cpu:4.0%} generator CPU "
                    f"{s.client_cpu:4.0%} bad {s.bad}")
        for _, _, socks, _ in targets:
            for sock in socks:
                sock.close()
    load = os.getloadavg()
    log(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    best: dict[tuple[str, int], Sample] = {}
    for s in samples:
        key = (s.server, s.concurrency)
        if key not in best or s.throughput > best[key].throughput:
            best[key] = s
    samples = list(best.values())
    print(table(samples))
    print()
    text, _ = summary(samples, args.p99_ms)
    print(text)
    return 1 if any(s.bad for s in samples) else 0


if __name__ == "__main__":
    sys.exit(main())
