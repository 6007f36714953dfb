"""Starting the brokers a benchmark compares: coterie and the pinned reference Apache Kafka.

Shared by the scripts in benchmarks/ so that every benchmark starts both brokers the same way:
each as its own subprocess on a free loopback port with a data dir and a log file under a
caller-given work dir, coterie as `python -m coterie serve`, Kafka through
scripts/reference_kafka.py (needs java, and mvn the first time; see docs/reference-broker.md).
Both take the same Kafka property overrides, so a benchmark can give them equal settings.
For the security benchmarks (issue 25) it also gives both the same secured listeners: the
certificates, Kafka's view of the same PEM keystore, and the reference broker's settings for
the listeners coterie gets.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

REPO_ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
STARTUP_TIMEOUT = 120.0
KINDS = ("coterie", "kafka")


def load_reference_kafka() -> ModuleType:
    name = "coterie_reference_kafka"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "scripts" /
                                                  "reference_kafka.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def prepare_reference(log: Callable[[str], None]) -> str | None:
    """Make sure the reference broker can run (java present, jars fetched). Returns None when
    ready, else a one-line reason."""
    rk = load_reference_kafka()
    try:
        rk.require_tools(("java",))
        rk.fetch(log=log)
    except rk.ReferenceKafkaError as exc:
        return str(exc)
    log(f"reference broker is Apache Kafka {rk.kafka_version()}")
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_until_serving(bootstrap: str, proc: subprocess.Popen, log_path: Path,
                       metadata_probe: bool) -> None:
    """Wait until the broker listens and, with metadata_probe, answers an all-topics Metadata
    request (Kafka opens its listener before it is ready to serve); fail with its log."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    host, port = bootstrap.rsplit(":", 1)
    last: Exception | None = None
    listening = False
    while not listening and time.monotonic() < deadline and proc.poll() is None:
        try:
            with socket.create_connection((host, int(port)), timeout=0.5):
                listening = True
        except OSError as exc:
            last = exc
            time.sleep(0.1)
    if listening and not metadata_probe:
        return
    admin = AdminClient({"bootstrap.servers": bootstrap})
    while listening and time.monotonic() < deadline and proc.poll() is None:
        try:
            if admin.list_topics(timeout=2).brokers:
                return
        except KafkaException as exc:
            last = exc
        time.sleep(0.2)
    tail = log_path.read_text(errors="replace")[-5000:] if log_path.exists() else ""
    raise RuntimeError(f"broker on {bootstrap} did not start (exit={proc.poll()}, "
                       f"last error={last}, log {log_path}); log tail:\n{tail}")


@contextlib.contextmanager
def run_broker(kind: str, workdir: Path,
               overrides: Mapping[str, str] | None = None,
               profile: Path | None = None) -> Iterator[str]:
    """Run one broker ("coterie" or "kafka") for the duration of the block; yields its
    bootstrap address. `overrides` are Kafka broker properties given to either broker.
    The broker's output goes to <workdir>/<kind>.log. With `profile`, coterie runs under
    cProfile, which writes its figures there when the broker stops."""
    launcher = ("-m", "cProfile", "-o", str(profile), "-m", "coterie") if profile else (
        "-m", "coterie")
    with run_broker_process(kind, workdir, overrides, launcher) as (bootstrap, _):
        yield bootstrap


@contextlib.contextmanager
def run_broker_process(kind: str, workdir: Path, overrides: Mapping[str, str] | None = None,
                       launcher: Sequence[str] = ("-m", "coterie"),
                       ) -> Iterator[tuple[str, subprocess.Popen]]:
    """As run_broker, but yields (bootstrap address, broker process), for benchmarks that
    watch the process (its RSS, its CPU time). For coterie, `launcher` is what follows the
    interpreter in the command (another script that runs the coterie command line, say)."""
    if kind not in KINDS:
        raise ValueError(f"unknown broker kind {kind!r}")
    port = free_port()
    data_dir = workdir / f"{kind}-data"
    log_path = workdir / f"{kind}.log"
    overrides = dict(overrides or {})
    if kind == "coterie":
        data_dir.mkdir(parents=True)
        cmd = [sys.executable, *launcher, "serve", "--host", HOST, "--port", str(port),
               "--data-dir", str(data_dir)]
        for key, value in overrides.items():
            cmd += ["--override", f"{key}={value}"]
    else:
        cmd = load_reference_kafka().prepare(port, data_dir, overrides=overrides)
    with serving(kind, cmd, log_path, f"{HOST}:{port}") as proc:
        yield f"{HOST}:{port}", proc


def coterie_env() -> dict[str, str]:
    """The environment coterie runs in: unbuffered output (its log is read on failure) and
    this checkout first on the import path (a worktree's code, not the main one's)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


@contextlib.contextmanager
def serving(kind: str, cmd: Sequence[str], log_path: Path, bootstrap: str,
            ) -> Iterator[subprocess.Popen]:
    """Run a broker's command line (`kind` "coterie" or "kafka") for the duration of the
    block, its output to `log_path`, once it serves on `bootstrap` (a PLAINTEXT listener);
    yields the process. For benchmarks that build the command themselves (several
    listeners, say) yet start and stop the broker as every other benchmark does."""
    env = coterie_env() if kind == "coterie" else dict(os.environ)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(list(cmd), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env)
    try:
        # coterie is ready once it listens (as in tests/fixtures/coterie_broker.py); Kafka
        # opens its listeners before it can answer Metadata
        wait_until_serving(bootstrap, proc, log_path, metadata_probe=kind == "kafka")
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


# -- secured listeners (issue 25) --------------------------------------------------------------

# The one SASL/PLAIN user of the security benchmarks, in the JAAS line both brokers read.
SASL_USER = ("bench", "bench-secret")
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              f'user_{SASL_USER[0]}="{SASL_USER[1]}";')


def make_certs(certs: Path) -> None:
    """The test CA and the broker's certificates (scripts/make-test-certs; needs openssl)."""
    subprocess.run([str(REPO_ROOT / "scripts" / "make-test-certs"), str(certs)], check=True,
                   capture_output=True)


def coterie_secured_cmd(work: Path, certs: Path, ports: Mapping[str, int]) -> list[str]:
    """`coterie serve` with a listener per entry of `ports` (named for its protocol), TLS
    from the test certificates and SASL/PLAIN with the benchmarks' user."""
    listeners = ",".join(f"{name}://{HOST}:{port}" for name, port in ports.items())
    return [sys.executable, "-m", "coterie", "serve", "--data-dir", str(work / "data"),
            "--override", f"listeners={listeners}",
            "--override", f"ssl.keystore.location={certs / 'server.pem'}",
            "--override", "sasl.enabled.mechanisms=PLAIN",
            "--override", f"sasl.jaas.config={PLAIN_JAAS}"]


def kafka_keystore(server_pem: Path, work: Path) -> Path:
    """`server_pem` as Kafka's PEM keystore can read it. Kafka (ssl.keystore.type=PEM) takes
    only a PKCS#8 key ("BEGIN PRIVATE KEY" or "BEGIN ENCRYPTED PRIVATE KEY"); the openssl
    of scripts/make-test-certs writes PKCS#8 since 1.1, but an older one writes PKCS#1
    ("BEGIN RSA PRIVATE KEY"), which Kafka refuses: that key is converted into a copy
    under `work`, the certificates kept as they are."""
    text = server_pem.read_text()
    if "-----BEGIN RSA PRIVATE KEY-----" not in text:
        return server_pem
    head, rest = text.split("-----BEGIN RSA PRIVATE KEY-----", 1)
    body, tail = rest.split("-----END RSA PRIVATE KEY-----", 1)
    key = f"-----BEGIN RSA PRIVATE KEY-----{body}-----END RSA PRIVATE KEY-----\n"
    pkcs8 = subprocess.run(["openssl", "pkcs8", "-topk8", "-nocrypt"], input=key.encode(),
                           capture_output=True, check=True).stdout.decode()
    out = work / "kafka-server.pem"
    out.write_text(head + pkcs8 + tail.lstrip("\n"))
    return out


def kafka_secured_settings(ports: Mapping[str, int], controller_port: int,
                           keystore: Path) -> dict[str, str]:
    """Reference-broker settings for the listeners coterie gets in the same benchmark:
    `ports` maps each listener (named for its protocol: PLAINTEXT, SSL, SASL_SSL) to its
    port, PLAINTEXT first. TLS from the same PEM keystore coterie reads, SASL/PLAIN with
    the same user on SASL_SSL. The controller and inter-broker listeners stay PLAINTEXT:
    with no authorizer nothing checks the broker's own requests to its controller (cf.
    tests/fixtures/reference_broker.py's `secured_reference_config`, whose authorizer makes
    it authenticate them)."""
    names = list(ports)
    assert names[0] == "PLAINTEXT", "the first listener is the PLAINTEXT one"
    advertised = ",".join(f"{name}://{HOST}:{port}" for name, port in ports.items())
    settings = {
        "listeners": f"{advertised},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": advertised,
        "listener.security.protocol.map": ",".join(
            [f"{name}:{name}" for name in names] + ["CONTROLLER:PLAINTEXT"]),
        "controller.quorum.voters": f"1@{HOST}:{controller_port}",
        "inter.broker.listener.name": "PLAINTEXT",
    }
    if any(name in ("SSL", "SASL_SSL") for name in names):
        settings |= {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore)}
    if "SASL_SSL" in names:
        settings |= {"sasl.enabled.mechanisms": "PLAIN",
                     "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS}
    return settings


def require_reference() -> None:
    """Make sure the reference broker can run for a benchmark's `--kafka`, or end the
    benchmark at once with why (no java, no mvn to fetch the jars the first time): a
    comparison asked for must not silently become a coterie-only run."""
    reason = prepare_reference(lambda msg: print(msg, file=sys.stderr, flush=True))
    if reason is not None:
        sys.exit(f"--kafka: cannot run the reference Apache Kafka broker: {reason}")


def create_topic(bootstrap: str, name: str, partitions: int,
                 config: Mapping[str, str] | None = None) -> None:
    """Create a topic (replication 1, topic configs `config`) and wait until metadata shows
    every partition led."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})  # no info chatter
    topic = NewTopic(name, partitions, 1, config=dict(config or {}))
    admin.create_topics([topic], operation_timeout=30)[name].result(60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        topic = admin.list_topics(name, timeout=5).topics.get(name)
        if (topic is not None and topic.error is None and len(topic.partitions) == partitions
                and all(p.leader >= 0 for p in topic.partitions.values())):
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {name} did not become ready")


def rss_kib(pid: int) -> int:
    """Resident set size of a process (VmRSS of /proc/<pid>/status), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce_timed(conf: Mapping[str, object], topic: str, records: int, value: bytes) -> float:
    """Seconds to produce `records` copies of `value` to partition 0 of `topic` with a
    confluent-kafka producer of `conf` (the caller's batching settings), until every delivery
    report is in."""
    from confluent_kafka import Producer

    p = Producer({"compression.type": "none", "queue.buffering.max.messages": 500_000,
                  **conf})
    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                p.produce(topic, value, partition=0)
                break
            except BufferError:
                p.poll(0.05)
    if p.flush(600):
        raise RuntimeError(f"produce to {topic}: not every record delivered")
    return time.perf_counter() - start


def consume_timed(conf: Mapping[str, object], topic: str, records: int) -> float:
    """Seconds to read `records` records of partition 0 of `topic` from offset 0 with a
    confluent-kafka consumer of `conf` (assigned, in a group of its own)."""
    import uuid

    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"group.id": f"bench-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                  **conf})
    seen = 0
    try:
        start = time.perf_counter()
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 600
        while seen < records:
            if time.monotonic() > deadline:
                raise RuntimeError(f"consume from {topic}: {seen} of {records}")
            for m in c.consume(num_messages=10_000, timeout=1.0):
                if m.error():
                    raise RuntimeError(str(m.error()))
                seen += 1
        return time.perf_counter() - start
    finally:
        c.close()
