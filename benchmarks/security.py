"""Produce and consume throughput over each kind of listener of one coterie broker, side by
side in one run (issue 25, "Measure"): PLAINTEXT, SSL and SASL_SSL (PLAIN); with `--kafka`,
the reference Apache Kafka broker over the same three listeners in the same run.

One broker, one data directory, three listeners; certificates from scripts/make-test-certs
(needs openssl). For each listener in turn, and again for `--reps` rounds (the best of each
is kept, as other work on the machine only slows a round down), confluent-kafka produces
`--records` records of 1 KiB to a fresh one-partition topic (acks=1, linger.ms=5,
batch.size=256 KiB, no compression; the clock runs until every delivery report is in), then
consumes them back from offset 0 (until the last arrives). Before the rounds,
`--warmup-records` go each way over every listener of every broker, not counted (a JVM's
first seconds of load run code it has not compiled yet). The broker's CPU seconds per MB
are reported too: over TLS the broker encrypts what it sends (no sendfile) and decrypts
what it reads. The summary gives each listener's MB/s as a ratio to the same server's
PLAINTEXT.

With `--kafka` (needs java, and mvn the first time; it fails at once without them) the
reference broker (scripts/reference_kafka.py, Apache Kafka 4.2.1) runs next to coterie with
the same listeners: TLS from the same server.pem (a PEM keystore), SASL/PLAIN with the same
user on SASL_SSL; its controller and inter-broker listeners stay PLAINTEXT. Both brokers
run for the whole run and take turns listener by listener (coterie, then Kafka, over
PLAINTEXT, then over SSL, ...) so that other work on the machine hits both alike; the
summary adds coterie / Kafka per listener, over SASL_SSL above all.

    .venv/bin/python benchmarks/security.py                     # about a minute
    .venv/bin/python benchmarks/security.py --kafka             # and Kafka, about 3 minutes
    .venv/bin/python benchmarks/security.py --records 20000 --reps 1   # smoke
    .venv/bin/python benchmarks/security.py --kafka --records 50000 --reps 1   # smoke
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _brokers import (
    HOST,
    SASL_USER,
    consume_timed,
    coterie_secured_cmd,
    cpu_seconds,
    create_topic,
    free_port,
    kafka_keystore,
    kafka_secured_settings,
    load_reference_kafka,
    make_certs,
    produce_timed,
    require_reference,
    serving,
)

LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
# (produce MB/s, consume MB/s, broker CPU s/MB producing, broker CPU s/MB consuming)
Row = tuple[float, float, float, float]


def _produce(conf: dict[str, str], topic: str, records: int, value: bytes) -> float:
    return produce_timed({**conf, "acks": 1, "linger.ms": 5, "batch.size": 256 * 1024},
                         topic, records, value)


def _consume(conf: dict[str, str], topic: str, records: int) -> float:
    return consume_timed(conf, topic, records)


def _client_confs(ports: dict[str, int], ca: Path) -> dict[str, dict[str, str]]:
    """The client settings per listener: the same for either broker but for the ports."""
    tls = {"ssl.ca.location": str(ca)}
    return {
        "PLAINTEXT": {"bootstrap.servers": f"{HOST}:{ports['PLAINTEXT']}"},
        "SSL": {"bootstrap.servers": f"{HOST}:{ports['SSL']}",
                "security.protocol": "SSL", **tls},
        "SASL_SSL": {"bootstrap.servers": f"{HOST}:{ports['SASL_SSL']}",
                     "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                     "sasl.username": SASL_USER[0], "sasl.password": SASL_USER[1], **tls},
    }


def _start_coterie(stack: contextlib.ExitStack, work: Path, certs: Path
                   ) -> tuple[subprocess.Popen, dict[str, int]]:
    ports = {name: free_port() for name in LISTENERS}
    cmd = coterie_secured_cmd(work, certs, ports)
    proc = stack.enter_context(serving("coterie", cmd, work / "coterie.log",
                                       f"{HOST}:{ports['PLAINTEXT']}"))
    return proc, ports


def _start_kafka(stack: contextlib.ExitStack, work: Path, certs: Path
                 ) -> tuple[subprocess.Popen, dict[str, int]]:
    ports = {name: free_port() for name in LISTENERS}
    controller = free_port()
    settings = kafka_secured_settings(ports, controller,
                                      kafka_keystore(certs / "server.pem", work))
    cmd = load_reference_kafka().prepare(ports["PLAINTEXT"], work / "kafka-data",
                                         controller_port=controller, overrides=settings)
    proc = stack.enter_context(serving("kafka", cmd, work / "kafka.log",
                                       f"{HOST}:{ports['PLAINTEXT']}"))
    return proc, ports


def _measure(server: str, proc: subprocess.Popen, ports: dict[str, int], name: str,
             conf: dict[str, str], records: int, value: bytes, note: str = "") -> Row:
    """One round over one listener of one broker: a fresh topic written, then read back."""
    mb = records * len(value) / 1e6
    topic = f"bench-{name.lower()}-{uuid.uuid4().hex[:6]}"
    create_topic(f"{HOST}:{ports['PLAINTEXT']}", topic, 1)
    cpu0 = cpu_seconds(proc.pid)
    produce_s = _produce(conf, topic, records, value)
    cpu1 = cpu_seconds(proc.pid)
    consume_s = _consume(conf, topic, records)
    cpu2 = cpu_seconds(proc.pid)
    row = (mb / produce_s, mb / consume_s, (cpu1 - cpu0) / mb, (cpu2 - cpu1) / mb)
    print(f"  {server:7} {name:9} produce {row[0]:7.1f} MB/s ({row[2] * 1000:.1f} ms "
          f"broker CPU per MB), consume {row[1]:7.1f} MB/s ({row[3] * 1000:.1f} ms per MB)"
          f"{note}", file=sys.stderr, flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--warmup-records", type=int, default=20_000,
                        help="records written and read over every listener of every broker "
                             "once before the rounds, not counted (default 20000)")
    parser.add_argument("--kafka", action="store_true",
                        help="also measure the reference Apache Kafka broker over the same "
                             "listeners, in turns with coterie (needs java; mvn the first "
                             "time)")
    args = parser.parse_args(argv)
    if args.kafka:
        require_reference()
    value = os.urandom(1024)
    best: dict[tuple[str, str], Row] = {}
    with tempfile.TemporaryDirectory(prefix="coterie-security-") as tmp, \
            contextlib.ExitStack() as stack:
        work = Path(tmp)
        certs = work / "certs"
        make_certs(certs)
        servers = {"coterie": _start_coterie(stack, work, certs)}
        if args.kafka:
            servers["kafka"] = _start_kafka(stack, work, certs)
        # Unmeasured: the JVM compiles its hot paths in its first seconds of load, and either
        # broker's first TLS connections load what TLS needs; a first round would time that.
        if args.warmup_records:
            for name in LISTENERS:
                for server, (proc, ports) in servers.items():
                    conf = _client_confs(ports, certs / "ca.pem")[name]
                    _measure(server, proc, ports, name, conf, args.warmup_records,
                             value, note=" (warm-up, not counted)")
        for _ in range(args.reps):
            for name in LISTENERS:
                for server, (proc, ports) in servers.items():
                    conf = _client_confs(ports, certs / "ca.pem")[name]
                    row = _measure(server, proc, ports, name, conf, args.records, value)
                    old = best.get((server, name))
                    best[(server, name)] = row if old is None else (
                        max(old[0], row[0]), max(old[1], row[1]), min(old[2], row[2]),
                        min(old[3], row[3]))
    print(f"{args.records:,} records of 1 KiB, best of {args.reps} rounds\n")
    print("| server | listener | produce MB/s | consume MB/s | broker CPU ms/MB produce | "
          "broker CPU ms/MB consume | / PLAINTEXT (produce, consume) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for (server, name), row in sorted(best.items(), key=lambda item: (
            list(servers).index(item[0][0]), LISTENERS.index(item[0][1]))):
        base = best[(server, "PLAINTEXT")]
        print(f"| {server} | {name} | {row[0]:.1f} | {row[1]:.1f} | {row[2] * 1000:.1f} | "
              f"{row[3] * 1000:.1f} | {row[0] / base[0]:.2f}, {row[1] / base[1]:.2f} |")
    if args.kafka:
        print("\n| listener | coterie / Kafka produce MB/s | coterie / Kafka consume MB/s | "
              "coterie / Kafka broker CPU per MB (produce, consume) |")
        print("| --- | --- | --- | --- |")
        for name in LISTENERS:
            c, k = best[("coterie", name)], best[("kafka", name)]
            print(f"| {name} | {c[0] / k[0]:.2f} | {c[1] / k[1]:.2f} | "
                  f"{c[2] / k[2]:.2f}, {c[3] / k[3]:.2f} |")
        c, k = best[("coterie", "SASL_SSL")], best[("kafka", "SASL_SSL")]
        cp, kp = best[("coterie", "PLAINTEXT")], best[("kafka", "PLAINTEXT")]
        print(f"\nSASL_SSL / PLAINTEXT: coterie {c[0] / cp[0]:.2f} produce, "
              f"{c[1] / cp[1]:.2f} consume; Kafka {k[0] / kp[0]:.2f} produce, "
              f"{k[1] / kp[1]:.2f} consume")
        print(f"coterie / Kafka over SASL_SSL: {c[0] / k[0]:.2f} produce, "
              f"{c[1] / k[1]:.2f} consume")
    return 0


if __name__ == "__main__":
    sys.exit(main())
