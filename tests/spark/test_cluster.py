"""The `coterie` Spark source and sink against a three-broker cluster over PostgreSQL (issue
24): partitions led by different brokers, and a write job that goes on through a broker's
kill -9 (its partitions move; the job finishes, and everything it wrote is read back)."""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")

from tests.cluster.test_cluster_clients import create, wait_for_leaders

pytestmark = pytest.mark.timeout(300)


def test_a_spark_job_writes_and_reads_through_a_brokers_kill(spark, coterie_cluster) -> None:
    cluster = coterie_cluster
    create(cluster, "spark-cluster")
    wait_for_leaders(cluster, "spark-cluster", {1, 2, 3})
    rows = [(f"k{i}", f"v{i}".encode()) for i in range(20_000)]
    df = spark.createDataFrame(rows, "key string, value binary").repartition(4)
    # The job runs on this thread (the `coterie` format is registered with the session
    # here); the kill comes from a timer while its tasks produce.
    killer = threading.Timer(1.0, cluster.broker(2).kill9)
    started = time.monotonic()
    killer.start()
    try:
        (df.write.format("coterie").option("bootstrap.servers", cluster.bootstrap)
         .option("topic", "spark-cluster").mode("append").save())
    finally:
        killer.join()
    assert cluster.broker(2).proc.poll() is not None
    assert time.monotonic() - started > 1.0  # the broker died while the job ran
    back = (spark.read.format("coterie").option("bootstrap.servers", cluster.bootstrap)
            .option("subscribe", "spark-cluster").load().collect())
    assert {(r.key.decode(), r.value) for r in back} == set(rows)
    assert len({r.partition for r in back}) == 6
