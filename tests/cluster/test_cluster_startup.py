"""A cluster broker that cannot start says why on one line and exits non-zero (issue 24,
point 6): the database unreachable, its schema newer than this coterie, its node.id held by
a live broker."""

from __future__ import annotations

import subprocess
import sys

import psycopg

from tests.fixtures.coterie_broker import free_port
from tests.fixtures.coterie_cluster import uri_of


def serve(tmp_path, uri: str, node_id: int, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "coterie", "serve", "--port", str(free_port()),
         "--data-dir", str(tmp_path / f"node{node_id}"), "--storage", uri,
         "--node-id", str(node_id)],
        capture_output=True, text=True, timeout=timeout)


def one_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode != 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    errors = [line for line in r.stderr.splitlines() if "coterie: error" in line]
    assert len(errors) == 1, r.stderr
    return errors[0]


def test_an_unreachable_database_is_a_clear_error(tmp_path):
    port = free_port()  # nothing listens there
    line = one_error(serve(tmp_path, f"postgresql://coterie@127.0.0.1:{port}/nowhere", 1))
    assert "cannot reach the database at postgresql://127.0.0.1:" in line
    assert str(port) in line


def test_a_newer_schema_is_refused(tmp_path, postgres_server, pg_dsn):
    # As if a newer coterie had migrated the database.
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE schema_version (version integer PRIMARY KEY, "
                     "summary text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
        conn.execute("INSERT INTO schema_version (version, summary) VALUES (99, 'future')")
    line = one_error(serve(tmp_path, uri_of(postgres_server, pg_dsn), 1))
    assert "database schema is version 99" in line
    assert "upgrade coterie" in line


def test_a_node_id_in_use_is_refused(tmp_path, postgres_server, pg_dsn, coterie_factory):
    uri = uri_of(postgres_server, pg_dsn)
    coterie_factory(config={"storage": uri, "node.id": "7", "cluster.lease.ms": "3000"})
    line = one_error(serve(tmp_path, uri, 7))
    assert "node.id 7 is registered by a live broker" in line
