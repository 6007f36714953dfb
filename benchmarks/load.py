"""Many group members against one coterie broker: false expiries, heartbeat latency and the
broker's memory per member (issue: 10,000 members, 0 false expiries, p99 < 50 ms, <= 3 KiB
of broker memory per member).

What runs:

* one coterie broker, `python -m coterie serve` on a free loopback port (benchmarks/_brokers.py),
  with `group.consumer.heartbeat.interval.ms` (and `group.consumer.min.heartbeat.interval.ms`,
  5 s by default in Kafka as in coterie) set to `--interval` (Kafka's default is 5 s, the
  classic client's heartbeat.interval.ms is 3 s: this way both protocols heartbeat every 3 s)
  and `group.consumer.session.timeout.ms` to `--session-ms` (45 s, Kafka's default);
* one topic of `--partitions` (100) partitions, shared by every group. One shared topic keeps
  the broker's topic and log state the same whatever `--members` is, so the RSS growth is the
  members' (and their connections'), not partitions'; with groups of 10 each member owns 10
  partitions, a typical consumer's share;
* `--members` members in groups of `--group-size`, each on its own TCP connection (as real
  clients are), driven by `--procs` load-generator processes, each owning whole groups and
  running a plain epoll loop over non-blocking sockets (the approach of
  benchmarks/heartbeats.py, whose helpers it imports). Requests are encoded and answers
  decoded with kio (through coterie.wire.codec), as in the other raw-protocol benchmarks.

Protocols (`--protocol`; `both` runs classic, then consumer, each against a fresh broker so
that the memory figures are per protocol):

* classic: JoinGroup v9 (first without a member id, MEMBER_ID_REQUIRED, again with it; session
  timeout `--session-ms`, rebalance timeout 60 s, protocol type "consumer" with one static
  "range" subscription), SyncGroup v5 (the leader sends each member its round-robin share of the
  partitions as a consumer-protocol assignment; the others send none), then Heartbeat v4 every
  interval. REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION make the member rejoin,
  UNKNOWN_MEMBER_ID makes it rejoin without its member id, as a client does.
* consumer (KIP-848): ConsumerGroupHeartbeat v1 with a client-generated member id, epoch 0 and
  the subscription; a new assignment is acknowledged at once by a heartbeat that reports the
  owned partitions; otherwise the steady heartbeat (epoch, every other field null) every
  interval. UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH make the member rejoin at epoch 0.

Each member has at most one request in flight; its next heartbeat is due `--interval` times
a uniform factor in [1 - jitter, 1 + jitter] after the previous answer, the first one a
uniform fraction of an interval after it joined, so the load is spread evenly.

Phases and figures:

1. RSS of the broker after the topic exists ("before"); the generators open every
   connection (RSS "connected");
2. all members join; join time is from the first JoinGroup / heartbeat until every group is
   settled (classic: every member synced in the same generation and heartbeated once since;
   consumer: all members of a group at the same epoch, assignment acknowledged, last answer
   without a new assignment), plus one more interval in which it must stay so. RSS "joined";
3. the window of `--duration` seconds: every heartbeat's latency (send to answer), false
   expiries (a heartbeat answered UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, ILLEGAL_GENERATION or
   REBALANCE_IN_PROGRESS: a healthy member never sees these), other errors, the broker's CPU
   time as a share of the window; RSS "end" at its end, members still connected.

Memory per member is (RSS end - RSS before) / members: connection and group state together
(the "connected" column splits them). Targets are printed next to the figures.

Needs one file descriptor per member in the broker and in the generators: the script raises
its RLIMIT_NOFILE soft limit to the hard limit (inherited by the broker and the generators);
for 10,000 members the hard limit must be above ~10,100.

    .venv/bin/python benchmarks/load.py --members 200 --duration 20            # smoke, ~1 min
    .venv/bin/python benchmarks/load.py --protocol both --duration 120        # ~8 min
    .venv/bin/python benchmarks/load.py                                        # the issue's run
    .venv/bin/python benchmarks/load.py --protocol consumer --json /tmp/load.json
    .venv/bin/python benchmarks/load.py --members 2000 --duration 10 --tracemalloc /tmp/tm

`--tracemalloc DIR` starts the broker through benchmarks/_instrumented_serve.py, takes a
snapshot of its Python allocations before, connected and end, and prints the allocating lines
that grew most, per member: connections (connected - before), members (end - connected).
Tracemalloc sees Python's allocations only (not the allocator's free lists or fragmentation),
so its total is below the RSS growth; it slows the broker, so read only its memory figures.
"""

from __future__ import annotations

import argparse
import array
import contextlib
import datetime
import heapq
import json
import multiprocessing
import multiprocessing.connection
import os
import random
import resource
import select
import signal
import socket
import struct
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _brokers import (
    HOST,
    cpu_seconds,
    create_topic,
    rss_kib,
    run_broker_process,
)
from heartbeats import CORR_AT, REPO_ROOT, RETRIABLE, _member_id, _percentile
from kio.index import load_response_schema
from kio.schema.consumer_group_heartbeat.v1.request import (
    ConsumerGroupHeartbeatRequest,
    TopicPartitions,
)
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v9.request import (
    JoinGroupRequest,
    JoinGroupRequestProtocol,
)
from kio.schema.sync_group.v5.request import (
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)
from kio.serial import entity_reader

from coterie.wire.codec import encode_request
from coterie.wire.consumer_protocol import (
    Assignment,
    Subscription,
    encode_assignment,
    encode_subscription,
)
from coterie.wire.framing import FrameBuffer

TOPIC = "load-bench"
CLIENT_ID = "load-bench"
REBALANCE_MS = 60_000
PROTOCOL_NAME = "range"
FALSE_EXPIRY = frozenset({ErrorCode.unknown_member_id, ErrorCode.fenced_member_epoch,
                          ErrorCode.illegal_generation, ErrorCode.rebalance_in_progress})
TARGET_P99_MS = 50.0
TARGET_KIB_PER_MEMBER = 3.0
TARGET_MEMBERS = 10_000
_SIZE = struct.Struct(">i")
# states of a member
IDLE, JOINING, SYNCING, STABLE = range(4)


# -- consumer-protocol bytes of the classic protocol (Kafka's embedded protocol, v0) ----------

def subscription_v0(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0 of `topic`, as coterie's own members write it."""
    return encode_subscription(Subscription(topics=(topic,), version=0))


def assignment_v0(topic: str, partitions: list[int]) -> bytes:
    """ConsumerProtocolAssignment v0 of `partitions` of `topic`."""
    return encode_assignment(Assignment(
        partitions=frozenset((topic, p) for p in partitions), version=0))


# -- one generator process ---------------------------------------------------------------------

@dataclass(slots=True, eq=False)
class Member:
    group: str
    sock: socket.socket
    member_id: str = ""
    state: int = IDLE
    generation: int = -1  # classic generation / consumer member epoch
    corr: int = 0
    inflight: str = ""  # api of the request in flight ("" = none)
    sent_at: float = 0.0
    due: float = 0.0  # next heartbeat (0 = none scheduled)
    hb_since_sync: int = 0
    frames: FrameBuffer = field(default_factory=lambda: FrameBuffer(2**31 - 1))
    steady: bytearray = field(default_factory=bytearray)  # pre-encoded heartbeat
    assigned: tuple[TopicPartitions, ...] = ()
    ack: bool = False  # consumer: the owned partitions must be reported


@dataclass
class GenResult:
    """What one generator process reports at the end of the window."""
    members: int = 0
    settled_at_start: int = 0
    heartbeats: int = 0
    false_expiries: dict[str, int] = field(default_factory=dict)
    other_errors: dict[str, int] = field(default_factory=dict)
    late: int = 0  # heartbeats due while the previous one was still unanswered
    disconnects: int = 0
    latencies_path: str = ""
    cpu_seconds: float = 0.0


class Generator:
    def __init__(self, protocol: str, port: int, groups: list[str], group_size: int,
                 partitions: int, interval: float, jitter: float, session_ms: int,
                 seed: int) -> None:
        self.protocol = protocol
        self.port = port
        self.group_names = groups
        self.group_size = group_size
        self.partitions = partitions
        self.interval = interval
        self.jitter = jitter
        self.session_ms = session_ms
        self.rng = random.Random(seed)
        self.members: list[Member] = []
        self.by_fd: dict[int, Member] = {}
        self.groups: dict[str, list[Member]] = {}
        self.timers: list[tuple[float, int, Member]] = []
        self.tie = 0
        self.ep = select.epoll()
        self.in_window = False
        self.recording = False  # latencies are kept (from "start" to "end")
        self.latencies = array.array("d")
        self.sent = array.array("d")  # send time of each, seconds into the window
        self.window_t0 = 0.0
        self.heartbeats = 0
        self.false_expiries: Counter[str] = Counter()
        self.other_errors: Counter[str] = Counter()
        self.late = 0
        self.disconnects = 0
        self.metadata = subscription_v0(TOPIC)
        self.readers: dict[str, tuple[Any, Any]] = {}
        for api, req in (("join", JoinGroupRequest), ("sync", SyncGroupRequest),
                         ("hb", HeartbeatRequest), ("chb", ConsumerGroupHeartbeatRequest)):
            cls = load_response_schema(req.__api_key__, req.__version__)
            self.readers[api] = (entity_reader(cls.__header_schema__), entity_reader(cls))

    # connections ------------------------------------------------------------------------
    def connect(self) -> None:
        for name in self.group_names:
            for _ in range(self.group_size):
                s = socket.create_connection((HOST, self.port), timeout=30)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.setblocking(False)
                m = Member(name, s)
                self.members.append(m)
                self.groups.setdefault(name, []).append(m)
                self.by_fd[s.fileno()] = m
                self.ep.register(s.fileno(), select.EPOLLIN)

    def close(self) -> None:
        for m in self.members:
            with contextlib.suppress(OSError):
                m.sock.close()
        self.ep.close()

    # sending ----------------------------------------------------------------------------
    def _send(self, m: Member, api: str, frame: bytes | bytearray) -> None:
        m.corr = (m.corr + 1) & 0x7FFFFFFF
        buf = frame if isinstance(frame, bytearray) else bytearray(frame)
        _SIZE.pack_into(buf, CORR_AT, m.corr)
        m.inflight = api
        m.sent_at = time.perf_counter()
        if m.sock.send(buf) != len(buf):
            raise RuntimeError("short send")

    def _schedule(self, m: Member, delay: float) -> None:
        m.due = time.perf_counter() + delay
        self.tie += 1
        heapq.heappush(self.timers, (m.due, self.tie, m))

    def _next_delay(self) -> float:
        return self.interval * self.rng.uniform(1 - self.jitter, 1 + self.jitter)

    def join(self, m: Member) -> None:
        m.state, m.due, m.hb_since_sync = JOINING, 0.0, 0
        if self.protocol == "classic":
            req = JoinGroupRequest(
                group_id=m.group, member_id=m.member_id,
                session_timeout=datetime.timedelta(milliseconds=self.session_ms),
                rebalance_timeout=datetime.timedelta(milliseconds=REBALANCE_MS),
                protocol_type="consumer",
                protocols=(JoinGroupRequestProtocol(name=PROTOCOL_NAME, metadata=self.metadata),))
            self._send(m, "join", encode_request(0, req, client_id=CLIENT_ID))
        else:
            if not m.member_id:
                m.member_id = _member_id()
            m.generation, m.assigned, m.ack = 0, (), False
            req = ConsumerGroupHeartbeatRequest(
                group_id=m.group, member_id=m.member_id, member_epoch=0,
                rebalance_timeout=datetime.timedelta(milliseconds=REBALANCE_MS),
                subscribed_topic_names=(TOPIC,), topic_partitions=())
            self._send(m, "chb", encode_request(0, req, client_id=CLIENT_ID))

    def start_joining(self) -> None:
        for m in self.members:
            self.join(m)

    def heartbeat(self, m: Member) -> None:
        if m.inflight:
            self.late += 1
            return
        if self.protocol == "consumer" and m.ack:
            req = ConsumerGroupHeartbeatRequest(
                group_id=m.group, member_id=m.member_id, member_epoch=m.generation,
                topic_partitions=m.assigned)
            self._send(m, "chb", encode_request(0, req, client_id=CLIENT_ID))
            return
        self._send(m, "hb" if self.protocol == "classic" else "chb", m.steady)

    # answers ----------------------------------------------------------------------------
    def _error(self, m: Member, code: ErrorCode) -> None:
        """A heartbeat's error: count it, and do what a client does."""
        if self.in_window:
            (self.false_expiries if code in FALSE_EXPIRY else self.other_errors)[code.name] += 1
        if code == ErrorCode.unknown_member_id and self.protocol == "classic":
            m.member_id = ""
        if code in FALSE_EXPIRY:
            self.join(m)
        else:
            self._schedule(m, self._next_delay())

    def on_frame(self, m: Member, frame: bytes, now: float) -> None:
        api = m.inflight
        m.inflight = ""
        read_header, read_body = self.readers[api]
        header, at = read_header(frame, 0)
        if header.correlation_id != m.corr:
            raise RuntimeError(f"correlation id {header.correlation_id}, expected {m.corr}")
        body, _ = read_body(frame, at)
        code = body.error_code
        if api == "join":
            self.on_join(m, body, code)
        elif api == "sync":
            self.on_sync(m, body, code)
        else:
            if self.recording and m.state == STABLE:
                self.latencies.append(now - m.sent_at)
                self.sent.append(m.sent_at - self.window_t0)
                self.heartbeats += 1
            if api == "hb":
                if code != ErrorCode.none:
                    self._error(m, code)
                else:
                    m.hb_since_sync += 1
                    self._schedule(m, self._next_delay())
            else:
                self.on_consumer_heartbeat(m, body, code)

    def on_join(self, m: Member, body: Any, code: ErrorCode) -> None:
        if code == ErrorCode.member_id_required:
            m.member_id = body.member_id
            self.join(m)
            return
        if code in (ErrorCode.rebalance_in_progress, ErrorCode.illegal_generation):
            self.join(m)
            return
        if code == ErrorCode.unknown_member_id:
            m.member_id = ""
            self.join(m)
            return
        if code != ErrorCode.none:
            raise RuntimeError(f"JoinGroup of {m.member_id} in {m.group}: {code.name}")
        m.generation, m.member_id = body.generation_id, body.member_id
        assignments: tuple[SyncGroupRequestAssignment, ...] = ()
        if body.leader == m.member_id:
            ids = sorted(x.member_id for x in body.members)
            assignments = tuple(
                SyncGroupRequestAssignment(member_id=mid, assignment=assignment_v0(
                    TOPIC, list(range(k, self.partitions, len(ids)))))
                for k, mid in enumerate(ids))
        m.state = SYNCING
        req = SyncGroupRequest(group_id=m.group, generation_id=m.generation,
                               member_id=m.member_id, protocol_type="consumer",
                               protocol_name=PROTOCOL_NAME, assignments=assignments)
        self._send(m, "sync", encode_request(0, req, client_id=CLIENT_ID))

    def on_sync(self, m: Member, body: Any, code: ErrorCode) -> None:
        if code in FALSE_EXPIRY:
            if code == ErrorCode.unknown_member_id:
                m.member_id = ""
            self.join(m)
            return
        if code != ErrorCode.none:
            raise RuntimeError(f"SyncGroup of {m.member_id} in {m.group}: {code.name}")
        m.state = STABLE
        m.steady = bytearray(encode_request(0, HeartbeatRequest(
            group_id=m.group, generation_id=m.generation, member_id=m.member_id),
            client_id=CLIENT_ID))
        self._schedule(m, self.interval * self.rng.random())

    def on_consumer_heartbeat(self, m: Member, body: Any, code: ErrorCode) -> None:
        if code in RETRIABLE and m.state == JOINING:
            self._schedule(m, 0.1)  # the join is retried by the timer
            m.state = IDLE
            return
        if code != ErrorCode.none:
            if m.state != STABLE:
                raise RuntimeError(f"ConsumerGroupHeartbeat of {m.member_id} in {m.group}: "
                                   f"{code.name}")
            self._error(m, code)
            return
        m.ack = False
        epoch_changed = body.member_epoch != m.generation
        m.generation = body.member_epoch
        if body.assignment is not None:
            assigned = tuple(TopicPartitions(topic_id=t.topic_id, partitions=tuple(t.partitions))
                             for t in body.assignment.topic_partitions)
            if assigned != m.assigned or m.state == JOINING:
                m.assigned, m.ack = assigned, True
        first = m.state == JOINING
        m.state = STABLE
        if epoch_changed or not m.steady:
            m.steady = bytearray(encode_request(0, ConsumerGroupHeartbeatRequest(
                group_id=m.group, member_id=m.member_id, member_epoch=m.generation,
                topic_partitions=None), client_id=CLIENT_ID))
        if m.ack:
            m.hb_since_sync = 0
            self.heartbeat(m)  # acknowledge the new assignment at once
        else:
            m.hb_since_sync += 1
            self._schedule(m, self.interval * self.rng.random() if first
                           else self._next_delay())

    def on_readable(self, m: Member) -> None:
        try:
            chunk = m.sock.recv(262144)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.disconnects += 1
            self.ep.unregister(m.sock.fileno())
            m.inflight, m.state = "", IDLE
            return
        m.frames.feed(chunk)
        now = time.perf_counter()
        while (frame := m.frames.next_frame()) is not None:
            self.on_frame(m, frame, now)

    def fire_timers(self) -> None:
        now = time.perf_counter()
        timers = self.timers
        while timers and timers[0][0] <= now:
            due, _, m = heapq.heappop(timers)
            if due != m.due:
                continue  # superseded
            m.due = 0.0
            if m.state == IDLE and self.protocol == "consumer":
                self.join(m)
            elif m.state == STABLE:
                self.heartbeat(m)

    # settling ---------------------------------------------------------------------------
    def settled_count(self) -> int:
        """Members of groups that are settled (see the module docstring)."""
        total = 0
        for members in self.groups.values():
            gens = {m.generation for m in members}
            if len(gens) == 1 and all(m.state == STABLE and m.hb_since_sync > 0 and not m.ack
                                      for m in members):
                total += len(members)
        return total

    def poll(self, timeout: float) -> list[tuple[int, int]]:
        if self.timers:
            timeout = max(0.0, min(timeout, self.timers[0][0] - time.perf_counter()))
        return self.ep.poll(timeout)


def generator_main(conn: multiprocessing.connection.Connection, out_dir: str, index: int,
                   protocol: str, port: int, groups: list[str], group_size: int,
                   partitions: int, interval: float, jitter: float, session_ms: int) -> None:
    """A generator process: control messages from the parent on `conn` ("join", "start",
    "end" of the latencies kept, "stop"); reports ("connected"), ("settled", n) and at the
    end ("result", GenResult)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us
    gen = Generator(protocol, port, groups, group_size, partitions, interval, jitter,
                    session_ms, seed=index)
    try:
        gen.connect()
        conn.send(("connected", len(gen.members)))
        ctrl = conn.fileno()
        gen.ep.register(ctrl, select.EPOLLIN)
        last_report = -1
        next_check = 0.0
        cpu0 = 0.0
        settled_at_start = 0
        while True:
            events = gen.poll(0.25)
            for fd, _ in events:
                if fd == ctrl:
                    msg = conn.recv()
                    if msg == "join":
                        gen.start_joining()
                    elif msg == "start":
                        settled_at_start = gen.settled_count()
                        gen.in_window = gen.recording = True
                        gen.window_t0 = time.perf_counter()
                        cpu0 = time.process_time()
                    elif msg == "end":
                        gen.recording = False
                    elif msg == "stop":
                        path = Path(out_dir) / f"latencies-{index}"
                        with open(path, "wb") as f:
                            gen.latencies.tofile(f)
                        with open(f"{path}.sent", "wb") as f:
                            gen.sent.tofile(f)
                        result = GenResult(
                            members=len(gen.members), settled_at_start=settled_at_start,
                            heartbeats=gen.heartbeats,
                            false_expiries=dict(gen.false_expiries),
                            other_errors=dict(gen.other_errors), late=gen.late,
                            disconnects=gen.disconnects, latencies_path=str(path),
                            cpu_seconds=time.process_time() - cpu0)
                        conn.send(("result", result))
                        return
                else:
                    gen.on_readable(gen.by_fd[fd])
            gen.fire_timers()
            now = time.perf_counter()
            if not gen.in_window and now >= next_check:
                next_check = now + 0.5
                n = gen.settled_count()
                if n != last_report:
                    conn.send(("settled", n))
                    last_report = n
    except Exception as exc:  # reported to the parent, which stops the run
        conn.send(("error", f"generator {index}: {type(exc).__name__}: {exc}"))
    finally:
        gen.close()


# -- the run -----------------------------------------------------------------------------------

class Snapshots:
    """Tracemalloc snapshots of a broker run by benchmarks/_instrumented_serve.py (or none)."""

    def __init__(self, directory: Path | None, pid: int) -> None:
        self.dir, self.pid, self.taken = directory, pid, 0
        self.paths: dict[str, Path] = {}

    def take(self, name: str) -> None:
        if self.dir is None:
            return
        path = self.dir / f"snapshot-{self.taken}"
        self.taken += 1
        os.kill(self.pid, signal.SIGUSR1)
        deadline = time.monotonic() + 600
        while not Path(f"{path}.done").exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"the broker wrote no snapshot {path}")
            time.sleep(0.2)
        self.paths[name] = path


def _where(trace: tracemalloc.Frame) -> str:
    name = trace.filename
    if name.startswith(str(REPO_ROOT) + "/"):
        name = name[len(str(REPO_ROOT)) + 1:]
    elif "site-packages/" in name:
        name = name.split("site-packages/", 1)[1]
    elif "/lib/python3" in name:
        name = "stdlib " + name.split("/lib/python3", 1)[1].split("/", 1)[1]
    return f"{name}:{trace.lineno}"


def memory_breakdown(paths: dict[str, Path], members: int, top: int) -> str:
    """Where the broker's memory per member went (tracemalloc, by allocating line): the
    connections (connected - before) and the members (end - connected)."""
    snaps = {k: tracemalloc.Snapshot.load(str(p)).filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)]) for k, p in paths.items()}
    out = []
    for title, a, b in (("connections (connected - before)", "before", "connected"),
                        ("members (end - connected)", "connected", "end"),
                        ("all (end - before)", "before", "end")):
        stats = snaps[b].compare_to(snaps[a], "lineno")
        total = sum(st.size_diff for st in stats)
        out.append(f"\n{title}: {total / members / 1024:.2f} KiB per member traced by "
                   "tracemalloc (Python allocations only)")
        out.append("| bytes / member | blocks / member | allocated at |")
        out.append("| ---: | ---: | --- |")
        for st in sorted(stats, key=lambda x: -x.size_diff)[:top]:
            out.append(f"| {st.size_diff / members:,.0f} | {st.count_diff / members:.2f} "
                       f"| {_where(st.traceback[0])} |")
    return "\n".join(out)


@dataclass
class RunResult:
    protocol: str
    members: int
    joined: int
    join_seconds: float
    window_seconds: float
    heartbeats: int
    false_expiries: dict[str, int]
    other_errors: dict[str, int]
    late: int
    disconnects: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    rss_before_kib: int
    rss_connected_kib: int
    rss_joined_kib: int
    rss_end_kib: int
    broker_cpu: float
    generator_cpu: float
    # the broker's full collections in the window (--gc-log): (second of the window, ms)
    gc_full: list[tuple[int, float]] | None = None
    slow: int = 0  # heartbeats answered in TARGET_P99_MS or more
    slow_seconds: int = 0  # distinct seconds of the window they were sent in
    worst_seconds: list[tuple[int, int]] = field(default_factory=list)
    snapshots: dict[str, str] = field(default_factory=dict)

    @property
    def kib_per_member(self) -> float:
        return (self.rss_end_kib - self.rss_before_kib) / max(self.members, 1)

    @property
    def false_total(self) -> int:
        return sum(self.false_expiries.values())


def read_gc_log(path: Path | None, start: float, end: float) -> list[tuple[int, float]] | None:
    """Full collections of the broker between wall-clock times start and end (second of the
    window, duration in ms), from benchmarks/_instrumented_serve.py's COTERIE_GC_LOG."""
    if path is None:
        return None
    out = []
    if path.exists():
        for line in path.read_text().splitlines():
            at, ms, _ = line.split()
            if start <= float(at) <= end:
                out.append((int(float(at) - start), float(ms)))
    return out


class Generators:
    """The generator processes of one run, and their control pipes."""

    def __init__(self) -> None:
        self.procs: list[multiprocessing.Process] = []
        self.conns: list[multiprocessing.connection.Connection] = []
        self.finished: set[int] = set()

    def start(self, ctx: Any, target: Any, args_for: list[tuple[Any, ...]]) -> None:
        for args in args_for:
            parent, child = ctx.Pipe()
            p = ctx.Process(target=target, args=(child, *args), daemon=True)
            p.start()
            child.close()
            self.procs.append(p)
            self.conns.append(parent)

    def broadcast(self, msg: str) -> None:
        for c in self.conns:
            c.send(msg)

    def receive(self, timeout: float) -> list[tuple[int, Any]]:
        """Messages that arrive within `timeout` seconds (index of the generator, message)."""
        out = []
        live = [c for i, c in enumerate(self.conns) if i not in self.finished]
        for c in multiprocessing.connection.wait(live, timeout):
            assert isinstance(c, multiprocessing.connection.Connection)
            try:
                msg = c.recv()
            except EOFError:
                raise RuntimeError("a generator process died") from None
            if msg[0] == "error":
                raise RuntimeError(msg[1])
            index = self.conns.index(c)
            if msg[0] == "result":  # its last message
                self.finished.add(index)
            out.append((index, msg))
        return out

    def stop(self) -> None:
        """Wait briefly for generators that were told to stop, then end the others
        (SIGTERM, then SIGKILL): an error or Ctrl-C must leave no process behind."""
        deadline = time.monotonic() + 2
        for p in self.procs:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in self.procs:
            if p.is_alive():
                p.terminate()
        for p in self.procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
        for c in self.conns:
            c.close()


@contextlib.contextmanager
def generators() -> Iterator[Generators]:
    g = Generators()
    try:
        yield g
    finally:
        g.stop()


def run_once(protocol: str, args: argparse.Namespace, log: Any) -> RunResult:
    groups = [f"load-{protocol}-{i}" for i in range(args.members // args.group_size)]
    overrides = {
        "group.consumer.heartbeat.interval.ms": str(int(args.interval * 1000)),
        # Kafka's minimum is 5 s by default; a 3 s interval needs it lowered too
        "group.consumer.min.heartbeat.interval.ms": str(int(args.interval * 1000)),
        "group.consumer.session.timeout.ms": str(args.session_ms),
        **dict(item.split("=", 1) for item in args.override),
    }
    launcher: tuple[str, ...] = ("-m", "coterie")
    instrumented = (str(Path(__file__).resolve().parent / "_instrumented_serve.py"),)
    snap_dir: Path | None = None
    if args.tracemalloc is not None:
        launcher = instrumented
        snap_dir = args.tracemalloc / protocol
        snap_dir.mkdir(parents=True, exist_ok=True)
        os.environ["COTERIE_TRACEMALLOC_DIR"] = str(snap_dir)
    elif args.mallocstats is not None:
        launcher = instrumented
        snap_dir = args.mallocstats / protocol
        snap_dir.mkdir(parents=True, exist_ok=True)
        os.environ["COTERIE_MALLOCSTATS_DIR"] = str(snap_dir)
    with tempfile.TemporaryDirectory(prefix="coterie-load-") as tmp:
        gc_log: Path | None = None
        if args.gc_log:
            launcher = instrumented
            gc_log = Path(tmp) / "gc.log"
            os.environ["COTERIE_GC_LOG"] = str(gc_log)
        with run_broker_process("coterie", Path(tmp), overrides, launcher) as (bootstrap,
                                                                                broker), \
                generators() as gens:
            return measure(protocol, args, log, Path(tmp), groups, bootstrap, broker, gens,
                           snap_dir, gc_log)


def measure(protocol: str, args: argparse.Namespace, log: Any, tmp: Path, groups: list[str],
            bootstrap: str, broker: Any, gens: Generators, snap_dir: Path | None,
            gc_log: Path | None) -> RunResult:
    """The phases of one run, on a started broker (see the module docstring)."""
    members = len(groups) * args.group_size
    ctx = multiprocessing.get_context("fork")
    snaps = Snapshots(snap_dir, broker.pid)
    port = int(bootstrap.rsplit(":", 1)[1])
    create_topic(bootstrap, TOPIC, args.partitions)
    time.sleep(1.0)
    rss_before = rss_kib(broker.pid)
    snaps.take("before")
    procs = min(args.procs, len(groups))
    slices = [groups[i::procs] for i in range(procs)]
    gens.start(ctx, generator_main, [
        (str(tmp), i, protocol, port, s, args.group_size, args.partitions, args.interval,
         args.jitter, args.session_ms) for i, s in enumerate(slices)])
    connected = 0
    while connected < procs:
        connected += sum(1 for _, msg in gens.receive(60) if msg[0] == "connected")
    time.sleep(1.0)
    rss_connected = rss_kib(broker.pid)
    snaps.take("connected")
    log(f"[{protocol}] {members} connections open; broker RSS {rss_before:,} -> "
        f"{rss_connected:,} KiB")
    started = time.monotonic()
    gens.broadcast("join")
    settled = [0] * procs
    all_since: float | None = None
    last_log = started
    while True:
        for i, msg in gens.receive(0.5):
            if msg[0] == "settled":
                settled[i] = msg[1]
        now = time.monotonic()
        total = sum(settled)
        if total == members:
            all_since = all_since or now
            if now - all_since >= args.interval:
                break
        else:
            all_since = None
        if now - last_log >= 10:
            last_log = now
            log(f"[{protocol}] {total:,}/{members:,} members settled after "
                f"{now - started:.0f} s")
        if now - started > args.join_timeout:
            log(f"[{protocol}] only {total:,}/{members:,} settled after "
                f"{args.join_timeout:.0f} s; measuring anyway")
            break
    join_seconds = (all_since or time.monotonic()) - started
    rss_joined = rss_kib(broker.pid)
    log(f"[{protocol}] {sum(settled):,} members settled in {join_seconds:.1f} s; broker RSS "
        f"{rss_joined:,} KiB; measuring {args.duration:.0f} s")
    gens.broadcast("start")
    w0, cpu0, wall0 = time.monotonic(), cpu_seconds(broker.pid), time.time()
    while time.monotonic() - w0 < args.duration:
        gens.receive(min(10.0, max(0.0, args.duration - (time.monotonic() - w0))))
    window = time.monotonic() - w0
    gens.broadcast("end")
    wall1 = time.time()
    broker_cpu = (cpu_seconds(broker.pid) - cpu0) / window
    rss_end = rss_kib(broker.pid)
    snaps.take("end")
    gens.broadcast("stop")
    results: dict[int, GenResult] = {}
    while len(results) < procs:
        for i, msg in gens.receive(60):
            if msg[0] == "result":
                results[i] = msg[1]
    lat, sent = array.array("d"), array.array("d")
    for r in results.values():
        with open(r.latencies_path, "rb") as f:
            lat.frombytes(f.read())
        with open(f"{r.latencies_path}.sent", "rb") as f:
            sent.frombytes(f.read())
    ordered = sorted(lat)
    # when the slow heartbeats were sent: spread out, or bunched in a few stalls?
    slow = Counter(int(t) for x, t in zip(lat, sent, strict=True)
                   if x * 1000 >= TARGET_P99_MS)
    false: Counter[str] = Counter()
    other: Counter[str] = Counter()
    for r in results.values():
        false.update(r.false_expiries)
        other.update(r.other_errors)
    ms = [_percentile(ordered, q) * 1000 for q in (0.5, 0.99)] if ordered else [0.0, 0.0]
    return RunResult(
        protocol=protocol, members=members,
        joined=sum(r.settled_at_start for r in results.values()),
        join_seconds=join_seconds, window_seconds=window,
        heartbeats=sum(r.heartbeats for r in results.values()),
        false_expiries=dict(false), other_errors=dict(other),
        late=sum(r.late for r in results.values()),
        disconnects=sum(r.disconnects for r in results.values()),
        p50_ms=ms[0], p99_ms=ms[1], max_ms=(ordered[-1] * 1000 if ordered else 0.0),
        rss_before_kib=rss_before, rss_connected_kib=rss_connected,
        rss_joined_kib=rss_joined, rss_end_kib=rss_end, broker_cpu=broker_cpu,
        generator_cpu=sum(r.cpu_seconds for r in results.values()) / window,
        gc_full=read_gc_log(gc_log, wall0, wall1),
        slow=sum(slow.values()), slow_seconds=len(slow),
        worst_seconds=slow.most_common(5),
        snapshots={k: str(v) for k, v in snaps.paths.items()})


# -- report ------------------------------------------------------------------------------------

def _errors(d: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(d.items())) or "0"


def table(results: list[RunResult]) -> str:
    def ok(cond: bool) -> str:
        return "met" if cond else "NOT met"

    rows: list[tuple[str, list[str], str]] = [
        ("members joined / asked", [f"{r.joined:,} / {r.members:,}" for r in results],
         f">= {TARGET_MEMBERS:,}"),
        ("join time (s)", [f"{r.join_seconds:.1f}" for r in results], ""),
        ("window (s)", [f"{r.window_seconds:.0f}" for r in results], ""),
        ("heartbeats answered", [f"{r.heartbeats:,} ({r.heartbeats / r.window_seconds:,.0f}/s)"
                                 for r in results], ""),
        ("false expiries", [_errors(r.false_expiries) for r in results], "0"),
        ("other errors / disconnects / late",
         [f"{_errors(r.other_errors)} / {r.disconnects} / {r.late}" for r in results], ""),
        ("heartbeat p50 (ms)", [f"{r.p50_ms:.2f}" for r in results], ""),
        ("heartbeat p99 (ms)", [f"{r.p99_ms:.2f}" for r in results], f"< {TARGET_P99_MS:g}"),
        ("heartbeat max (ms)", [f"{r.max_ms:.1f}" for r in results], ""),
        (f"heartbeats >= {TARGET_P99_MS:g} ms: count, in how many seconds (worst: second "
         "of the window: count)",
         [f"{r.slow:,} in {r.slow_seconds} s (" + ", ".join(f"{t}: {n}"
                                                          for t, n in r.worst_seconds) + ")"
          for r in results], ""),
        *([("broker full GCs in the window: count, max ms (longest: second: ms)",
            [f"{len(r.gc_full or [])}, {max((ms for _, ms in r.gc_full or []), default=0):.0f}"
             " (" + ", ".join(f"{t}: {ms:.0f}" for t, ms in
                              sorted(r.gc_full or [], key=lambda x: -x[1])[:5]) + ")"
             for r in results], "")] if any(r.gc_full is not None for r in results) else []),
        ("broker RSS before (KiB)", [f"{r.rss_before_kib:,}" for r in results], ""),
        ("broker RSS connected (KiB)", [f"{r.rss_connected_kib:,}" for r in results], ""),
        ("broker RSS joined (KiB)", [f"{r.rss_joined_kib:,}" for r in results], ""),
        ("broker RSS end (KiB)", [f"{r.rss_end_kib:,}" for r in results], ""),
        ("  of which connections, per member (KiB)",
         [f"{(r.rss_connected_kib - r.rss_before_kib) / r.members:.2f}" for r in results], ""),
        ("memory per member (KiB)", [f"{r.kib_per_member:.2f}" for r in results],
         f"<= {TARGET_KIB_PER_MEMBER:g}"),
        ("broker CPU over the window", [f"{r.broker_cpu:.0%}" for r in results], ""),
        ("generator CPU (all procs)", [f"{r.generator_cpu:.0%}" for r in results], ""),
    ]
    verdicts = []
    for r in results:
        verdicts.append(", ".join([
            f"members {ok(r.joined >= TARGET_MEMBERS)}",
            f"false expiries {ok(r.false_total == 0)}",
            f"p99 {ok(r.p99_ms < TARGET_P99_MS)}",
            f"memory {ok(r.kib_per_member <= TARGET_KIB_PER_MEMBER)}"]))
    rows.append(("targets", verdicts, ""))
    head = "| figure | " + " | ".join(r.protocol for r in results) + " | target |"
    sep = "| --- |" + " --- |" * (len(results) + 1)
    return "\n".join([head, sep] + [f"| {name} | " + " | ".join(cells) + f" | {target} |"
                                    for name, cells, target in rows])


def raise_nofile(log: Any) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    log(f"RLIMIT_NOFILE {hard} (was {soft})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=TARGET_MEMBERS)
    parser.add_argument("--group-size", type=int, default=10)
    parser.add_argument("--protocol", choices=("classic", "consumer", "both"), default="both")
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--duration", type=float, default=600.0,
                        help="seconds measured after every member settled (default 600)")
    parser.add_argument("--interval", type=float, default=3.0, help="heartbeat interval, s")
    parser.add_argument("--jitter", type=float, default=0.1,
                        help="each interval is scaled by a uniform factor in [1-j, 1+j]")
    parser.add_argument("--session-ms", type=int, default=45_000)
    parser.add_argument("--procs", type=int, default=4, help="load-generator processes")
    parser.add_argument("--join-timeout", type=float, default=600.0)
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="another broker property (repeatable)")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    parser.add_argument("--tracemalloc", type=Path, default=None, metavar="DIR",
                        help="run the broker with tracemalloc, keep its snapshots (before, "
                             "connected, end) under DIR/<protocol> and print where the memory "
                             "per member went; slows the broker, so its latency and CPU "
                             "figures are not comparable")
    parser.add_argument("--gc-log", action="store_true",
                        help="log the broker's full garbage collections (through "
                             "benchmarks/_instrumented_serve.py) and report those of the window")
    parser.add_argument("--mallocstats", type=Path, default=None, metavar="DIR",
                        help="instead of --tracemalloc: the broker writes Python's allocator "
                             "statistics (sys._debugmallocstats) to DIR/<protocol>/mallocstats-N "
                             "at the same moments (before, connected, end)")
    parser.add_argument("--top", type=int, default=25, help="lines per tracemalloc table")
    args = parser.parse_args(argv)
    if args.members < args.group_size:
        parser.error("--members must be at least --group-size")

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    raise_nofile(log)
    need = args.members + 100
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < need:
        parser.error(f"RLIMIT_NOFILE hard limit below {need}: raise it (ulimit -Hn)")
    load = os.getloadavg()
    log(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    protocols = ["classic", "consumer"] if args.protocol == "both" else [args.protocol]
    results = []
    try:
        for protocol in protocols:
            results.append(run_once(protocol, args, log))
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    load = os.getloadavg()
    log(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(table(results))
    if args.mallocstats is not None:
        print(f"\nallocator statistics: {args.mallocstats}/<protocol>/mallocstats-0/1/2 "
              "(before, connected, end)")
    for r in results:
        if r.snapshots and args.tracemalloc is not None:
            print(f"\n### {r.protocol}: tracemalloc, {r.members:,} members")
            print(memory_breakdown({k: Path(v) for k, v in r.snapshots.items()}, r.members,
                                   args.top))
    if args.json is not None:
        args.json.write_text(json.dumps(
            [{**asdict(r), "kib_per_member": r.kib_per_member} for r in results], indent=2))
    ok = all(r.false_total == 0 and r.joined == r.members for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
