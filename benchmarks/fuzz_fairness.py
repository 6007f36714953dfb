"""Healthy heartbeats through a long wire fuzz (issue 23).

A coterie broker runs on a free loopback port. The two healthy members of
benchmarks/_probes.py heartbeat every 50 ms the whole time, on their own connections and
threads of this process. Beside them, each in a process of its own:

* **the fuzzer** sends, one connection per frame, mutated frames of every advertised API and
  version and well-formed requests with any field values (tests/wire_requests.py, whose
  strings now and then run past an int16 length), and every 50 frames one of issue 23's
  shapes: a Produce v10 whose transactional id is 100,000 bytes long, a Produce v12 of 400
  partitions under an id of 32,000 characters, a DescribeTransactions v0 of 12 MB of such
  ids, an InitProducerId v4 with a 40,000-byte id, a DescribeConfigs v1 of a 32,760-character
  topic name;
* **the dribblers**: 200 connections, each announcing a frame of 1 MB and sending it a byte
  per connection at a time, round after round, until the run ends; then they close.

Reported: the probes' heartbeat latency p50 / p99 / max and the heartbeats answered with an
error or not at all (a timeout of 5 s); the frames the fuzzer sent and how many connections it
saw closed; the broker's RSS before, at its highest, and 3 s after the dribblers closed.
Target: p99 < 100 ms, no error, no timeout.

    .venv/bin/python benchmarks/fuzz_fairness.py                 # six minutes, as in the issue
    .venv/bin/python benchmarks/fuzz_fairness.py --seconds 60
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import multiprocessing
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _brokers import create_topic, rss_kib, run_broker_process  # noqa: E402
from _probes import PROBE_SETTINGS, HeartbeatProbes  # noqa: E402

TOPIC = "fuzz-probe"
BROKER_SETTINGS = {**PROBE_SETTINGS, "max.connections.per.ip": "100000"}


# == the fuzzer ===============================================================================
def _issue_shapes() -> list[bytes]:
    from kio.records.schema import NewRecordBatch, Record
    from kio.records.writers import write_new_batch
    from kio.schema.describe_configs.v1.request import (
        DescribeConfigsRequest,
        DescribeConfigsResource,
    )
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
    from kio.schema.produce.v10.request import PartitionProduceData as P10
    from kio.schema.produce.v10.request import ProduceRequest as Produce10
    from kio.schema.produce.v10.request import TopicProduceData as T10
    from kio.schema.produce.v12.request import PartitionProduceData as P12
    from kio.schema.produce.v12.request import ProduceRequest as Produce12
    from kio.schema.produce.v12.request import TopicProduceData as T12

    from tests.wire_requests import frame_of

    ts = datetime.datetime.fromtimestamp(1_700_000_000, datetime.UTC)
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(producer_id=7, producer_epoch=0, base_sequence=0,
                                        attributes=16, records=(Record(
                                            attributes=0, timestamp=ts, offset=0, key=b"k",
                                            value=b"v", headers=()),)))
    batch = buf.getvalue()
    long_ok = "y" * 32_000
    timeout = datetime.timedelta(seconds=5)
    return [frame_of(r) for r in (
        Produce10(transactional_id="x" * 100_000, acks=-1, timeout=timeout, topic_data=(
            T10(name=TOPIC, partition_data=(P10(index=0, records=os.urandom(30_000)),)),)),
        Produce12(transactional_id=long_ok, acks=-1, timeout=timeout, topic_data=(
            T12(name=TOPIC, partition_data=tuple(P12(index=i % 4, records=batch)
                                                 for i in range(400))),)),
        DescribeTransactionsRequest(transactional_ids=tuple(
            f"{i:04d}{long_ok[4:]}" for i in range(375))),
        InitProducerIdRequest(transactional_id="z" * 40_000,
                              transaction_timeout=datetime.timedelta(seconds=60),
                              producer_id=-1, producer_epoch=-1),
        DescribeConfigsRequest(resources=(DescribeConfigsResource(
            resource_type=2, resource_name="t" * 32_760, configuration_keys=None),),
            include_synonyms=False),
    )]


def _exchange(host: str, port: int, frame: bytes) -> bool:
    """Send one frame on a new connection and read what comes within 0.3 s; False if the
    broker closed the connection."""
    with socket.create_connection((host, port), timeout=10) as s:
        with contextlib.suppress(OSError):
            s.sendall(frame)
        s.settimeout(0.3)
        try:
            return bool(s.recv(65536))
        except TimeoutError:
            return True
        except OSError:
            return False


def _fuzz(host: str, port: int, stop: multiprocessing.Event,
          out: multiprocessing.Queue) -> None:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    from tests.wire_requests import frame_of, mutated_frames, requests

    shapes = _issue_shapes()
    counts = {"frames": 0, "closed": 0, "issue shapes": 0}

    class Done(Exception):
        pass

    @settings(max_examples=10**9, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.one_of(mutated_frames(), requests().map(lambda kv: frame_of(kv[2]))))
    def send(frame: bytes) -> None:
        if stop.is_set():
            raise Done
        counts["frames"] += 1
        if counts["frames"] % 50 == 0:
            frame = shapes[counts["issue shapes"] % len(shapes)]
            counts["issue shapes"] += 1
        if not _exchange(host, port, frame):
            counts["closed"] += 1

    try:
        send()
    except Done:
        pass
    except Exception as e:  # reported, not raised
        out.put(f"fuzzer failed: {type(e).__name__}: {e}")
        return
    out.put(f"{counts['frames']} frames ({counts['issue shapes']} of issue 23's shapes), "
            f"{counts['closed']} connections closed by the broker")


# == the dribblers ============================================================================
def _dribble(host: str, port: int, count: int, stop: multiprocessing.Event,
             out: multiprocessing.Queue) -> None:
    socks = []
    for _ in range(count):
        s = socket.create_connection((host, port), timeout=5)
        s.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            s.send((1 << 20).to_bytes(4, "big") + b"\x00\x12\x00\x03")
        socks.append(s)
    sent = 0
    while not stop.is_set():
        for s in socks:
            with contextlib.suppress(BlockingIOError):
                sent += s.send(b"\x01")
        time.sleep(0.01)
    out.put(f"{count} connections sent {sent} bytes a byte at a time")
    time.sleep(0.5)
    for s in socks:
        s.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=360.0)
    parser.add_argument("--dribblers", type=int, default=200)
    parser.add_argument("--every", type=float, default=0.05)
    args = parser.parse_args()
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="coterie-fuzz-") as tmp, \
            run_broker_process("coterie", Path(tmp), BROKER_SETTINGS) as (bootstrap, proc):
        host, port_s = bootstrap.rsplit(":", 1)
        port = int(port_s)
        create_topic(bootstrap, TOPIC, 4)
        rss_before = rss_kib(proc.pid)
        peak = [rss_before]
        watching = threading.Event()

        def watch() -> None:
            while not watching.is_set():
                peak[0] = max(peak[0], rss_kib(proc.pid))
                time.sleep(0.2)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        with HeartbeatProbes(host, port, TOPIC, args.every) as probes:
            stop, out = ctx.Event(), ctx.Queue()
            workers = [ctx.Process(target=_fuzz, args=(host, port, stop, out)),
                       ctx.Process(target=_dribble,
                                   args=(host, port, args.dribblers, stop, out))]
            probes.start_window()
            for w in workers:
                w.start()
            time.sleep(args.seconds)
            stop.set()
            notes = []
            for w in workers:
                w.join(120)
                if w.is_alive():
                    w.kill()
            while not out.empty():
                notes.append(out.get())
            time.sleep(3.0)
            result = probes.end_window("fuzz", "; ".join(notes))
        watching.set()
        watcher.join(5)
        rss_after = rss_kib(proc.pid)
        alive = proc.poll() is None
    timeouts = sum(1 for e in result["errors"] if e.startswith("connection"))
    print(f"fuzz for {args.seconds:.0f} s: {result['note']}")
    print(f"heartbeats {result['n']}  p50 {result['p50']:.1f} ms  p99 {result['p99']:.1f} ms  "
          f"max {result['max']:.1f} ms  errors {len(result['errors']) - timeouts}  "
          f"lost connections {timeouts}  ({', '.join(sorted(set(result['errors']))) or '-'})")
    print(f"broker RSS: {rss_before / 1024:.0f} MiB before, {peak[0] / 1024:.0f} MiB at most, "
          f"{rss_after / 1024:.0f} MiB 3 s after the dribblers closed; broker alive: {alive}")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
