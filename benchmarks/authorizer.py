"""What the authorizer costs with 10,000 ACLs (issue 25, "Measure"), side by side in one run.

Two parts:

1. **One check, in process.** coterie.security.authorize over an AclSet of `--acls` ACLs
   (literal topic ACLs for many principals, prefixed topic ACLs, group ACLs, some DENYs),
   for a principal allowed by a prefixed ACL: microseconds per check.
2. **Requests, end to end.** Two brokers run at once: one without an authorizer, one with
   Kafka's StandardAuthorizer class name and the same ACLs (created through CreateAcls by a
   super user on a SASL_PLAINTEXT listener). On each in turn, for `--reps` rounds (the best
   of each kept), confluent-kafka produces `--records` records of 100 bytes, one record per
   Produce request (batch.num.messages=1, acks=1: each request authorized), then consumes
   them back with small fetches. Reported: records/s, the broker's CPU
   per 1,000 records, and the authorized broker's figures as ratios to the other's.

    .venv/bin/python benchmarks/authorizer.py                      # about two minutes
    .venv/bin/python benchmarks/authorizer.py --records 5000 --reps 1 --checks 20000  # smoke
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

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

from coterie.security import AclBinding as Binding
from coterie.security import AclOperation as Op
from coterie.security import AclPermissionType as Perm
from coterie.security import AclSet, AuthorizerSettings, PatternType, authorize
from coterie.security import ResourceType as Res

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret";')


def _acl_specs(count: int) -> list[tuple[str, str, str, str, str]]:
    """`count` ACLs as (resource type, pattern type, name, principal, permission): the
    shape a team's cluster has, with the benchmark's own ALLOWs among them."""
    specs = [("topic", "prefixed", "bench-", "User:ANONYMOUS", "allow"),
             ("group", "prefixed", "bench-", "User:ANONYMOUS", "allow")]
    i = 0
    while len(specs) < count:
        kind = i % 10
        if kind < 5:
            specs.append(("topic", "literal", f"orders-{i}", f"User:app-{i % 500}", "allow"))
        elif kind < 8:
            specs.append(("topic", "prefixed", f"team-{i}-", f"User:team-{i % 300}", "allow"))
        elif kind < 9:
            specs.append(("group", "literal", f"svc-{i}", f"User:app-{i % 500}", "allow"))
        else:
            specs.append(("topic", "literal", f"orders-{i}", "User:*", "deny"))
        i += 1
    return specs[:count]


def _in_process(count: int, checks: int) -> float:
    """µs per check of the benchmark's principal with `count` ACLs."""
    types = {"topic": Res.TOPIC, "group": Res.GROUP}
    patterns = {"literal": PatternType.LITERAL, "prefixed": PatternType.PREFIXED}
    acls = AclSet(Binding(types[t], n, patterns[p], principal, "*", Op.ALL if t == "topic"
                          else Op.READ, Perm.ALLOW if perm == "allow" else Perm.DENY)
                  for t, p, n, principal, perm in _acl_specs(count))
    settings = AuthorizerSettings(frozenset({"User:admin"}), False)
    names = [f"bench-{i % 64}" for i in range(checks)]
    start = time.perf_counter()
    for name in names:
        if not authorize(acls, settings, "User:ANONYMOUS", "127.0.0.1", Op.WRITE,
                         Res.TOPIC, name):
            raise RuntimeError("the benchmark's principal is not allowed")
    return (time.perf_counter() - start) / checks * 1e6


def _create_acls(admin: AdminClient, count: int) -> None:
    types = {"topic": ResourceType.TOPIC, "group": ResourceType.GROUP}
    patterns = {"literal": ResourcePatternType.LITERAL,
                "prefixed": ResourcePatternType.PREFIXED}
    bindings = [AclBinding(types[t], n, patterns[p], principal, "*",
                           AclOperation.ALL if t == "topic" else AclOperation.READ,
                           AclPermissionType.ALLOW if perm == "allow"
                           else AclPermissionType.DENY)
                for t, p, n, principal, perm in _acl_specs(count)]
    for i in range(0, len(bindings), 1000):
        for future in admin.create_acls(bindings[i:i + 1000]).values():
            future.result(60)


def _produce(conf: dict[str, str], topic: str, records: int, value: bytes) -> float:
    # One record per Produce request (each authorized), five in flight.
    return produce_timed({**conf, "acks": 1, "linger.ms": 0, "batch.num.messages": 1},
                         topic, records, value)


def _consume(conf: dict[str, str], topic: str, records: int) -> float:
    return consume_timed({**conf, "max.partition.fetch.bytes": 16 * 1024},  # small fetches
                         topic, records)


def _start(work: Path, name: str, overrides: dict[str, str]) -> tuple[subprocess.Popen, Path]:
    cmd = [sys.executable, "-m", "coterie", "serve", "--data-dir", str(work / name)]
    for key, value in overrides.items():
        cmd += ["--override", f"{key}={value}"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO_ROOT)}
    log_path = work / f"{name}.log"
    with open(log_path, "ab") as log:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), log_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--acls", type=int, default=10_000)
    parser.add_argument("--checks", type=int, default=200_000)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)

    checked = _in_process(args.acls, args.checks)
    print(f"one check, {args.acls:,} ACLs: {checked:.2f} µs ({args.checks:,} checks)",
          file=sys.stderr, flush=True)

    value = os.urandom(100)
    with tempfile.TemporaryDirectory(prefix="coterie-authorizer-") as tmp:
        work = Path(tmp)
        plain, secured, sasl = free_port(), free_port(), free_port()
        procs = {}
        procs["no authorizer"] = _start(work, "open",
                                        {"listeners": f"PLAINTEXT://{HOST}:{plain}"})
        procs[f"{args.acls:,} ACLs"] = _start(work, "acls", {
            "listeners": f"PLAINTEXT://{HOST}:{secured},SASL_PLAINTEXT://{HOST}:{sasl}",
            "sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": JAAS,
            "authorizer.class.name": STANDARD, "super.users": "User:admin"})
        ports = dict(zip(procs, (plain, secured), strict=True))
        try:
            for label, (proc, log_path) in procs.items():
                wait_until_serving(f"{HOST}:{ports[label]}", proc, log_path,
                                   metadata_probe=False)
            admin_conf = {"bootstrap.servers": f"{HOST}:{sasl}",
                          "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                          "sasl.username": "admin", "sasl.password": "admin-secret"}
            started = time.perf_counter()
            _create_acls(AdminClient(admin_conf), args.acls)
            print(f"{args.acls:,} ACLs created in {time.perf_counter() - started:.1f} s",
                  file=sys.stderr, flush=True)
            best: dict[str, tuple[float, float, float]] = {}
            for _ in range(args.reps):
                for label, (proc, _) in procs.items():
                    port = ports[label]
                    topic = f"bench-{uuid.uuid4().hex[:8]}"
                    if port == plain:
                        create_topic(f"{HOST}:{plain}", topic, 1)
                    else:
                        create_topic_as(admin_conf, topic)
                    conf = {"bootstrap.servers": f"{HOST}:{port}"}
                    cpu0 = cpu_seconds(proc.pid)
                    produce_s = _produce(conf, topic, args.records, value)
                    consume_s = _consume(conf, topic, args.records)
                    cpu = (cpu_seconds(proc.pid) - cpu0) / args.records * 1000
                    row = (args.records / produce_s, args.records / consume_s, cpu)
                    print(f"  {label:14} produce {row[0]:8,.0f}/s consume {row[1]:8,.0f}/s "
                          f"broker CPU {row[2] * 1000:.1f} ms per 1,000 records",
                          file=sys.stderr, flush=True)
                    old = best.get(label)
                    best[label] = row if old is None else (
                        max(old[0], row[0]), max(old[1], row[1]), min(old[2], row[2]))
        finally:
            for proc, _ in procs.values():
                proc.terminate()
                proc.wait(30)
    print(f"\none authorizer check with {args.acls:,} ACLs: {checked:.2f} µs "
          f"(in process, {args.checks:,} checks)\n")
    print(f"{args.records:,} records of 100 bytes, one per Produce request, best of "
          f"{args.reps} rounds\n")
    print("| broker | produce records/s | consume records/s | broker CPU ms per 1,000 "
          "records | / no authorizer (produce, consume, CPU) |")
    print("| --- | --- | --- | --- | --- |")
    base = best["no authorizer"]
    for label, row in best.items():
        print(f"| {label} | {row[0]:,.0f} | {row[1]:,.0f} | {row[2] * 1000:.1f} | "
              f"{row[0] / base[0]:.2f}, {row[1] / base[1]:.2f}, {row[2] / base[2]:.2f} |")
    return 0


def create_topic_as(conf: dict[str, str], topic: str) -> None:
    """A one-partition topic, created by the super user (the SASL listener)."""
    from confluent_kafka.admin import NewTopic

    admin = AdminClient(conf)  # kept until the answer came: a destroyed client cancels it
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


if __name__ == "__main__":
    sys.exit(main())
