"""ConsumerGroupHeartbeat throughput over SASL_SSL next to PLAINTEXT, on one broker, in one
run (issue 25, "Measure").

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

    .venv/bin/python benchmarks/security_heartbeats.py              # about 1.5 minutes
    .venv/bin/python benchmarks/security_heartbeats.py --levels 8 --reps 1 --duration 2
"""

from __future__ import annotations

import argparse
import os
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from heartbeats import (
    BROKER_SETTINGS,
    HOST,
    REPO_ROOT,
    TOPIC,
    Sample,
    Server,
    connect_all,
    create_topic,
    drive,
    free_port,
    join_members,
    running,
    steady_answer,
)
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from tests.kafka_raw import RawConnection

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_bench="bench-secret";')


def secured_sockets(port: int, count: int, ca: Path) -> list[ssl.SSLSocket]:
    """`count` connections to the SASL_SSL listener, each through its TLS handshake and
    authenticated as `bench` (SASL/PLAIN), then made non-blocking for the generator."""
    context = ssl.create_default_context(cafile=str(ca))
    out = []
    for _ in range(count):
        conn = RawConnection(HOST, port)
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.sock = context.wrap_socket(conn.sock, server_hostname="localhost")
        assert conn.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == \
            ErrorCode.none
        done = conn.request(SaslAuthenticateRequest(auth_bytes=b"\0bench\0bench-secret"))
        if done.error_code != ErrorCode.none:
            raise RuntimeError(f"authentication failed: {done}")
        conn.sock.setblocking(False)
        out.append(conn.sock)
    return out


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
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",")]
    os.sched_setaffinity(0, {args.client_core})
    with tempfile.TemporaryDirectory(prefix="coterie-sec-heartbeats-") as tmp:
        work = Path(tmp)
        certs = work / "certs"
        subprocess.run([str(REPO_ROOT / "scripts" / "make-test-certs"), str(certs)],
                       check=True, capture_output=True)
        plain, secure = free_port(), free_port()
        cmd = [sys.executable, "-m", "coterie", "serve", "--data-dir", str(work / "data"),
               "--override", f"listeners=PLAINTEXT://{HOST}:{plain},SASL_SSL://{HOST}:{secure}",
               "--override", f"ssl.keystore.location={certs / 'server.pem'}",
               "--override", "sasl.enabled.mechanisms=PLAIN",
               "--override", f"sasl.jaas.config={JAAS}"]
        for key, value in BROKER_SETTINGS.items():
            cmd += ["--override", f"{key}={value}"]
        with running("coterie", cmd, args.server_core, work / "coterie.log", plain) as server:
            create_topic(f"{HOST}:{plain}", TOPIC, args.partitions)
            members = join_members(plain, args.members, args.groups)
            expected = len(steady_answer(members))
            sockets = {"PLAINTEXT": connect_all(plain, args.members),
                       "SASL_SSL": secured_sockets(secure, args.members, certs / "ca.pem")}
            best: dict[tuple[str, int], Sample] = {}
            for rep in range(args.reps):
                for level in levels:
                    for name, socks in sockets.items():
                        s = drive(Server(name, server.proc, server.port), members, socks,
                                  level, expected, args.warmup, args.duration)
                        if s.bad:
                            raise RuntimeError(f"{name}: {s.bad} unexpected answers")
                        print(f"  rep {rep + 1} C={level:<4} {name:9} {s.throughput:8,.0f}/s "
                              f"p99 {s.p99_ms:6.2f} ms, broker CPU {s.server_cpu:.0%}",
                              file=sys.stderr, flush=True)
                        key = (name, level)
                        if key not in best or s.throughput > best[key].throughput:
                            best[key] = s
    print(f"{args.members} members in {args.groups} groups, best of {args.reps} sweeps, "
          f"{args.duration:.0f} s windows\n")
    print("| concurrency | listener | heartbeats/s | p50 ms | p99 ms | broker CPU | "
          "heartbeats per broker CPU-s | SASL_SSL / PLAINTEXT (per s, per CPU-s) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    ratios: list[tuple[float, float]] = []
    for level in levels:
        p, q = best[("PLAINTEXT", level)], best[("SASL_SSL", level)]
        ratios.append((q.throughput / p.throughput, q.per_cpu / p.per_cpu))
        for s in (p, q):
            ratio = f"{ratios[-1][0]:.2f}, {ratios[-1][1]:.2f}" if s is q else ""
            print(f"| {level} | {s.server} | {s.throughput:,.0f} | {s.p50_ms:.2f} | "
                  f"{s.p99_ms:.2f} | {s.server_cpu:.0%} | {s.per_cpu:,.0f} | {ratio} |")
    print(f"\nmedian over the levels: SASL_SSL / PLAINTEXT = "
          f"{statistics.median(r[0] for r in ratios):.2f} heartbeats/s, "
          f"{statistics.median(r[1] for r in ratios):.2f} heartbeats per broker CPU-s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
