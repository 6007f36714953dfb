"""A coterie cluster over PostgreSQL: failover under kill -9, and throughput side by side.

    .venv/bin/python benchmarks/cluster.py failover --kills 20
    .venv/bin/python benchmarks/cluster.py throughput --records 100000

Both start a PostgreSQL server of their own (tests/fixtures/postgres.py; Debian's
`postgresql` package) with **synchronous_commit=on** (a commit is flushed to the write-ahead
log before coterie acknowledges anything; fsync stays off, as the machine itself does not
crash here), and coterie brokers as `python -m coterie serve` processes.

**failover**: three brokers (`cluster.lease.ms`, default 6000), one topic of 6 partitions,
an idempotent acks=all producer writing without pause, and three classic consumer groups of
two confluent-kafka members each, committing after every batch. Then, `--kills` times, one
broker (in turn) is killed with SIGKILL, and the clock runs until service is back: every
partition led by a live broker, every group Stable again on a live coordinator with all its
members, and a record produced after the kill acknowledged on every partition. The broker is
then restarted and the harness waits until it leads its share again before the next kill.
After the last kill every acknowledged record is looked for (read from the start) and every
group's committed offsets are compared with the last commit each member had acknowledged.
Prints p50/p99/max failover time and what was lost (nothing, or the run fails).

**throughput**: produce and consume MB/s (confluent-kafka, 1 KiB values,
linger.ms=5, batch.size=256 KiB, acks=1, which a cluster broker answers only once
stored in the database, 6 partitions) for one broker on local files, one broker on
PostgreSQL and three brokers on PostgreSQL, one after the other (and Kafka 4.2.1 with
`--kafka`, through benchmarks/produce_consume.py's workload); then the database's rows and
bytes per record (`batches` rows and `pg_total_relation_size`).

**takeover**: one topic of one partition filled with `--records` x 1 KiB by one broker,
then taken over by a broker started for it (the previous leader killed -9), once per
setting: first with `cluster.copy.bytes` larger than the partition (the whole partition
copied, as before the bound), then with each of `--copy-mb` (256, the default, and 32).
Prints, per take, the bytes copied and the time the take took (copy, producer state,
opening the copy: the broker's own log line), which is what grows with the partition's size.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _brokers import free_port, prepare_reference, run_broker
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from produce_consume import consume, produce

from tests.fixtures import postgres
from tests.fixtures.coterie_broker import wait_for_port
from tests.kafka_raw import RawConnection

TOPIC_PARTITIONS = 6


class Node:
    """One `coterie serve` process of the cluster."""

    def __init__(self, root: Path, node_id: int, uri: str, lease_ms: int) -> None:
        self.node_id = node_id
        self.port = free_port()
        self.dir = root / f"node{node_id}"
        self.uri = uri
        self.lease_ms = lease_ms
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        log = open(self.dir.parent / f"node{self.node_id}.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "coterie", "serve", "--port", str(self.port),
             "--data-dir", str(self.dir), "--storage", self.uri,
             "--node-id", str(self.node_id), "--log-level", "INFO",
             "--override", f"cluster.lease.ms={self.lease_ms}",
             *[a for kv in EXTRA_OVERRIDES for a in ("--override", kv)]],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        log.close()
        wait_for_port("127.0.0.1", self.port, 60, self.proc)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


EXTRA_OVERRIDES: list[str] = []  # --override KEY=VALUE for every broker (main's option)


@contextlib.contextmanager
def database() -> Iterator[tuple[str, str]]:
    """A PostgreSQL server of our own with synchronous_commit=on: (URI, DSN) of a new
    database on it."""
    server = postgres.start_server({"synchronous_commit": "on"})
    try:
        dsn = server.create_database()
        name = dsn.rsplit("dbname=", 1)[1]
        yield f"postgresql://coterie@127.0.0.1:{server.port}/{name}", dsn
    finally:
        server.stop()


@contextlib.contextmanager
def cluster(size: int, uri: str, lease_ms: int, root: Path) -> Iterator[list[Node]]:
    nodes = [Node(root, i, uri, lease_ms) for i in range(1, size + 1)]
    try:
        for n in nodes:
            n.start()
        yield nodes
    finally:
        for n in nodes:
            n.stop()


def bootstrap_of(nodes: list[Node]) -> str:
    return ",".join(n.bootstrap for n in nodes)


def leaders(admin: AdminClient, topic: str) -> dict[int, int]:
    try:
        md = admin.list_topics(topic, timeout=5)
    except KafkaException:
        return {}
    t = md.topics.get(topic)
    return {} if t is None or t.error else {p.id: p.leader for p in t.partitions.values()}


def wait(check, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(interval)
    raise RuntimeError(f"{what}: not after {timeout} s")


# ------------------------------------------------------------------------------- failover


class Workload:
    """The producer and the consumer groups of the failover run, each in its own thread."""

    def __init__(self, bootstrap: str, topic: str, groups: int, members: int) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.stop = threading.Event()
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.produce_errors: list[str] = []
        self.last_ack_at = [0.0] * TOPIC_PARTITIONS
        self.committed: dict[tuple[str, int], int] = {}  # acknowledged commits
        self.lock = threading.Lock()
        self.groups = [f"failover-{g}" for g in range(groups)]
        self.threads = [threading.Thread(target=self._produce, daemon=True)]
        self.threads += [threading.Thread(target=self._consume, args=(g,), daemon=True)
                         for g in self.groups for _ in range(members)]

    def __enter__(self) -> Workload:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(180)

    def _produce(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                      "acks": "all", "linger.ms": 5, "message.timeout.ms": 300_000})

        def done(err, msg) -> None:
            if err is not None:
                self.produce_errors.append(str(err))
                return
            self.acked[msg.value()] = (msg.partition(), msg.offset())
            self.last_ack_at[msg.partition()] = time.monotonic()

        i = 0
        while not self.stop.is_set():
            try:
                p.produce(self.topic, value=f"{uuid.uuid4().hex[:8]}-{i}".encode(),
                          partition=i % TOPIC_PARTITIONS, on_delivery=done)
                i += 1
            except BufferError:
                p.poll(0.01)
            if i % 20 == 0:
                p.poll(0.005)
        p.flush(300)

    def _consume(self, group: str) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "session.timeout.ms": 10_000})
        c.subscribe([self.topic])
        try:
            while not self.stop.is_set():
                msgs = c.consume(500, 0.2)
                good = [m for m in msgs if not m.error()]
                if not good:
                    continue
                ends: dict[int, int] = {}
                for m in good:
                    ends[m.partition()] = m.offset() + 1
                try:
                    c.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in ends.items()],
                             asynchronous=False)
                except KafkaException:
                    continue  # not acknowledged: nothing to hold the broker to
                with self.lock:
                    for p, o in ends.items():
                        key = (group, p)
                        self.committed[key] = max(self.committed.get(key, 0), o)
        finally:
            with contextlib.suppress(Exception):
                c.close()


def groups_stable(ports: list[int], groups: list[str], members: int,
                  dead: int | None) -> bool:
    """Every group Stable with all its members on a live coordinator, as FindCoordinator and
    DescribeGroups answer them (raw requests to a live broker: an admin client may keep
    asking a dead broker until its own timeouts)."""
    try:
        with RawConnection("127.0.0.1", ports[0], timeout=3) as conn:
            found = conn.request(FindCoordinatorRequest(
                key_type=0, coordinator_keys=tuple(groups))).coordinators
        for c in found:
            if c.error_code != 0 or c.node_id == dead:
                return False
            with RawConnection("127.0.0.1", c.port, timeout=3) as conn:
                (d,) = conn.request(DescribeGroupsRequest(
                    groups=(c.key,), include_authorized_operations=False)).groups
            if d.error_code != 0 or d.group_state != "Stable" or len(d.members) != members:
                return False
        return True
    except Exception:
        return False


def explain(admin: AdminClient, topic: str, work: Workload, root: Path) -> None:
    """What a failover that did not finish is still waiting for; the brokers' logs are kept
    in /tmp/coterie-cluster-logs."""
    now = time.monotonic()
    print("leaders:", leaders(admin, topic), file=sys.stderr)
    print("seconds since each partition's last acknowledgement:",
          [round(now - t, 1) for t in work.last_ack_at], file=sys.stderr)
    try:
        found = admin.describe_consumer_groups(work.groups, request_timeout=5)
        for g in work.groups:
            d = found[g].result(5)
            print(f"group {g}: {d.state} on {d.coordinator.id}, {len(d.members)} members",
                  file=sys.stderr)
    except Exception as e:
        print("groups:", e, file=sys.stderr)
    for g in work.groups:
        for port in work.ports:
            try:
                with RawConnection("127.0.0.1", port, timeout=3) as conn:
                    (c,) = conn.request(FindCoordinatorRequest(
                        key_type=0, coordinator_keys=(g,))).coordinators
                print(f"group {g}: FindCoordinator at {port}: {c.error_code!r} node "
                      f"{c.node_id} port {c.port}", file=sys.stderr)
                if c.port > 0:
                    with RawConnection("127.0.0.1", c.port, timeout=3) as conn:
                        (d,) = conn.request(DescribeGroupsRequest(
                            groups=(g,), include_authorized_operations=False)).groups
                    print(f"   DescribeGroups: {d.error_code!r} {d.group_state} "
                          f"{len(d.members)} members", file=sys.stderr)
            except Exception as e:
                print(f"group {g} via {port}: {type(e).__name__} {e}", file=sys.stderr)
    keep = Path("/tmp/coterie-cluster-logs")
    keep.mkdir(exist_ok=True)
    for log in root.glob("node*.log"):
        (keep / log.name).write_bytes(log.read_bytes())


def failover(args: argparse.Namespace) -> int:
    times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="coterie-cluster-") as tmp, \
            database() as (uri, dsn), \
            cluster(3, uri, args.lease_ms, Path(tmp)) as nodes:
        bs = bootstrap_of(nodes)
        admin = AdminClient({"bootstrap.servers": bs})
        topic = "failover"
        admin.create_topics([NewTopic(topic, TOPIC_PARTITIONS, 1)])[topic].result(30)
        wait(lambda: set(leaders(admin, topic).values()) == {1, 2, 3}, 60, "leaders")
        with Workload(bs, topic, args.groups, args.members) as work:
            work.ports = [n.port for n in nodes]
            wait(lambda: groups_stable(work.ports, work.groups, args.members, None), 120,
                 "groups stable at the start")
            for k in range(args.kills):
                victim = nodes[k % 3]
                time.sleep(args.gap)
                victim.kill()
                killed_at = time.monotonic()
                live = {n.node_id for n in nodes} - {victim.node_id}

                def restored(live: set[int] = live, killed_at: float = killed_at,
                             victim: Node = victim) -> bool:
                    led = leaders(admin, topic)
                    if len(led) != TOPIC_PARTITIONS or not set(led.values()) <= live:
                        return False
                    if min(work.last_ack_at) <= killed_at:
                        return False
                    live_ports = [n.port for n in nodes if n is not victim]
                    return groups_stable(live_ports, work.groups, args.members,
                                         victim.node_id)

                try:
                    wait(restored, 120, f"service back after kill {k + 1}")
                except RuntimeError:
                    explain(admin, topic, work, Path(tmp))
                    raise
                took = time.monotonic() - killed_at
                times.append(took)
                print(f"kill {k + 1:3}: node {victim.node_id}, service back in {took:6.2f} s "
                      f"({len(work.acked)} records acknowledged so far)", flush=True)
                victim.start()
                wait(lambda: set(leaders(admin, topic).values()) == {1, 2, 3}, 60,
                     "the restarted broker leading its share")
                wait(lambda: groups_stable(work.ports, work.groups, args.members, None), 120,
                     "groups stable after the restart")
        # What was acknowledged must be there.
        placed: dict[bytes, tuple[int, int]] = {}
        c = Consumer({"bootstrap.servers": bs, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                      "enable.auto.commit": False})
        c.assign([TopicPartition(topic, p, 0) for p in range(TOPIC_PARTITIONS)])
        deadline = time.monotonic() + 300
        while len(placed) < len(work.acked) and time.monotonic() < deadline:
            for m in c.consume(10_000, 1.0):
                if not m.error():
                    placed[m.value()] = (m.partition(), m.offset())
        c.close()
        lost = [v for v, where in work.acked.items() if placed.get(v) != where]
        committed_lost = 0
        for g in work.groups:
            probe = Consumer({"bootstrap.servers": bs, "group.id": g})
            now = probe.committed([TopicPartition(topic, p) for p in range(TOPIC_PARTITIONS)],
                                  timeout=30)
            probe.close()
            for tp in now:
                if tp.offset < work.committed.get((g, tp.partition), 0):
                    committed_lost += 1
        with psycopg.connect(dsn) as conn:
            rows, size = conn.execute(
                "SELECT count(*), coalesce(sum(size), 0) FROM batches").fetchone()
    times.sort()
    p99 = times[min(len(times) - 1, round(0.99 * (len(times) - 1)))]
    print(f"\n{len(times)} kills (lease {args.lease_ms} ms, {args.groups} groups x "
          f"{args.members} members, 6 partitions): failover p50 "
          f"{statistics.median(times):.2f} s, p99 {p99:.2f} s, max {times[-1]:.2f} s")
    print(f"records acknowledged {len(work.acked)}, lost {len(lost)}; acknowledged commits "
          f"lost {committed_lost}; producer errors {len(work.produce_errors)}; "
          f"database rows {rows} ({size / max(1, len(work.acked)):.0f} batch bytes per record)")
    return 1 if lost or committed_lost else 0


# ----------------------------------------------------------------------------- throughput


def rows_and_bytes(dsn: str) -> tuple[int, int, int]:
    with psycopg.connect(dsn) as conn:
        rows, = conn.execute("SELECT count(*) FROM batches").fetchone()
        total, = conn.execute("SELECT pg_total_relation_size('batches')").fetchone()
        data, = conn.execute("SELECT coalesce(sum(size), 0) FROM batches").fetchone()
    return rows, total, data


def measure(name: str, bootstrap: str, args: argparse.Namespace,
            results: list[tuple[str, float, float]]) -> None:
    value = os.urandom(1024)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"bench-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, TOPIC_PARTITIONS, 1)])[topic].result(30)
    wait(lambda: (lambda led: len(led) == TOPIC_PARTITIONS and -1 not in led.values())(
        leaders(admin, topic)), 60, "leaders")
    produce_s = produce(bootstrap, topic, TOPIC_PARTITIONS, args.records, value)
    consume_s = consume(bootstrap, topic, TOPIC_PARTITIONS, args.records)
    mb = args.records * 1024 / 1e6
    results.append((name, mb / produce_s, mb / consume_s))
    print(f"  {name:22} produce {mb / produce_s:7.1f} MB/s, consume {mb / consume_s:7.1f} MB/s",
          file=sys.stderr, flush=True)


def throughput(args: argparse.Namespace) -> int:
    results: list[tuple[str, float, float]] = []
    per_record = None
    with tempfile.TemporaryDirectory(prefix="coterie-cluster-") as tmp:
        root = Path(tmp)
        with run_broker("coterie", root / "files") as bs:
            measure("1 broker, local files", bs, args, results)
        with database() as (uri, dsn), cluster(1, uri, 6000, root / "one") as nodes:
            measure("1 broker, PostgreSQL", bootstrap_of(nodes), args, results)
        with database() as (uri, dsn), cluster(3, uri, 6000, root / "three") as nodes:
            measure("3 brokers, PostgreSQL", bootstrap_of(nodes), args, results)
            rows, total, data = rows_and_bytes(dsn)
            per_record = (rows / args.records, total / args.records, data / args.records)
        if args.kafka:
            problem = prepare_reference(lambda m: print(m, file=sys.stderr, flush=True))
            if problem:
                print(f"benchmark: {problem}", file=sys.stderr)
            else:
                with run_broker("kafka", root / "kafka") as bs:
                    measure("Kafka 4.2.1", bs, args, results)
    print(f"\n{args.records:,} records x 1 KiB, 6 partitions, acks=1 (librdkafka)\n")
    print(f"{'':24} {'produce MB/s':>13} {'consume MB/s':>13}")
    for name, p, c in results:
        print(f"{name:24} {p:>13.1f} {c:>13.1f}")
    if per_record is not None:
        print(f"\ndatabase per record (3 brokers): {per_record[0]:.4f} rows, "
              f"{per_record[2]:.0f} batch bytes, {per_record[1]:.0f} bytes on disk "
              "(table, indexes and TOAST)")
    return 0


def lanes(args: argparse.Namespace) -> int:
    """Produce MB/s of one broker on PostgreSQL by write connections and producers: the
    lanes (cluster.write.connections) pay off only when several producers' requests are in
    flight together (one connection's requests are answered one after the other)."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="coterie-lanes-") as tmp:
        for count in (1, 4):
            EXTRA_OVERRIDES[:] = [f"cluster.write.connections={count}"]
            for producers in (1, 3):
                with database() as (uri, _), \
                        cluster(1, uri, 6000, Path(tmp) / f"l{count}p{producers}") as nodes:
                    bootstrap = bootstrap_of(nodes)
                    admin = AdminClient({"bootstrap.servers": bootstrap})
                    topics = [f"lanes-{uuid.uuid4().hex[:6]}" for _ in range(producers)]
                    for t in topics:
                        admin.create_topics([NewTopic(t, TOPIC_PARTITIONS, 1)])[t].result(30)
                        wait(lambda t=t, a=admin: (lambda led: len(led) == TOPIC_PARTITIONS
                                                   and -1 not in led.values())(leaders(a, t)),
                             60, "leaders")
                    value = os.urandom(1024)
                    started = time.monotonic()
                    threads = [threading.Thread(target=produce, args=(
                        bootstrap, t, TOPIC_PARTITIONS, args.records, value)) for t in topics]
                    for th in threads:
                        th.start()
                    for th in threads:
                        th.join()
                    mb_s = producers * args.records * 1024 / 1e6 / (time.monotonic() - started)
                    rows.append((count, producers, mb_s))
                    print(f"  {count} write connections, {producers} producers: "
                          f"{mb_s:.1f} MB/s", file=sys.stderr, flush=True)
    EXTRA_OVERRIDES.clear()
    print(f"\n1 broker on PostgreSQL, {args.records:,} records x 1 KiB per producer, "
          f"{TOPIC_PARTITIONS} partitions each, acks=1\n")
    print("| write connections | producers | produce MB/s |\n| --- | --- | --- |")
    for count, producers, mb_s in rows:
        print(f"| {count} | {producers} | {mb_s:.1f} |")
    return 0


TAKE = re.compile(r"leads big-0 at epoch \d+ \((\d+) batches' bytes copied, offsets (\d+)-\d+ "
                  r"of \d+-(\d+), (\d+) ms\)")


def takeover(args: argparse.Namespace) -> int:
    """Time and bytes of a partition's takeover, whole and bounded (module docstring)."""
    settings = [("whole partition (before)", 1 << 60)] + [
        (f"last {mb} MiB (after)", mb << 20) for mb in args.copy_mb]
    rows = []
    nodes: list[Node] = []
    with tempfile.TemporaryDirectory(prefix="coterie-takeover-") as tmp, \
            database() as (uri, _):
        root = Path(tmp)
        try:
            EXTRA_OVERRIDES[:] = []
            current = Node(root, 1, uri, args.lease_ms)
            nodes.append(current)
            current.start()
            admin = AdminClient({"bootstrap.servers": current.bootstrap})
            admin.create_topics([NewTopic("big", 1, 1)])["big"].result(30)
            wait(lambda: leaders(admin, "big").get(0) == 1, 60, "a leader")
            produce_s = produce(current.bootstrap, "big", 1, args.records, os.urandom(1024))
            print(f"  {args.records * 1024 / 1e6:.0f} MB produced in {produce_s:.1f} s",
                  file=sys.stderr, flush=True)
            for node_id, (label, copy_bytes) in enumerate(settings, start=2):
                EXTRA_OVERRIDES[:] = [f"cluster.copy.bytes={copy_bytes}"]
                nxt = Node(root, node_id, uri, args.lease_ms)
                nodes.append(nxt)
                nxt.start()
                log_path = root / f"node{node_id}.log"
                # It takes the partition when it joins, or once the leader is killed.
                time.sleep(args.lease_ms / 1000)
                current.kill()
                seen = wait(lambda p=log_path: TAKE.findall(p.read_text()), 300,
                            f"node {node_id} taking big-0")
                copied, start, end, ms = (int(x) for x in seen[-1])
                rows.append((label, copied, start, end, ms))
                print(f"  {label}: {copied / 1e6:.1f} MB copied (offsets {start}-{end}) "
                      f"in {ms} ms", file=sys.stderr, flush=True)
                current = nxt
        finally:
            EXTRA_OVERRIDES.clear()
            for n in nodes:
                n.stop()
    print(f"\none partition of {args.records:,} records x 1 KiB "
          f"({args.records * 1024 / 1e6:.0f} MB), taken over by a new broker\n")
    print("| copy | bytes copied | copy start offset | take (copy and open) |\n"
          "| --- | --- | --- | --- |")
    for label, copied, start, _end, ms in rows:
        print(f"| {label} | {copied / 1e6:.1f} MB | {start:,} | {ms:,} ms |")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    f = sub.add_parser("failover", help="kill -9 brokers in turn; time until service is back")
    f.add_argument("--kills", type=int, default=20)
    f.add_argument("--lease-ms", type=int, default=6000)
    f.add_argument("--groups", type=int, default=3)
    f.add_argument("--members", type=int, default=2)
    f.add_argument("--gap", type=float, default=2.0, help="seconds of steady load before a kill")
    t = sub.add_parser("throughput", help="produce/consume MB/s: files, 1 and 3 on PostgreSQL")
    t.add_argument("--records", type=int, default=100_000)
    t.add_argument("--kafka", action="store_true", help="also Kafka 4.2.1 (java and mvn)")
    c = sub.add_parser("lanes", help="produce MB/s by write connections and producers")
    c.add_argument("--records", type=int, default=40_000)
    k = sub.add_parser("takeover", help="a large partition taken over: whole copy, bounded")
    k.add_argument("--records", type=int, default=200_000)
    k.add_argument("--copy-mb", type=int, nargs="+", default=[256, 32])
    k.add_argument("--lease-ms", type=int, default=3000)
    args = parser.parse_args(argv)
    return {"failover": failover, "throughput": throughput, "lanes": lanes,
            "takeover": takeover}[args.what](args)


if __name__ == "__main__":
    sys.exit(main())
