"""Chaos with real clients: kill -9 the broker at random moments while consumers of every
kind consume and commit and a producer writes, then count what was lost (issue 13).

    .venv/bin/python benchmarks/chaos.py --kills 100

One coterie broker (its own process, restarted on the same port and data directory after
each SIGKILL), one topic of `--partitions` partitions, and in child processes:

* a producer (confluent-kafka, acks=all, idempotent) writing numbered values without pause;
  every delivery report without error is an acknowledged record, with its partition and
  offset;
* five consumers, each alone in its own group so that its commits per partition only ever
  move forward: confluent-kafka classic, confluent-kafka consumer protocol (KIP-848),
  kafka-python classic, coterie.client classic and coterie.client consumer protocol. Each
  commits synchronously after every batch it processed; a commit that returned without
  error is an acknowledged commit.

Between kills the harness waits a random 1-4 s (`--min-gap`, `--max-gap`). After each
restart it measures the time until every consumer has received a record produced after the
restart ("converge"). Losses:

* **acked commits lost**: right after each restart, every group's committed offsets are
  fetched (OffsetFetch); one below a commit the consumer had acknowledged before the kill is
  lost (the consumer alone commits there, so its offsets only move forward). Also counted:
  a consumer handed a partition at an offset below a commit it had acknowledged.
* **acked records lost**: after the last kill, every partition is read from the start with
  read_uncommitted; an acknowledged (partition, offset) that is missing or holds another
  value is lost.

Prints one line per kill and a summary; exit code 1 if anything was lost.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import queue
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._brokers import HOST, create_topic, free_port, wait_until_serving

TOPIC = "chaos"
CONSUMERS = ("confluent-classic", "confluent-consumer", "kafka-python-classic",
             "coterie-classic", "coterie-consumer")


class Broker:
    """A coterie broker process that can be SIGKILLed and restarted in place."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.data = workdir / "data"
        self.log = workdir / "coterie.log"
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def start(self) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "coterie", "serve", "--host", HOST, "--port",
                 str(self.port), "--data-dir", str(self.data),
                 "--override", "group.initial.rebalance.delay.ms=0"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        wait_until_serving(self.bootstrap, self.proc, self.log, metadata_probe=False)

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


# -- child processes ------------------------------------------------------------------------
def producer_main(bootstrap: str, events: Any, stop: Any) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "enable.idempotence": True, "message.timeout.ms": 300_000,
                  "log_level": 0})
    acked: list[tuple[int, int, bytes]] = []

    def report(err: Any, msg: Any) -> None:
        if err is None:
            acked.append((msg.partition(), msg.offset(), msg.value()))

    n = 0
    while not stop.is_set():
        for _ in range(50):
            p.produce(TOPIC, value=f"v{n}".encode(), key=str(n).encode(), on_delivery=report)
            n += 1
        p.poll(0.025)  # about 2,000 records a second
        time.sleep(0.025)
        if acked:
            events.put(("acked", list(acked)))
            acked.clear()
    p.flush(120)
    events.put(("acked", list(acked)))
    events.put(("producer-done", n))


def consumer_main(kind: str, bootstrap: str, events: Any, stop: Any) -> None:
    """Consume, commit after each batch, report (kind, event, partition, offset, time)."""
    try:
        if kind.startswith("confluent"):
            _confluent(kind, bootstrap, events, stop)
        elif kind.startswith("kafka-python"):
            _kafka_python(kind, bootstrap, events, stop)
        else:
            asyncio.run(_coterie(kind, bootstrap, events, stop))
    except BaseException as exc:  # reported, and the harness counts it and restarts it
        import traceback

        events.put(("error", kind, "".join(traceback.format_exception(exc))[-1500:]))


def _report_batch(kind: str, events: Any, firsts: dict[int, int], batch: list[tuple[int, int]]
                  ) -> dict[int, int]:
    """Report the first offset seen per partition since the last assignment, and the
    records' arrival; return the offsets to commit (next offset per partition)."""
    now = time.time()
    upto: dict[int, int] = {}
    for partition, offset in batch:
        if partition not in firsts:
            firsts[partition] = offset
            events.put(("position", kind, partition, offset, now))
        upto[partition] = max(upto.get(partition, -1), offset + 1)
    if batch:
        events.put(("records", kind, len(batch), now))
    return upto


def _confluent(kind: str, bootstrap: str, events: Any, stop: Any) -> None:
    from confluent_kafka import Consumer, TopicPartition

    config = {"bootstrap.servers": bootstrap, "group.id": f"chaos-{kind}",
              "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 0}
    if kind.endswith("consumer"):
        config["group.protocol"] = "consumer"
    c = Consumer(config)
    firsts: dict[int, int] = {}

    def on_assign(_c: Any, parts: list[Any]) -> None:
        for p in parts:
            firsts.pop(p.partition, None)

    c.subscribe([TOPIC], on_assign=on_assign, on_revoke=on_assign, on_lost=on_assign)
    while not stop.is_set():
        msgs = [m for m in c.consume(500, 0.5) if m.error() is None]
        upto = _report_batch(kind, events, firsts, [(m.partition(), m.offset()) for m in msgs])
        if not upto:
            continue
        try:
            done = c.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in upto.items()],
                            asynchronous=False)
        except Exception:
            continue  # not acknowledged
        for tp in done or []:
            if tp.error is None:
                events.put(("commit", kind, tp.partition, tp.offset, time.time()))
    c.close()


def _kafka_python(kind: str, bootstrap: str, events: Any, stop: Any) -> None:
    import kafka
    import kafka.errors
    from kafka.structs import OffsetAndMetadata, TopicPartition

    firsts: dict[int, int] = {}

    class Listener(kafka.ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            for tp in revoked:
                firsts.pop(tp.partition, None)

        def on_partitions_assigned(self, assigned: Any) -> None:
            for tp in assigned:
                firsts.pop(tp.partition, None)

    c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=f"chaos-{kind}",
                            enable_auto_commit=False, auto_offset_reset="earliest")
    c.subscribe([TOPIC], listener=Listener())
    while not stop.is_set():
        try:
            polled = c.poll(timeout_ms=500)
        except kafka.errors.KafkaConnectionError:
            # kafka-python 3.0 raises a refused connection (the broker restarting) out of
            # poll(); an application catches it and polls on.
            continue
        got = [m for batch in polled.values() for m in batch]
        upto = _report_batch(kind, events, firsts, [(m.partition, m.offset) for m in got])
        if not upto:
            continue
        try:
            c.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(o, "", -1)
                      for p, o in upto.items()})
        except Exception:
            continue
        for p, o in upto.items():
            events.put(("commit", kind, p, o, time.time()))
    c.close(autocommit=False)


async def _coterie(kind: str, bootstrap: str, events: Any, stop: Any) -> None:
    from coterie.client import Consumer

    firsts: dict[int, int] = {}

    class Listener:
        def on_partitions_revoked(self, parts: Any) -> None:
            for _topic, p in parts:
                firsts.pop(p, None)

        on_partitions_assigned = on_partitions_revoked
        on_partitions_lost = on_partitions_revoked

    protocol = "consumer" if kind.endswith("consumer") else "classic"
    c = Consumer(bootstrap, f"chaos-{kind}", topics=[TOPIC], listener=Listener(),
                 auto_commit=False, auto_offset_reset="earliest", group_protocol=protocol,
                 client_id=kind)
    await c.start()
    while not stop.is_set():
        batch = await c.poll(timeout_ms=500)
        upto = _report_batch(kind, events, firsts, [(r.partition, r.offset) for r in batch])
        if not upto:
            continue
        try:
            await c.commit({(TOPIC, p): o for p, o in upto.items()})
        except Exception:
            continue
        for p, o in upto.items():
            events.put(("commit", kind, p, o, time.time()))
    await c.close()


# -- the harness ----------------------------------------------------------------------------
class Ledger:
    """What the children reported, and the losses found in it."""

    def __init__(self) -> None:
        self.acked: dict[tuple[int, int], bytes] = {}
        self.committed: dict[tuple[str, int], int] = {}  # acknowledged, highest
        self.commit_times: dict[tuple[str, int], list[tuple[float, int]]] = {}
        self.lost_commits: list[tuple[str, int, int, int]] = []
        self.last_records: dict[str, float] = {}
        self.errors: list[str] = []
        self.produced = 0

    def take(self, event: tuple) -> None:
        kind = event[0]
        if kind == "acked":
            for p, o, v in event[1]:
                self.acked[(p, o)] = v
        elif kind == "commit":
            _, who, p, o, t = event
            self.committed[(who, p)] = max(self.committed.get((who, p), 0), o)
            self.commit_times.setdefault((who, p), []).append((t, o))
        elif kind == "position":
            _, who, p, o, _t = event
            acked = self.committed.get((who, p), 0)
            if o < acked:
                self.lost_commits.append((who, p, o, acked))
        elif kind == "records":
            self.last_records[event[1]] = event[3]
        elif kind == "error":
            self.errors.append(f"{event[1]}: {event[2]}")
            print(f"client error: {event[1]}: {event[2]}", flush=True)
        elif kind == "producer-done":
            self.produced = event[1]


    def check_durable(self, killed_at: float, fetched: dict[tuple[str, int], int]) -> int:
        """Count commits acknowledged before `killed_at` that the restarted broker lost."""
        lost = 0
        for key, history in self.commit_times.items():
            before = [o for t, o in history if t < killed_at]
            if before and fetched.get(key, -1) < max(before):
                self.lost_commits.append((key[0], key[1], fetched.get(key, -1), max(before)))
                lost += 1
            self.commit_times[key] = [(t, o) for t, o in history if t >= killed_at][-1:] + (
                [(killed_at - 1e-6, max(before))] if before else [])
        return lost


def fetch_committed(bootstrap: str) -> dict[tuple[str, int], int]:
    """Every chaos group's committed offsets, as the broker answers OffsetFetch."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    out: dict[tuple[str, int], int] = {}
    for kind in CONSUMERS:
        deadline = time.monotonic() + 60
        while True:
            try:
                future = admin.list_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(f"chaos-{kind}")])[f"chaos-{kind}"]
                for tp in future.result(10).topic_partitions:
                    if tp.offset >= 0:
                        out[(kind, tp.partition)] = tp.offset
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)  # still loading after the restart
    return out


def drain(events: Any, ledger: Ledger, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        try:
            ledger.take(events.get(timeout=min(left, 0.1)))
        except queue.Empty:
            continue


def read_back(bootstrap: str, partitions: int) -> dict[tuple[int, int], bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-audit",
                  "enable.auto.commit": False, "log_level": 0})
    ends = {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1]
            for p in range(partitions)}
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
    seen: dict[tuple[int, int], bytes] = {}
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and any(
            seen.get((p, end - 1)) is None for p, end in ends.items() if end > 0):
        for m in c.consume(5000, 0.5):
            if m.error() is None:
                seen[(m.partition(), m.offset())] = m.value()
    c.close()
    return seen


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--min-gap", type=float, default=1.0)
    ap.add_argument("--max-gap", type=float, default=4.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="coterie-chaos-") as tmp:
        broker = Broker(Path(tmp))
        broker.start()
        create_topic(broker.bootstrap, TOPIC, args.partitions)
        events, stop = ctx.Queue(), ctx.Event()
        children = [ctx.Process(target=producer_main, args=(broker.bootstrap, events, stop))]
        children += [ctx.Process(target=consumer_main, args=(k, broker.bootstrap, events, stop))
                     for k in CONSUMERS]
        for child in children:
            child.start()
        ledger = Ledger()
        converge: list[float] = []
        stalled = 0
        replacements = 0
        try:
            drain(events, ledger, 8.0)  # everyone joined and consuming
            for kill in range(1, args.kills + 1):
                drain(events, ledger, rng.uniform(args.min_gap, args.max_gap))
                for i, child in enumerate(children):
                    if not child.is_alive():  # a client that died is replaced (and counted)
                        kind = CONSUMERS[i - 1] if i else "producer"
                        print(f"{kind} exited ({child.exitcode}); starting a new one",
                              flush=True)
                        replacements += 1
                        target, extra = ((producer_main, ()) if not i
                                         else (consumer_main, (kind,)))
                        children[i] = ctx.Process(
                            target=target, args=(*extra, broker.bootstrap, events, stop))
                        children[i].start()
                killed_at = time.time()
                broker.kill9()
                broker.start()
                restarted = time.time()
                drain(events, ledger, 0.2)  # commits acknowledged before the kill, reported
                ledger.check_durable(killed_at, fetch_committed(broker.bootstrap))
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline and not all(
                        ledger.last_records.get(k, 0) > restarted for k in CONSUMERS):
                    drain(events, ledger, 0.1)
                stuck = [k for k in CONSUMERS if ledger.last_records.get(k, 0) <= restarted]
                took = max(ledger.last_records.get(k, 0) for k in CONSUMERS) - restarted
                converge.append(took)
                print(f"kill {kill:3d}: consumers all progressing {took:5.2f} s after the "
                      f"restart; acked records {len(ledger.acked)}, lost commits "
                      f"{len(ledger.lost_commits)}"
                      + (f"; NOT progressing: {', '.join(stuck)}" if stuck else ""),
                      flush=True)
                stalled += bool(stuck)
        finally:
            stop.set()
            drain(events, ledger, 5.0)
            for child in children:
                child.join(60)
                if child.is_alive():
                    child.kill()
            drain(events, ledger, 1.0)
        seen = read_back(broker.bootstrap, args.partitions)
        broker.stop()
    lost_records = [k for k, v in ledger.acked.items() if seen.get(k) != v]
    commits = len(ledger.committed)
    print(f"\n{args.kills} kills; {len(ledger.acked)} acknowledged records, "
          f"{len(lost_records)} lost; acknowledged commits lost: {len(ledger.lost_commits)} "
          f"(over {commits} consumer-partitions); client errors: {len(ledger.errors)}; "
          f"restarts after which a consumer made no progress within 120 s: {stalled}; "
          f"client processes that died and were replaced: {replacements}")
    if converge:
        print(f"time until every consumer progresses after a restart: median "
              f"{statistics.median(converge):.2f} s, max {max(converge):.2f} s")
    for item in ledger.lost_commits[:10]:
        print("lost commit (consumer, partition, resumed at, acknowledged):", item)
    for item in lost_records[:10]:
        print("lost record (partition, offset):", item)
    for item in ledger.errors[:10]:
        print("client error:", item)
    return 1 if lost_records or ledger.lost_commits else 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
