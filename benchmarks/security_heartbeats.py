"""ConsumerGroupHeartbeat throughput over SASL_SSL next to PLAINTEXT, on one broker, in one
run (issue 25, "Measure"); with `--kafka`, the reference Apache Kafka broker the same way in
the same run.

One coterie broker pinned to one core (`--server-core`) with two listeners: PLAINTEXT and
SASL_SSL (SASL/PLAIN; certificates from scripts/make-test-certs, needs openssl). Members
are joined and settled once (benchmarks/heartbeats.py's `join_members`, over PLAINTEXT);
each member then has two connections of its own, one per listener, the SASL_SSL one with
its TLS handshake and authentication done beforehand (a settled consumer's steady state:
what is measured is the per-request cost of TLS, not the handshakes). The same epoll load
generator as benchmarks/heartbeats.py (`drive`, pinned to `--client-core`) keeps C
heartbeats in flight over one listener, then over the other, level by level, `--reps`
times; the best sweep per listener and level is kept. The summary gives SASL_SSL's
heartbeats/s and heartbeats per broker CPU-second as ratios to PLAINTEXT's (the second is
what another process on the machine skews least). Every answer is checked as in
heartbeats.py (no error, the steady-state size, the right correlation id).

With `--kafka` (needs java, and mvn the first time; it fails at once without them) the
reference broker (scripts/reference_kafka.py, Apache Kafka 4.2.1) runs too, pinned to the
same server core (all its threads, as heartbeats.py pins it), with the same two listeners
(TLS from the same server.pem as a PEM keystore, the same SASL/PLAIN user; its controller
and inter-broker listeners stay PLAINTEXT), its own members joined and settled the same
way, the same session timeout. At each level coterie and Kafka take turns (each over
PLAINTEXT, then SASL_SSL), so that other work on the machine hits both alike. The summary
adds Kafka's SASL_SSL / PLAINTEXT ratios and coterie / Kafka over SASL_SSL.

    .venv/bin/python benchmarks/security_heartbeats.py              # about 1.5 minutes
    .venv/bin/python benchmarks/security_heartbeats.py --kafka      # and Kafka, about 4
    .venv/bin/python benchmarks/security_heartbeats.py --levels 8 --reps 1 --duration 2
    .venv/bin/python benchmarks/security_heartbeats.py --kafka --members 100 --levels 8,32 \\
        --reps 1 --duration 3                                       # smoke, with Kafka
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import ssl
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _brokers import (
    SASL_USER,
    coterie_secured_cmd,
    kafka_keystore,
    kafka_secured_settings,
    make_certs,
    require_reference,
)
from heartbeats import (
    BROKER_SETTINGS,
    HOST,
    KAFKA_SETTINGS,
    TOPIC,
    Member,
    Sample,
    Server,
    connect_all,
    create_topic,
    drive,
    free_port,
    join_members,
    load_reference_kafka,
    running,
    steady_answer,
)
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from tests.kafka_raw import RawConnection

LISTENERS = ("PLAINTEXT", "SASL_SSL")


def secured_sockets(port: int, count: int, ca: Path) -> list[ssl.SSLSocket]:
    """`count` connections to the SASL_SSL listener, each through its TLS handshake and
    authenticated as `bench` (SASL/PLAIN), then made non-blocking for the generator."""
    context = ssl.create_default_context(cafile=str(ca))
    user, password = SASL_USER
    out = []
    for _ in range(count):
        conn = RawConnection(HOST, port)
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.sock = context.wrap_socket(conn.sock, server_hostname="localhost")
        assert conn.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == \
            ErrorCode.none
        done = conn.request(SaslAuthenticateRequest(
            auth_bytes=f"\0{user}\0{password}".encode()))
        if done.error_code != ErrorCode.none:
            raise RuntimeError(f"authentication failed: {done}")
        conn.sock.setblocking(False)
        out.append(conn.sock)
    return out


# What the generator needs of one server: it, its members, their sockets per listener and
# the size of the steady-state answer.
Target = tuple[Server, list[Member], dict[str, list[socket.socket]], int]


def _settle(server: Server, ports: dict[str, int], args: argparse.Namespace,
            ca: Path) -> Target:
    """Create the topic, join and settle the members over PLAINTEXT, then give each member
    its connection on either listener."""
    create_topic(f"{HOST}:{ports['PLAINTEXT']}", TOPIC, args.partitions)
    members = join_members(ports["PLAINTEXT"], args.members, args.groups)
    expected = len(steady_answer(members))
    sockets = {"PLAINTEXT": connect_all(ports["PLAINTEXT"], args.members),
               "SASL_SSL": secured_sockets(ports["SASL_SSL"], args.members, ca)}
    print(f"{server.name}: {args.members} members in {args.groups} groups settled",
          file=sys.stderr, flush=True)
    return server, members, sockets, expected


def _start_coterie(stack: contextlib.ExitStack, work: Path, certs: Path, core: int
                   ) -> tuple[Server, dict[str, int]]:
    ports = {name: free_port() for name in LISTENERS}
    cmd = coterie_secured_cmd(work, certs, ports)
    for key, value in BROKER_SETTINGS.items():
        cmd += ["--override", f"{key}={value}"]
    server = stack.enter_context(running("coterie", cmd, core, work / "coterie.log",
                                         ports["PLAINTEXT"]))
    return server, ports


def _start_kafka(stack: contextlib.ExitStack, work: Path, certs: Path, core: int
                 ) -> tuple[Server, dict[str, int]]:
    ports = {name: free_port() for name in LISTENERS}
    controller = free_port()
    settings = {**KAFKA_SETTINGS, **kafka_secured_settings(
        ports, controller, kafka_keystore(certs / "server.pem", work))}
    cmd = load_reference_kafka().prepare(ports["PLAINTEXT"], work / "kafka-data",
                                         controller_port=controller, overrides=settings)
    server = stack.enter_context(running("kafka", cmd, core, work / "kafka.log",
                                         ports["PLAINTEXT"]))
    return server, ports


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=200)
    parser.add_argument("--groups", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--levels", default="8,32,64,128")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)
    parser.add_argument("--kafka", action="store_true",
                        help="also measure the reference Apache Kafka broker over the same "
                             "listeners, pinned to the same core, in turns with coterie "
                             "(needs java; mvn the first time)")
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",")]
    if max(levels) > args.members:
        parser.error("every concurrency level must be at most --members")
    if args.kafka:
        require_reference()
    os.sched_setaffinity(0, {args.client_core})
    best: dict[tuple[str, str, int], Sample] = {}
    with tempfile.TemporaryDirectory(prefix="coterie-sec-heartbeats-") as tmp, \
            contextlib.ExitStack() as stack:
        work = Path(tmp)
        certs = work / "certs"
        make_certs(certs)
        ca = certs / "ca.pem"
        targets = [_settle(*_start_coterie(stack, work, certs, args.server_core), args, ca)]
        if args.kafka:
            targets.append(_settle(*_start_kafka(stack, work, certs, args.server_core),
                                   args, ca))
        for rep in range(args.reps):
            for level in levels:
                for server, members, sockets, expected in targets:
                    for name in LISTENERS:
                        s = drive(Server(f"{server.name} {name}", server.proc, server.port),
                                  members, sockets[name], level, expected, args.warmup,
                                  args.duration)
                        if s.bad:
                            raise RuntimeError(f"{s.server}: {s.bad} unexpected answers")
                        print(f"  rep {rep + 1} C={level:<4} {s.server:18} "
                              f"{s.throughput:8,.0f}/s p99 {s.p99_ms:6.2f} ms, broker CPU "
                              f"{s.server_cpu:.0%}", file=sys.stderr, flush=True)
                        key = (server.name, name, level)
                        if key not in best or s.throughput > best[key].throughput:
                            best[key] = s
        for _, _, sockets, _ in targets:
            for socks in sockets.values():
                for sock in socks:
                    sock.close()
    servers = [target[0].name for target in targets]
    print(f"{args.members} members in {args.groups} groups per server, best of {args.reps} "
          f"sweeps, {args.duration:g} s windows\n")
    print("| concurrency | server | listener | heartbeats/s | p50 ms | p99 ms | broker CPU | "
          "heartbeats per broker CPU-s | SASL_SSL / PLAINTEXT (per s, per CPU-s) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    # per server: [(SASL_SSL / PLAINTEXT per s, per CPU-s) for each level]
    ratios: dict[str, list[tuple[float, float]]] = {name: [] for name in servers}
    for level in levels:
        for server in servers:
            p, q = best[(server, "PLAINTEXT", level)], best[(server, "SASL_SSL", level)]
            ratios[server].append((q.throughput / p.throughput, q.per_cpu / p.per_cpu))
            for name, s in (("PLAINTEXT", p), ("SASL_SSL", q)):
                ratio = (f"{ratios[server][-1][0]:.2f}, {ratios[server][-1][1]:.2f}"
                         if s is q else "")
                print(f"| {level} | {server} | {name} | {s.throughput:,.0f} | {s.p50_ms:.2f} | "
                      f"{s.p99_ms:.2f} | {s.server_cpu:.0%} | {s.per_cpu:,.0f} | {ratio} |")
    print()
    for server in servers:
        print(f"{server}: median over the levels SASL_SSL / PLAINTEXT = "
              f"{statistics.median(r[0] for r in ratios[server]):.2f} heartbeats/s, "
              f"{statistics.median(r[1] for r in ratios[server]):.2f} heartbeats per broker "
              f"CPU-s")
    if args.kafka:
        for name in LISTENERS:
            per_s = [best[("coterie", name, lv)].throughput / best[("kafka", name, lv)].throughput
                     for lv in levels]
            per_cpu = [best[("coterie", name, lv)].per_cpu / best[("kafka", name, lv)].per_cpu
                       for lv in levels]
            print(f"coterie / kafka over {name}, median over the levels: "
                  f"{statistics.median(per_s):.2f} heartbeats/s, "
                  f"{statistics.median(per_cpu):.2f} heartbeats per broker CPU-s "
                  f"(per level: {', '.join(f'{x:.2f}' for x in per_s)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
