"""The HTTP side of the metrics (coterie.broker.metrics): `/metrics` on `metrics.listen`.

A small WSGI app on prometheus_client's threading WSGI server, on threads of its own: the
event loop never serves HTTP. `GET /metrics` (or HEAD) answers the Prometheus text format;
any other path is 404, any other method 405.

**Who sees what** (docs/operations.md, "Security"):

* A broker with a SASL listener authenticates its clients, so a scrape must too: HTTP Basic
  credentials of one of the broker's users (coterie.broker.metrics_auth), else 401 with a
  `WWW-Authenticate` challenge. A failed attempt is answered after
  `connection.failed.authentication.delay.ms`, as a failed SASL authentication is.
* Without a SASL listener `/metrics` is open; the scraper is `User:ANONYMOUS`.
* When an authorizer is configured (`authorizer.class.name`), a series labelled with a
  group or a topic is shown only if the principal, from the scraper's address, may
  DESCRIBE that group or topic under the broker's ACLs (super users see all). Those
  decisions are made on the event loop, in the same step as the snapshot. Series without
  such labels (requests, connections, loop lag) are shown to every principal let in.

Bounded: at most `MAX_SCRAPES` scrapes are served at once (more are answered 503 at once),
and a connection that does not send its request within `READ_TIMEOUT_S` is closed.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import Metric
from prometheus_client.exposition import ThreadingWSGIServer

from coterie.broker.metrics_auth import BasicAuth
from coterie.security import AclOperation, ResourceType

__all__ = ["MetricsServer", "filtered"]

log = logging.getLogger("coterie.metrics")

MAX_SCRAPES = 8
READ_TIMEOUT_S = 10.0
REALM = 'Basic realm="coterie metrics", charset="UTF-8"'


class _QuietHandler(WSGIRequestHandler):
    """Logs nothing per request (a scrape every few seconds is not news); closes a
    connection that sends nothing for READ_TIMEOUT_S."""

    timeout = READ_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingWSGIServer):
    """prometheus_client's thread-per-request server, with at most MAX_SCRAPES at once."""

    allow_reuse_address = True
    slots = threading.BoundedSemaphore(MAX_SCRAPES)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            with contextlib.suppress(OSError):
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                                b"Retry-After: 1\r\nConnection: close\r\n\r\n")
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


def filtered(families: Iterable[Metric], groups: Callable[[str], bool],
             topics: Callable[[str], bool]) -> Iterator[Metric]:
    """`families` with only the samples whose `group` and `topic` labels pass."""
    for family in families:
        samples = [s for s in family.samples
                   if ("group" not in s.labels or groups(s.labels["group"]))
                   and ("topic" not in s.labels or topics(s.labels["topic"]))]
        if len(samples) == len(family.samples):
            yield family
            continue
        copy = Metric(family.name, family.documentation, family.type, family.unit)
        copy.samples = samples
        yield copy


class _Scrape:
    """What one scrape encodes: the registry's inline series, then the snapshot's."""

    def __init__(self, inline: Any, snapshot: list[Metric]) -> None:
        self.inline = inline
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        yield from self.inline.collect()
        yield from self.snapshot


def _labelled(families: Iterable[Metric], label: str) -> set[str]:
    return {s.labels[label] for f in families for s in f.samples if label in s.labels}


class MetricsServer:
    """Serves `/metrics` for a BrokerMetrics (module docstring) on host:port."""

    def __init__(self, metrics: Any, host: str, port: int) -> None:
        self.metrics = metrics
        broker = metrics.broker
        self.authorizer = broker.authorizer if broker.authorizer.enabled else None
        self.auth: BasicAuth | None = None
        if broker.sasl_settings:
            users: dict[str, str] = {}
            for settings in broker.sasl_settings.values():
                users.update(settings.plain_users)
            self.auth = BasicAuth(users, broker.scram_credentials.get)
        self.failure_delay_s = broker.config.get_int(
            "connection.failed.authentication.delay.ms") / 1000

        class Server(_Server):
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
            slots = threading.BoundedSemaphore(MAX_SCRAPES)

        self.httpd = make_server(host, port, self.app, Server, handler_class=_QuietHandler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       name="coterie-metrics", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- the app (on a server thread) -----------------------------------------------------
    def app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        def answer(status: str, body: bytes, headers: list[tuple[str, str]] | None = None,
                   content_type: str = "text/plain; charset=utf-8") -> list[bytes]:
            start_response(status, [("Content-Type", content_type),
                                    ("Content-Length", str(len(body))), *(headers or [])])
            return [] if environ.get("REQUEST_METHOD") == "HEAD" else [body]

        if environ.get("PATH_INFO") != "/metrics":
            return answer("404 Not Found", b"Not found: metrics are at /metrics\n")
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return answer("405 Method Not Allowed", b"Only GET and HEAD\n",
                          [("Allow", "GET, HEAD")])
        principal = "User:ANONYMOUS"
        if self.auth is not None:
            user = self.auth.user(environ.get("HTTP_AUTHORIZATION"))
            if user is None:
                if environ.get("HTTP_AUTHORIZATION"):
                    time.sleep(self.failure_delay_s)  # this thread's, never the loop's
                return answer("401 Unauthorized", b"Authentication required\n",
                              [("WWW-Authenticate", REALM)])
            principal = f"User:{user}"
        host = str(environ.get("REMOTE_ADDR") or "")
        view = None
        if self.authorizer is not None:
            view = self._view(principal, host)
        collected = self.metrics.collect_from_thread(view)
        if collected is None:
            if view is not None:
                return answer("503 Service Unavailable",
                              b"The broker is too busy to decide what you may see; retry\n",
                              [("Retry-After", "1")])
            snapshot = self.metrics.last
        else:
            snapshot, visible = collected
            if visible is not None:
                groups, topics = visible
                snapshot = list(filtered(snapshot, groups.__contains__,
                                         topics.__contains__))
        body = generate_latest(_Scrape(self.metrics.registry, snapshot))  # type: ignore[arg-type]
        return answer("200 OK", body, content_type=CONTENT_TYPE_LATEST)

    def _view(self, principal: str, host: str) -> Callable[[], tuple[set[str], set[str]]]:
        """What `principal` may DESCRIBE among the snapshot's groups and topics: decided on
        the loop, right after the snapshot (the ACLs live there)."""
        authorizer = self.authorizer
        metrics = self.metrics

        def visible() -> tuple[set[str], set[str]]:
            families = metrics.last
            groups = {g for g in _labelled(families, "group")
                      if authorizer.authorize_principal(principal, host, AclOperation.DESCRIBE,
                                                        ResourceType.GROUP, g)}
            topics = {t for t in _labelled(families, "topic")
                      if authorizer.authorize_principal(principal, host, AclOperation.DESCRIBE,
                                                        ResourceType.TOPIC, t)}
            return groups, topics
        return visible
