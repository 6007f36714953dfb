"""The console's brokers page in a cluster (issue 28, "brokers and leases in a cluster"):
three brokers on a real PostgreSQL, each serving its console on `console.listen`. The page
lists the three brokers and every lease of the cluster, read from the database (holder,
epoch, time to expiry, coordinator shards marked); after one broker is killed -9 its leases
show as moved to the others. `coterie console --bootstrap-server` against the same cluster
has no database and keeps saying that leases are not shown.
"""

from __future__ import annotations

import contextlib
import html
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cluster.test_cluster_clients import create
from tests.fixtures.coterie_broker import free_port, terminate
from tests.fixtures.coterie_cluster import CoterieCluster, uri_of, wait_until
from tests.fixtures.postgres import PostgresServer
from tests.integration.test_console import _get, _wait_http

pytestmark = pytest.mark.timeout(240)

TOPIC, PARTITIONS = "orders", 4
# SMALL_INTERNAL_TOPICS of the cluster fixture: 6 group and 3 transaction coordinator shards.
GROUP_SHARDS, TXN_SHARDS = 6, 3

_LEASE = re.compile(
    r'<tr class="(lease(?: dead)?)"><td>(.*?)</td><td>(.*?)</td>\s*'
    r'<td class="num">(.*?)</td><td class="num">(\d+)</td>\s*<td>(.*?)</td></tr>', re.S)
_BROKER = re.compile(r'<tr><td class="num">(\d+)</td><td>')


@dataclass(frozen=True)
class Row:
    resource: str
    coordinator: str
    holder: int | None
    epoch: int
    expires: str
    live: bool


def leases_of(body: str) -> dict[str, Row]:
    rows = {}
    for cls, resource, coordinator, holder, epoch, expires in _LEASE.findall(body):
        resource = html.unescape(resource)
        rows[resource] = Row(resource, coordinator, int(holder) if holder.isdigit() else None,
                             int(epoch), expires, cls == "lease")
    return rows


def brokers_of(body: str) -> set[int]:
    table = body.split('id="brokers"', 1)[1].split("</table>", 1)[0]
    return {int(n) for n in _BROKER.findall(table)}


def expected_resources() -> set[str]:
    return ({f"{TOPIC}-{p}" for p in range(PARTITIONS)}
            | {f"__consumer_offsets-{p}" for p in range(GROUP_SHARDS)}
            | {f"__transaction_state-{p}" for p in range(TXN_SHARDS)})


@pytest.fixture
def cluster(tmp_path: Path, postgres_server: PostgresServer) -> Iterator[CoterieCluster]:
    dsn = postgres_server.create_database()
    c = CoterieCluster(tmp_path, uri_of(postgres_server, dsn))
    for b in c.brokers:
        b.console_port = free_port()  # type: ignore[attr-defined]
        b.config["console.listen"] = f"127.0.0.1:{b.console_port}"  # type: ignore[attr-defined]
    try:
        c.start()
        for b in c.brokers:
            _wait_http(b.console_port)  # type: ignore[attr-defined]
        yield c
    finally:
        c.stop()
        with contextlib.suppress(Exception):
            postgres_server.drop_database(dsn)


def _page(port: int) -> str:
    status, body, _ = _get(port, "/brokers", timeout=15)
    assert status == 200, body
    return body


def test_brokers_page_shows_every_lease_and_its_move_after_a_kill(
        cluster: CoterieCluster, tmp_path: Path) -> None:
    create(cluster, TOPIC, PARTITIONS)
    port = cluster.broker(1).console_port  # type: ignore[attr-defined]
    wanted = expected_resources()

    def settled() -> dict[str, Row] | None:
        body = _page(port)
        rows = leases_of(body)
        ok = (brokers_of(body) == {1, 2, 3} and wanted <= set(rows)
              and all(rows[r].live and rows[r].holder in (1, 2, 3) for r in wanted))
        return rows if ok else None

    def steady() -> dict[str, Row] | None:
        """The leases settled, and still where they were 3 s later: at a cluster's start
        the brokers still even out their shares (a lease can move once more after every
        lease is live), and the comparison after the kill needs the spread it ended with."""
        first = settled()
        if first is None:
            return None
        time.sleep(3)
        again = settled()
        same = again is not None and all(
            (again[r].holder, again[r].epoch) == (first[r].holder, first[r].epoch)
            for r in wanted)
        return again if same else None

    before = wait_until(steady, 90, "every lease live on the brokers page, and staying put")
    body = _page(port)
    assert 'id="no-leases"' not in body and 'id="leases-error"' not in body
    assert all(before[f"__consumer_offsets-{p}"].coordinator == "group"
               for p in range(GROUP_SHARDS))
    assert all(before[f"__transaction_state-{p}"].coordinator == "transaction"
               for p in range(TXN_SHARDS))
    assert all(before[f"{TOPIC}-{p}"].coordinator == "" for p in range(PARTITIONS))
    assert all(re.fullmatch(r"in \d+\.\d s", before[r].expires) for r in wanted)
    # Every broker's console reads the same table: broker 3's page names the same holders.
    other = leases_of(_page(cluster.broker(3).console_port))  # type: ignore[attr-defined]
    assert {r: other[r].holder for r in wanted} == {r: before[r].holder for r in wanted}

    # The broker holding the most leases (not broker 1, whose console is read) is killed.
    held = {n: {r for r in wanted if before[r].holder == n} for n in (2, 3)}
    victim = max(held, key=lambda n: len(held[n]))
    moved = held[victim]
    assert moved, f"neither broker 2 nor 3 holds a lease: {before}"
    cluster.broker(victim).kill9()

    def taken_over() -> dict[str, Row] | None:
        body = _page(port)
        rows = leases_of(body)
        ok = (wanted <= set(rows)
              and all(rows[r].live and rows[r].holder not in (None, victim) for r in wanted)
              and victim not in brokers_of(body))
        return rows if ok else None

    after = wait_until(taken_over, 45, f"the leases of node {victim} moved to the others")
    for r in moved:  # a new tenure: a new holder at a higher epoch
        assert after[r].holder in {1, 2, 3} - {victim}
        assert after[r].epoch > before[r].epoch, (r, before[r], after[r])
    for r in wanted - moved:
        # Held by a survivor. Each topic's partitions are spread evenly over the live brokers
        # (coterie.storage.tenure.spread), so one of a survivor's may move to the other
        # survivor too: then it is a new tenure, at a higher epoch.
        assert after[r].holder in {1, 2, 3} - {victim}
        if after[r].holder != before[r].holder:
            assert after[r].epoch > before[r].epoch, (r, before[r], after[r])

    # `coterie console` against the cluster has no database: no leases, said so.
    listen = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "coterie", "console", "--bootstrap-server",
         cluster.broker(1).bootstrap, "--listen", f"127.0.0.1:{listen}"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "console.log", "wb"))  # noqa: SIM115
    try:
        _wait_http(listen)
        body = _page(listen)
        assert 'id="no-leases"' in body and not leases_of(body)
        assert brokers_of(body) == {1, 2, 3} - {victim}
    finally:
        terminate(proc, 10)
