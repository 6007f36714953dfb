"""The web console (coterie.console) served by a real broker on `console.listen`, read in a
real headless Chromium (Debian's `chromium`, driven by Playwright with the system browser)
and over plain HTTP: a live cooperative rebalance on the group page, hostile names rendered
as text, 404s, bad page numbers, an unreachable cluster, and HTTP Basic login on a SASL broker
whose ACLs decide what each user sees.

The group page's screenshot is saved in the test's tmp dir on every run; it becomes
docs/images/console-group.png when that file is missing or COTERIE_DOCS_SCREENSHOTS=1.
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.fixtures.coterie_broker import CoterieBroker, free_port, terminate
from tests.integration.clients import create_topics
from tests.integration.group_clients import (
    ThreadedConsumer,
    all_partitions,
    confluent_assignments,
    wait_until_settled,
)

pytestmark = pytest.mark.timeout(180)

CHROMIUM = "/usr/bin/chromium"
HOSTILE = "<script>alert(1)</script>\"'é"
TOPIC, PARTITIONS = "orders", 6
DOCS_IMAGE = Path(__file__).resolve().parents[2] / "docs" / "images" / "console-group.png"


def _keep_for_docs(shot: Path, image: Path) -> None:
    """A screenshot becomes the docs' one when that is missing, or on request
    (COTERIE_DOCS_SCREENSHOTS=1): not on every run, which would leave every checkout with
    a changed image."""
    if os.environ.get("COTERIE_DOCS_SCREENSHOTS") == "1" or not image.exists():
        image.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, image)


def _get(port: int, path: str, auth: tuple[str, str] | None = None,
         timeout: float = 30.0) -> tuple[int, str, dict[str, str]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {}
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        return response.status, response.read().decode(), dict(response.getheaders())
    finally:
        conn.close()


def _wait_http(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            _get(port, "/brokers", timeout=5)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoterieBroker]:
    b = CoterieBroker(tmp_path_factory.mktemp("console") / "data")
    b.console_port = free_port()  # type: ignore[attr-defined]
    b.config.update({"console.listen": f"127.0.0.1:{b.console_port}",  # type: ignore[attr-defined]
                     "group.initial.rebalance.delay.ms": "0"})
    b.start()
    _wait_http(b.console_port)  # type: ignore[attr-defined]
    create_topics(b.bootstrap, {TOPIC: PARTITIONS})
    producer = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(60):
        producer.produce(TOPIC, value=b"x", partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    yield b
    b.stop()


@pytest.fixture(scope="module")
def chromium() -> Iterator[object]:
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"chromium is not installed ({CHROMIUM}; scripts/ensure-chromium installs "
                    "Debian's chromium package)")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="playwright (the test extra) drives chromium")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-gpu"])
        yield browser
        browser.close()


def _commit(bootstrap: str, group: str, offsets: dict[int, int]) -> None:
    """Commit offsets of `orders` for `group` without joining it (an Empty classic group)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()],
                 asynchronous=False)
    finally:
        c.close()


def test_a_live_cooperative_rebalance_shows_members_partitions_and_the_timeline(
        broker: CoterieBroker, chromium, tmp_path: Path) -> None:
    group = "console-coop"
    port = broker.console_port  # type: ignore[attr-defined]
    members = [ThreadedConsumer("confluent", broker.bootstrap, group, [TOPIC], f"member-{i}",
                                strategy="cooperative-sticky") for i in range(3)]
    try:
        for m in members[:2]:
            m.start()
        wait_until_settled(members[:2], all_partitions(TOPIC, PARTITIONS), quiet=1.0)
        members[2].start()  # a third joins: a cooperative rebalance moves two partitions
        wait_until_settled(members, all_partitions(TOPIC, PARTITIONS), quiet=1.0)
        _, held = confluent_assignments(broker.bootstrap, group)
        assert sorted(held) == ["member-0", "member-1", "member-2"]

        page = chromium.new_page(viewport={"width": 1100, "height": 900})
        page.goto(f"http://127.0.0.1:{port}/")
        page.click(f"a[href='/groups/{group}']")
        page.wait_for_selector("#members")
        assert page.inner_text("#group-id") == group
        assert page.inner_text("#group-state") == "Stable"
        rows = page.query_selector_all("#members tr")[1:]
        shown = {r.query_selector_all("td")[1].inner_text():
                 r.query_selector("td.assignment").inner_text() for r in rows}
        assert {client: frozenset(tuple(tp.rsplit("-", 1)) for tp in text.split(", ") if tp)
                for client, text in shown.items()} == {
            client: frozenset((t, str(p)) for t, p in tps) for client, tps in held.items()}
        # The timeline: a bar per partition held, and the rebalances (the first join, the
        # second member, the third); the page lists each with its cause and duration.
        svg = page.query_selector("svg#timeline")
        assert svg is not None and svg.is_visible()
        assert len(page.query_selector_all("svg#timeline g.member-row")) == 3
        bars = page.query_selector_all("svg#timeline g.held")
        assert len(bars) >= PARTITIONS
        assert len(page.query_selector_all("svg#timeline g.rebalance")) >= 2
        causes = page.inner_text("#rebalances")
        assert "joined" in causes
        # Lag per partition: one row per partition with its owner.
        assert len(page.query_selector_all("#lag tr")) == PARTITIONS + 1
        assert "10" in page.inner_text("#lag")  # each partition's end offset
        shot = tmp_path / "console-group.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
        # The docs' screenshot is this one: made when missing, or renewed on request (not on
        # every run, which would leave every checkout with a changed image).
        _keep_for_docs(shot, DOCS_IMAGE)
        # The groups and the topic's pages, for the docs too.
        for path, name, marker in (("/", "console-groups.png", "group"),
                                   (f"/topics/{TOPIC}", "console-topic.png", TOPIC)):
            page.goto(f"http://127.0.0.1:{port}{path}")
            assert marker in page.inner_text("main")
            other = tmp_path / name
            page.screenshot(path=str(other), full_page=True)
            assert other.stat().st_size > 5_000
            _keep_for_docs(other, DOCS_IMAGE.with_name(name))
        page.close()
    finally:
        for m in members:
            m.stop()


def test_a_hostile_group_name_renders_as_text_and_runs_nothing(
        broker: CoterieBroker, chromium, tmp_path: Path) -> None:
    _commit(broker.bootstrap, HOSTILE, {0: 1})
    port = broker.console_port  # type: ignore[attr-defined]
    page = chromium.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(f"http://127.0.0.1:{port}/")
    link = page.get_by_text(HOSTILE, exact=True)
    assert link.count() == 1
    link.click()
    page.wait_for_selector("#group-id")
    assert page.inner_text("#group-id") == HOSTILE
    assert page.evaluate("document.querySelectorAll('main script').length") == 0
    page.screenshot(path=str(tmp_path / "console-hostile.png"))
    page.close()
    assert dialogs == []


def test_pages_over_http(broker: CoterieBroker) -> None:
    port = broker.console_port  # type: ignore[attr-defined]
    _commit(broker.bootstrap, "console-plain", {0: 0, 1: 0})
    awkward = "a/b?c=%d#e f"
    _commit(broker.bootstrap, awkward, {0: 3})
    status, body, _ = _get(port, "/")
    link = f'/groups/{quote(awkward, safe="")}'
    assert status == 200 and f'href="{link}"' in body
    status, body, _ = _get(port, link)
    assert status == 200 and f'<span id="group-id">{awkward}</span>' in body
    status, body, headers = _get(port, "/")
    assert status == 200 and "console-plain" in body
    assert "script-src" not in headers["Content-Security-Policy"]  # no script at all
    status, body, _ = _get(port, "/groups/console-plain")
    assert status == 200 and 'id="lag"' in body and "Empty" in body
    status, body, _ = _get(port, "/topics")
    assert status == 200 and f'href="/topics/{TOPIC}"' in body and "__group_events" in body
    status, body, _ = _get(port, f"/topics/{TOPIC}")
    assert status == 200 and body.count('<td class="num">') >= PARTITIONS * 5
    assert "retention.ms" in body
    status, body, _ = _get(port, "/brokers")
    assert status == 200 and f"<td class=\"num\">{broker.port}</td>" in body
    assert 'id="no-leases"' in body


def test_a_kip_848_consumer_group_shows_its_type_epochs_and_assignment(
        broker: CoterieBroker) -> None:
    port = broker.console_port  # type: ignore[attr-defined]
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "console-848",
                  "group.protocol": "consumer", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        c.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        while len(c.assignment()) < PARTITIONS:
            assert time.monotonic() < deadline, "the consumer got no assignment"
            c.poll(0.2)
        status, body, _ = _get(port, "/")
        row = body[body.index('href="/groups/console-848"'):]
        row = row[:row.index("</tr>")]
        assert status == 200 and "<td>consumer</td>" in row and "<td>Stable</td>" in row
        assert '<td class="num">1</td>' in row  # one member
        status, body, _ = _get(port, "/groups/console-848")
        assert status == 200 and "type <b>consumer</b>" in body
        cell = body[body.index('<td class="assignment">'):]
        assert cell[:cell.index("</td>")].count(f"{TOPIC}-") == PARTITIONS
    finally:
        c.close()


def test_unknown_names_and_bad_pages_are_clear_errors(broker: CoterieBroker) -> None:
    port = broker.console_port  # type: ignore[attr-defined]
    for path in (f"/groups/{quote(HOSTILE + 'nope', safe='')}", "/groups/no-such-group",
                 "/topics/no-such-topic", f"/topics/{quote('bad name <b>', safe='')}",
                 "/nothing-here"):
        status, body, _ = _get(port, path)
        assert status == 404, path
        assert "Not found" in body and "<script>" not in body and "<b>" not in body
    status, body, _ = _get(port, "/?page=zero")
    assert status == 400 and "positive integer" in body
    assert _get(port, "/?page=999999")[0] == 200  # past the end: the last page


def test_an_unreachable_cluster_is_an_error_page_not_a_crash(tmp_path: Path) -> None:
    dead, port = free_port(), free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "coterie", "console", "--bootstrap-server", f"127.0.0.1:{dead}",
         "--listen", f"127.0.0.1:{port}", "--timeout", "1"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "console.log", "wb"))  # noqa: SIM115
    try:
        _wait_http(port)
        for path in ("/", "/groups/g", "/topics/t", "/brokers"):
            status, body, _ = _get(port, path)
            assert status == 503, path
            assert "Cluster unreachable" in body
        assert proc.poll() is None
    finally:
        terminate(proc, 10)


# -- a SASL broker with ACLs ---------------------------------------------------------------------
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
USERS = ("admin", "alice")
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" '
        + " ".join(f'user_{u}="{u}-secret"' for u in USERS) + ";")


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoterieBroker]:
    b = CoterieBroker(tmp_path_factory.mktemp("console-sasl") / "data")
    b.sasl_port, b.console_port = free_port(), free_port()  # type: ignore[attr-defined]
    b.config.update({
        "authorizer.class.name": STANDARD, "super.users": "User:admin",
        "listeners": f"PLAINTEXT://127.0.0.1:{b.port},"
                     f"SASL_PLAINTEXT://127.0.0.1:{b.sasl_port}",  # type: ignore[attr-defined]
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "console.listen": f"127.0.0.1:{b.console_port}",  # type: ignore[attr-defined]
    })
    b.args = ["--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-scram]"]
    b.start()
    conf = {"bootstrap.servers": f"127.0.0.1:{b.sasl_port}",  # type: ignore[attr-defined]
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": "admin", "sasl.password": "admin-secret"}
    admin = AdminClient(conf)
    for f in admin.create_topics([NewTopic("orders", 1, 1), NewTopic("payments", 1, 1)],
                                 request_timeout=10).values():
        f.result(10)
    acls = [AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL,
                       "User:alice", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW),
            AclBinding(ResourceType.GROUP, "team-a-", ResourcePatternType.PREFIXED,
                       "User:alice", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)]
    for f in admin.create_acls(acls, request_timeout=10).values():
        f.result(10)
    for group in ("team-a-1", "team-b-1"):
        c = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition("orders", 0, 0)], asynchronous=False)
        c.close()
    _wait_http(b.console_port)  # type: ignore[attr-defined]
    yield b
    b.stop()


def test_a_sasl_cluster_asks_for_a_login_and_shows_what_the_user_may_describe(
        sasl_broker: CoterieBroker) -> None:
    port = sasl_broker.console_port  # type: ignore[attr-defined]
    status, body, headers = _get(port, "/topics")
    assert status == 401 and headers["WWW-Authenticate"].startswith("Basic realm=")
    assert "log in" in body
    status, body, _ = _get(port, "/topics", auth=("alice", "guess"))
    assert status == 401 and "refused" in body
    status, body, _ = _get(port, "/topics", auth=("alice", "alice-secret"))
    assert status == 200 and "as alice" in body
    assert 'href="/topics/orders"' in body and "payments" not in body
    status, body, _ = _get(port, "/topics", auth=("admin", "admin-secret"))
    assert status == 200 and 'href="/topics/payments"' in body
    status, body, _ = _get(port, "/topics/payments", auth=("alice", "alice-secret"))
    assert status == 403 and "TOPIC_AUTHORIZATION_FAILED" in body
    status, body, _ = _get(port, "/", auth=("alice", "alice-secret"))
    assert status == 200 and "team-a-1" in body and "team-b-1" not in body
    status, body, _ = _get(port, "/", auth=("admin", "admin-secret"))
    assert "team-a-1" in body and "team-b-1" in body
    status, body, _ = _get(port, "/groups/team-b-1", auth=("alice", "alice-secret"))
    assert status == 403 and "GROUP_AUTHORIZATION_FAILED" in body
    status, body, _ = _get(port, "/groups/team-a-1", auth=("alice", "alice-secret"))
    assert status == 200 and "team-a-1" in body


def test_a_console_address_in_use_stops_the_broker_with_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        b = CoterieBroker(tmp_path / "data", config={"console.listen": f"127.0.0.1:{port}"})
        b.launch()
        try:
            assert b.proc is not None and b.proc.wait(30) == 1
        finally:
            b.stop()
    assert f"console cannot listen on 127.0.0.1:{port}" in b.log_text()


def test_coterie_console_logs_users_in_with_scram(sasl_broker: CoterieBroker,
                                                  tmp_path: Path) -> None:
    """`coterie console --command-config` against a SASL listener: each user logs in with
    SCRAM-SHA-512 (the file's own user is ignored) and sees what the ACLs allow."""
    port = free_port()
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                      "sasl.username=admin\nsasl.password=admin-secret\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "coterie", "console", "--bootstrap-server",
         f"127.0.0.1:{sasl_broker.sasl_port}", "--command-config", str(config),  # type: ignore[attr-defined]
         "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "console.log", "wb"))  # noqa: SIM115
    try:
        _wait_http(port)
        assert _get(port, "/topics")[0] == 401
        assert _get(port, "/topics", auth=("alice", "alice-secret"))[0] == 401  # PLAIN's
        status, body, _ = _get(port, "/topics", auth=("alice", "alice-scram"))
        assert status == 200 and 'href="/topics/orders"' in body and "payments" not in body
    finally:
        terminate(proc, 10)


def test_leases_are_shown_only_for_topics_the_user_may_describe(
        sasl_broker: CoterieBroker) -> None:
    # The lease reader stands in for the cluster's database (a lone broker on files has no
    # leases; tests/cluster/test_cluster_console.py reads a real one): what is under test is
    # that the brokers page filters leases by what the cluster lets the principal describe.
    from coterie.console.admin_source import AdminSource
    from coterie.console.views import Lease

    async def leases() -> tuple[Lease, ...]:
        return (Lease("__consumer_offsets-0", 1, 1, 5_000, "group", "__consumer_offsets"),
                Lease("orders-0", 1, 1, 5_000, None, "orders"),
                Lease("payments-0", 1, 1, 5_000, None, "payments"))

    async def shown(user: str, password: str) -> set[str]:
        source = AdminSource(
            f"127.0.0.1:{sasl_broker.sasl_port}",  # type: ignore[attr-defined]
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
             "sasl.username": user, "sasl.password": password}, leases=leases)
        try:
            detail = await source.brokers()
        finally:
            await source.close()
        assert detail.brokers and detail.leases is not None
        return {lease.resource for lease in detail.leases}

    def run(user: str, password: str) -> set[str]:
        # On a thread of its own: the browser tests' Playwright keeps a loop in this one.
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, shown(user, password)).result(60)

    assert run("alice", "alice-secret") == {"orders-0"}
    assert run("admin", "admin-secret") == {"__consumer_offsets-0", "orders-0", "payments-0"}


def test_a_lease_table_out_of_reach_still_shows_the_brokers_and_says_why(
        broker: CoterieBroker) -> None:
    # The read function `coterie serve` hands its console, aimed at a port nothing listens
    # on: the brokers page keeps its brokers and says why the leases are missing.
    from coterie.console.admin_source import AdminSource
    from coterie.console.lease_source import database_leases

    dead = free_port()

    async def brokers() -> object:
        source = AdminSource(broker.bootstrap, leases=database_leases(
            f"postgresql://coterie@127.0.0.1:{dead}/coterie", timeout_s=2))
        try:
            return await source.brokers()
        finally:
            await source.close()

    with ThreadPoolExecutor(1) as pool:
        detail = pool.submit(asyncio.run, brokers()).result(60)
    assert [b.port for b in detail.brokers] == [broker.port]  # type: ignore[attr-defined]
    assert detail.leases is None  # type: ignore[attr-defined]
    assert "OperationalError" in detail.leases_error  # type: ignore[attr-defined]
    assert str(dead) in detail.leases_error  # type: ignore[attr-defined]
