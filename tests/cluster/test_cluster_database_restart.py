"""The database restarted under load (issue 24, point 6): the brokers never crash, requests
meanwhile get retriable errors, they serve again once the database is back, and nothing
acknowledged is lost.

The test runs its own PostgreSQL server with synchronous_commit=on (the session's server
runs with it off for speed, and a crash of such a server may lose its last commits: exactly
what production must not allow, docs/cluster.md), and stops it as a crash would."""

from __future__ import annotations

import contextlib

import pytest

from tests.cluster.test_cluster_clients import (
    Produced,
    check_nothing_lost_or_doubled,
    consume_all,
    create,
    wait_for_leaders,
)
from tests.fixtures.coterie_cluster import CoterieCluster, uri_of, wait_until
from tests.fixtures.postgres import start_server

pytestmark = pytest.mark.timeout(300)


def test_a_database_restart_under_load_loses_nothing_acknowledged(tmp_path):
    server = start_server({"synchronous_commit": "on"})
    cluster = None
    try:
        cluster = CoterieCluster(tmp_path, uri_of(server, server.create_database()))
        cluster.start()
        create(cluster, "restarted")
        wait_for_leaders(cluster, "restarted", {1, 2, 3})
        with Produced(cluster, "restarted") as produced:
            wait_until(lambda: len(produced.acked) >= 1000, 60, "records before the restart")
            server.kill_and_restart(down_s=2.0)
            count = len(produced.acked)
            wait_until(lambda: len(produced.acked) >= count + 1000, 120,
                       "records after the restart")
        assert not produced.errors
        for b in cluster.brokers:
            assert b.proc.poll() is None, f"broker exited:\n{b.log_text()[-3000:]}"
            assert "Traceback" not in b.log_text(), b.log_text()[-6000:]
        assert any("cluster round failed" in b.log_text() for b in cluster.brokers)
        got = consume_all(cluster, "restarted", len(produced.acked), "after-restart")
        check_nothing_lost_or_doubled(produced, got)
    finally:
        if cluster is not None:
            cluster.stop()
        with contextlib.suppress(Exception):
            server.stop()
