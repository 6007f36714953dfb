"""The console's HTTP side: aiohttp routes, HTTP Basic login, error pages, a source per user.

Routes: `/` (groups), `/groups/{id}`, `/topics`, `/topics/{name}`, `/brokers`. Every page is
rendered by `render.py` from what a `ConsoleSource` answers.

Security (docs/operations.md): when the cluster is reached over SASL
(`security.protocol` SASL_PLAINTEXT or SASL_SSL), the console keeps no credentials of its own:
every request must carry HTTP Basic credentials, and the console logs in to the cluster as
that user with the configured mechanism (PLAIN or SCRAM). What the page shows is then what the
cluster lets that principal describe. A source (its connections) is kept per user and password
for reuse, a bounded number of them; credentials the cluster refuses are asked for again
(401). Without SASL, no login is asked and the console connects as the cluster's listener
makes it (ANONYMOUS, or the TLS certificate's principal).

Bad input and failures: names are percent-decoded by the router and rendered escaped; an
unknown group or topic is a 404 page; a cluster that does not answer within the page timeout
is a 503 page; another error the cluster answered is a 502 page with its words; anything
unexpected is a 500 page with the error logged, never a crash of the
server or of the broker that hosts it.
"""

from __future__ import annotations

import asyncio
import binascii
import hashlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from aiohttp import BasicAuth, web

from coterie.console import render
from coterie.console.paging import BadPage, Page, page_of, parse_page
from coterie.console.views import (
    AuthenticationFailed,
    ConsoleError,
    ConsoleSource,
    Denied,
    GroupRow,
    NotFound,
    Unreachable,
)

log = logging.getLogger("coterie.console")

REALM = "coterie console"
MAX_SOURCES = 32  # logged-in users whose connections are kept open at once


@dataclass(frozen=True, slots=True)
class Credentials:
    username: str
    password: str

    def __repr__(self) -> str:
        return f"Credentials({self.username!r}, ***)"


# Makes a source for one user (None: the cluster needs no login).
SourceFactory = Callable[[Credentials | None], ConsoleSource]


class _NeedLogin(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConsoleApp:
    """The aiohttp application and the sources it reads through."""

    def __init__(self, make_source: SourceFactory, *, needs_login: bool,
                 page_timeout_s: float = 15.0) -> None:
        self.make_source = make_source
        self.needs_login = needs_login
        self.page_timeout_s = page_timeout_s
        self._sources: OrderedDict[tuple[str, bytes] | None, ConsoleSource] = OrderedDict()
        self._closing: set[asyncio.Future] = set()
        self.app = web.Application(middlewares=[self._errors])
        self.app.add_routes([
            web.get("/", self.groups),
            web.get("/groups/{group_id:.+}", self.group),
            web.get("/topics", self.topics),
            web.get("/topics/{name:.+}", self.topic),
            web.get("/brokers", self.brokers),
        ])
        self.app.on_cleanup.append(self._close_sources)

    # -- users and their sources ----------------------------------------------------------------
    def _credentials(self, request: web.Request) -> Credentials | None:
        if not self.needs_login:
            return None
        header = request.headers.get("Authorization")
        if not header:
            raise _NeedLogin("The cluster needs SASL: log in with a user of the cluster.")
        try:
            auth = BasicAuth.decode(header, encoding="utf-8")
        except (ValueError, binascii.Error, UnicodeDecodeError) as e:
            raise _NeedLogin("The Authorization header is not HTTP Basic credentials.") from e
        if not auth.login:
            raise _NeedLogin("A user name is needed.")
        return Credentials(auth.login, auth.password)

    def _source(self, who: Credentials | None) -> ConsoleSource:
        key = None if who is None else (
            who.username, hashlib.sha256(who.password.encode()).digest())
        source = self._sources.get(key)
        if source is None:
            source = self.make_source(who)
            self._sources[key] = source
            while len(self._sources) > MAX_SOURCES:
                _, old = self._sources.popitem(last=False)
                task = asyncio.ensure_future(_quietly_close(old))
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
        self._sources.move_to_end(key)
        return source

    async def _forget(self, who: Credentials | None) -> None:
        key = None if who is None else (
            who.username, hashlib.sha256(who.password.encode()).digest())
        source = self._sources.pop(key, None)
        if source is not None:
            await _quietly_close(source)

    async def _close_sources(self, _app: web.Application) -> None:
        sources, self._sources = list(self._sources.values()), OrderedDict()
        for source in sources:
            await _quietly_close(source)

    async def _read(self, request: web.Request, fetch: Callable[[ConsoleSource], Awaitable[object]]
                    ) -> tuple[object, str | None]:
        """What `fetch` reads through this request's user's source, and who that user is."""
        who = self._credentials(request)
        source = self._source(who)
        try:
            async with asyncio.timeout(self.page_timeout_s):
                value = await fetch(source)
        except TimeoutError as e:
            await self._forget(who)
            raise Unreachable(f"the cluster did not answer within {self.page_timeout_s:g} s") \
                from e
        except AuthenticationFailed as e:
            await self._forget(who)
            raise _NeedLogin(f"The cluster refused the login: {e}") from e
        except Unreachable:
            await self._forget(who)  # reconnect from scratch next time
            raise
        return value, None if who is None else who.username

    # -- pages --------------------------------------------------------------------------------
    async def groups(self, request: web.Request) -> web.Response:
        number = parse_page(request.query.get("page"))

        async def fetch(source: ConsoleSource) -> Page[GroupRow]:
            page = page_of(render.sort_groups(list(await source.list_groups())), number)
            return replace(page, items=list(await source.summarize(page.items)))

        page, who = await self._read(request, fetch)
        return _html(render.groups_page(page, who))  # type: ignore[arg-type]

    async def group(self, request: web.Request) -> web.Response:
        group_id = request.match_info["group_id"]
        page = parse_page(request.query.get("page"))
        lag_page = parse_page(request.query.get("lag_page"))
        detail, who = await self._read(request, lambda s: s.describe_group(group_id))
        return _html(render.group_page(detail, page, lag_page, who))  # type: ignore[arg-type]

    async def topics(self, request: web.Request) -> web.Response:
        page = parse_page(request.query.get("page"))
        topics, who = await self._read(request, lambda s: s.list_topics())
        return _html(render.topics_page(list(topics), page, who))  # type: ignore[arg-type]

    async def topic(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        page = parse_page(request.query.get("page"))
        detail, who = await self._read(request, lambda s: s.describe_topic(name))
        return _html(render.topic_page(detail, page, who))  # type: ignore[arg-type]

    async def brokers(self, request: web.Request) -> web.Response:
        page = parse_page(request.query.get("page"))
        detail, who = await self._read(request, lambda s: s.brokers())
        return _html(render.brokers_page(detail, who, page))  # type: ignore[arg-type]

    # -- errors -------------------------------------------------------------------------------
    @web.middleware
    async def _errors(self, request: web.Request,
                      handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                      ) -> web.StreamResponse:
        try:
            return await handler(request)
        except _NeedLogin as e:
            return _html(render.error_page("Login needed", e.message), status=401,
                         headers={"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"'})
        except NotFound as e:
            return _html(render.error_page("Not found", str(e)), status=404)
        except BadPage as e:
            return _html(render.error_page("Bad request", str(e)), status=400)
        except Denied as e:
            return _html(render.error_page("Not allowed", str(e),
                                           "The cluster's ACLs do not let this user see it."),
                         status=403)
        except Unreachable as e:
            return _html(render.error_page(
                "Cluster unreachable", f"The console cannot read the cluster: {e}.",
                "Check that the brokers are up and that the console's bootstrap address is "
                "right; this page works again as soon as they answer."), status=503)
        except ConsoleError as e:  # the cluster answered with an error the page cannot show
            return _html(render.error_page("The cluster refused", str(e)), status=502)
        except web.HTTPException as e:
            if e.status == 404:
                return _html(render.error_page("Not found", f"No page at {request.path}."),
                             status=404)
            raise
        except Exception:
            log.exception("console: %s %s failed", request.method, request.path)
            return _html(render.error_page(
                "Console error", "The page could not be rendered; the error is in the log."),
                status=500)


async def _quietly_close(source: ConsoleSource) -> None:
    try:
        await source.close()
    except Exception:
        log.debug("console: closing a source failed", exc_info=True)


def _html(body: str, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # No script runs but the console's own (it has none): names can never become markup, and
    # this keeps even an injected inline script from running.
    security = {"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                                           "img-src 'self'; frame-ancestors 'none'",
                "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}
    return web.Response(text=body, status=status, content_type="text/html", charset="utf-8",
                        headers={**security, **(headers or {})})
