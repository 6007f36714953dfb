"""ApiVersions: the first thing every client asks.

A client that asks with a version newer than ours gets the version-0 answer with
UNSUPPORTED_VERSION and our full list: clients decode that shape whatever they asked with,
then retry with the highest version we listed. That fallback is built in `server.py`, which
sees the unsupported version before any handler.
"""

from __future__ import annotations

from typing import Any

from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode

from coterie.broker.context import RequestContext
from coterie.broker.services import Services
from coterie.wire.build import build


def _api_list(services: Services) -> list[dict[str, int]]:
    return [{"api_key": api.key, "min_version": api.min_version,
             "max_version": api.max_version} for api in services.apis]


def handle(ctx: RequestContext, request: Any) -> Any:
    return ctx.respond({"error_code": ErrorCode.none, "api_keys": _api_list(ctx.services)})


def unsupported_version_answer(services: Services) -> Any:
    """The v0-shaped answer for an ApiVersions request of a version we do not know."""
    return build(ApiVersionsResponseV0, {
        "error_code": ErrorCode.unsupported_version, "api_keys": _api_list(services),
    })
