"""SaslHandshake (v1) and SaslAuthenticate (v0-v2): a connection on a SASL listener says
which mechanism it uses, then authenticates (coterie.broker.sasl has the rules).

The connection's state is the connection's own (`ctx.connection.sasl`): these handlers
move it on, and the connection serves nothing else until it is authenticated. A request
on a listener without SASL, a second handshake, or an authentication before the handshake
is answered ILLEGAL_SASL_STATE, as Kafka answers it.

PLAIN takes one SaslAuthenticate; SCRAM two (the client-first message, answered with the
server-first; the client-final, answered with the server-final), the exchange between them
kept in the connection's state. A SCRAM failure is answered with Kafka's generic words,
which name only the mechanism (Kafka keeps the reason from an unauthenticated client: it
could tell which users exist); the reason goes to the debug log.

Re-authentication (KIP-368), when the listener's `connections.max.reauth.ms` is positive: a
successful SaslAuthenticate (v1+) answers that as `session_lifetime_ms`, and the session
ends then (coterie.broker.sasl.SaslState.refusal closes a connection that sends anything
else after its end). A SaslHandshake on an authenticated connection whose session ends
begins a re-authentication (at most one a second, Kafka's KafkaChannel rule; otherwise it
is answered ILLEGAL_SASL_STATE, as Kafka's KafkaApis answers it): the same mechanism and
the same principal as before, else SASL_AUTHENTICATION_FAILED with Kafka's words and the
connection closed after the failed-authentication delay. A success gives a new session.
Where coterie differs: Kafka closes a connection re-authenticating with another mechanism
without answering its SaslAuthenticate; coterie answers it SASL_AUTHENTICATION_FAILED with
Kafka's reason first.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.context import RequestContext
from coterie.broker.sasl import SaslState, check_plain
from coterie.broker.scram import MECHANISMS, ScramExchange, ScramFailed

log = logging.getLogger("coterie.sasl")


def handshake(ctx: RequestContext, request: Any) -> Any:
    """SaslHandshake: the mechanism of a first authentication, or, on an authenticated
    connection whose session ends, the start of a re-authentication (module docstring)."""
    state = getattr(ctx.connection, "sasl", None)
    if state is None:
        return ctx.respond({"error_code": ErrorCode.illegal_sasl_state, "mechanisms": []})
    mechanisms = list(state.settings.mechanisms)
    if state.authenticated:
        now = time.monotonic()
        if not state.may_reauthenticate(now):
            return ctx.respond({"error_code": ErrorCode.illegal_sasl_state,
                                "mechanisms": mechanisms})
        return _begin_reauthentication(ctx, state, request.mechanism, mechanisms, now)
    if state.mechanism is not None:
        return ctx.respond({"error_code": ErrorCode.illegal_sasl_state,
                            "mechanisms": mechanisms})
    wanted = request.mechanism.upper()
    if wanted not in mechanisms:
        # An authentication failure on Kafka: the answer names the mechanisms served, and
        # the connection closes after the failed-authentication delay.
        _fail_later(ctx, state)
        return ctx.respond({"error_code": ErrorCode.unsupported_sasl_mechanism,
                            "mechanisms": mechanisms})
    state.mechanism = wanted
    return ctx.respond({"error_code": ErrorCode.none, "mechanisms": mechanisms})


def _begin_reauthentication(ctx: RequestContext, state: SaslState, wanted: str,
                            mechanisms: list[str], now: float) -> Any:
    """A SaslHandshake that begins a re-authentication: a mechanism the listener does not
    serve fails it at once (UNSUPPORTED_SASL_MECHANISM); another served mechanism than the
    session's is answered NONE and fails at the SaslAuthenticate, as on Kafka."""
    state.reauthenticating = True
    state.reauth_started = now
    state.scram = None
    wanted = wanted.upper()
    if wanted not in mechanisms:
        _fail_later(ctx, state)
        return ctx.respond({"error_code": ErrorCode.unsupported_sasl_mechanism,
                            "mechanisms": mechanisms})
    if wanted != state.mechanism:
        state.bad_mechanism = (f"SASL mechanism '{wanted}' requested by client is not "
                               f"supported for re-authentication of mechanism "
                               f"'{state.mechanism}'")
    log.debug("%s: beginning SASL re-authentication", ctx.who)
    return ctx.respond({"error_code": ErrorCode.none, "mechanisms": mechanisms})


def authenticate(ctx: RequestContext, request: Any) -> Any:
    """SaslAuthenticate: one step of the handshaken mechanism's exchange, for a first
    authentication or a re-authentication; after a successful one, ILLEGAL_SASL_STATE with
    Kafka's words (its KafkaApis answers that)."""
    state = getattr(ctx.connection, "sasl", None)
    if state is not None and state.authenticated and not state.reauthenticating:
        return _answer(ctx, ErrorCode.illegal_sasl_state,
                       "SaslAuthenticate request received after successful authentication")
    if state is None or state.mechanism is None:
        return _answer(ctx, ErrorCode.illegal_sasl_state,
                       "SaslAuthenticate request received when it was not expected")
    if state.bad_mechanism is not None:
        return _failed(ctx, state, state.bad_mechanism)
    token = bytes(request.auth_bytes)
    if state.mechanism == "PLAIN":
        username, why = check_plain(token, state.settings.plain_users)
        if username is None:
            return _failed(ctx, state, why)
        return _authenticated(ctx, state, username, b"")
    exchange = state.scram
    if exchange is None:
        store, mechanism = ctx.services.scram_credentials, MECHANISMS[state.mechanism]
        exchange = state.scram = ScramExchange(
            state.mechanism, lambda user: store.get(user, mechanism))
    try:
        answer = exchange.step(token)
    except ScramFailed as e:
        during = "re-authentication" if state.reauthenticating else "authentication"
        log.debug("%s: SASL/%s %s failed: %s", ctx.who, state.mechanism, during, e)
        return _failed(ctx, state, f"Authentication failed during {during} due to invalid "
                                   f"credentials with SASL mechanism {state.mechanism}")
    if exchange.username is None:  # the server-first message: the client answers it
        return _answer(ctx, ErrorCode.none, None, answer)
    state.scram = None
    return _authenticated(ctx, state, exchange.username, answer)


def _fail_later(ctx: RequestContext, state: SaslState) -> None:
    """The authentication failed: nothing more is served, and the connection closes
    `connection.failed.authentication.delay.ms` later (a client guessing passwords goes
    no faster than that per connection)."""
    state.failed = True
    state.scram = None
    delay = ctx.services.config.get_int("connection.failed.authentication.delay.ms")
    asyncio.get_running_loop().call_later(delay / 1000,
                                          ctx.connection.close_after_failed_auth)


def _failed(ctx: RequestContext, state: SaslState, message: str) -> Any:
    """Answer SASL_AUTHENTICATION_FAILED; the connection closes after Kafka's delay."""
    _fail_later(ctx, state)
    return _answer(ctx, ErrorCode.sasl_authentication_failed, message)


def _authenticated(ctx: RequestContext, state: SaslState, username: str,
                   answer: bytes) -> Any:
    """The connection is `User:<username>` from now on, its frames as large as any, its
    session as long as the listener's connections.max.reauth.ms for the mechanism (0: no
    end). A re-authentication must prove the principal the connection already has."""
    conn = ctx.connection
    principal = f"User:{username}"
    if state.reauthenticating and principal != conn.principal:
        # Kafka's words: the principals as type.name.
        before = conn.principal.replace(":", ".", 1)
        return _failed(ctx, state, "Cannot change principals during re-authentication "
                                   f"from {before}: User.{username}")
    lifetime_ms = state.settings.reauth_ms.get(state.mechanism or "", 0)
    # The session runs from the end of the authentication (Kafka's authenticationEndNanos).
    state.expires_at = time.monotonic() + lifetime_ms / 1000 if lifetime_ms > 0 else None
    if state.reauthenticating:
        state.reauthenticating = False
        log.debug("%s: SASL re-authentication done", ctx.who)
    state.authenticated = True
    conn.principal = principal
    conn.frames.limit = ctx.services.config.socket_request_max_bytes
    return _answer(ctx, ErrorCode.none, None, answer, lifetime_ms)


def _answer(ctx: RequestContext, error: ErrorCode, message: str | None,
            auth_bytes: bytes = b"", lifetime_ms: int = 0) -> Any:
    """A SaslAuthenticate answer; v1 and later carry the session's lifetime (v0 has no
    field for it: its session ends all the same, as on Kafka)."""
    data: dict[str, Any] = {"error_code": error, "error_message": message,
                            "auth_bytes": auth_bytes}
    if ctx.api_version >= 1:
        data["session_lifetime"] = datetime.timedelta(milliseconds=lifetime_ms)
    return ctx.respond(data)
