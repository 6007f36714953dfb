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
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.context import RequestContext
from coterie.broker.sasl import SaslState, check_plain
from coterie.broker.scram import MECHANISMS, ScramExchange, ScramFailed

log = logging.getLogger("coterie.sasl")


def handshake(ctx: RequestContext, request: Any) -> Any:
    state = getattr(ctx.connection, "sasl", None)
    if state is None:
        return ctx.respond({"error_code": ErrorCode.illegal_sasl_state, "mechanisms": []})
    mechanisms = list(state.settings.mechanisms)
    if state.mechanism is not None or state.authenticated:
        return ctx.respond({"error_code": ErrorCode.illegal_sasl_state,
                            "mechanisms": mechanisms})
    wanted = request.mechanism.upper()
    if wanted not in mechanisms:
        return ctx.respond({"error_code": ErrorCode.unsupported_sasl_mechanism,
                            "mechanisms": mechanisms})
    state.mechanism = wanted
    return ctx.respond({"error_code": ErrorCode.none, "mechanisms": mechanisms})


def authenticate(ctx: RequestContext, request: Any) -> Any:
    state = getattr(ctx.connection, "sasl", None)
    if state is None or state.mechanism is None or state.authenticated:
        return _answer(ctx, ErrorCode.illegal_sasl_state,
                       "SaslAuthenticate request received when it was not expected")
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
        log.debug("%s: SASL/%s failed: %s", ctx.who, state.mechanism, e)
        return _failed(ctx, state, "Authentication failed during authentication due to "
                                   f"invalid credentials with SASL mechanism {state.mechanism}")
    if exchange.username is None:  # the server-first message: the client answers it
        return _answer(ctx, ErrorCode.none, None, answer)
    state.scram = None
    return _authenticated(ctx, state, exchange.username, answer)


def _failed(ctx: RequestContext, state: SaslState, message: str) -> Any:
    """Answer SASL_AUTHENTICATION_FAILED; the connection closes after Kafka's delay."""
    state.failed = True
    state.scram = None
    delay = ctx.services.config.get_int("connection.failed.authentication.delay.ms")
    asyncio.get_running_loop().call_later(delay / 1000,
                                          ctx.connection.close_after_failed_auth)
    return _answer(ctx, ErrorCode.sasl_authentication_failed, message)


def _authenticated(ctx: RequestContext, state: SaslState, username: str,
                   answer: bytes) -> Any:
    """The connection is `User:<username>` from now on, its frames as large as any."""
    conn = ctx.connection
    state.authenticated = True
    conn.principal = f"User:{username}"
    conn.frames.limit = ctx.services.config.socket_request_max_bytes
    return _answer(ctx, ErrorCode.none, None, answer)


def _answer(ctx: RequestContext, error: ErrorCode, message: str | None,
            auth_bytes: bytes = b"") -> Any:
    data: dict[str, Any] = {"error_code": error, "error_message": message,
                            "auth_bytes": auth_bytes}
    if ctx.api_version >= 1:
        data["session_lifetime"] = datetime.timedelta(0)
    return ctx.respond(data)
