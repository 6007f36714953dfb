"""Kafka Connect (4.2.1 worker) in distributed mode against coterie: file source to file sink
through two workers, one of them killed -9 while lines flow.

A distributed Connect cluster leans on the broker in ways no other client does: the workers
form a classic group of protocol type "connect" (Connect's own "sessioned" and "compatible"
sub-protocols, incremental cooperative assignment, a leader that the REST API forwards
requests to), keep their whole state in three topics they create themselves with
cleanup.policy=compact (and check the config topic's policy with DescribeConfigs, refusing to
start on a non-compacted one), read those topics to their end (ListOffsets) on every rebalance,
and run each sink task as an ordinary consumer group member ("connect-<connector>").

The scenario: two workers of one group; a FileStreamSource connector (tasks.max=1) that tails
an input file into a three-partition topic, and a FileStreamSink connector (tasks.max=1) that
appends that topic to an output file; both created through the REST API. What is checked:

* the three internal topics exist with cleanup.policy=compact (DescribeConfigs; the data
  topic, for contrast, with the default "delete");
* before any failure, the output file holds exactly the input lines (as a multiset: lines
  travel through three partitions, so their order across partitions is not kept);
* lines keep being appended to the input while the worker running the source task is
  killed -9; its tasks move to the surviving worker (the group notices through the session
  timeout; the workers use a short scheduled.rebalance.max.delay.ms, whose default of five
  minutes would keep a departed worker's tasks unassigned that long), and in the end every
  input line is in the output file. Duplicates are allowed after the kill: the source
  re-reads the input from its last flushed offset and the sink re-delivers records after its
  last committed offset, which is the at-least-once Connect promises.

The same scenario runs against the session's reference Kafka broker (marked `reference`).
Skips, naming the tool, without java or mvn. The file connectors' jar is 4.2.0 (see the
"connect" set in scripts/reference_kafka.py), the worker and everything else 4.2.1.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from tests.fixtures.coterie_broker import free_port, terminate
from tests.fixtures.reference_broker import load_reference_kafka, reference_tools_missing
from tests.integration.clients import broker_log_on_failure
from tests.integration.test_java_console_consumer_848 import JVM_OPTIONS

CONNECT_MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"
PARTITIONS = 3


@pytest.fixture(scope="module")
def connect_classpath() -> str:
    """Kafka Connect 4.2.1's worker jars with the file connectors (fetched with Maven on
    first use); skip without java or mvn."""
    missing = reference_tools_missing()
    if missing:
        pytest.skip("the Kafka Connect test needs java and mvn on PATH: missing "
                    + ", ".join(missing))
    lib = load_reference_kafka().fetch(
        jar_set="connect", log=lambda msg: print(msg, file=sys.stderr, flush=True))
    return f"{lib}/*"


@pytest.fixture(params=["coterie", pytest.param("reference_kafka", marks=pytest.mark.reference)])
def connect_broker(request: pytest.FixtureRequest) -> Any:
    """A coterie broker, or the session's reference Kafka broker; both without an initial
    rebalance delay (with Kafka's default of 3 s, extended by 3 s for the second worker,
    forming the workers' group takes 6 s more, on both)."""
    if request.param == "coterie":
        return request.getfixturevalue("coterie_factory")(
            config={"group.initial.rebalance.delay.ms": "0"})
    return request.getfixturevalue(request.param)


class Worker:
    """One distributed Connect worker JVM; its output goes to a file (shown on failure)."""

    def __init__(self, classpath: str, bootstrap: str, group: str, workdir: Path) -> None:
        self.port = free_port()
        self.id = f"127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / "worker.log"
        props = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic": f"{group}-configs",
            "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status",
            # coterie is a single node, and so is the reference broker here.
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "listeners": f"http://127.0.0.1:{self.port}",
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(self.port),
            "offset.flush.interval.ms": "1000",
            # A departed worker's tasks are reassigned after this delay (default 5 minutes).
            "scheduled.rebalance.max.delay.ms": "1000",
            "session.timeout.ms": "6000",
            "heartbeat.interval.ms": "1000",
            # The sink task's consumer group: a killed member leaves after 6 s, not 45 s.
            "consumer.session.timeout.ms": "6000",
            "consumer.heartbeat.interval.ms": "1000",
            "task.shutdown.graceful.timeout.ms": "2000",
            # The plugins on the classpath all have ServiceLoader manifests: no scan.
            "plugin.discovery": "service_load",
        }
        self.props_path = workdir / "worker.properties"
        self.props_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.classpath = classpath
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child process
        self.proc = subprocess.Popen(
            ["java", *JVM_OPTIONS, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
             "-cp", self.classpath, CONNECT_MAIN, str(self.props_path)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def output(self) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return f"--- worker {self.id} ---\n" + text[-6000:]

    def kill9(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        terminate(self.proc, 30)


def _rest(method: str, url: str, body: dict | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def _workers_failed(workers: list[Worker]) -> str:
    return "\n".join(w.output() for w in workers)


@contextlib.contextmanager
def _worker_logs_on_failure(workers: list[Worker]) -> Iterator[None]:
    try:
        yield
    except BaseException as e:
        e.add_note(_workers_failed(workers))
        raise


def _await(what: str, check: Any, timeout: float) -> Any:
    """Poll `check()` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
            last = e
        else:
            if last:
                return last
        time.sleep(0.25)
    raise AssertionError(f"{what}: not within {timeout}s (last: {last!r})")


def _create_connector(worker: Worker, name: str, config: dict[str, str]) -> None:
    """PUT the connector's config; retried while the worker is starting (its REST server
    answers 404 until its resources are in place, 5xx while the worker has not joined the
    group) and during a rebalance (409)."""
    def put() -> bool:
        status, answer = _rest("PUT", f"{worker.url}/connectors/{name}/config", config)
        if status in (200, 201):
            return True
        assert status in (404, 409, 500, 503), f"PUT {name}: {status} {answer}"
        return False
    _await(f"connector {name} created", put, 90)


def _status(worker: Worker, name: str) -> dict | None:
    status, answer = _rest("GET", f"{worker.url}/connectors/{name}/status")
    return answer if status == 200 else None


def _running(worker: Worker, name: str, on: set[str] | None = None) -> dict | None:
    """The connector's status once it and its one task are RUNNING (the task on a worker
    in `on`, if given)."""
    status = _status(worker, name)
    if status is None:
        return None
    for task in status["tasks"]:
        assert task["state"] != "FAILED", f"{name} task failed: {task.get('trace', '')[:3000]}"
    tasks = status["tasks"]
    if (status["connector"]["state"] == "RUNNING" and len(tasks) == 1
            and tasks[0]["state"] == "RUNNING"
            and (on is None or tasks[0]["worker_id"] in on)):
        return status
    return None


def _output_lines(path: Path) -> list[str]:
    if not path.exists():
        return []
    text = path.read_text(errors="replace")
    return text.splitlines() if text.endswith("\n") else text.splitlines()[:-1]


class Feeder:
    """Appends numbered lines to the input file (each one written whole, then flushed)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.written: list[str] = []
        path.touch()

    def append(self, count: int, pace_s: float = 0.0) -> None:
        with self.path.open("a") as f:
            for _ in range(count):
                line = f"line-{len(self.written):06d}-{uuid.uuid4().hex[:8]}"
                f.write(line + "\n")
                f.flush()
                self.written.append(line)
                if pace_s:
                    time.sleep(pace_s)


def _cleanup_policies(bootstrap: str, names: list[str]) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resources = [ConfigResource(ResourceType.TOPIC, name) for name in names]
    policies = {}
    for resource, future in admin.describe_configs(resources).items():
        policies[resource.name] = future.result(20)["cleanup.policy"].value
    return policies


def test_file_source_to_file_sink_through_a_worker_kill(
        connect_broker: Any, connect_classpath: str, tmp_path: Path) -> None:
    broker = connect_broker
    suffix = uuid.uuid4().hex[:8]
    group, topic = f"connect-{suffix}", f"connect-lines-{suffix}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(20)
    source_file, sink_file = tmp_path / "input.txt", tmp_path / "output.txt"
    feeder = Feeder(source_file)
    workers = [Worker(connect_classpath, broker.bootstrap, group, tmp_path / name)
               for name in ("worker-a", "worker-b")]
    source, sink = f"source-{suffix}", f"sink-{suffix}"
    log = getattr(broker, "log_text", lambda: "")
    with broker_log_on_failure(log), _worker_logs_on_failure(workers):
        try:
            for w in workers:
                w.start()
            a, b = workers
            _create_connector(a, source, {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                "tasks.max": "1", "file": str(source_file), "topic": topic})
            _create_connector(b, sink, {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                "tasks.max": "1", "file": str(sink_file), "topics": topic})
            both = {w.id for w in workers}
            _await("connectors RUNNING", lambda: _running(a, source, both)
                   and _running(a, sink, both), 90)

            # Connect made its own topics, compacted (it refuses a config topic that is not);
            # the data topic, made here without configs, has the default policy.
            internal = [f"{group}-{kind}" for kind in ("configs", "offsets", "status")]
            assert _cleanup_policies(broker.bootstrap, [*internal, topic]) == {
                **dict.fromkeys(internal, "compact"), topic: "delete"}

            # Nothing fails: exactly the input lines, once each.
            feeder.append(300)
            _await("first lines in the sink file",
                   lambda: len(_output_lines(sink_file)) >= len(feeder.written), 60)
            time.sleep(1.5)  # room for a duplicate to show up
            assert Counter(_output_lines(sink_file)) == Counter(feeder.written)

            # Kill -9 the worker running the source task while lines are being appended.
            status = _running(a, source)
            assert status is not None
            victim = next(w for w in workers if w.id == status["tasks"][0]["worker_id"])
            survivor = next(w for w in workers if w is not victim)
            flow = threading.Thread(target=feeder.append, args=(400, 0.005))
            flow.start()
            time.sleep(1.0)
            victim.kill9()
            flow.join(30)
            assert not flow.is_alive()
            _await("both tasks RUNNING on the surviving worker",
                   lambda: _running(survivor, source, {survivor.id})
                   and _running(survivor, sink, {survivor.id}), 60)
            feeder.append(200)

            def all_arrived() -> bool:
                return set(feeder.written) <= set(_output_lines(sink_file))
            _await("every input line in the sink file", all_arrived, 60)
            unknown = set(_output_lines(sink_file)) - set(feeder.written)
            assert not unknown, f"lines in the output that were never input: {list(unknown)[:5]}"
        finally:
            for w in workers:
                w.stop()
