"""Group members for consumer-group tests: real clients in threads, a SIGKILL-able
subprocess member and a raw-protocol member speaking JoinGroup/SyncGroup/Heartbeat itself.

Every member exposes the same small surface: a `label`, its current `assignment` (a frozen set
of (topic, partition)), counters of assign/revoke callbacks and the records it consumed.
Assignment changes are seen through each client's own rebalance callbacks, so a test observes
what the clients believe, not only what the broker reports. Callbacks and deliveries carry a
`time.monotonic()` stamp: the members of one test share the process, hence the clock, so a
test can line up who owned what when. Under cooperative rebalancing (KIP-429) callbacks are
incremental (only the partitions added or revoked), which `MemberState(incremental=True)`
accounts for. All waits are bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiokafka
import kafka
from aiokafka.coordinator.assignors.range import (
    RangePartitionAssignor as AioRangePartitionAssignor,
)
from aiokafka.coordinator.assignors.roundrobin import (
    RoundRobinPartitionAssignor as AioRoundRobinPartitionAssignor,
)
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.heartbeat.v3.request import HeartbeatRequest
from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.leave_group.v3.request import LeaveGroupRequest, MemberIdentity
from kio.schema.sync_group.v3.request import SyncGroupRequest, SyncGroupRequestAssignment

from coterie.client import Consumer as CoterieConsumer
from tests.kafka_raw import RawConnection

TP = tuple[str, int]

# strategy -> (confluent name, kafka-python assignor, aiokafka assignor or None if it has none)
STRATEGIES: dict[str, tuple[str, type, type | None]] = {
    "range": ("range", RangePartitionAssignor, AioRangePartitionAssignor),
    "roundrobin": ("roundrobin", RoundRobinPartitionAssignor, AioRoundRobinPartitionAssignor),
    "cooperative-sticky": ("cooperative-sticky", CooperativeStickyAssignor, None),
}
COOPERATIVE = frozenset({"cooperative-sticky"})

SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 500


@dataclass(frozen=True, slots=True)
class Delivery:
    """One record as a group member received it."""

    member: str
    topic: str
    partition: int
    offset: int
    value: bytes
    at: float = 0.0  # time.monotonic() when the client handed it over


@dataclass
class MemberState:
    """What one member has seen so far; guarded by `lock`. `incremental`: assign callbacks
    name only the partitions added (cooperative rebalancing), not the whole assignment.
    `events` holds every callback as (monotonic time, "assign" | "revoke", partitions)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    assignment: frozenset[TP] = frozenset()
    assigns: int = 0
    revokes: int = 0
    last_change: float = field(default_factory=time.monotonic)
    deliveries: list[Delivery] = field(default_factory=list)
    history: list[tuple[str, frozenset[TP]]] = field(default_factory=list)
    incremental: bool = False
    events: list[tuple[float, str, frozenset[TP]]] = field(default_factory=list)

    def assigned(self, tps: Iterable[TP]) -> None:
        with self.lock:
            given = frozenset((t, p) for t, p in tps)
            self.assignment = self.assignment | given if self.incremental else given
            self.assigns += 1
            self.last_change = time.monotonic()
            self.history.append(("assign", self.assignment))
            self.events.append((self.last_change, "assign", given))

    def revoked(self, tps: Iterable[TP]) -> None:
        with self.lock:
            taken = frozenset((t, p) for t, p in tps)
            self.assignment = self.assignment - taken
            self.revokes += 1
            self.last_change = time.monotonic()
            self.history.append(("revoke", taken))
            self.events.append((self.last_change, "revoke", taken))

    def delivered(self, items: Iterable[Delivery]) -> None:
        with self.lock:
            self.deliveries.extend(items)


class GroupMember:
    """Common read-only view of a member's state."""

    label: str
    state: MemberState

    @property
    def assignment(self) -> frozenset[TP]:
        with self.state.lock:
            return self.state.assignment

    @property
    def counters(self) -> tuple[int, int]:
        """(assign callbacks, revoke callbacks) so far."""
        with self.state.lock:
            return self.state.assigns, self.state.revokes

    @property
    def last_change(self) -> float:
        with self.state.lock:
            return self.state.last_change

    def deliveries(self) -> list[Delivery]:
        with self.state.lock:
            return list(self.state.deliveries)

    def events(self) -> list[tuple[float, str, frozenset[TP]]]:
        with self.state.lock:
            return list(self.state.events)

    def check(self) -> None:
        """Raise whatever failed in the member's background thread."""


class PollingThread(GroupMember, threading.Thread):
    """A member whose client polls in its own thread: the life cycle every threaded test
    member shares. Subclasses implement `_body()`, which polls until `_stop_event` is set
    and closes its client; whatever it raises is kept and re-raised by `check()`."""

    processing_s: float = 0.0

    def __init__(self, kind: str, label: str, incremental: bool) -> None:
        threading.Thread.__init__(self, name=f"member-{label}", daemon=True)
        self.kind = kind
        self.label = label
        self.state = MemberState(incremental=incremental)
        self.error: BaseException | None = None
        self._stop_event = threading.Event()

    def _body(self) -> None:
        raise NotImplementedError

    def run(self) -> None:
        try:
            self._body()
        except BaseException as e:
            self.error = e

    def stop(self, timeout: float = 30.0) -> None:
        """Close the client (clean leave) and wait for the thread; re-raise its failure."""
        self._stop_event.set()
        self.join(timeout)
        assert not self.is_alive(), f"{self.label}: consumer did not close within {timeout}s"
        self.check()

    def check(self) -> None:
        if self.error is not None:
            raise AssertionError(f"{self.label} ({self.kind}) failed") from self.error

    def _record(self, items: Iterable[tuple[str, int, int, bytes]]) -> bool:
        """Note deliveries; True if there were any (and the processing pause is due)."""
        now = time.monotonic()
        batch = [Delivery(self.label, t, p, o, v, now) for t, p, o, v in items]
        self.state.delivered(batch)
        return bool(batch) and self.processing_s > 0


class ThreadedConsumer(PollingThread):
    """A subscribed consumer of one client library, polling in its own thread.

    kind: "confluent", "kafka_python", "aiokafka" or "coterie" (coterie.client's Consumer;
    aiokafka and coterie run their own event loop in the thread). `processing_s`: a pause
    after each poll that returned records, as if the application took that long to process
    them. `stop()` closes the client, which sends LeaveGroup (except for static members,
    which by KIP-345 leave only by session timeout).
    """

    def __init__(self, kind: str, bootstrap: str, group: str, topics: Sequence[str],
                 label: str, strategy: str = "range", instance_id: str | None = None,
                 session_timeout_ms: int = SESSION_TIMEOUT_MS,
                 processing_s: float = 0.0) -> None:
        super().__init__(kind, label, incremental=strategy in COOPERATIVE)
        self.bootstrap = bootstrap
        self.group = group
        self.topics = list(topics)
        self.strategy = strategy
        self.instance_id = instance_id
        self.session_timeout_ms = session_timeout_ms
        self.processing_s = processing_s

    def _body(self) -> None:
        {"confluent": self._run_confluent, "kafka_python": self._run_kafka_python,
         "aiokafka": lambda: asyncio.run(self._run_aiokafka()),
         "coterie": lambda: asyncio.run(self._run_coterie())}[self.kind]()

    # -- confluent-kafka ----------------------------------------------------------------------
    def _run_confluent(self) -> None:
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap, "group.id": self.group,
            "client.id": self.label,
            "partition.assignment.strategy": STRATEGIES[self.strategy][0],
            "session.timeout.ms": self.session_timeout_ms,
            "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 2000,
        }
        if self.instance_id is not None:
            config["group.instance.id"] = self.instance_id
        consumer = Consumer(config)

        def on_assign(_c: Any, parts: list[Any]) -> None:
            self.state.assigned((p.topic, p.partition) for p in parts)

        def on_revoke(_c: Any, parts: list[Any]) -> None:
            self.state.revoked((p.topic, p.partition) for p in parts)

        consumer.subscribe(self.topics, on_assign=on_assign, on_revoke=on_revoke,
                           on_lost=on_revoke)
        try:
            while not self._stop_event.is_set():
                msgs = consumer.consume(num_messages=1000, timeout=0.2)
                for m in msgs:
                    if m.error() is not None:
                        raise RuntimeError(f"confluent consumer error: {m.error()}")
                if self._record((m.topic(), m.partition(), m.offset(), m.value())
                                for m in msgs):
                    time.sleep(self.processing_s)
        finally:
            consumer.close()

    # -- kafka-python -------------------------------------------------------------------------
    def _listener(self, base: type) -> Any:
        state = self.state

        class Listener(base):  # type: ignore[misc, valid-type]
            def on_partitions_revoked(self, revoked: Any) -> None:
                state.revoked((tp.topic, tp.partition) for tp in revoked)

            def on_partitions_assigned(self, assigned: Any) -> None:
                state.assigned((tp.topic, tp.partition) for tp in assigned)

        return Listener()

    def _run_kafka_python(self) -> None:
        kwargs: dict[str, Any] = {}
        if self.instance_id is not None:
            kwargs["group_instance_id"] = self.instance_id
        consumer = kafka.KafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group, client_id=self.label,
            partition_assignment_strategy=[STRATEGIES[self.strategy][1]],
            session_timeout_ms=self.session_timeout_ms,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS, auto_offset_reset="earliest",
            enable_auto_commit=False, metadata_max_age_ms=2000, **kwargs)
        consumer.subscribe(topics=self.topics,
                           listener=self._listener(kafka.ConsumerRebalanceListener))
        self.kafka_python_consumer = consumer
        try:
            while not self._stop_event.is_set():
                got = [m for batch in consumer.poll(timeout_ms=200).values() for m in batch]
                if self._record((m.topic, m.partition, m.offset, m.value) for m in got):
                    time.sleep(self.processing_s)
        finally:
            consumer.close(autocommit=False)

    def generation(self) -> int:
        """The generation the client's coordinator currently holds (kafka-python and
        aiokafka expose it; librdkafka does not)."""
        if self.kind == "aiokafka":
            return self.aiokafka_consumer._coordinator.generation
        coordinator = self.kafka_python_consumer._coordinator
        return coordinator._generation.generation_id

    def member_id(self) -> str:
        """The member id the client's coordinator currently holds (kafka-python, aiokafka)."""
        if self.kind == "aiokafka":
            return self.aiokafka_consumer._coordinator.member_id
        return self.kafka_python_consumer._coordinator._generation.member_id

    # -- aiokafka -----------------------------------------------------------------------------
    async def _run_aiokafka(self) -> None:
        kwargs: dict[str, Any] = {}
        if self.instance_id is not None:
            kwargs["group_instance_id"] = self.instance_id
        assignor = STRATEGIES[self.strategy][2]
        if assignor is None:
            raise ValueError(f"aiokafka has no {self.strategy} assignor")
        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group, client_id=self.label,
            partition_assignment_strategy=(assignor,),
            session_timeout_ms=self.session_timeout_ms,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS, auto_offset_reset="earliest",
            enable_auto_commit=False, metadata_max_age_ms=2000, **kwargs)
        consumer.subscribe(topics=self.topics,
                           listener=self._listener(aiokafka.ConsumerRebalanceListener))
        await consumer.start()
        self.aiokafka_consumer = consumer
        try:
            while not self._stop_event.is_set():
                got = await consumer.getmany(timeout_ms=200)
                if self._record((m.topic, m.partition, m.offset, m.value)
                                for batch in got.values() for m in batch):
                    await asyncio.sleep(self.processing_s)
        finally:
            await consumer.stop()

    # -- coterie.client -----------------------------------------------------------------------
    async def _run_coterie(self) -> None:
        state = self.state

        class Listener:
            def on_partitions_revoked(self, revoked: Any) -> None:
                state.revoked(revoked)

            def on_partitions_assigned(self, assigned: Any) -> None:
                state.assigned(assigned)

        consumer = CoterieConsumer(
            self.bootstrap, self.group, topics=self.topics, assignors=[self.strategy],
            listener=Listener(), client_id=self.label, group_instance_id=self.instance_id,
            session_timeout_ms=self.session_timeout_ms,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS, rebalance_timeout_ms=15_000,
            auto_offset_reset="earliest", auto_commit=False, metadata_max_age_ms=2000,
            retry_backoff_ms=50, retry_backoff_max_ms=500)
        self.coterie_consumer = consumer
        await consumer.start()
        try:
            while not self._stop_event.is_set():
                batch = await consumer.poll(timeout_ms=200)
                if self._record((r.topic, r.partition, r.offset, r.value) for r in batch):
                    await asyncio.sleep(self.processing_s)
        finally:
            await consumer.close()


# -- a member in a child process, for SIGKILL --------------------------------------------------

_CHILD_SCRIPT = r"""
import json, sys
import kafka
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

bootstrap, group, topic, strategy, label = sys.argv[1:6]
assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[strategy]

def say(kind, tps):
    print(json.dumps([kind, sorted([tp.topic, tp.partition] for tp in tps)]), flush=True)

class Listener(kafka.ConsumerRebalanceListener):
    def on_partitions_revoked(self, revoked):
        say("revoke", revoked)
    def on_partitions_assigned(self, assigned):
        say("assign", assigned)

consumer = kafka.KafkaConsumer(
    bootstrap_servers=bootstrap, group_id=group, client_id=label,
    partition_assignment_strategy=[assignor], session_timeout_ms=6000,
    heartbeat_interval_ms=500, auto_offset_reset="earliest", enable_auto_commit=False)
consumer.subscribe(topics=[topic], listener=Listener())
while True:
    consumer.poll(timeout_ms=200)
"""


class ChildProcessMember(GroupMember):
    """A kafka-python consumer in a child process that reports its assignment on stdout,
    so that it can be SIGKILLed: it then never sends LeaveGroup nor another heartbeat."""

    def __init__(self, bootstrap: str, group: str, topic: str, label: str,
                 strategy: str = "range") -> None:
        self.label = label
        self.state = MemberState()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD_SCRIPT, bootstrap, group, topic, strategy, label],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self._reader = threading.Thread(target=self._read, name=f"child-{label}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                kind, tps = json.loads(line)
                parts = [(t, p) for t, p in tps]
                if kind == "assign":
                    self.state.assigned(parts)
                else:
                    self.state.revoked(parts)

    def sigkill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.sigkill()
        self._reader.join(5)

    def check(self) -> None:
        code = self.proc.poll()
        if code is not None and code != -signal.SIGKILL:
            stderr = self.proc.stderr.read() if self.proc.stderr else ""
            raise AssertionError(f"{self.label}: child exited with {code}: {stderr[-2000:]}")


# -- waiting for a settled group ---------------------------------------------------------------


def ownership_problems(members: Sequence[GroupMember], partitions: Iterable[TP]) -> list[str]:
    """Why the members' assignments are not an exact partition of `partitions` ([] if they
    are): every partition owned by exactly one member, and nothing else owned."""
    wanted = set(partitions)
    owners: dict[TP, list[str]] = {}
    for m in members:
        for tp in m.assignment:
            owners.setdefault(tp, []).append(m.label)
    problems = []
    missing = sorted(wanted - owners.keys())
    if missing:
        problems.append(f"unowned: {missing}")
    shared = {tp: who for tp, who in owners.items() if len(who) > 1}
    if shared:
        problems.append(f"owned twice: {shared}")
    extra = sorted(owners.keys() - wanted)
    if extra:
        problems.append(f"unexpected: {extra}")
    return problems


def wait_until_settled(members: Sequence[GroupMember], partitions: Iterable[TP],
                       timeout: float = 45.0, quiet: float = 2.0,
                       everyone_busy: bool = True) -> float:
    """Wait until the members' assignments exactly cover `partitions` and have not changed
    for `quiet` seconds; with `everyone_busy`, every member must own something. Returns the
    seconds it took. Fails with the last problem seen when `timeout` passes."""
    wanted = list(partitions)
    start = time.monotonic()
    deadline = start + timeout
    problems: list[str] = []
    while time.monotonic() < deadline:
        for m in members:
            m.check()
        problems = ownership_problems(members, wanted)
        if everyone_busy:
            idle = [m.label for m in members if not m.assignment]
            if idle:
                problems.append(f"members without partitions: {idle}")
        if not problems and time.monotonic() - max(m.last_change for m in members) >= quiet:
            return time.monotonic() - start
        time.sleep(0.1)
    history = {m.label: m.state.history[-6:] for m in members}
    raise AssertionError(f"group did not settle within {timeout}s: {problems}; "
                         f"recent callbacks: {history}")


def all_partitions(topic: str, count: int) -> list[TP]:
    return [(topic, p) for p in range(count)]


# -- admin views -------------------------------------------------------------------------------


def confluent_describe(bootstrap: str, group: str, timeout: float = 15.0) -> Any:
    """The confluent-kafka AdminClient's ConsumerGroupDescription of `group`."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group], request_timeout=timeout)[group].result(
        timeout=timeout)


def confluent_assignments(bootstrap: str, group: str) -> tuple[str, dict[str, frozenset[TP]]]:
    """(state name, client.id -> assigned partitions) as the confluent AdminClient sees it."""
    d = confluent_describe(bootstrap, group)
    return d.state.name, {
        m.client_id: frozenset((tp.topic, tp.partition) for tp in m.assignment.topic_partitions)
        for m in d.members}


def wait_for_admin_view(bootstrap: str, group: str, expected: dict[str, frozenset[TP]],
                        timeout: float = 20.0) -> None:
    """Wait until confluent's describe_consumer_groups shows a Stable group whose members
    (by client.id) hold exactly `expected`."""
    deadline = time.monotonic() + timeout
    seen: Any = None
    while time.monotonic() < deadline:
        seen = confluent_assignments(bootstrap, group)
        if seen == ("STABLE", expected):
            return
        time.sleep(0.25)
    raise AssertionError(f"describe_consumer_groups({group}) shows {seen}, want {expected}")


# -- a raw classic-protocol member ---------------------------------------------------------------


def _ms(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)


_COORDINATOR_NOT_READY = frozenset({ErrorCode.not_coordinator,
                                    ErrorCode.coordinator_not_available,
                                    ErrorCode.coordinator_load_in_progress})

Assign = Callable[[str, Sequence[tuple[str, bytes]]], dict[str, bytes]]


@dataclass(frozen=True, slots=True)
class RawGeneration:
    """One completed rebalance as a raw member saw it."""

    generation: int
    leader: str
    member_id: str
    members: tuple[tuple[str, bytes], ...]  # (member id, metadata); only the leader's is filled
    assignment: bytes


class RawMember(threading.Thread):
    """A group member written directly against the classic protocol over a RawConnection.

    JoinGroup v5 (answering MEMBER_ID_REQUIRED by resending with the given id), then
    SyncGroup v3 (the leader passes every member's metadata to `assign`), then Heartbeat v3
    every `heartbeat_s`; REBALANCE_IN_PROGRESS on a heartbeat makes it rejoin. `kill()` stops
    it dead: no LeaveGroup, the socket closed. JoinGroup parks in the broker until the join
    phase ends, so each member needs its own connection and thread.
    """

    def __init__(self, host: str, port: int, group: str, protocol_type: str,
                 protocols: Sequence[tuple[str, bytes]], assign: Assign, label: str,
                 session_timeout_ms: int = SESSION_TIMEOUT_MS,
                 rebalance_timeout_ms: int = 15_000, heartbeat_s: float = 0.5,
                 instance_id: str | None = None) -> None:
        super().__init__(name=f"raw-{label}", daemon=True)
        self.host, self.port = host, port
        self.group = group
        self.protocol_type = protocol_type
        self.protocols = tuple(protocols)
        self.assign = assign
        self.label = label
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_s = heartbeat_s
        self.instance_id = instance_id
        self.member_id = ""
        self.generations: list[RawGeneration] = []
        self.heartbeat_errors: list[ErrorCode] = []
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        self._stop_event = threading.Event()
        self._killed = False
        self._leave = True
        self.conn = RawConnection(host, port, timeout=30.0)

    @property
    def current(self) -> RawGeneration | None:
        with self.lock:
            return self.generations[-1] if self.generations else None

    def _find_coordinator(self, timeout: float = 30.0) -> None:
        """Ask FindCoordinator until the group's coordinator is ready, as clients do before
        joining: Apache Kafka creates `__consumer_offsets` on the first lookup and answers
        NOT_COORDINATOR to group requests until then (single broker: always this one)."""
        deadline = time.monotonic() + timeout
        while True:
            resp = self.conn.request(FindCoordinatorRequest(key=self.group, key_type=0))
            if resp.error_code == ErrorCode.none:
                return
            assert time.monotonic() < deadline, f"{self.label}: FindCoordinator {resp!r}"
            time.sleep(0.2)

    def run(self) -> None:
        try:
            self._find_coordinator()
            while not self._stop_event.is_set():
                if not self._join_and_sync():
                    continue
                self._heartbeat_until_rebalance()
            if self._leave and not self._killed and self.member_id:
                self.conn.request(LeaveGroupRequest(group_id=self.group, members=(
                    MemberIdentity(member_id=self.member_id,
                                   group_instance_id=self.instance_id),)))
        except (OSError, ConnectionError) as e:
            if not self._killed:
                self.error = e
        except BaseException as e:
            self.error = e
        finally:
            self.conn.close()

    def _join_and_sync(self) -> bool:
        while True:
            resp = self.conn.request(JoinGroupRequest(
                group_id=self.group, session_timeout=_ms(self.session_timeout_ms),
                rebalance_timeout=_ms(self.rebalance_timeout_ms), member_id=self.member_id,
                group_instance_id=self.instance_id, protocol_type=self.protocol_type,
                protocols=tuple(JoinGroupRequestProtocol(name=n, metadata=md)
                                for n, md in self.protocols)))
            if resp.error_code == ErrorCode.member_id_required:
                self.member_id = resp.member_id
                continue
            if resp.error_code == ErrorCode.unknown_member_id:
                self.member_id = ""
                continue
            if resp.error_code == ErrorCode.rebalance_in_progress:
                continue
            if resp.error_code in _COORDINATOR_NOT_READY:
                # A fresh Apache Kafka broker: __consumer_offsets exists but its partition
                # is still being loaded. Clients rediscover and retry; so do we.
                self._find_coordinator()
                time.sleep(0.2)
                continue
            assert resp.error_code == ErrorCode.none, f"{self.label} join: {resp.error_code!r}"
            break
        self.member_id = resp.member_id
        assignments: tuple[SyncGroupRequestAssignment, ...] = ()
        members = tuple((m.member_id, bytes(m.metadata)) for m in resp.members)
        if resp.leader == self.member_id:
            plan = self.assign(self.member_id, members)
            assignments = tuple(SyncGroupRequestAssignment(member_id=k, assignment=v)
                                for k, v in plan.items())
        sync = self.conn.request(SyncGroupRequest(
            group_id=self.group, generation_id=resp.generation_id, member_id=self.member_id,
            group_instance_id=self.instance_id, assignments=assignments))
        if sync.error_code in (ErrorCode.rebalance_in_progress, ErrorCode.illegal_generation):
            return False
        assert sync.error_code == ErrorCode.none, f"{self.label} sync: {sync.error_code!r}"
        with self.lock:
            self.generations.append(RawGeneration(resp.generation_id, resp.leader,
                                                  self.member_id, members, sync.assignment))
        return True

    def _heartbeat_until_rebalance(self) -> None:
        gen = self.current
        assert gen is not None
        while not self._stop_event.wait(self.heartbeat_s):
            resp = self.conn.request(HeartbeatRequest(
                group_id=self.group, generation_id=gen.generation, member_id=self.member_id,
                group_instance_id=self.instance_id))
            if resp.error_code == ErrorCode.none:
                continue
            with self.lock:
                self.heartbeat_errors.append(resp.error_code)
            if resp.error_code == ErrorCode.unknown_member_id:
                self.member_id = ""
            return

    def stop(self, leave: bool = True, timeout: float = 20.0) -> None:
        """Stop heartbeating; with `leave`, send LeaveGroup first. Re-raises thread errors."""
        self._leave = leave
        self._stop_event.set()
        self.join(timeout)
        assert not self.is_alive(), f"{self.label} did not stop within {timeout}s"
        self.check()

    def kill(self) -> None:
        """Vanish without a word: no more heartbeats, no LeaveGroup, socket closed."""
        self._killed = True
        self._stop_event.set()
        with contextlib.suppress(OSError):
            self.conn.sock.shutdown(2)
        self.join(10)
        assert not self.is_alive(), f"{self.label} did not die"

    def check(self) -> None:
        if self.error is not None:
            raise AssertionError(f"raw member {self.label} failed") from self.error
