"""One member joins a mixed consumer group while records flow: a timeline of who owned
which partition when, and what the members delivered, on one monotonic clock.

Used by tests/integration/test_consumer_rebalance.py (assertions) and
benchmarks/cooperative_pause.py (figures). Three members (coterie.client's Consumer,
librdkafka, kafka-python, all with one assignment strategy) settle on a 6-partition topic
while a producer writes to every partition every 20 ms; a fourth member (ours) joins; the
group settles again. All consumers are threads of this process, so their callback and
delivery stamps (`time.monotonic()`) are comparable. From them:

- ownership intervals per partition (assign callback to revoke callback) and any instant at
  which two members owned one partition (`overlaps`);
- "moved" partitions (another owner after the join) and "unmoved" ones;
- per partition, the time without an owner and the longest stretch without a delivered
  record between the join and the last callback of the rebalance (the "window").
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import Producer

from tests.integration.clients import create_topics
from tests.integration.group_clients import (
    TP,
    ThreadedConsumer,
    all_partitions,
    wait_until_settled,
)
from tests.integration.member_helpers import Target

PARTITIONS = 6
KINDS = ("coterie", "confluent", "kafka_python")


class SteadyProducer(threading.Thread):
    """Writes one record to every partition of `topic` every `interval` seconds."""

    def __init__(self, bootstrap: str, topic: str, partitions: int,
                 interval: float = 0.02) -> None:
        super().__init__(name="steady-producer", daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2,
                                  "enable.idempotence": False, "acks": 1})
        self.topic, self.partitions, self.interval = topic, partitions, interval
        self.sent = 0
        self.error: BaseException | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            while not self._stop_event.wait(self.interval):
                for p in range(self.partitions):
                    self.producer.produce(self.topic, value=b"%d" % self.sent, partition=p)
                    self.sent += 1
                self.producer.poll(0)
            self.producer.flush(10)
        except BaseException as e:
            self.error = e

    def stop(self) -> None:
        self._stop_event.set()
        self.join(20)
        assert self.error is None, f"producer failed: {self.error!r}"


Interval = tuple[float, float, str]  # (from, to, member label)


def ownership(members: Sequence[ThreadedConsumer], until: float) -> dict[TP, list[Interval]]:
    """Per partition, every member's ownership intervals from its callbacks."""
    out: dict[TP, list[Interval]] = {}
    for m in members:
        since: dict[TP, float] = {}
        for at, kind, tps in m.events():
            for tp in tps:
                if kind == "assign":
                    since.setdefault(tp, at)
                elif tp in since:
                    out.setdefault(tp, []).append((since.pop(tp), at, m.label))
        for tp, start in since.items():
            out.setdefault(tp, []).append((start, until, m.label))
    for intervals in out.values():
        intervals.sort()
    return out


def overlaps(owned: dict[TP, list[Interval]]) -> list[str]:
    """Instants at which two members owned one partition."""
    problems = []
    for tp, intervals in owned.items():
        latest: Interval | None = None  # the interval reaching furthest so far
        for start, end, label in intervals:  # sorted by start
            if latest is not None and start < latest[1] and label != latest[2]:
                problems.append(f"{tp}: {latest[2]} [{latest[0]:.3f}, {latest[1]:.3f}) and "
                                f"{label} from {start:.3f}")
            if latest is None or end > latest[1]:
                latest = (start, end, label)
    return problems


def owner_at(owned: dict[TP, list[Interval]], tp: TP, at: float) -> str | None:
    for start, end, label in owned.get(tp, []):
        if start <= at < end:
            return label
    return None


def unowned_time(intervals: list[Interval], start: float, end: float) -> float:
    """How long within [start, end] nobody owned the partition."""
    covered, cursor = 0.0, start
    for s, e, _ in intervals:
        s, e = max(s, cursor), min(e, end)
        if e > s:
            covered += e - s
            cursor = e
    return (end - start) - covered


def longest_silence(times: list[float], start: float, end: float) -> float:
    """The longest stretch within [start, end] without a delivery."""
    points = [start, *sorted(t for t in times if start < t < end), end]
    return max(b - a for a, b in itertools.pairwise(points))


@dataclass
class JoinOutcome:
    strategy: str
    window: float  # join -> last callback of the rebalance, seconds
    moved: frozenset[TP]
    unmoved: frozenset[TP]
    overlaps: list[str]
    revoked_after_join: dict[TP, list[str]]  # partition -> members that revoked it
    unowned: dict[TP, float]  # partition -> seconds without an owner in the window
    silence: dict[TP, float]  # partition -> longest gap between deliveries in the window
    delivered_in_window: dict[TP, int]  # partition -> records delivered in the window
    owners: dict[TP, str | None]  # partition -> its owner after the rebalance (label)
    kinds: dict[str, str]  # member label -> client kind

    def owned_by(self, kind: str, which: frozenset[TP]) -> frozenset[TP]:
        return frozenset(tp for tp in which if self.kinds.get(self.owners[tp] or "") == kind)

    @staticmethod
    def worst_ms(what: dict[TP, float], which: frozenset[TP]) -> float | None:
        return max(what[tp] for tp in which) * 1000 if which else None

    def row(self) -> dict[str, float | int | str | None]:
        """The figures of this run: milliseconds, worst partition of each kind."""
        out: dict[str, float | int | str | None] = {
            "strategy": self.strategy, "rebalance_ms": self.window * 1000,
            "moved": len(self.moved), "unmoved": len(self.unmoved),
            "unmoved_unowned_ms": self.worst_ms(self.unowned, self.unmoved),
            "moved_unowned_ms": self.worst_ms(self.unowned, self.moved),
        }
        for kind in KINDS:
            out[f"unmoved_silence_{kind}_ms"] = self.worst_ms(
                self.silence, self.owned_by(kind, self.unmoved))
        return out

    def figures(self) -> str:
        def ms(value: float | int | str | None) -> str:
            return "-" if value is None else f"{value:.0f}"

        r = self.row()
        silence = ", ".join(f"{kind} {ms(r[f'unmoved_silence_{kind}_ms'])}" for kind in KINDS)
        return (f"{self.strategy:>18}: rebalance {ms(r['rebalance_ms'])} ms; "
                f"{r['unmoved']} unmoved partitions: max {ms(r['unmoved_unowned_ms'])} ms "
                f"without owner, max ms without a delivered record by owner: {silence}; "
                f"{r['moved']} moved: {ms(r['moved_unowned_ms'])} ms without owner")


def join_scenario(target: Target, strategy: str, busy: str | None = None,
                  busy_s: float = 1.0) -> JoinOutcome:
    """Three members (ours, librdkafka, kafka-python) settle on a 6-partition topic with
    records flowing; a fourth (ours) joins; the group settles again. Returns what happened.
    `busy`: the kind of member that spends `busy_s` processing each batch it polls (librdkafka
    and kafka-python only take part in a rebalance from inside poll, so a busy one makes the
    group wait for it)."""
    topic = f"coop-{uuid.uuid4().hex[:8]}"
    group = f"coop-{strategy}-{uuid.uuid4().hex[:8]}"
    create_topics(target.bootstrap, {topic: PARTITIONS})
    partitions = all_partitions(topic, PARTITIONS)
    producer = SteadyProducer(target.bootstrap, topic, PARTITIONS)
    members = [ThreadedConsumer(kind, target.bootstrap, group, [topic], f"{kind}-{strategy}",
                                strategy=strategy, processing_s=busy_s if kind == busy else 0)
               for kind in KINDS]
    kinds = {m.label: m.kind for m in members}
    joiner = ThreadedConsumer("coterie", target.bootstrap, group, [topic],
                              f"joiner-{strategy}", strategy=strategy)
    everyone = [*members, joiner]
    kinds[joiner.label] = joiner.kind
    producer.start()
    try:
        for m in members:
            m.start()
        wait_until_settled(members, partitions, timeout=60, quiet=1.5)
        time.sleep(0.5)  # records flow to the settled owners
        t_join = time.monotonic()
        joiner.start()
        wait_until_settled(everyone, partitions, timeout=60, quiet=2.0)
        t_end = max(m.last_change for m in everyone)
        time.sleep(0.3)
    finally:
        for m in everyone:
            if m.is_alive():
                m.stop()
        producer.stop()
    owned = ownership(everyone, until=time.monotonic())
    before = {tp: owner_at(owned, tp, t_join) for tp in partitions}
    after = {tp: owner_at(owned, tp, t_end + 0.01) for tp in partitions}
    moved = frozenset(tp for tp in partitions if before[tp] != after[tp])
    unmoved = frozenset(partitions) - moved
    revoked: dict[TP, list[str]] = {}
    for m in everyone:
        for at, kind, tps in m.events():
            if kind == "revoke" and t_join < at <= t_end:
                for tp in tps:
                    revoked.setdefault(tp, []).append(m.label)
    deliveries: dict[TP, list[float]] = {}
    for m in everyone:
        for d in m.deliveries():
            deliveries.setdefault((d.topic, d.partition), []).append(d.at)
    return JoinOutcome(
        strategy=strategy, window=t_end - t_join, moved=moved, unmoved=unmoved,
        overlaps=overlaps(owned), revoked_after_join=revoked,
        unowned={tp: unowned_time(owned.get(tp, []), t_join, t_end) for tp in partitions},
        silence={tp: longest_silence(deliveries.get(tp, []), t_join, t_end)
                 for tp in partitions},
        delivered_in_window={tp: sum(t_join < t < t_end for t in deliveries.get(tp, []))
                             for tp in partitions},
        owners=after, kinds=kinds)
