"""What a handler knows about the request it is answering."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from coterie.wire.build import build
from coterie.wire.codec import response_schema

if TYPE_CHECKING:
    from coterie.broker.server import Broker


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str
    # Why the request was refused, for responses that cannot say it themselves (JoinGroup has
    # no error message): the server logs it with every INVALID_REQUEST it sends.
    refusal: str | None = None

    def respond(self, data: dict[str, Any]) -> Any:
        """Build this request's response entity, in the request's version, from plain data."""
        return build(response_schema(self.api_key, self.api_version), data)

    @property
    def who(self) -> str:
        return f"{self.client_id or '-'}@{self.peer}"
