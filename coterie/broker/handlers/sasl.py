"""SaslHandshake (v1) and SaslAuthenticate (v0-v2): a connection on a SASL listener says
which mechanism it uses, then authenticates (coterie.broker.sasl has the rules).

The connection's state is the connection's own (`ctx.connection.sasl`): these handlers
move it on, and the connection serves nothing else until it is authenticated. A request
on a listener without SASL, a second handshake, or an authentication before the handshake
is answered ILLEGAL_SASL_STATE, as Kafka answers it.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.context import RequestContext
from coterie.broker.sasl import check_plain


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
    conn = ctx.connection
    state = getattr(conn, "sasl", None)
    if state is None or state.mechanism is None or state.authenticated:
        return _answer(ctx, ErrorCode.illegal_sasl_state,
                       "SaslAuthenticate request received when it was not expected")
    username, why = check_plain(bytes(request.auth_bytes), state.settings.plain_users)
    if username is None:
        state.failed = True
        delay = ctx.services.config.get_int("connection.failed.authentication.delay.ms")
        asyncio.get_running_loop().call_later(delay / 1000, conn.close_after_failed_auth)
        return _answer(ctx, ErrorCode.sasl_authentication_failed, why)
    state.authenticated = True
    conn.principal = f"User:{username}"
    conn.frames.limit = ctx.services.config.socket_request_max_bytes
    return _answer(ctx, ErrorCode.none, None)


def _answer(ctx: RequestContext, error: ErrorCode, message: str | None) -> Any:
    data: dict[str, Any] = {"error_code": error, "error_message": message, "auth_bytes": b""}
    if ctx.api_version >= 1:
        data["session_lifetime"] = datetime.timedelta(0)
    return ctx.respond(data)
