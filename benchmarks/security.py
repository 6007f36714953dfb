"""Produce and consume throughput over each kind of listener of one coterie broker, side by
side in one run (issue 25, "Measure"): PLAINTEXT, SSL and SASL_SSL (PLAIN).

One broker, one data directory, three listeners; certificates from scripts/make-test-certs
(needs openssl). For each listener in turn, and again for `--reps` rounds (the best of each
is kept, as other work on the machine only slows a round down), confluent-kafka produces
`--records` records of 1 KiB to a fresh one-partition topic (acks=1, linger.ms=5,
batch.size=256 KiB, no compression; the clock runs until every delivery report is in), then
consumes them back from offset 0 (until the last arrives). The broker's CPU seconds per MB
are reported too: over TLS the broker encrypts what it sends (no sendfile) and decrypts
what it reads. The summary gives each listener's MB/s as a ratio to PLAINTEXT's.

    .venv/bin/python benchmarks/security.py                     # about a minute
    .venv/bin/python benchmarks/security.py --records 20000 --reps 1   # smoke
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _brokers import (
    HOST,
    REPO_ROOT,
    consume_timed,
    cpu_seconds,
    create_topic,
    free_port,
    produce_timed,
    wait_until_serving,
)

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_bench="bench-secret";')


def _produce(conf: dict[str, str], topic: str, records: int, value: bytes) -> float:
    return produce_timed({**conf, "acks": 1, "linger.ms": 5, "batch.size": 256 * 1024},
                         topic, records, value)


def _consume(conf: dict[str, str], topic: str, records: int) -> float:
    return consume_timed(conf, topic, records)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    value = os.urandom(1024)
    mb = args.records * len(value) / 1e6
    with tempfile.TemporaryDirectory(prefix="coterie-security-") as tmp:
        work = Path(tmp)
        certs = work / "certs"
        subprocess.run([str(REPO_ROOT / "scripts" / "make-test-certs"), str(certs)],
                       check=True)
        ports = {"PLAINTEXT": free_port(), "SSL": free_port(), "SASL_SSL": free_port()}
        listeners = ",".join(f"{name}://{HOST}:{port}" for name, port in ports.items())
        cmd = [sys.executable, "-m", "coterie", "serve", "--data-dir", str(work / "data"),
               "--override", f"listeners={listeners}",
               "--override", f"ssl.keystore.location={certs / 'server.pem'}",
               "--override", "sasl.enabled.mechanisms=PLAIN",
               "--override", f"sasl.jaas.config={JAAS}"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO_ROOT)}
        log_path = work / "coterie.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            wait_until_serving(f"{HOST}:{ports['PLAINTEXT']}", proc, log_path,
                               metadata_probe=False)
            tls = {"ssl.ca.location": str(certs / "ca.pem")}
            confs = {
                "PLAINTEXT": {"bootstrap.servers": f"{HOST}:{ports['PLAINTEXT']}"},
                "SSL": {"bootstrap.servers": f"{HOST}:{ports['SSL']}",
                        "security.protocol": "SSL", **tls},
                "SASL_SSL": {"bootstrap.servers": f"{HOST}:{ports['SASL_SSL']}",
                             "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                             "sasl.username": "bench", "sasl.password": "bench-secret",
                             **tls},
            }
            best: dict[str, tuple[float, float, float, float]] = {}
            for _ in range(args.reps):
                for name, conf in confs.items():
                    topic = f"bench-{name.lower()}-{uuid.uuid4().hex[:6]}"
                    create_topic(f"{HOST}:{ports['PLAINTEXT']}", topic, 1)
                    cpu0 = cpu_seconds(proc.pid)
                    produce_s = _produce(conf, topic, args.records, value)
                    cpu1 = cpu_seconds(proc.pid)
                    consume_s = _consume(conf, topic, args.records)
                    cpu2 = cpu_seconds(proc.pid)
                    row = (mb / produce_s, mb / consume_s, (cpu1 - cpu0) / mb,
                           (cpu2 - cpu1) / mb)
                    print(f"  {name:9} produce {row[0]:7.1f} MB/s ({row[2] * 1000:.1f} ms "
                          f"broker CPU per MB), consume {row[1]:7.1f} MB/s "
                          f"({row[3] * 1000:.1f} ms per MB)", file=sys.stderr, flush=True)
                    old = best.get(name)
                    best[name] = row if old is None else (
                        max(old[0], row[0]), max(old[1], row[1]), min(old[2], row[2]),
                        min(old[3], row[3]))
        finally:
            proc.terminate()
            proc.wait(30)
    base = best["PLAINTEXT"]
    print(f"{args.records:,} records of 1 KiB, best of {args.reps} rounds\n")
    print("| listener | produce MB/s | consume MB/s | broker CPU ms/MB produce | "
          "broker CPU ms/MB consume | / PLAINTEXT (produce, consume) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, row in best.items():
        print(f"| {name} | {row[0]:.1f} | {row[1]:.1f} | {row[2] * 1000:.1f} | "
              f"{row[3] * 1000:.1f} | {row[0] / base[0]:.2f}, {row[1] / base[1]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
