"""`coterie produce` and `coterie consume` against a real broker, checked with confluent-kafka:
keys land where Kafka's partitioner puts them, headers and nulls survive, a group consumer
commits what it printed, and bad input ends with exit code 1 and a message, never a
traceback."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from coterie.common.partitioning import default_partition


def cli(*args: str, stdin: str | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "coterie", *args], input=stdin,
                          capture_output=True, text=True, timeout=timeout)


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(10)


def read_all(bootstrap: str, topic: str, partitions: int, expected: int,
             timeout: float = 20) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "checker",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expected and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and not msg.error():
                out.append(msg)
    finally:
        c.close()
    return out


def test_produce_keys_and_headers_read_back_by_confluent_and_coterie(coterie) -> None:
    bs = coterie.bootstrap
    create(bs, "pc", 3)
    lines = "".join(f"key-{i}|value {i}\n" for i in range(20))
    run = cli("produce", "pc", "--bootstrap-server", bs, "--key-separator", "|",
              "--header", "source=cli", "--header", "n=1", stdin=lines)
    assert run.returncode == 0, run.stderr
    got = read_all(bs, "pc", 3, 20)
    assert sorted((m.key(), m.value()) for m in got) == sorted(
        (f"key-{i}".encode(), f"value {i}".encode()) for i in range(20))
    for m in got:
        # Kafka's default partitioner: where a Java or librdkafka producer puts the key.
        assert m.partition() == default_partition(m.key(), 3)
        assert m.headers() == [("source", b"cli"), ("n", b"1")]

    run = cli("consume", "pc", "--bootstrap-server", bs, "--from-beginning",
              "--max-messages", "20", "--format", "json")
    assert run.returncode == 0, run.stderr
    docs = [json.loads(line) for line in run.stdout.splitlines()]
    assert sorted((d["key"], d["value"]) for d in docs) == sorted(
        (f"key-{i}", f"value {i}") for i in range(20))
    assert all(d["headers"] == [{"key": "source", "value": "cli"}, {"key": "n", "value": "1"}]
               for d in docs)
    assert {(d["partition"], d["offset"]) for d in docs} == {
        (m.partition(), m.offset()) for m in got}

    text = cli("consume", "pc", "--bootstrap-server", bs, "--partition", "1", "--offset",
               "0", "--print-key", "--print-headers", "--timeout-ms", "1000")
    assert text.returncode == 0, text.stderr
    ones = sorted(f"source:cli,n:1\t{m.key().decode()}\t{m.value().decode()}"
                  for m in got if m.partition() == 1)
    assert ones and sorted(text.stdout.splitlines()) == ones


def test_json_format_round_trip_with_nulls_and_partitions(coterie) -> None:
    bs = coterie.bootstrap
    create(bs, "pj", 2)
    lines = "\n".join([
        json.dumps({"key": "a", "value": "x", "headers": {"h": "1"}, "partition": 1}),
        json.dumps({"value": None, "partition": 0}),
        "",
        json.dumps({"key": None, "value": "ünï", "headers": [{"key": "e", "value": None}],
                    "partition": 1}),
    ]) + "\n"
    run = cli("produce", "pj", "--bootstrap-server", bs, "--format", "json", stdin=lines)
    assert run.returncode == 0, run.stderr
    got = read_all(bs, "pj", 2, 3)
    assert sorted(((m.partition(), m.offset(), m.key(), m.value(), m.headers()) for m in got),
                  key=lambda row: row[:2]) == [
        (0, 0, None, None, None), (1, 0, b"a", b"x", [("h", b"1")]),
        (1, 1, None, "ünï".encode(), [("e", None)])]
    out = cli("consume", "pj", "--bootstrap-server", bs, "--from-beginning", "--format",
              "json", "--max-messages", "3")
    assert out.returncode == 0, out.stderr
    # What consume prints, produce reads back as it is (same partitions, keys, headers).
    assert cli("produce", "pj", "--bootstrap-server", bs, "--format", "json",
               stdin=out.stdout).returncode == 0
    both = read_all(bs, "pj", 2, 6)
    rows = sorted(((m.partition(), m.offset(), m.key(), m.value(), m.headers()) for m in both),
                  key=lambda row: row[:2])
    assert [r[0] for r in rows] == [0, 0, 1, 1, 1, 1]
    assert [r[2:] for r in rows if r[1] >= 2 or (r[0] == 0 and r[1] == 1)] == [
        r[2:] for r in rows if r[1] < 2 and not (r[0] == 0 and r[1] == 1)]


def test_consume_with_a_group_commits_what_it_printed(coterie) -> None:
    bs = coterie.bootstrap
    create(bs, "pg", 2)
    run = cli("produce", "pg", "--bootstrap-server", bs, "--acks", "1",
              stdin="".join(f"{i}\n" for i in range(10)))
    assert run.returncode == 0, run.stderr
    first = cli("consume", "pg", "--bootstrap-server", bs, "--group", "cli-g",
                "--from-beginning", "--max-messages", "4")
    assert first.returncode == 0, first.stderr
    assert len(first.stdout.splitlines()) == 4
    checker = Consumer({"bootstrap.servers": bs, "group.id": "cli-g"})
    committed = checker.committed([TopicPartition("pg", 0), TopicPartition("pg", 1)],
                                  timeout=10)
    checker.close()
    assert sum(max(tp.offset, 0) for tp in committed) == 4
    # The next run of the group goes on where the first stopped: every record once.
    rest = cli("consume", "pg", "--bootstrap-server", bs, "--group", "cli-g",
               "--from-beginning", "--timeout-ms", "1500")
    assert rest.returncode == 0, rest.stderr
    assert sorted(first.stdout.splitlines() + rest.stdout.splitlines(), key=int) == [
        str(i) for i in range(10)]


def test_acks_zero_and_a_file(coterie, tmp_path) -> None:
    bs = coterie.bootstrap
    create(bs, "pz", 1)
    data = tmp_path / "in.txt"
    data.write_text("one\ntwo\n\nthree")
    run = cli("produce", "pz", "--bootstrap-server", bs, "--acks", "0", "--file", str(data))
    assert run.returncode == 0, run.stderr
    assert [m.value() for m in read_all(bs, "pz", 1, 4)] == [b"one", b"two", b"", b"three"]


@pytest.mark.parametrize(("args", "stdin", "message"), [
    (("produce", "missing"), "x\n", "unknown topic 'missing'"),
    (("consume", "missing", "--timeout-ms", "500"), None, "unknown topic 'missing'"),
    (("consume", "missing", "--group", "g", "--timeout-ms", "500"), None,
     "unknown topic 'missing'"),
    (("produce", "bad", "--key-separator", ":"), "a:1\nno separator\n",
     "line 2: no key separator"),
    (("produce", "bad", "--format", "json"), '{"value": "a"}\n[1]\n',
     "line 2: a JSON object is expected"),
    (("produce", "bad", "--format", "json"), '{"value": 3}\n', "value must be a string"),
    (("produce", "bad", "--partition", "5"), "x\n", "there is no partition 5"),
    (("produce", "bad", "--header", "novalue"), "x\n", "--header wants KEY=VALUE"),
    (("consume", "bad", "--group", "g", "--partition", "0"), None, "exclude each other"),
    (("consume", "bad", "--partition", "0", "--offset", "soon"), None,
     "--offset must be"),
    (("consume", "bad", "--partition", "0", "--offset", "99", "--timeout-ms", "500"), None,
     "OFFSET_OUT_OF_RANGE"),
    (("consume", "bad", "--partition", "3", "--timeout-ms", "500"), None,
     "there is no partition 3"),
    (("consume", "bad", "--offset", "3"), None, "--offset needs --partition"),
])
def test_bad_input_is_exit_code_1_with_a_message(coterie, args, stdin, message) -> None:
    if "bad" in args:
        create(coterie.bootstrap, "bad", 1)
    run = cli(*args, "--bootstrap-server", coterie.bootstrap, stdin=stdin)
    assert run.returncode == 1, (run.stdout, run.stderr)
    assert message in run.stderr and "Traceback" not in run.stderr


def test_bad_lines_keep_the_records_before_them(coterie) -> None:
    bs = coterie.bootstrap
    create(bs, "pb", 1)
    run = cli("produce", "pb", "--bootstrap-server", bs, "--key-separator", "=",
              stdin="a=1\nb=2\noops\nc=3\n")
    assert run.returncode == 1 and "line 3" in run.stderr
    assert [(m.key(), m.value()) for m in read_all(bs, "pb", 1, 2)] == [
        (b"a", b"1"), (b"b", b"2")]


def test_unreachable_cluster_is_exit_code_1(coterie_factory) -> None:
    nobody = coterie_factory(start=False).bootstrap
    for args in (("produce", "t"), ("consume", "t", "--timeout-ms", "500"),
                 ("consume", "t", "--group", "g", "--timeout-ms", "500")):
        run = cli(*args, "--bootstrap-server", nobody, "--request-timeout-ms", "1500",
                  stdin="x\n")
        assert run.returncode == 1, (args, run.stderr)
        assert "no broker reachable" in run.stderr and "Traceback" not in run.stderr


def _with_tty_stderr(args: list[str], stdin: str | None = None) -> tuple[int, str, str]:
    """Run the command with stderr on a pseudo-terminal (as an operator's shell), stdout on a
    pipe; returns (exit code, stdout, what the terminal got)."""
    import os
    import pty

    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "coterie", *args],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=slave,
                                text=True, env={**os.environ, "TERM": "xterm",
                                                "COLUMNS": "100"})
        os.close(slave)
        out, _ = proc.communicate(stdin, timeout=60)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(master)
    return proc.returncode, out, b"".join(chunks).decode(errors="replace")


def test_progress_on_a_terminal_only(coterie) -> None:
    bs = coterie.bootstrap
    create(bs, "pp", 1)
    code, _, terminal = _with_tty_stderr(
        ["produce", "pp", "--bootstrap-server", bs],
        stdin="".join(f"{i}\n" for i in range(3000)))
    assert code == 0 and "produced" in terminal
    code, out, terminal = _with_tty_stderr(
        ["consume", "pp", "--bootstrap-server", bs, "--from-beginning", "--max-messages",
         "3000"])
    assert code == 0 and len(out.splitlines()) == 3000
    assert "consumed from pp" in terminal
    piped = cli("consume", "pp", "--bootstrap-server", bs, "--from-beginning",
                "--max-messages", "3000")
    assert piped.returncode == 0 and piped.stderr == ""


@pytest.mark.reference
def test_against_apache_kafka(reference_kafka) -> None:
    """The same commands against the reference Kafka broker: produce and consume work (keys
    where Kafka's partitioner puts them, a group that commits); the timeline says Kafka has
    no group events."""
    bs = reference_kafka.bootstrap
    create(bs, "cli-ref", 3)
    run = cli("produce", "cli-ref", "--bootstrap-server", bs, "--key-separator", "=",
              "--header", "h=1", stdin="".join(f"k{i}=v{i}\n" for i in range(12)))
    assert run.returncode == 0, run.stderr
    got = read_all(bs, "cli-ref", 3, 12)
    assert len(got) == 12
    assert all(m.partition() == default_partition(m.key(), 3) for m in got)
    consumed = cli("consume", "cli-ref", "--bootstrap-server", bs, "--group", "cli-ref-g",
                   "--from-beginning", "--max-messages", "12", "--print-key")
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.splitlines()) == sorted(f"k{i}\tv{i}" for i in range(12))
    checker = Consumer({"bootstrap.servers": bs, "group.id": "cli-ref-g"})
    committed = checker.committed([TopicPartition("cli-ref", p) for p in range(3)], timeout=10)
    checker.close()
    assert sum(max(tp.offset, 0) for tp in committed) == 12
    timeline = cli("groups", "timeline", "cli-ref-g", "--bootstrap-server", bs)
    assert timeline.returncode == 1
    assert "no __group_events topic" in timeline.stderr and "Apache Kafka" in timeline.stderr


def test_command_config_authenticates_with_sasl(tmp_path) -> None:
    """--command-config with Kafka's client properties: SASL/PLAIN on a SASL_PLAINTEXT
    listener; a wrong password is exit code 1 naming the failure."""
    from tests.fixtures.coterie_broker import CoterieBroker, free_port

    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="admin" password="admin-secret" user_admin="admin-secret" '
            'user_alice="alice-secret";')
    broker = CoterieBroker(tmp_path / "data")
    sasl_port = free_port()
    broker.config.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{broker.port},"
                     f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "sasl.jaas.config": jaas})
    broker.start()
    try:
        create(broker.bootstrap, "sasl-t", 1)
        good = tmp_path / "client.properties"
        good.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                        "sasl.username=alice\nsasl.password=alice-secret\n")
        bad = tmp_path / "bad.properties"
        bad.write_text(good.read_text().replace("alice-secret", "wrong"))
        sasl = f"127.0.0.1:{sasl_port}"
        run = cli("produce", "sasl-t", "--bootstrap-server", sasl, "--command-config",
                  str(good), stdin="over sasl\n")
        assert run.returncode == 0, run.stderr
        out = cli("consume", "sasl-t", "--bootstrap-server", sasl, "--command-config",
                  str(good), "--from-beginning", "--max-messages", "1")
        assert out.returncode == 0 and out.stdout == "over sasl\n", out.stderr
        refused = cli("produce", "sasl-t", "--bootstrap-server", sasl, "--command-config",
                      str(bad), "--request-timeout-ms", "3000", stdin="x\n")
        assert refused.returncode == 1 and "authentication" in refused.stderr.lower()
        assert "Traceback" not in refused.stderr
        missing = cli("consume", "sasl-t", "--bootstrap-server", sasl, "--command-config",
                      str(tmp_path / "nope.properties"))
        # A file that is not there is a usage error (exit 2), as for every command.
        assert missing.returncode == 2 and "does not exist" in missing.stderr
    finally:
        broker.stop()
