"""Stopping and starting a broker that holds many partitions.

Why: an operator restarts a broker to upgrade it or change a static setting, and every
second of a stop or a start is a second no client is served. A broker holding thousands of
partitions must close and open each of them; what that costs per partition is what this
measures.

What runs: a coterie broker (`python -m coterie serve`, defaults) on a free loopback port
with a temporary data dir. `--topics` topics of `--partitions` partitions each are created
(default 100 x 100: 10,000 partitions), and one record is produced to every partition
(confluent-kafka, acks=all), so every partition has written data when the broker stops.
Then, in order:

1. clean stop: SIGTERM, time until the process has exited;
2. start after the clean stop: time from the process start until a Metadata request for all
   topics answers with every partition;
3. stop again (nothing written since the start) and start again;
4. kill -9, then start: the start after a crash, which recovers every partition;

and finally every partition is read back (its one record must be there). Printed: a table
of the times, and per-partition figures (ms per 1,000 partitions).

    .venv/bin/python benchmarks/restart.py                        # 10,000 partitions, ~2 min
    .venv/bin/python benchmarks/restart.py --topics 20 --partitions 50
    .venv/bin/python benchmarks/restart.py --tree /tmp/old   # another checkout's coterie

The disk's speed varies from minute to minute on a shared machine: compare two trees by
alternating runs of each (`--tree`), not against figures from another day.

`--in-process TREE [TREE ...]` times the log layer alone, without a broker or clients: for
each tree in turn (`--rounds` times), a subprocess running that tree's coterie opens a
LogManager on a fresh directory, creates the partitions, appends one record to each, then
times close (every partition written), open, and close again (nothing written).

    .venv/bin/python benchmarks/restart.py --in-process /tmp/old . --rounds 2
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _brokers import HOST, REPO_ROOT, free_port
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def start(tree: Path, data_dir: Path, port: int, log_path: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "coterie", "serve", "--host", HOST, "--port", str(port),
           "--data-dir", str(data_dir)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(tree),
                                                       os.environ.get("PYTHONPATH")]))}
    with open(log_path, "ab") as log:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env)


def wait_ready(bootstrap: str, proc: subprocess.Popen, topics: list[str],
               partitions: int, timeout: float = 600.0) -> float:
    """Seconds from now until every topic's partitions are in a Metadata answer."""
    began = time.monotonic()
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    while time.monotonic() - began < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"the broker exited with {proc.returncode}")
        try:
            meta = admin.list_topics(timeout=2)
        except Exception:  # not listening yet
            time.sleep(0.02)
            continue
        if all(t in meta.topics and len(meta.topics[t].partitions) == partitions
               for t in topics):
            return time.monotonic() - began
        time.sleep(0.02)
    raise RuntimeError("the broker did not come up in time")


def stop(proc: subprocess.Popen, sig: int) -> float:
    began = time.monotonic()
    proc.send_signal(sig)
    proc.wait(600)
    return time.monotonic() - began


IN_PROCESS = """
import shutil, sys, tempfile, time
from pathlib import Path
from coterie.log.manager import LogManager
from tests.unit.log.batches import make_batch
topics, partitions = int(sys.argv[1]), int(sys.argv[2])
d = Path(tempfile.mkdtemp(prefix="coterie-restart-log-"))
now = int(time.time() * 1000)
m = LogManager.open(d, {}, now)
for i in range(topics):
    m.create_topic(f"t{i:04d}", partitions, {}, now)
    for p in range(partitions):
        m.partition(f"t{i:04d}", p).append(make_batch(1), 0, now)
t = time.perf_counter(); m.close(); written = time.perf_counter() - t
t = time.perf_counter(); m = LogManager.open(d, {}, now); opened = time.perf_counter() - t
t = time.perf_counter(); m.close(); idle = time.perf_counter() - t
shutil.rmtree(d)
print(f"{written:.2f} {opened:.2f} {idle:.2f}")
"""


def in_process(trees: list[Path], topics: int, partitions: int, rounds: int) -> None:
    total = topics * partitions
    print(f"log layer alone, {total:,} partitions; load average before: {_load()}")
    print("| round | tree | close, every partition written (s) | open (s) "
          "| close, nothing written (s) |")
    print("| --- | --- | ---: | ---: | ---: |")
    for r in range(1, rounds + 1):
        for tree in trees:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                [str(tree.resolve()), str(REPO_ROOT)])}
            out = subprocess.run([sys.executable, "-c", IN_PROCESS, str(topics),
                                  str(partitions)], env=env, capture_output=True, text=True,
                                 check=True, timeout=1800).stdout.split()
            print(f"| {r} | {tree} | {out[0]} | {out[1]} | {out[2]} |", flush=True)
    print(f"load average after: {_load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--tree", type=Path, default=REPO_ROOT,
                        help="the source tree whose coterie runs (default: this one)")
    parser.add_argument("--in-process", type=Path, nargs="+", metavar="TREE",
                        help="time the log layer alone for each of these trees")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    if args.in_process:
        in_process(args.in_process, args.topics, args.partitions, args.rounds)
        return
    tree = args.tree.resolve()
    total = args.topics * args.partitions
    work = Path(tempfile.mkdtemp(prefix="coterie-restart-"))
    data_dir, log_path = work / "data", work / "coterie.log"
    data_dir.mkdir()
    port = free_port()
    bootstrap = f"{HOST}:{port}"
    topics = [f"t{i:04d}" for i in range(args.topics)]
    print(f"coterie from {tree}")
    print(f"{args.topics} topics x {args.partitions} partitions = {total:,} partitions; "
          f"load average before: {_load()}")

    t0 = time.monotonic()
    proc = start(tree, data_dir, port, log_path)
    wait_ready(bootstrap, proc, [], 0)
    first_start = time.monotonic() - t0
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    t0 = time.monotonic()
    for i in range(0, len(topics), 20):
        batch = [NewTopic(t, args.partitions, 1) for t in topics[i:i + 20]]
        for future in admin.create_topics(batch, operation_timeout=120).values():
            future.result(300)
    wait_ready(bootstrap, proc, topics, args.partitions)
    created = time.monotonic() - t0
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "log_level": 0})
    t0 = time.monotonic()
    for t in topics:
        for p in range(args.partitions):
            producer.produce(t, value=f"{t}/{p}".encode(), partition=p)
        producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("records left unacknowledged")
    produced = time.monotonic() - t0

    rows: list[tuple[str, float]] = [("start (empty data dir)", first_start),
                                     (f"create {total:,} partitions", created),
                                     ("produce one record to each", produced)]
    rows.append(("clean stop (SIGTERM), partitions written", stop(proc, signal.SIGTERM)))
    t0 = time.monotonic()
    proc = start(tree, data_dir, port, log_path)
    wait_ready(bootstrap, proc, topics, args.partitions)
    rows.append(("start after the clean stop", time.monotonic() - t0))
    rows.append(("clean stop, nothing written since the start", stop(proc, signal.SIGTERM)))
    t0 = time.monotonic()
    proc = start(tree, data_dir, port, log_path)
    wait_ready(bootstrap, proc, topics, args.partitions)
    rows.append(("start after that stop", time.monotonic() - t0))
    rows.append(("kill -9", stop(proc, signal.SIGKILL)))
    t0 = time.monotonic()
    proc = start(tree, data_dir, port, log_path)
    wait_ready(bootstrap, proc, topics, args.partitions)
    rows.append(("start after kill -9 (recovery)", time.monotonic() - t0))

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "restart-check",
                         "enable.auto.commit": False, "log_level": 0})
    consumer.assign([TopicPartition(t, p, 0) for t in topics for p in range(args.partitions)])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 300
    while len(seen) < total and time.monotonic() < deadline:
        for msg in consumer.consume(1000, 1.0):
            if msg.error() is None:
                seen.add(msg.value())
    consumer.close()
    rows.append(("shut down at the end (SIGTERM)", stop(proc, signal.SIGTERM)))

    print("| step | seconds | ms per 1,000 partitions |")
    print("| --- | ---: | ---: |")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.2f} | {seconds * 1000 / total * 1000:.0f} |")
    print(f"records read back: {len(seen):,} of {total:,}"
          + ("" if len(seen) == total else "  <-- RECORDS MISSING"))
    print(f"load average after: {_load()}")
    print(f"work dir (broker log): {work}")
    if len(seen) != total:
        sys.exit(1)


if __name__ == "__main__":
    main()
