"""One asyncio TCP connection to one broker.

Theory of operation: a request gets the next correlation id, a future in `_pending` and its
bytes written at once (id assignment and write happen without an await in between, so the
bytes on the socket are in correlation order whatever the number of concurrent callers). One
reader task cuts the incoming stream into frames (`coterie.wire.framing.FrameBuffer`), reads
the correlation id at the head of each response header and completes the matching future,
decoding with the response class that was recorded for it. Requests may therefore be
pipelined freely; matching never relies on answers coming back in order (Kafka brokers do
answer in order, one connection at a time, which is why a parked JoinGroup holds back the
requests queued behind it on the same connection).

Versions: `open()` asks ApiVersions first and remembers the broker's ranges; each request is
then sent in the highest version the broker, kio and the caller's range all accept
(`coterie.client.versions`). A broker that does not know our ApiVersions version answers in
the v0 shape with UNSUPPORTED_VERSION and its list; we then ask again in the highest version it
listed.

Security (`coterie.client.security`): on SSL and SASL_SSL the socket is wrapped in TLS by
asyncio (Python's `ssl`, TLS 1.2+) before any byte of Kafka's protocol; on SASL_PLAINTEXT
and SASL_SSL, after ApiVersions, SaslHandshake v1 names the mechanism and SaslAuthenticate
requests carry its tokens (`coterie.client.sasl`) until the broker has accepted the client
and, for SCRAM, proved it knows the password too. Only then does `open()` return. A TLS
handshake the certificates fail, and a refused authentication, raise AuthenticationError
(not retried: see `coterie.client.errors`). Re-authentication (KIP-368) is not done: a
broker that sets a session lifetime closes the connection when it ends, and the caller
reconnects as after any close.

Failures are loud and final for this connection: a timed-out request closes it (as Kafka's
client does: the broker would answer the requests behind the stuck one only afterwards), and
an EOF or socket error fails every outstanding request with `ConnectionClosedError`. Reconnects
are the caller's business (`coterie.client.cluster`).

Every byte is encoded and decoded by kio (`coterie.wire.codec.encode_request` for requests,
kio's entity readers for responses); `coterie.wire.build.build` turns plain dicts into the kio
entity of the negotiated version.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import ssl
import struct
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from coterie.client.errors import (
    BrokerConnectionError,
    ConnectionClosedError,
    RequestTimeoutError,
    SaslAuthenticationError,
    SslAuthenticationError,
    UnsupportedVersionError,
)
from coterie.client.sasl import sasl_exchange
from coterie.client.security import SecuritySettings
from coterie.client.versions import (
    MEMBER_API_RANGES,
    SASL_API_RANGES,
    ApiKey,
    VersionRange,
    pick_version,
)
from coterie.wire.build import build
from coterie.wire.codec import encode_request, request_schema, response_schema
from coterie.wire.framing import FrameBuffer, FrameTooLarge

log = logging.getLogger("coterie.client")

_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
READ_CHUNK = 256 * 1024
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024
SOFTWARE_NAME = "coterie-client"
SOFTWARE_VERSION = "0.1.0"

Decoder = Callable[[bytes], Any]


@cache
def _decoder(response_cls: type) -> Decoder:
    read_header = entity_reader(response_cls.__header_schema__)
    read_body = entity_reader(response_cls)

    def decode(frame: bytes) -> Any:
        _, offset = read_header(frame, 0)
        body, _ = read_body(frame, offset)
        return body

    return decode


def _api_versions_decoder(version: int) -> Decoder:
    """ApiVersions answers of any version start with the v0 header and an error code; an
    UNSUPPORTED_VERSION answer is laid out as v0 whatever version was asked."""
    asked = _decoder(load_response_schema(ApiKey.API_VERSIONS, version))
    v0 = _decoder(load_response_schema(ApiKey.API_VERSIONS, 0))

    def decode(frame: bytes) -> Any:
        (code,) = _INT16.unpack_from(frame, 4)
        if code == ErrorCode.unsupported_version and version > 0:
            return v0(frame)
        return asked(frame)

    return decode


# TLS failures that say the connection broke, not that the peers refused each other: the
# broker went away mid-handshake (retried, as any lost connection).
_TLS_CONNECTION_ERRORS = (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError)


def _tls_failure(address: str, e: ssl.SSLError) -> SslAuthenticationError:
    """The AuthenticationError for a TLS failure, saying which setting to look at."""
    if isinstance(e, ssl.SSLCertVerificationError):
        why = (f"the broker's certificate was refused: {e.verify_message} (check "
               "ssl.ca.location / ssl.truststore.location, the CA that signed the broker's "
               "certificate, and ssl.endpoint.identification.algorithm)")
    elif "ALERT" in (e.reason or ""):
        why = (f"the broker refused the connection ({e.reason}): does it require a client "
               "certificate (ssl.certificate.location / ssl.keystore.location) from a CA it "
               "trusts?")
    else:
        why = f"{e.reason or e} (is the listener an SSL / SASL_SSL one?)"
    return SslAuthenticationError(f"TLS handshake with {address} failed: {why}")


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api_key={api_key}"


class Connection:
    """A connection to one broker, multiplexing concurrent requests by correlation id."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str,
                 port: int, *, client_id: str, request_timeout_ms: float,
                 api_ranges: Mapping[int, VersionRange],
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.api_ranges = dict(api_ranges)
        self.broker_ranges: dict[int, VersionRange] = {}
        self._reader = reader
        self._writer = writer
        self._frames = FrameBuffer(max_frame_bytes)
        self._pending: dict[int, tuple[asyncio.Future[Any], Decoder, str]] = {}
        self._correlation = 0
        self._closed_error: BrokerConnectionError | None = None
        self._read_task: asyncio.Task[None] | None = None
        # A TLS alert read from the broker (e.g. it refused our certificate after a TLS 1.3
        # handshake that had looked fine): turns the close into an SslAuthenticationError.
        self._tls_alert: ssl.SSLError | None = None
        # Re-authentication (KIP-368): the settings logged in with, when (loop time) the
        # session the broker gave should be renewed, and the renewal under way, if any.
        self._security: SecuritySettings | None = None
        self._reauth_at: float | None = None
        self._reauthenticating: asyncio.Future[None] | None = None

    # -- life cycle ---------------------------------------------------------------------------
    @classmethod
    async def open(cls, host: str, port: int, *, client_id: str = SOFTWARE_NAME,
                   connect_timeout_ms: float = 10_000, request_timeout_ms: float = 30_000,
                   api_ranges: Mapping[int, VersionRange] = MEMBER_API_RANGES,
                   max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                   security: SecuritySettings | None = None,
                   ssl_context: ssl.SSLContext | None = None) -> Connection:
        """Connect (TLS if `security` says so), negotiate versions and authenticate (SASL
        if `security` says so). Raises BrokerConnectionError if the broker cannot be
        reached, AuthenticationError if it and the client do not accept each other.
        `ssl_context`: a context built once from `security` (`Cluster` shares one); built
        here when not given."""
        security = security or SecuritySettings()
        if security.uses_tls and ssl_context is None:
            ssl_context = security.ssl_context()
        tls: dict[str, Any] = {}
        if security.uses_tls:
            tls = {"ssl": ssl_context, "server_hostname": host,
                   "ssl_handshake_timeout": connect_timeout_ms / 1000}
        try:
            async with asyncio.timeout(connect_timeout_ms / 1000):
                reader, writer = await asyncio.open_connection(host, port, limit=READ_CHUNK,
                                                               **tls)
        except _TLS_CONNECTION_ERRORS as e:
            raise BrokerConnectionError(f"cannot connect to {host}:{port}: {e!r}") from e
        except ssl.SSLError as e:
            raise _tls_failure(f"{host}:{port}", e) from e
        except (OSError, TimeoutError) as e:
            raise BrokerConnectionError(f"cannot connect to {host}:{port}: {e!r}") from e
        conn = cls(reader, writer, host, port, client_id=client_id,
                   request_timeout_ms=request_timeout_ms, api_ranges=api_ranges,
                   max_frame_bytes=max_frame_bytes)
        conn._read_task = asyncio.create_task(conn._read_loop(),
                                              name=f"coterie-conn-{host}:{port}")
        try:
            await conn._negotiate(connect_timeout_ms)
            if security.sasl is not None and security.uses_sasl:
                conn._security = security
                await conn._authenticate(security, connect_timeout_ms)
        except BrokerConnectionError as e:
            conn.close()
            if conn._tls_alert is not None:
                raise _tls_failure(conn.address, conn._tls_alert) from e
            raise
        except BaseException:
            conn.close()
            raise
        return conn

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def closed(self) -> bool:
        return self._closed_error is not None

    def close(self, reason: str = "closed by the client") -> None:
        """Close the socket and fail whatever is outstanding. Idempotent."""
        self._shut(ConnectionClosedError(f"connection to {self.address} {reason}"))

    async def aclose(self) -> None:
        """`close()` and wait for the reader task to finish."""
        self.close()
        if self._read_task is not None and self._read_task is not asyncio.current_task():
            with contextlib.suppress(BaseException):
                await self._read_task

    def _shut(self, error: BrokerConnectionError) -> None:
        if self._closed_error is not None:
            return
        self._closed_error = error
        self._writer.close()
        pending, self._pending = self._pending, {}
        for fut, _, what in pending.values():
            if not fut.done():
                fut.set_exception(type(error)(f"{what}: {error}"))
        if self._read_task is not None and self._read_task is not asyncio.current_task():
            self._read_task.cancel()

    # -- versions -----------------------------------------------------------------------------
    async def _negotiate(self, timeout_ms: float) -> None:
        wanted = self.api_ranges.get(ApiKey.API_VERSIONS, (0, 3))
        version = wanted[1]
        for _ in range(2):
            cls = load_request_schema(ApiKey.API_VERSIONS, version)
            request = build(cls, {"client_software_name": SOFTWARE_NAME,
                                  "client_software_version": SOFTWARE_VERSION})
            response = await self._roundtrip(request, _api_versions_decoder(version),
                                             timeout_ms)
            self.broker_ranges = {int(k.api_key): (int(k.min_version), int(k.max_version))
                                  for k in response.api_keys}
            if response.error_code == ErrorCode.none:
                return
            if response.error_code != ErrorCode.unsupported_version:
                raise BrokerConnectionError(
                    f"ApiVersions to {self.address} failed: {response.error_code.name}")
            retry = pick_version(ApiKey.API_VERSIONS,
                                 self.broker_ranges.get(ApiKey.API_VERSIONS), wanted)
            if retry is None or retry == version:
                break
            version = retry
        raise UnsupportedVersionError(f"{self.address} shares no ApiVersions version with us")

    # -- SASL ---------------------------------------------------------------------------------
    async def _authenticate(self, security: SecuritySettings, timeout_ms: float) -> None:
        """SaslHandshake, then SaslAuthenticate until the mechanism's exchange is done; the
        session's lifetime, when the broker gives one, sets when to re-authenticate."""
        credentials = security.sasl
        assert credentials is not None
        mechanism = credentials.mechanism
        try:
            shaken = await self._sasl_call(ApiKey.SASL_HANDSHAKE, {"mechanism": mechanism},
                                           timeout_ms)
        except UnsupportedVersionError as e:
            raise SaslAuthenticationError(f"{self.address} does not serve SaslHandshake v1 "
                                          f"(is it a SASL listener?): {e}") from e
        if shaken.error_code == ErrorCode.unsupported_sasl_mechanism:
            raise SaslAuthenticationError(
                f"{self.address} does not offer SASL {mechanism} (sasl.mechanism); it offers "
                f"{', '.join(shaken.mechanisms) or 'none'}")
        if shaken.error_code != ErrorCode.none:
            hint = (" (is it a SASL_PLAINTEXT / SASL_SSL listener?)"
                    if shaken.error_code == ErrorCode.illegal_sasl_state else "")
            raise SaslAuthenticationError(f"SaslHandshake to {self.address} failed: "
                                          f"{shaken.error_code.name.upper()}{hint}")
        exchange = sasl_exchange(credentials)
        token: bytes | None = exchange.first()
        while token is not None:
            answer = await self._sasl_call(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token},
                                           timeout_ms)
            if answer.error_code != ErrorCode.none:
                raise SaslAuthenticationError(
                    f"SASL {mechanism} authentication of {credentials.username!r} to "
                    f"{self.address} failed: "
                    f"{answer.error_message or answer.error_code.name.upper()}")
            token = exchange.answer(bytes(answer.auth_bytes))
        lifetime = getattr(answer, "session_lifetime", None)
        lifetime_s = lifetime.total_seconds() if lifetime is not None else 0.0
        # As Kafka's clients: renew at 85-95% of the session (spread, so that the clients of
        # one broker do not all come back at once).
        self._reauth_at = (asyncio.get_running_loop().time()
                           + lifetime_s * random.uniform(0.85, 0.95)) if lifetime_s > 0 else None
        log.debug("%s: authenticated as %r with SASL %s%s", self.address, credentials.username,
                  mechanism, f" for {lifetime_s:.1f} s" if lifetime_s > 0 else "")

    async def _sasl_call(self, api_key: int, fields: Mapping[str, Any],
                         timeout_ms: float) -> Any:
        """A SASL request, sent at once (never held for a re-authentication: it is one)."""
        version = self.version(api_key, SASL_API_RANGES[api_key])
        request = build(request_schema(api_key, version), fields)
        cls = response_schema(request.__api_key__, request.__version__)
        return await self._roundtrip(request, _decoder(cls), timeout_ms)

    async def _renew_session(self) -> None:
        """KIP-368 re-authentication on this connection: the answers to what was already
        sent come first (the broker answers in order), nothing else is sent meanwhile, then
        SaslHandshake and SaslAuthenticate as at the start. A refusal closes the connection
        and raises SaslAuthenticationError to every request that waited."""
        if self._reauthenticating is None:
            self._reauth_at = None
            self._reauthenticating = asyncio.ensure_future(self._reauthenticate())
        await asyncio.shield(self._reauthenticating)

    async def _reauthenticate(self) -> None:
        try:
            pending = [fut for fut, _, _ in self._pending.values()]
            if pending:
                await asyncio.wait(pending)
            assert self._security is not None
            log.debug("%s: re-authenticating (KIP-368)", self.address)
            await self._authenticate(self._security, self.request_timeout_ms)
        except SaslAuthenticationError as e:
            self._shut(ConnectionClosedError(f"connection to {self.address}: "
                                             f"re-authentication failed: {e}"))
            raise
        finally:
            self._reauthenticating = None

    def version(self, api_key: int, wanted: VersionRange | None = None) -> int:
        """The version a request of `api_key` is sent in on this connection."""
        wanted = wanted or self.api_ranges.get(api_key)
        if wanted is None:
            raise UnsupportedVersionError(f"no client version range for {_api_name(api_key)}")
        version = pick_version(api_key, self.broker_ranges.get(api_key), wanted)
        if version is None:
            raise UnsupportedVersionError(
                f"{self.address} supports {_api_name(api_key)} "
                f"{self.broker_ranges.get(api_key, 'not at all')}, the client {wanted}")
        return version

    # -- requests -----------------------------------------------------------------------------
    async def call(self, api_key: int, fields: Mapping[str, Any], *,
                   versions: VersionRange | None = None,
                   timeout_ms: float | None = None) -> Any:
        """Send `fields` (newest-version field names) in the negotiated version of `api_key`
        and return the decoded kio response entity."""
        version = self.version(api_key, versions)
        request = build(request_schema(api_key, version), fields)
        return await self.send(request, timeout_ms=timeout_ms)

    async def call_no_response(self, api_key: int, fields: Mapping[str, Any]) -> None:
        """Send a request the broker never answers (a Produce with acks=0): written and
        drained, nothing waited for. Errors of the write close the connection."""
        if self._closed_error is not None:
            raise type(self._closed_error)(str(self._closed_error))
        version = self.version(api_key)
        request = build(request_schema(api_key, version), fields)
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        self._writer.write(encode_request(self._correlation, request, client_id=self.client_id))
        try:
            async with asyncio.timeout(self.request_timeout_ms / 1000):
                await self._writer.drain()
        except (TimeoutError, ConnectionError, OSError) as e:
            self._shut(ConnectionClosedError(f"connection to {self.address} failed: {e!r}"))
            raise ConnectionClosedError(f"{_api_name(api_key)} to {self.address}: {e!r}") from e

    async def send(self, request: Any, *, timeout_ms: float | None = None) -> Any:
        """Send a kio request entity as it is and return the decoded response entity.
        Schemas come from `coterie.wire.codec`, which knows coterie's extension APIs too.
        When the SASL session is due for renewal, it is renewed first (KIP-368)."""
        if self._reauthenticating is not None or (
                self._reauth_at is not None
                and asyncio.get_running_loop().time() >= self._reauth_at):
            await self._renew_session()
        cls = response_schema(request.__api_key__, request.__version__)
        return await self._roundtrip(request, _decoder(cls), timeout_ms)

    async def _roundtrip(self, request: Any, decode: Decoder,
                         timeout_ms: float | None) -> Any:
        if self._closed_error is not None:
            raise type(self._closed_error)(str(self._closed_error))
        what = f"{_api_name(request.__api_key__)} v{request.__version__} to {self.address}"
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        correlation_id = self._correlation
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (fut, decode, what)
        self._writer.write(encode_request(correlation_id, request, client_id=self.client_id))
        timeout = (timeout_ms if timeout_ms is not None else self.request_timeout_ms) / 1000
        try:
            async with asyncio.timeout(timeout):
                await self._writer.drain()
                return await fut
        except TimeoutError:
            error = RequestTimeoutError(f"{what}: no response within {timeout:.1f}s")
            self._shut(error)
            raise error from None
        except (ConnectionError, OSError) as e:
            self._shut(ConnectionClosedError(f"connection to {self.address} failed: {e!r}"))
            raise ConnectionClosedError(f"{what}: {e!r}") from e
        finally:
            self._pending.pop(correlation_id, None)
            if fut.done() and not fut.cancelled():
                # `_shut` above failed this future too; the error raised here is the one
                # the caller sees, so mark the future's as seen (asyncio would otherwise log
                # "Future exception was never retrieved" when the broker drops mid-request).
                fut.exception()

    # -- the reader ---------------------------------------------------------------------------
    async def _read_loop(self) -> None:
        reason = "closed by the broker"
        try:
            while True:
                data = await self._reader.read(READ_CHUNK)
                if not data:
                    break
                self._frames.feed(data)
                while (frame := self._frames.next_frame()) is not None:
                    self._dispatch(frame)
        except asyncio.CancelledError:
            raise
        except FrameTooLarge as e:
            reason = f"dropped: {e}"
        except ssl.SSLError as e:
            if not isinstance(e, _TLS_CONNECTION_ERRORS):
                self._tls_alert = e
            reason = f"failed: {e!r}"
        except (ConnectionError, OSError) as e:
            reason = f"failed: {e!r}"
        self._shut(ConnectionClosedError(f"connection to {self.address} {reason}"))

    def _dispatch(self, frame: bytes) -> None:
        (correlation_id,) = _INT32.unpack_from(frame, 0)
        entry = self._pending.pop(correlation_id, None)
        if entry is None:
            log.debug("%s: dropping the answer to correlation id %d (abandoned request)",
                      self.address, correlation_id)
            return
        fut, decode, what = entry
        if fut.done():
            return
        try:
            fut.set_result(decode(frame))
        except Exception as e:  # kio raises assorted errors on a malformed response
            fut.set_exception(BrokerConnectionError(f"{what}: undecodable response: {e!r}"))
