"""The two pipeline jobs: rebalance analytics on a hand-computed scenario (plain Python and on
Spark), the clickstream aggregation on a hand-built DataFrame, and both end to end on a real
coterie broker through format "coterie".

Spark runs as local[2] with the UI off and 2 shuffle partitions; the Spark tests are skipped,
saying why, when pyspark or java is missing.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from coterie.spark.jobs.rebalance_figures import rebalances, summarize

# == a hand-computed scenario ==========================================================
# "shop", classic, eager (figures in the comments are computed by hand):
#  R1 1000 -> Stable 4500: 3500 ms; A gets t-0..3 (first owner: not moved, never unowned)
#  R2 10000 -> 13000: 3000 ms; A revokes all 4 at 10000, t-0,1 back to A, t-2,3 to B at
#     13000: moved 2, unowned 4 x 3 s = 12 partition-seconds
#  R3 20000 -> 26500: 6500 ms; B fenced (t-2,3 revoked), A revokes t-0,1 (eager), A gets
#     all 4 at 26500: moved 2 (t-2,3 B -> A), unowned 4 x 6.5 s = 26
#  R4 30000, open: C joins, A revokes all (never reassigned: not counted)
# "orders", consumer:
#  R1 0 -> Stable 0: 0 ms, X gets o-0,1
#  R2 5000 -> 6000: 1000 ms; X revokes o-1 at 5800, Y gets it at 6000: moved 1, unowned 0.2
#  R3 9000 (Y leaves) and R4 9500 (X leaves) end Empty at 9500: no time to Stable; o-1 and
#     o-0 are never reassigned: not counted
SHOP = [
    (1000, "member_joined", 0, "A", {}),
    (1000, "rebalance_started", 0, None, {}),
    (1000, "state_changed", 0, None, {"previous": "Empty", "state": "PreparingRebalance"}),
    (4000, "generation_bumped", 1, None, {"previous": 0}),
    (4000, "state_changed", 1, None, {"state": "CompletingRebalance"}),
    (4500, "assignment_computed", 1, "A", {"partitions": {"A": 4}}),
    (4500, "partitions_assigned", 1, "A", {"partitions": ["t-0", "t-1", "t-2", "t-3"]}),
    (4500, "state_changed", 1, None, {"state": "Stable"}),
    (10000, "member_joined", 1, "B", {}),
    (10000, "rebalance_started", 1, None, {}),
    (10000, "partitions_revoked", 1, "A", {"partitions": ["t-0", "t-1", "t-2", "t-3"]}),
    (10000, "state_changed", 1, None, {"state": "PreparingRebalance"}),
    (12000, "generation_bumped", 2, None, {}),
    (12000, "state_changed", 2, None, {"state": "CompletingRebalance"}),
    (13000, "partitions_assigned", 2, "A", {"partitions": ["t-0", "t-1"]}),
    (13000, "partitions_assigned", 2, "B", {"partitions": ["t-2", "t-3"]}),
    (13000, "state_changed", 2, None, {"state": "Stable"}),
    (20000, "member_fenced", 2, "B", {"reason": "session timeout"}),
    (20000, "partitions_revoked", 2, "B", {"partitions": ["t-2", "t-3"]}),
    (20000, "rebalance_started", 2, None, {}),
    (20000, "partitions_revoked", 2, "A", {"partitions": ["t-0", "t-1"]}),
    (20000, "state_changed", 2, None, {"state": "PreparingRebalance"}),
    (26000, "generation_bumped", 3, None, {}),
    (26000, "state_changed", 3, None, {"state": "CompletingRebalance"}),
    (26500, "partitions_assigned", 3, "A", {"partitions": ["t-0", "t-1", "t-2", "t-3"]}),
    (26500, "state_changed", 3, None, {"state": "Stable"}),
    (30000, "member_joined", 3, "C", {}),
    (30000, "rebalance_started", 3, None, {}),
    (30000, "partitions_revoked", 3, "A", {"partitions": ["t-0", "t-1", "t-2", "t-3"]}),
    (30000, "state_changed", 3, None, {"state": "PreparingRebalance"}),
]
ORDERS = [
    (0, "member_joined", 1, "X", {}),
    (0, "rebalance_started", 1, None, {}),
    (0, "epoch_bumped", 1, None, {}),
    (0, "partitions_assigned", 1, "X", {"partitions": ["o-0", "o-1"]}),
    (0, "state_changed", 1, None, {"state": "Stable"}),
    (5000, "member_joined", 2, "Y", {}),
    (5000, "rebalance_started", 2, None, {}),
    (5000, "state_changed", 2, None, {"state": "Reconciling"}),
    (5800, "partitions_revoked", 2, "X", {"partitions": ["o-1"]}),
    (6000, "partitions_assigned", 2, "Y", {"partitions": ["o-1"]}),
    (6000, "state_changed", 2, None, {"state": "Stable"}),
    (9000, "member_left", 3, "Y", {}),
    (9000, "partitions_revoked", 3, "Y", {"partitions": ["o-1"]}),
    (9000, "rebalance_started", 3, None, {}),
    (9000, "state_changed", 3, None, {"state": "Assigning"}),
    (9500, "member_left", 4, "X", {}),
    (9500, "partitions_revoked", 4, "X", {"partitions": ["o-0"]}),
    (9500, "rebalance_started", 4, None, {}),
    (9500, "state_changed", 4, None, {"state": "Empty"}),
]


def as_events(group: str, protocol: str, rows: list[tuple]) -> list[dict[str, Any]]:
    return [{"ts": ts, "group": group, "protocol": protocol, "type": kind, "generation": gen,
             "member": member, "details": details}
            for ts, kind, gen, member, details in rows]


SHOP_EVENTS = as_events("shop", "classic", SHOP)
ORDERS_EVENTS = as_events("orders", "consumer", ORDERS)

EXPECTED_REBALANCES = {
    # (group, n): (start, end, outcome, time to Stable, moved, unowned partition-seconds)
    ("shop", 1): (1000, 4500, "Stable", 3500, 0, 0.0),
    ("shop", 2): (10000, 13000, "Stable", 3000, 2, 12.0),
    ("shop", 3): (20000, 26500, "Stable", 6500, 2, 26.0),
    ("shop", 4): (30000, None, "open", None, 0, 0.0),
    ("orders", 1): (0, 0, "Stable", 0, 0, 0.0),
    ("orders", 2): (5000, 6000, "Stable", 1000, 1, 0.2),
    ("orders", 3): (9000, 9500, "Empty", None, 0, 0.0),
    ("orders", 4): (9500, 9500, "Empty", None, 0, 0.0),
}
EXPECTED_SUMMARY = {
    # rebalances, stable ones, mean and max time to Stable, moved, unowned partition-seconds
    ("orders", "consumer"): (4, 2, 500.0, 1000, 1, 0.2),
    ("shop", "classic"): (4, 3, 13000 / 3, 6500, 4, 38.0),
}


def rebalance_tuple(r: dict[str, Any]) -> tuple:
    return (r["start_ts"], r["end_ts"], r["outcome"], r["time_to_stable_ms"],
            r["partitions_moved"], pytest.approx(r["unowned_partition_seconds"]))


def summary_tuple(s: dict[str, Any]) -> tuple:
    return (s["rebalances"], s["stable_rebalances"], pytest.approx(s["time_to_stable_avg_ms"]),
            s["time_to_stable_max_ms"], s["partitions_moved"],
            pytest.approx(s["unowned_partition_seconds"]))


def test_rebalance_figures_match_the_hand_computed_scenario():
    rows = rebalances(SHOP_EVENTS) + rebalances(ORDERS_EVENTS)
    assert {(r["group"], r["rebalance"]): rebalance_tuple(r) for r in rows} == \
        EXPECTED_REBALANCES
    assert {(s["group"], s["protocol"]): summary_tuple(s) for s in summarize(rows)} == \
        EXPECTED_SUMMARY


def test_events_before_any_rebalance_and_same_member_reassignment_are_not_moves():
    events = as_events("g", "classic", [
        (0, "partitions_assigned", 0, "A", {"partitions": ["t-0"]}),  # before any rebalance
        (1, "rebalance_started", 0, None, {}),
        (1, "partitions_revoked", 0, "B", {"partitions": ["t-0"]}),  # B never owned it
        (2, "partitions_assigned", 1, "A", {"partitions": ["t-0"]}),
        (3, "state_changed", 1, None, {"state": "Stable"}),
    ])
    [row] = rebalances(events)
    assert (row["partitions_moved"], row["unowned_partition_seconds"]) == (0, 0.0)
    assert row["time_to_stable_ms"] == 2


# == Spark ==============================================================================
def _spark_missing() -> str | None:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (pip install -e '.[spark]')"
    if shutil.which("java") is None:
        return "java is not on PATH (Spark needs Java 17+)"
    return None


spark_only = pytest.mark.skipif(_spark_missing() is not None,
                                reason=_spark_missing() or "")


@pytest.fixture(scope="module")
def spark() -> Any:
    from coterie.spark.jobs.session import spark_session

    session = spark_session("coterie-jobs-tests", "local[2]", shuffle_partitions=2)
    yield session
    session.stop()


def event_rows(events: list[dict[str, Any]]) -> list[tuple]:
    """(value, partition, offset) rows as the coterie source yields them, shuffled."""
    rows = [(json.dumps(e).encode(), 0, offset) for offset, e in enumerate(events)]
    random.Random(7).shuffle(rows)
    return rows


@spark_only
def test_analytics_job_on_spark_matches_the_hand_computed_scenario(spark, tmp_path):
    from coterie.spark.jobs.rebalance_analytics import analyze, rebalance_frame

    # The two groups' events interleaved in one partition, rows shuffled: the job must put
    # each group's events back in offset order.
    merged = [e for pair in zip(SHOP_EVENTS, ORDERS_EVENTS + [None] * 20, strict=False)
              for e in pair if e is not None]
    assert len(merged) == len(SHOP_EVENTS) + len(ORDERS_EVENTS)
    raw = spark.createDataFrame(event_rows(merged), "value binary, partition int, offset long")
    rows = [r.asDict() for r in rebalance_frame(raw).collect()]
    assert {(r["group"], r["rebalance"]): rebalance_tuple(r) for r in rows} == \
        EXPECTED_REBALANCES
    summary = analyze(spark, raw, str(tmp_path))
    assert {(s["group"], s["protocol"]): summary_tuple(s) for s in summary} == \
        EXPECTED_SUMMARY
    written = spark.read.parquet(str(tmp_path / "summary")).collect()
    assert {(r["group"], r["protocol"]): summary_tuple(r.asDict()) for r in written} == \
        EXPECTED_SUMMARY
    assert spark.read.parquet(str(tmp_path / "rebalances")).count() == 8
    assert (tmp_path / "rebalances.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@spark_only
def test_page_counts_per_window_on_a_hand_built_frame(spark):
    from coterie.spark.jobs.clickstream import page_counts

    minute = 60_000
    base = 1_763_700_000_000 - 1_763_700_000_000 % minute
    clicks = [("u1", "/a", base + 1), ("u2", "/a", base + 59_999), ("u1", "/b", base + 10),
              ("u3", "/a", base + minute), ("u1", "/b", base + 2 * minute + 5)]
    rows = [(json.dumps({"user": u, "page": p, "ts": ts}).encode(),) for u, p, ts in clicks]
    rows.append((b"not json",))
    raw = spark.createDataFrame(rows, "value binary")
    got = {(r["window_start"].timestamp() * 1000, r["page"]): r["count"]
           for r in page_counts(raw, "1 minute").collect()}
    assert got == {(base, "/a"): 2, (base, "/b"): 1, (base + minute, "/a"): 1,
                   (base + 2 * minute, "/b"): 1}


# == end to end on a real broker ========================================================
def produce_clicks(bootstrap: str, topic: str, events: list[dict[str, Any]]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for e in events:
        producer.produce(topic, key=e["page"].encode(), value=json.dumps(e).encode())
    assert producer.flush(30) == 0


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(10)


@spark_only
def test_clickstream_job_end_to_end_with_a_restart(spark, coterie, tmp_path):
    from coterie.spark.jobs.clickstream import start_query, synthetic_clicks

    minute = 60_000
    start = 1_763_700_000_000 - 1_763_700_000_000 % minute
    create_topic(coterie.bootstrap, "clicks", 2)
    first = synthetic_clicks(400, users=20, start_ms=start, span_ms=5 * minute, seed=3)
    produce_clicks(coterie.bootstrap, "clicks", first)
    out, ckpt = tmp_path / "counts", tmp_path / "ckpt"

    def run() -> None:
        query = start_query(spark, coterie.bootstrap, "clicks", str(out), str(ckpt),
                            window="1 minute", watermark="30 seconds",
                            max_offsets_per_trigger=150)
        query.awaitTermination(120)
        assert not query.isActive and query.exception() is None

    def written() -> Counter:
        got: Counter = Counter()
        for r in spark.read.parquet(str(out)).collect():
            got[(int(r["window_start"].timestamp() * 1000), r["page"])] += r["count"]
        return got

    def expected(events: list[dict[str, Any]], watermark_ms: int) -> Counter:
        counts = Counter((e["ts"] - e["ts"] % minute, e["page"]) for e in events)
        return Counter({k: v for k, v in counts.items() if k[0] + minute <= watermark_ms})

    run()
    # Windows the watermark has closed are final, counted exactly; later ones wait.
    watermark = max(e["ts"] for e in first) - 30_000
    after_first = written()
    assert after_first == expected(first, watermark) and after_first
    # More events, later in event time, and a restart from the checkpoint: the windows that
    # close now are added, none is written twice, nothing is lost.
    second = synthetic_clicks(300, users=20, start_ms=start + 5 * minute, span_ms=3 * minute,
                              seed=4)
    produce_clicks(coterie.bootstrap, "clicks", second)
    run()
    watermark = max(e["ts"] for e in second) - 30_000
    assert written() == expected(first + second, watermark)
    keys = [(int(r["window_start"].timestamp() * 1000), r["page"])
            for r in spark.read.parquet(str(out)).collect()]
    assert len(keys) == len(set(keys))


@spark_only
def test_rebalance_analytics_end_to_end_on_a_real_group(spark, coterie_factory, tmp_path):
    from confluent_kafka import Consumer

    from coterie.spark.jobs.rebalance_analytics import analyze, read_events

    broker = coterie_factory(config={"group.initial.rebalance.delay.ms": "200"})
    create_topic(broker.bootstrap, "orders", 4)

    def member() -> Consumer:
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "billing",
                      "partition.assignment.strategy": "range", "session.timeout.ms": 6000,
                      "heartbeat.interval.ms": 300, "enable.auto.commit": False})
        c.subscribe(["orders"])
        return c

    def poll_until(members: list[Consumer], done: Any) -> None:
        deadline = time.monotonic() + 30
        while not done():
            assert time.monotonic() < deadline, "the group did not settle"
            for c in members:
                c.poll(0.1)

    a = member()
    poll_until([a], lambda: len(a.assignment()) == 4)
    b = member()
    poll_until([a, b], lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2)
    b.close()
    poll_until([a], lambda: len(a.assignment()) == 4)
    a.close()  # the last member leaves: a fourth rebalance that ends Empty
    time.sleep(0.5)
    summary = analyze(spark, read_events(spark, broker.bootstrap), str(tmp_path))
    [row] = [s for s in summary if s["group"] == "billing"]
    assert row["protocol"] == "classic"
    assert (row["rebalances"], row["stable_rebalances"]) == (4, 3)
    # Range over 4 partitions: 2 move to B when it joins, and back when it leaves.
    assert row["partitions_moved"] == 4
    assert 0 < row["time_to_stable_avg_ms"] <= row["time_to_stable_max_ms"] < 30_000
    # Eager: every partition is without an owner during each of the two later rebalances.
    assert row["unowned_partition_seconds"] > 0
    assert Path(tmp_path / "rebalances.png").stat().st_size > 1000
