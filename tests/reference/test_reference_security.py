"""SCRAM users and ACLs made with Kafka's own tools, side by side on coterie and Apache Kafka.

Issue 25 asks for `kafka-configs --entity-type users` and `kafka-acls` against coterie next to
the reference broker configured the same way. Each broker gets the same security settings
(`SECURITY`: SCRAM-SHA-256/512 on a SASL_PLAINTEXT listener, Kafka's StandardAuthorizer,
`super.users=User:admin`) and a SCRAM-SHA-512 `admin` user made before it serves anyone
(Kafka: `kafka-storage format --add-scram`; coterie: `coterie serve --add-scram`, the same
spec). Then one
scenario, the operator's tools always run as `admin` over SASL (`--command-config`):

* `kafka-configs --alter --add-config 'SCRAM-SHA-512=[password=alice-secret]'` for alice and
  `--describe` of her; alice logs in (and not with a wrong password), but may not produce;
* `kafka-acls --add` READ and DESCRIBE on the topic, READ on a PREFIXED group, `--list`:
  alice still may not produce (no WRITE), consumes in a group under the prefix, and a group
  outside it is refused;
* `kafka-acls --remove --force` of both, `--list` again;
* `kafka-configs --delete-config SCRAM-SHA-512`: alice's login is refused.

Everything observed (each tool's output, normalised; each client outcome, as an error name
or a count) goes into one `Observed` per broker. Each broker's run is checked against what
Kafka's documentation leads one to expect, and then the two runs are compared: a difference
is a difference between coterie and Kafka. Each broker runs alone (one after the other: the
machine has two cores, and a JVM tool starts in seconds). Without java or mvn the module is
skipped (Kafka's tools are Java, so the coterie side needs them too).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
)
from kio.schema.describe_client_quotas.v0 import request as quotas_v0
from kio.schema.describe_client_quotas.v1 import request as quotas_v1

from tests.fixtures.coterie_broker import CoterieBroker, free_port
from tests.fixtures.reference_broker import (
    SCRAM_ADMIN,
    ReferenceBroker,
    load_reference_kafka,
    reference_tools_missing,
    run_kafka_tool,
    scram_admin_format_args,
    secured_reference_config,
)
from tests.integration.test_sasl_scram import scram_login
from tests.kafka_raw import RawConnection

pytestmark = [pytest.mark.reference, pytest.mark.timeout(300)]

CONFIGS = "kafka.admin.ConfigCommand"
ACLS = "org.apache.kafka.tools.AclCommand"
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"

# The settings both brokers are given, in Kafka's names: coterie reads each of them. (Kafka
# also needs a JAAS line per SCRAM mechanism of the listener, even an empty one; coterie
# accepts and ignores them. No initial rebalance delay: Kafka's 3 s would slow the consumers.)
SECURITY = {
    "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
    "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
    "authorizer.class.name": STANDARD,
    "super.users": "User:admin",
    "group.initial.rebalance.delay.ms": "0",
}

TOPIC = "payments"
GROUP_PREFIX = "billing-"
RECORDS = 3
ALICE = ("alice", "alice-secret")
AUTH_FAILED = ("_AUTHENTICATION: SASL authentication error: Authentication failed during "
               "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512")


@dataclass
class Secured:
    """A running secured broker of either kind: its SASL_PLAINTEXT bootstrap, and the
    properties file with which Kafka's tools log in there as admin."""

    sasl_bootstrap: str
    admin_properties: Path


@dataclass
class Observed:
    """What one broker's run of the scenario showed: each tool's normalised output (or its
    exit status and the error it gave), what alice's clients got, and each raw
    DescribeClientQuotas answer as (error code name, message, number of entries)."""

    tools: dict[str, str] = field(default_factory=dict)
    clients: dict[str, str] = field(default_factory=dict)
    quotas: dict[str, tuple[str, str | None, int | None]] = field(default_factory=dict)


# --------------------------------------------------------------------------- clients


def _sasl(bootstrap: str, user: str, password: str) -> dict[str, object]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password}


def _error_text(error: KafkaError) -> str:
    """librdkafka's error without what differs between two brokers: the broker's address
    in front, the time and state in parentheses behind."""
    text = re.sub(r"^\S+://\S+: ", "", error.str())
    text = re.sub(r" \(after \d+ms in state \w+.*\)$", "", text)
    return f"{error.name()}: {text}"


def login(bootstrap: str, user: str, password: str) -> str:
    """Whether `user` gets in with SCRAM-SHA-512: "ok" once a Metadata answer comes back,
    else the authentication error librdkafka reports (a refusal is reported within
    milliseconds, so this waits for whichever comes first)."""
    errors: list[KafkaError] = []
    producer = Producer({**_sasl(bootstrap, user, password), "error_cb": errors.append})
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        producer.poll(0.1)
        refused = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        if refused:
            return _error_text(refused[0])
        try:
            producer.list_topics(timeout=0.5)
            return "ok"
        except KafkaException:
            continue
    return f"neither in nor refused after 20 s: {[_error_text(e) for e in errors]}"


def produce(bootstrap: str) -> str:
    """alice produces one record to the topic: "ok" or the delivery error's name."""
    reports: list[KafkaError | None] = []
    producer = Producer({**_sasl(bootstrap, *ALICE), "message.timeout.ms": 15000})
    producer.produce(TOPIC, b"from alice",
                     on_delivery=lambda err, _msg: reports.append(err))
    producer.flush(20)
    assert reports, "no delivery report"
    return "ok" if reports[0] is None else reports[0].name()


def consume(bootstrap: str, group: str) -> str:
    """alice consumes the topic in `group`: how many records she read, or the first error
    her consumer got."""
    consumer = Consumer({**_sasl(bootstrap, *ALICE), "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    read = 0
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and read < RECORDS:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                return msg.error().name()
            read += 1
    finally:
        consumer.close()
    return f"{read} records"


# (filter components as (entity type, match type, match), strict) of the DescribeClientQuotas
# requests sent raw: the one kafka-configs sends for a user, and one of each refusal.
QUOTA_FILTERS: dict[str, tuple[tuple[tuple[str, int, str | None], ...], bool]] = {
    "user alice": ((("user", 0, "alice"),), False),
    "everything, strict": ((), True),
    "empty entity type": ((("", 0, "alice"),), False),
    "unknown entity type": ((("topic", 0, "t"),), False),
    "user twice": ((("user", 0, "alice"), ("user", 2, None)), False),
    "exact without a name": ((("user", 0, None),), False),
    "default with a name": ((("client-id", 1, "c"),), False),
    "unknown match type": ((("user", 7, None),), False),
    "ip with user": ((("ip", 2, None), ("user", 1, None)), False),
}


def describe_quotas(seen: Observed, bootstrap: str, who: tuple[str, str]) -> None:
    """DescribeClientQuotas sent raw as `who` (logged in with SCRAM-SHA-512), v0 and v1 of
    each of `QUOTA_FILTERS`: (error name, message, number of entries or None)."""
    host, port = bootstrap.rsplit(":", 1)
    with RawConnection(host, int(port)) as conn:
        assert scram_login(conn, "SCRAM-SHA-512", *who).error_code == 0
        for name, (components, strict) in QUOTA_FILTERS.items():
            for module in (quotas_v0, quotas_v1):
                answer = conn.request(module.DescribeClientQuotasRequest(
                    components=tuple(module.ComponentData(entity_type=t, match_type=m, match=n)
                                     for t, m, n in components), strict=strict))
                entries = None if answer.entries is None else len(answer.entries)
                version = module.DescribeClientQuotasRequest.__version__
                seen.quotas[f"{who[0]}: {name}, v{version}"] = (
                    answer.error_code.name, answer.error_message, entries)


# --------------------------------------------------------------------------- tools


def _normalised(text: str, bootstrap: str) -> str:
    """A tool's output with the broker's address taken out and the order of what Kafka
    keeps in a set (the ACLs of one resource, the resources) made canonical: blocks
    separated by blank lines, sorted, each block's first line kept first."""
    text = text.replace(bootstrap, "<bootstrap>")
    blocks = []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = [line.strip() for line in block.splitlines() if line.strip()]
        if lines:
            blocks.append("\n".join(lines[:1] + sorted(lines[1:])))
    return "\n\n".join(sorted(blocks))


def tool(observed: Observed, step: str, broker: Secured, main: str, *args: str) -> str:
    """Run one of Kafka's tools as admin and record its normalised output under `step`;
    a failure is recorded as its exit status and the exception it printed (a finding to
    compare, not a reason to stop the scenario)."""
    done = run_kafka_tool(main, broker.sasl_bootstrap, "--command-config",
                          str(broker.admin_properties), *args)
    if done.returncode == 0:
        out = _normalised(done.stdout.decode(errors="replace"), broker.sasl_bootstrap)
    else:
        said = (done.stdout + done.stderr).decode(errors="replace").strip().splitlines()
        causes = [line for line in said if "Exception:" in line] or \
            [line for line in said if "Error" in line] or said or [""]
        out = f"exit {done.returncode}: {causes[0].strip()}".replace(
            broker.sasl_bootstrap, "<bootstrap>").replace(str(broker.admin_properties),
                                                          "<admin.properties>")
    observed.tools[step] = out
    return out


# --------------------------------------------------------------------------- the scenario


def scenario(broker: Secured) -> Observed:
    """The issue's scenario on one broker; everything it observed."""
    seen = Observed()
    bootstrap = broker.sasl_bootstrap
    admin = AdminClient(_sasl(bootstrap, *SCRAM_ADMIN))
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    seed = Producer(_sasl(bootstrap, *SCRAM_ADMIN))
    for i in range(RECORDS):
        seed.produce(TOPIC, f"record-{i}".encode())
    assert seed.flush(30) == 0

    alice = ["--entity-type", "users", "--entity-name", ALICE[0]]
    tool(seen, "configs --alter --add-config", broker, CONFIGS, "--alter", "--add-config",
         f"SCRAM-SHA-512=[password={ALICE[1]}]", *alice)
    tool(seen, "configs --describe", broker, CONFIGS, "--describe", *alice)
    seen.clients["login"] = login(bootstrap, *ALICE)
    seen.clients["login, wrong password"] = login(bootstrap, ALICE[0], "wrong")
    seen.clients["produce, no ACLs"] = produce(bootstrap)
    describe_quotas(seen, bootstrap, SCRAM_ADMIN)
    describe_quotas(seen, bootstrap, ALICE)

    topic = ["--topic", TOPIC]
    group = ["--group", GROUP_PREFIX, "--resource-pattern-type", "prefixed"]
    principal = ["--allow-principal", f"User:{ALICE[0]}"]
    tool(seen, "acls --add topic", broker, ACLS, "--add", *principal, "--operation", "Read",
         "--operation", "Describe", *topic)
    tool(seen, "acls --add group", broker, ACLS, "--add", *principal, "--operation", "Read",
         *group)
    tool(seen, "acls --list", broker, ACLS, "--list")
    seen.clients["produce, READ and DESCRIBE"] = produce(bootstrap)
    seen.clients["consume, group in the prefix"] = consume(bootstrap, GROUP_PREFIX + "audit")
    seen.clients["consume, group outside the prefix"] = consume(bootstrap, "audit")

    tool(seen, "acls --remove topic", broker, ACLS, "--remove", "--force", *topic)
    tool(seen, "acls --remove group", broker, ACLS, "--remove", "--force", *group)
    tool(seen, "acls --list, after --remove", broker, ACLS, "--list")

    tool(seen, "configs --alter --delete-config", broker, CONFIGS, "--alter",
         "--delete-config", "SCRAM-SHA-512", *alice)
    seen.clients["login, credential deleted"] = login(bootstrap, *ALICE)
    return seen


def _admin_properties(path: Path) -> Path:
    user, password = SCRAM_ADMIN
    path.write_text("security.protocol=SASL_PLAINTEXT\n"
                    "sasl.mechanism=SCRAM-SHA-512\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
                    f'required username="{user}" password="{password}";\n')
    return path


def _require_java_and_mvn() -> None:
    missing = reference_tools_missing()
    if missing:
        pytest.skip("the security scenario runs Kafka's kafka-configs and kafka-acls, which "
                    f"need java and mvn on PATH: missing {', '.join(missing)}")


def _observed(broker: ReferenceBroker | CoterieBroker, sasl_port: int, base: Path) -> Observed:
    """Start `broker`, run the scenario as admin over its SASL listener, stop it."""
    broker.start()
    try:
        return scenario(Secured(f"127.0.0.1:{sasl_port}",
                                _admin_properties(base / "admin.properties")))
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def kafka_observed(tmp_path_factory: pytest.TempPathFactory) -> Observed:
    """Apache Kafka 4.2.1 secured as `SECURITY` says, its admin user written at format time;
    the scenario's observations (the broker is stopped before the coterie run starts)."""
    _require_java_and_mvn()
    load_reference_kafka().fetch()
    base = tmp_path_factory.mktemp("secured-kafka")
    port, sasl_port, controller_port = free_port(), free_port(), free_port()
    broker = ReferenceBroker(base / "data", port=port,
                             config=secured_reference_config(port, sasl_port, controller_port,
                                                             SECURITY),
                             format_args=scram_admin_format_args())
    return _observed(broker, sasl_port, base)


@pytest.fixture(scope="module")
def coterie_observed(tmp_path_factory: pytest.TempPathFactory) -> Observed:
    """coterie with the same settings and listeners (less Kafka's controller listener),
    admin made as Kafka's is: `coterie serve --add-scram` with the spec Kafka's
    `kafka-storage format` is given."""
    _require_java_and_mvn()
    base = tmp_path_factory.mktemp("secured-coterie")
    broker = CoterieBroker(base / "data")
    sasl_port = free_port()
    broker.config.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{broker.port},"
                     f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        **SECURITY,
    })
    broker.args = scram_admin_format_args()  # coterie's flag is Kafka's storage tool's
    return _observed(broker, sasl_port, base)


# --------------------------------------------------------------------------- the checks

ACL_LIST = (
    "Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=billing-, "
    "patternType=PREFIXED)`:\n"
    "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n\n"
    "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=payments, "
    "patternType=LITERAL)`:\n"
    "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)\n"
    "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
)


def check(seen: Observed) -> None:
    """What the scenario should show on any broker that behaves as Kafka documents."""
    assert seen.tools["configs --alter --add-config"] == \
        "Completed updating config for user alice.", seen.tools
    assert seen.tools["configs --describe"] == \
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=4096"
    assert seen.tools["acls --list"] == ACL_LIST
    assert seen.tools["acls --list, after --remove"] == ""
    assert seen.tools["configs --alter --delete-config"] == \
        "Completed updating config for user alice."
    assert seen.quotas["admin: user alice, v1"] == ("none", "", 0)
    assert seen.quotas["admin: unknown entity type, v0"] == \
        ("unsupported_version", "Unsupported entity type topic", None)
    assert seen.quotas["admin: user twice, v1"] == \
        ("invalid_request", "Entity type user cannot appear more than once in the filter.", None)
    assert {seen.quotas[k] for k in seen.quotas if k.startswith("alice:")} == \
        {("cluster_authorization_failed", None, None)}
    assert seen.clients == {
        "login": "ok",
        "login, wrong password": AUTH_FAILED,
        "produce, no ACLs": "TOPIC_AUTHORIZATION_FAILED",
        "produce, READ and DESCRIBE": "TOPIC_AUTHORIZATION_FAILED",
        "consume, group in the prefix": f"{RECORDS} records",
        "consume, group outside the prefix": "GROUP_AUTHORIZATION_FAILED",
        "login, credential deleted": AUTH_FAILED,
    }


def test_kafka_shows_what_the_scenario_expects(kafka_observed: Observed) -> None:
    """The expectations themselves are checked against Kafka: if Kafka disagrees, the
    expectation is wrong, not coterie."""
    check(kafka_observed)


def test_coterie_shows_what_the_scenario_expects(coterie_observed: Observed) -> None:
    check(coterie_observed)


def test_coterie_and_kafka_observe_the_same(kafka_observed: Observed,
                                             coterie_observed: Observed) -> None:
    """Every tool output (including the `--add` and `--remove` listings the expectations do
    not spell out) and every client outcome, step by step."""
    differences = {}
    for part in ("tools", "clients", "quotas"):
        ours, theirs = getattr(coterie_observed, part), getattr(kafka_observed, part)
        assert ours.keys() == theirs.keys()
        differences.update({f"{part}: {step}": {"coterie": ours[step], "kafka": theirs[step]}
                            for step in ours if ours[step] != theirs[step]})
    assert differences == {}
