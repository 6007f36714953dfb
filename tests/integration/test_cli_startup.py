"""Start-up failures are one clear line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

from tests.fixtures.coterie_broker import free_port


def run_serve(*args: str, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coterie", "serve", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_data_dir_that_is_a_file(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    r = run_serve("--port", str(free_port()), "--data-dir", str(not_a_dir))
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, r.stderr
    assert str(not_a_dir) in errors[0]


def test_data_dir_under_a_file(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = run_serve("--port", str(free_port()), "--data-dir", str(blocker / "data"))
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0, r.stderr


def test_port_taken(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run_serve("--port", str(port), "--data-dir", str(tmp_path / "d"))
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    assert "address already in use" in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "coterie: error" in ln]
    assert len(lines) == 1


def test_second_broker_on_same_data_dir(coterie):
    r = run_serve("--port", str(free_port()), "--data-dir", str(coterie.data_dir))
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    assert "coterie: error" in r.stderr


def test_bad_log_setting(tmp_path):
    r = run_serve("--port", str(free_port()), "--data-dir", str(tmp_path / "d"),
                  "--override", "log.segment.bytes=-5")
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    assert "segment.bytes" in r.stderr


def test_bad_config_value(tmp_path):
    cfg = tmp_path / "c.properties"
    cfg.write_text("num.partitions=zero\n")
    r = run_serve("--port", str(free_port()), "--data-dir", str(tmp_path / "d"),
                  "--config", str(cfg))
    assert r.returncode != 0
    assert "num.partitions" in r.stderr
    assert "Traceback" not in r.stderr


def test_stop_with_a_fetch_waiting_logs_no_traceback(coterie) -> None:
    """A SIGTERM while a consumer's long-poll Fetch is parked ends every connection quietly:
    Python 3.11's stream server used to log each cancelled connection as an asyncio error
    with a traceback."""
    from kio.schema.errors import ErrorCode

    from tests.integration.test_data_plane_raw import create
    from tests.kafka_raw import RawConnection

    with RawConnection(coterie.host, coterie.port) as conn:
        made = create(conn, "parked", 1)
        assert made.error_code == ErrorCode.none
        waiting = RawConnection(coterie.host, coterie.port)
        waiting.send(_long_poll(made.topic_id))
        time.sleep(0.5)  # the Fetch is parked in the broker's waiters
        coterie.stop()
        waiting.close()
    log = coterie.log_text()
    assert "shutting down" in log
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]


def _long_poll(topic_id) -> object:
    import datetime

    from kio.schema.fetch.v16.request import FetchPartition, FetchRequest, FetchTopic

    return FetchRequest(
        max_wait=datetime.timedelta(seconds=30), min_bytes=1, max_bytes=1 << 20,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=(FetchTopic(topic_id=topic_id, partitions=(FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=1 << 20),)),),
        forgotten_topics_data=(), rack_id="")
