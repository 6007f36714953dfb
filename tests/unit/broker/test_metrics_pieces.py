"""The pure pieces of the broker's metrics (coterie.broker.metrics*): the settings, the Basic
credentials and their check against PLAIN users and SCRAM credentials, the rebalance
bookkeeping from group events, the ACL filter, and a scrape's wait for a busy loop."""

from __future__ import annotations

import asyncio
import base64
import threading
import time

import pytest
from prometheus_client.core import GaugeMetricFamily

from coterie.broker import metrics as metrics_module
from coterie.broker.metrics import BrokerMetrics
from coterie.broker.metrics_auth import BasicAuth, basic_credentials
from coterie.broker.metrics_groups import GroupMetrics
from coterie.broker.metrics_http import filtered
from coterie.broker.metrics_settings import MetricsConfigError, metrics_settings, parse_listen
from coterie.broker.scram import MECHANISMS, credential_from_password


def _basic(text: str) -> str:
    return "Basic " + base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize(("text", "expected"), [
    ("127.0.0.1:9404", ("127.0.0.1", 9404)),
    (":9404", ("0.0.0.0", 9404)),
    ("[::1]:0", ("::1", 0)),
    (" localhost:80 ", ("localhost", 80)),
])
def test_parse_listen(text, expected):
    assert parse_listen(text) == expected


@pytest.mark.parametrize(("text", "why"), [
    ("9404", "HOST:PORT"), ("host:port", "not a number"), ("h:70000", "0 to 65535"),
    ("::1:9404", "brackets"), ("h:-1", "0 to 65535"),
])
def test_parse_listen_refuses(text, why):
    with pytest.raises(MetricsConfigError, match=why):
        parse_listen(text)


def test_metrics_settings():
    assert metrics_settings({}) is None
    assert metrics_settings({"metrics.listen": "  "}) is None
    s = metrics_settings({"metrics.listen": "127.0.0.1:1",
                          "metrics.group.partition.series.enable": "FALSE",
                          "metrics.series.max": "5"})
    assert s is not None
    assert (s.partition_series, s.series_max) == (False, 5)
    with pytest.raises(MetricsConfigError, match="true or false"):
        metrics_settings({"metrics.listen": "h:1",
                          "metrics.group.partition.series.enable": "yes"})
    with pytest.raises(MetricsConfigError, match="0 or more"):
        metrics_settings({"metrics.listen": "h:1", "metrics.series.max": "-1"})
    with pytest.raises(MetricsConfigError, match="not an integer"):
        metrics_settings({"metrics.listen": "h:1", "metrics.series.max": "lots"})


@pytest.mark.parametrize("header", [
    None, "", "Bearer abc", "Basic", "Basic !!!", "Basic " + base64.b64encode(b"nocolon").decode(),
    "Basic " + base64.b64encode(b":pw").decode(), "Basic " + base64.b64encode(b"\xff:x").decode(),
    "Basic " + "A" * 5000,
])
def test_malformed_basic_credentials_are_none(header):
    assert basic_credentials(header) is None


def test_basic_credentials():
    assert basic_credentials(_basic("alice:se:cret")) == ("alice", "se:cret")
    assert basic_credentials("basic " + base64.b64encode("é:ü".encode()).decode()) == ("é", "ü")


def test_basic_auth_checks_plain_users_and_scram_credentials():
    sha512 = MECHANISMS["SCRAM-SHA-512"]
    stored = {("carol", sha512): credential_from_password(sha512, "carol-pw", 4096, b"salt" * 4)}
    auth = BasicAuth({"alice": "alice-pw"}, lambda user, m: stored.get((user, m)))
    assert auth.user(_basic("alice:alice-pw")) == "alice"
    assert auth.user(_basic("alice:wrong")) is None
    assert auth.user(_basic("carol:carol-pw")) == "carol"
    assert auth.user(_basic("carol:alice-pw")) is None
    assert auth.user(_basic("nobody:x")) is None
    assert auth.user(None) is None


def _event(kind: str, ts: int, member: str | None = None, **details: object) -> dict:
    return {"ts": ts, "group": "g", "protocol": "classic", "type": kind,
            "generation": 1, "member": member, "details": details}


def test_rebalances_and_time_to_stable_come_from_the_events():
    tracked = GroupMetrics()
    tracked.observe_events("g", [_event("member_joined", 0, "m1"),
                                 _event("rebalance_started", 1000)], 1000)
    tracked.observe_events("g", [_event("state_changed", 3500, state="Stable")], 3500)
    # A member's state change is not the group's.
    tracked.observe_events("g", [_event("rebalance_started", 4000),
                                 _event("state_changed", 4100, "m1", state="Stable")], 4100)
    t = tracked.tracked["g"]
    assert t.rebalances == 2
    assert t.to_stable.sum == 2.5
    assert dict(t.to_stable.buckets())["2.5"] == 1
    assert t.since_ms == 4000  # the second rebalance is still under way
    tracked.observe_events("g", [_event("group_deleted", 5000)], 5000)
    assert "g" not in tracked.tracked


def test_filtered_keeps_only_visible_groups_and_topics():
    family = GaugeMetricFamily("x", "x", labels=["group", "topic"])
    family.add_metric(["a", "t1"], 1)
    family.add_metric(["b", "t1"], 2)
    family.add_metric(["a", "t2"], 3)
    plain = GaugeMetricFamily("y", "y", value=7)
    out = list(filtered([family, plain], {"a"}.__contains__, {"t1"}.__contains__))
    assert [s.value for s in out[0].samples] == [1]
    assert out[1] is plain


def test_a_scrape_does_not_wait_for_a_blocked_loop_longer_than_its_timeout(monkeypatch):
    """A loop stuck in a callback: the scrape thread gives up after SNAPSHOT_TIMEOUT_S
    (and serves the last snapshot) instead of waiting for it."""
    monkeypatch.setattr(metrics_module, "SNAPSHOT_TIMEOUT_S", 0.3)
    settings = metrics_settings({"metrics.listen": "127.0.0.1:0"})
    assert settings is not None
    metrics = BrokerMetrics(settings, broker=None)
    loop = asyncio.new_event_loop()
    release = threading.Event()
    thread = threading.Thread(target=loop.run_forever)
    thread.start()
    try:
        metrics.loop = loop
        loop.call_soon_threadsafe(release.wait, 10)  # the loop is busy
        started = time.monotonic()
        assert metrics.collect_from_thread() is None
        assert time.monotonic() - started < 2
    finally:
        release.set()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
